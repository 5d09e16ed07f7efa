//! The authorization matrix: every RPC of every service Drover serves over TCP (the
//! controller's commands, the node link, accounting), tried with every kind of credential and
//! as every kind of caller, against one table of the answers Slurm's rules give. Needs root
//! (test users).

mod common;

use common::{auth, conf, open, outcome, register_node, rt, Outcome};
use drover_proto::auth::{send_credential, Auth, Purpose};
use drover_proto::v1;
use drover_testkit::{Cluster, Options, TestUser};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Who presents a credential, and of what kind.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    /// No credential at all: a client of the old protocol, or an attacker's gRPC client.
    NoCredential,
    /// Root's, but expired.
    Expired,
    /// Signed with a key that is not the cluster's.
    OtherKey,
    /// Root's, already used once.
    Replayed,
    /// Root's, made for the other service.
    OtherService,
    /// The user who owns the job the requests name.
    Owner,
    /// Another ordinary user.
    Other,
    /// A user accounting names an Operator.
    Operator,
    Root,
}

const BAD: [Who; 5] = [Who::NoCredential, Who::Expired, Who::OtherKey, Who::Replayed, Who::OtherService];
const PEOPLE: [Who; 4] = [Who::Owner, Who::Other, Who::Operator, Who::Root];

/// The RPCs, and the list of them all.
macro_rules! rpcs {
    ($($r:ident),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum Rpc {
            $($r),*
        }
        const ALL: &[Rpc] = &[$(Rpc::$r),*];
    };
}

rpcs![
    // The controller's commands.
    Ping,
    GetState,
    ListJobs,
    Explain,
    WatchJob,
    Submit,
    Cancel,
    Hold,
    UpdateNode,
    Reconfigure,
    Shutdown,
    CreateStep,
    CompleteJob,
    StepStat,
    AttachStep,
    Reservation,
    Diag,
    DiagReset,
    // Controller failover (the test's cluster has a primary and a standby).
    HaStatus,
    Takeover,
    Relinquish,
    // The node link.
    Session,
    // Accounting.
    AcctPing,
    Record,
    Jobs,
    AdminGet,
    AdminPut,
    AdminDelete,
    Usage,
];

use Rpc::*;

impl Rpc {
    fn service(self) -> &'static str {
        match self {
            AcctPing | Record | Jobs | AdminGet | AdminPut | AdminDelete | Usage => "accounting",
            _ => "controller",
        }
    }
}

/// The table: what each caller's request comes to (Slurm's rules: reads for everyone; a job
/// for its owner, operators and root; the cluster for operators and root, reconfiguring and
/// stopping it for root; the node link and records for the cluster's daemons; accounting's
/// changes for its operators and administrators). Credentials that prove nothing are refused
/// before any request.
fn expected(rpc: Rpc, who: Who) -> Outcome {
    use Outcome::*;
    if BAD.contains(&who) {
        return Refused;
    }
    let owner_op_root = if who == Who::Other { Denied } else { Allowed };
    let op_root = if matches!(who, Who::Operator | Who::Root) { Allowed } else { Denied };
    let root = if who == Who::Root { Allowed } else { Denied };
    match rpc {
        Ping | GetState | ListJobs | Explain | WatchJob | Submit | Diag | AcctPing | Jobs | AdminGet | Usage => Allowed,
        Cancel | Hold | CreateStep | CompleteJob | StepStat | AttachStep => owner_op_root,
        UpdateNode | Reservation | DiagReset | AdminPut | AdminDelete => op_root,
        HaStatus => Allowed,
        // Slurm's REQUEST_TAKEOVER and REQUEST_CONTROL: root and SlurmUser only.
        Reconfigure | Shutdown | Session | Record | Takeover | Relinquish => root,
    }
}

struct World<'a> {
    auth: &'a Auth,
    owner: &'a TestUser,
    other: &'a TestUser,
    operator: &'a TestUser,
}

impl World<'_> {
    /// The credential bytes `who` presents to `service` (None: none at all).
    fn cred(&self, who: Who, service: &'static str, addr: &str) -> Option<Vec<u8>> {
        let now = jiff::Timestamp::now().as_second();
        let connect = Purpose::Connect(service);
        let user = |u: &TestUser| self.auth.issue_for(u.uid, u.gid, &connect, b"").unwrap();
        Some(match who {
            Who::NoCredential => return None,
            Who::Expired => self
                .auth
                .sign_claims(&v1::AuthClaims {
                    uid: 0,
                    gid: 0,
                    host: "old".into(),
                    issued: now - 300,
                    expires: now - 240,
                    nonce: drover_proto::auth::random::<16>().to_vec().into(),
                    purpose: format!("connect/{service}"),
                    binding: Default::default(),
                })
                .unwrap(),
            Who::OtherKey => Auth::with_key(b"a key of some other cluster, 32 bytes+", 0).issue(&connect, b"").unwrap(),
            Who::Replayed => {
                let cred = self.auth.issue(&connect, b"").unwrap();
                // Its first use, by the one it was made for.
                rt().block_on(async {
                    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    send_credential(&mut s, &cred, service).await.expect("the first use is accepted");
                });
                cred
            }
            Who::OtherService => {
                let other = if service == "controller" { "accounting" } else { "controller" };
                self.auth.issue(&Purpose::Connect(other), b"").unwrap()
            }
            Who::Owner => user(self.owner),
            Who::Other => user(self.other),
            Who::Operator => user(self.operator),
            Who::Root => self.auth.issue(&connect, b"").unwrap(),
        })
    }
}

/// `rpc` about `job` (pending, held, the owner's) on `ch`.
async fn call(rpc: Rpc, ch: tonic::transport::Channel, job: u32) -> Outcome {
    use v1::accounting_client::AccountingClient;
    use v1::controller_client::ControllerClient;
    let mut ctl = ControllerClient::new(ch.clone());
    let mut acct = AccountingClient::new(ch.clone());
    match rpc {
        Ping => outcome(ctl.ping(v1::Empty {}).await),
        GetState => outcome(ctl.get_state(v1::StateRequest::default()).await),
        ListJobs => outcome(ctl.list_jobs(v1::StateRequest::default()).await),
        Explain => outcome(ctl.explain(v1::ExplainRequest { job_id: job }).await),
        WatchJob => outcome(ctl.watch_job(v1::WatchRequest { job_id: job }).await),
        // A request that names no script: refused for what it is, after authorization.
        Submit => outcome(ctl.submit(v1::SubmitRequest::default()).await),
        Cancel => {
            // SIGCONT to a held job: harmless to it, and per job in the reply, as Slurm.
            let r = ctl.cancel(v1::CancelRequest { job_ids: vec![job], signal: 18, ..Default::default() }).await;
            match r {
                Ok(r) if r.get_ref().results.iter().any(|x| x.error.contains("Access/permission denied")) => {
                    Outcome::Denied
                }
                r => outcome(r),
            }
        }
        Hold => {
            let r = ctl
                .job_control(v1::JobControlRequest { action: "hold".into(), job_ids: vec![job], ..Default::default() })
                .await;
            match r {
                Ok(r) if format!("{:?}", r.get_ref()).contains("Access/permission denied") => Outcome::Denied,
                r => outcome(r),
            }
        }
        UpdateNode => outcome(
            ctl.update_node(v1::UpdateNodeRequest {
                nodes: "node1".into(),
                state: "RESUME".into(),
                reason: String::new(),
            })
            .await,
        ),
        Reconfigure => outcome(ctl.reconfigure(v1::Empty {}).await),
        HaStatus => outcome(v1::controller_ha_client::ControllerHaClient::new(ch.clone()).status(v1::Empty {}).await),
        Takeover => outcome(v1::controller_ha_client::ControllerHaClient::new(ch.clone()).takeover(v1::Empty {}).await),
        Relinquish => {
            outcome(v1::controller_ha_client::ControllerHaClient::new(ch.clone()).relinquish(v1::Empty {}).await)
        }
        Diag => outcome(ctl.diag(v1::DiagRequest { reset: false }).await),
        DiagReset => outcome(ctl.diag(v1::DiagRequest { reset: true }).await),
        Shutdown => outcome(ctl.shutdown(v1::Empty {}).await),
        CreateStep => outcome(
            ctl.create_step(v1::StepCreateRequest {
                spec: Some(v1::StepSpec { job_id: job, ..Default::default() }),
                wait: false,
            })
            .await,
        ),
        CompleteJob => outcome(ctl.complete_job(v1::CompleteRequest { job_id: job, ..Default::default() }).await),
        StepStat => outcome(ctl.step_stat(v1::StepStatRequest { job_id: job, ..Default::default() }).await),
        AttachStep => outcome(ctl.attach_step(v1::AttachRequest { job_id: job, ..Default::default() }).await),
        // A reservation that names nothing: refused for what it is, after authorization.
        Reservation => outcome(ctl.reservation(v1::ResvRequest { action: "create".into(), fields: vec![] }).await),
        Session => register_node(ch).await,
        AcctPing => outcome(acct.ping(v1::Empty {}).await),
        Record => outcome(acct.record(common::forged_record()).await),
        Jobs => match acct.jobs(v1::AcctQuery::default()).await {
            Ok(s) => {
                let mut s = s.into_inner();
                outcome(s.message().await)
            }
            Err(e) => outcome::<()>(Err(e)),
        },
        AdminGet => outcome(acct.admin_get(v1::Empty {}).await),
        AdminPut | AdminDelete => {
            let st = v1::AdminState {
                accounts: vec![v1::AcctAccount { name: "matrix".into(), ..Default::default() }],
                ..Default::default()
            };
            if rpc == AdminPut {
                outcome(acct.admin_put(st).await)
            } else {
                outcome(acct.admin_delete(st).await)
            }
        }
        Usage => outcome(acct.usage(v1::AcctUsageQuery::default()).await),
    }
}

#[test]
fn every_rpc_answers_every_caller_as_the_table_says() {
    if !drover_testkit::root_or_skip("the table's users are test users") {
        return;
    }
    let pid = std::process::id() % 10000;
    let owner = TestUser::create(&format!("drmo{pid}"));
    let other = TestUser::create(&format!("drmx{pid}"));
    let operator = TestUser::create(&format!("drmp{pid}"));
    let c = Cluster::start(EXE, Options { nodes: 2, accounting: true, controllers: 2, ..Default::default() });
    // The operator, as accounting names one; the controller learns it within seconds.
    c.ok("sacctmgr", &["-i", "add", "user", &operator.name, "Account=root", "AdminLevel=Operator"]);
    let dir = c.path().join("work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let o = c.run_as(&owner, "sbatch", &["--parsable", "--hold", "--wrap", "true"], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let job: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let a = auth(&c);
    let w = World { auth: &a, owner: &owner, other: &other, operator: &operator };
    let cfg = conf(&c);
    let addr_of = |svc: &str| if svc == "controller" { cfg.controller_addr() } else { cfg.accounting_addr().unwrap() };
    c.wait_until("the controller to know the operator", Duration::from_secs(20), || {
        let cred = w.cred(Who::Operator, "controller", &addr_of("controller"));
        rt().block_on(async {
            call(UpdateNode, open(&addr_of("controller"), cred, "controller").await.unwrap(), job).await
        }) == Outcome::Allowed
    });
    let mut wrong = Vec::new();
    let mut tried = 0;
    for &rpc in ALL {
        for who in BAD.iter().chain(PEOPLE.iter()).copied() {
            // Root's own shutdown, node registration and handing control over would change
            // the test's cluster under it.
            if who == Who::Root && matches!(rpc, Shutdown | Session | Takeover | Relinquish) {
                continue;
            }
            let want = expected(rpc, who);
            let addr = addr_of(rpc.service());
            let bytes = w.cred(who, rpc.service(), &addr);
            let got = rt().block_on(async {
                match open(&addr, bytes, rpc.service()).await {
                    // A plain gRPC client only sees its connection dropped.
                    Err(_) if who == Who::NoCredential => Outcome::Refused,
                    Err(e) => {
                        assert!(
                            e.starts_with("Invalid authentication credential")
                                || e.starts_with("Protocol authentication error"),
                            "{rpc:?} {who:?}: {e}"
                        );
                        Outcome::Refused
                    }
                    Ok(ch) => call(rpc, ch, job).await,
                }
            });
            tried += 1;
            if got != want {
                wrong.push(format!("{rpc:?} as {who:?}: {got:?}, the table says {want:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {tried} differ:\n{}\n{}", wrong.len(), wrong.join("\n"), c.logs());
    assert!(tried >= 220, "{tried}");
    // Nobody but root handed control over: ctl1 took it once, at the start.
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert_eq!(log.matches("took control: term").count(), 1, "{log}");
    assert!(!log.contains("hand control over"), "{log}");
    // The owner's job is as it was: held, and pending.
    assert_eq!(c.state(job), "PENDING");
    // Refusals are logged with who and where from.
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(log.contains("refused a connection from 127.0.0.1:"), "{log}");
    assert!(log.contains(&format!("refused a node registration from uid {} at ", other.uid)), "{log}");
    let log = std::fs::read_to_string(c.path().join("log/accounting.log")).unwrap();
    assert!(log.contains(&format!("refused records of cluster test from uid {} at ", owner.uid)), "{log}");
}

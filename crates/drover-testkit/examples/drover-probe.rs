//! An attacker's tool for the lab's acceptance test (`deploy/lab/acceptance`): it presents
//! chosen credentials to Drover's daemons and does what an impostor would, printing one line
//! of what came of it. Never installed on a lab host: the test copies it in and out.
//!
//! ```text
//! drover-probe issue SERVICE                  this process's credential for SERVICE, in hex
//!                                             (as Drover's commands make it: under auth/munge
//!                                             sealed to the daemon's uid)
//! drover-probe present ADDR SERVICE ACTION    a credential read from stdin (hex; `none`: no
//!                                             credential, plain gRPC) in the exchange of this
//!                                             host's AuthType, then ACTION:
//!     ping                                    the controller's Ping
//!     register NODE                           a node agent's registration as NODE
//!     cancel JOB                              scancel JOB
//!     record CLUSTER                          a forged accounting record (a 1,000-CPU job
//!                                             "for uid 4242", job 990001) for CLUSTER
//! drover-probe stdio HOST:PORT                an impostor on srun's task-I/O port: says hello
//!                                             as a node, writes "INJECTED", prints the frames
//!                                             it got
//! ```
//!
//! `present` prints `refused: WHY` (the connection was refused before any request),
//! `denied: WHY` (authenticated, not allowed) or `allowed: WHAT`, and exits 0 for each;
//! usage errors exit 2.

use drover_proto::auth::{Auth, AuthKind, Purpose};
use drover_proto::v1;
use drover_testkit::attack::{forged_record, open_in};
use std::io::{Read, Write};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let code = match a.as_slice() {
        ["issue", service] => issue(service),
        ["present", addr, service, action @ ..] if !action.is_empty() => present(addr, service, action),
        ["stdio", addr] => stdio(addr),
        _ => {
            eprintln!("usage: drover-probe issue SERVICE | present ADDR SERVICE ACTION.. | stdio HOST:PORT");
            2
        }
    };
    std::process::exit(code);
}

fn config() -> Result<drover_model::conf::Config, String> {
    let path = std::env::var("SLURM_CONF").unwrap_or_else(|_| "/etc/slurm/slurm.conf".into());
    drover_model::conf::parse_file(std::path::Path::new(&path)).map_err(|e| e.to_string())
}

/// The service names a credential may be for (the daemons' own, as `Purpose` wants them).
fn service_name(s: &str) -> Option<&'static str> {
    ["controller", "accounting"].into_iter().find(|n| *n == s)
}

fn issue(service: &str) -> i32 {
    let Some(service) = service_name(service) else {
        eprintln!("drover-probe: unknown service {service}");
        return 2;
    };
    let made = config().and_then(|cfg| {
        let auth = Auth::new(&cfg.auth, &cfg.path, false).map_err(|e| e.to_string())?;
        // What Drover's own commands present: under MUNGE sealed to the daemon's uid.
        match auth.kind() {
            AuthKind::Munge => auth.issue_sealed(&Purpose::Connect(service), &[0u8; 32], auth.daemon_uid(service)),
            AuthKind::Slurm => auth.issue(&Purpose::Connect(service), &[0u8; 16]),
        }
        .map_err(|e| e.to_string())
    });
    match made {
        Ok(cred) => {
            println!("{}", hex(&cred));
            0
        }
        Err(e) => {
            eprintln!("drover-probe: {e}");
            1
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

enum Outcome {
    Refused(String),
    Denied(String),
    Allowed(String),
}

fn of_status(s: tonic::Status) -> Outcome {
    match s.code() {
        tonic::Code::PermissionDenied => Outcome::Denied(s.message().to_string()),
        // Unauthenticated: the exchange's refusal; the others, the server dropping a
        // connection that proved nothing (HTTP/2 then fails as it may).
        tonic::Code::Unauthenticated | tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal => {
            Outcome::Refused(s.message().to_string())
        }
        // The request's own answer: it got past authorization.
        _ => Outcome::Allowed(format!("{:?}: {}", s.code(), s.message())),
    }
}

fn present(addr: &str, service: &str, action: &[&str]) -> i32 {
    let Some(service) = service_name(service) else {
        eprintln!("drover-probe: unknown service {service}");
        return 2;
    };
    let mut text = String::new();
    if std::io::stdin().read_to_string(&mut text).is_err() {
        eprintln!("drover-probe: cannot read the credential on stdin");
        return 2;
    }
    let cred = match text.trim() {
        "none" => None,
        t => match unhex(t) {
            Some(c) => Some(c),
            None => {
                eprintln!("drover-probe: the credential is not hex");
                return 2;
            }
        },
    };
    // The exchange of this host's AuthType (as its commands would use).
    let sealed = match config() {
        Ok(cfg) => cfg.auth.kind == AuthKind::Munge,
        Err(e) => {
            eprintln!("drover-probe: {e}");
            return 2;
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("invariant: a runtime starts");
    let outcome = rt.block_on(async {
        let ch = match open_in(addr, cred, service, sealed).await {
            Ok(ch) => ch,
            Err(e) => return Ok(Outcome::Refused(e)),
        };
        act(ch, action).await
    });
    match outcome {
        Ok(Outcome::Refused(why)) => println!("refused: {why}"),
        Ok(Outcome::Denied(why)) => println!("denied: {why}"),
        Ok(Outcome::Allowed(what)) => println!("allowed: {what}"),
        Err(usage) => {
            eprintln!("drover-probe: {usage}");
            return 2;
        }
    }
    0
}

async fn act(ch: tonic::transport::Channel, action: &[&str]) -> Result<Outcome, String> {
    Ok(match action {
        ["ping"] => match v1::controller_client::ControllerClient::new(ch).ping(v1::Empty {}).await {
            Ok(r) => Outcome::Allowed(format!("the controller of {}", r.into_inner().cluster)),
            Err(s) => of_status(s),
        },
        ["cancel", job] => {
            let id: u32 = job.parse().map_err(|_| format!("not a job id: {job}"))?;
            let req = v1::CancelRequest { job_ids: vec![id], ..Default::default() };
            match v1::controller_client::ControllerClient::new(ch).cancel(req).await {
                Ok(r) => match r.into_inner().results.into_iter().find(|r| !r.error.is_empty()) {
                    Some(r) => Outcome::Denied(r.error),
                    None => Outcome::Allowed(format!("job {id} cancelled")),
                },
                Err(s) => of_status(s),
            }
        }
        ["register", node] => register(ch, node).await,
        ["record", cluster] => {
            match v1::accounting_client::AccountingClient::new(ch).record(forged_record(cluster)).await {
                Ok(_) => Outcome::Allowed("the forged record was taken".into()),
                Err(s) => of_status(s),
            }
        }
        _ => return Err(format!("unknown action: {}", action.join(" "))),
    })
}

/// Registers as `node`; a session the controller accepts sends something back (its
/// configuration, launches), a refused one ends at once.
async fn register(ch: tonic::transport::Channel, node: &str) -> Outcome {
    let mut link = v1::node_link_client::NodeLinkClient::new(ch);
    let reg = v1::NodeToController {
        msg: Some(v1::node_to_controller::Msg::Register(v1::Register {
            node: node.into(),
            cpus: 1,
            ..Default::default()
        })),
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let _ = tx.send(reg);
    match link.session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)).await {
        Ok(resp) => {
            let mut s = resp.into_inner();
            match tokio::time::timeout(Duration::from_secs(3), s.message()).await {
                Ok(Err(st)) => of_status(st),
                Ok(Ok(Some(m))) => Outcome::Allowed(format!("the session sent {m:?}").chars().take(200).collect()),
                Ok(Ok(None)) => Outcome::Refused("the session ended".into()),
                Err(_) => Outcome::Allowed("the session stayed open".into()),
            }
        }
        Err(st) => of_status(st),
    }
}

/// Connects to srun's task-I/O port as a node would have before links were proved, writes a
/// line into srun's output and prints what srun sent (a challenge, and nothing else: no
/// stdin) as `received N bytes: ...`.
fn stdio(addr: &str) -> i32 {
    let mut s = match std::net::TcpStream::connect(addr) {
        Ok(s) => s,
        Err(e) => {
            println!("refused: {e}");
            return 0;
        }
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = drover_proto::io::write_frame(&mut s, drover_proto::io::HELLO, 0, b"compute01");
    let _ = drover_proto::io::write_frame(&mut s, drover_proto::io::STDOUT, 0, b"INJECTED\n");
    let _ = s.flush();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    // What came, frame by frame (kind and length): a challenge, or the stdin it must not see.
    let mut frames = Vec::new();
    let mut rest = &got[..];
    while let Ok(Some(f)) = drover_proto::io::read_frame(&mut rest) {
        frames.push(format!("kind {} ({} bytes)", f.kind, f.data.len()));
    }
    println!("received {} bytes: {}", got.len(), frames.join(", "));
    0
}

//! gRPC handlers. They turn requests into [`Msg`]s for the state owner and await its reply;
//! reads are answered from the published view without touching the owner.

use crate::diag::msg;
use crate::owner::{now, Msg, Reply};
use crate::view::{state_reply, View};
use arc_swap::ArcSwap;
use drover_proto::v1::{
    self, controller_server::Controller, controller_to_node, node_link_server::NodeLink, node_to_controller,
};
use drover_proto::{caller, Caller};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

#[derive(Clone)]
pub struct Handlers {
    pub tx: Sender<Msg>,
    pub view: Arc<ArcSwap<View>>,
    pub sessions: Arc<AtomicU64>,
    pub shutdown: Arc<Notify>,
    /// Checks who may register a node, and signs launches on their way out.
    pub auth: Arc<drover_proto::auth::Auth>,
    /// RPCs answered, for sdiag.
    pub stats: Arc<crate::diag::RpcStats>,
    /// Where reads are encoded (low priority, first come first served).
    pub readers: crate::readers::Readers,
    /// Per-user RPC rate limiting, where slurm.conf enables it.
    pub limit: Option<Arc<crate::ratelimit::RateLimit>>,
}

/// The caller's uid for the statistics (before any check: refused calls count too).
fn uid_of<T>(req: &Request<T>) -> u32 {
    caller(req).map_or(u32::MAX, |c| c.uid)
}

fn who<T>(req: &Request<T>) -> Result<Caller, Status> {
    caller(req).ok_or_else(|| Status::unauthenticated("Access/permission denied: no credentials"))
}

impl Handlers {
    /// A user over the RPC rate limit is told to back off: held until their next token, or
    /// refused when that is too far off.
    async fn admit(&self, kind: (&'static str, u32), uid: u32) -> Result<(), Status> {
        use crate::ratelimit::Admit;
        let Some(limit) = &self.limit else { return Ok(()) };
        let say = |log: bool| {
            if log {
                crate::log(&format!("RPC rate limit exceeded by uid {uid} with {}, telling to back off", kind.0));
            }
        };
        match limit.admit(uid, std::time::Instant::now()) {
            Admit::Now => Ok(()),
            Admit::After { wait, log } => {
                say(log);
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Admit::Refused { log } => {
                say(log);
                Err(Status::resource_exhausted("RPC rate limit exceeded: slow down and try again"))
            }
        }
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, Status> {
        self.readers.note_write();
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| Status::unavailable("controller is shutting down"))?;
        rx.await.map_err(|_| Status::unavailable("controller is shutting down"))?
    }
}

/// What configless mode hands out, where present beside `slurm.conf`.
const CONFIGLESS_FILES: &[&str] = &["slurm.conf", "cgroup.conf", "gres.conf", "topology.conf"];

type ListStream = Pin<Box<dyn Stream<Item = Result<v1::StateReply, Status>> + Send>>;
type EventStream = Pin<Box<dyn Stream<Item = Result<v1::JobEvent, Status>> + Send>>;
type NodeStream = Pin<Box<dyn Stream<Item = Result<v1::ControllerToNode, Status>> + Send>>;

#[tonic::async_trait]
impl Controller for Handlers {
    async fn submit(&self, req: Request<v1::SubmitRequest>) -> Result<Response<v1::SubmitReply>, Status> {
        let kind = if req.get_ref().spec.as_ref().is_some_and(|s| s.batch) {
            msg::SUBMIT_BATCH_JOB
        } else {
            msg::RESOURCE_ALLOCATION
        };
        self.admit(kind, uid_of(&req)).await?;
        let _t = self.stats.time(kind, uid_of(&req));
        let caller = who(&req)?;
        let r = req.into_inner();
        let spec = drover_proto::spec_from_wire(r.spec.unwrap_or_default()).map_err(Status::invalid_argument)?;
        let test_only = r.test_only;
        self.ask(|reply| Msg::Submit { spec: Box::new(spec), caller, test_only, reply }).await.map(Response::new)
    }

    async fn get_state(&self, req: Request<v1::StateRequest>) -> Result<Response<v1::StateReply>, Status> {
        let (uid, started) = (uid_of(&req), std::time::Instant::now());
        self.admit(msg::JOB_INFO, uid).await?;
        // Encoding a large queue takes milliseconds: off the async workers.
        let view = self.view.load_full();
        let req = req.into_inner();
        // One read here is what Slurm's commands ask in one RPC each.
        let kinds: Vec<(&'static str, u32)> = [
            (req.jobs, msg::JOB_INFO),
            (req.nodes, msg::NODE_INFO),
            (req.partitions, msg::PARTITION_INFO),
            (req.config, msg::BUILD_INFO),
            (req.shares, msg::SHARE_INFO),
            (req.prio, msg::PRIORITY_FACTORS),
            (req.reservations, msg::RESERVATION_INFO),
        ]
        .into_iter()
        .filter_map(|(asked, k)| asked.then_some(k))
        .collect();
        let _turn = self.readers.turn().await?;
        let reply = self.readers.run(move || state_reply(&view, &req, now())).await?;
        let us = started.elapsed().as_micros() as u64;
        for k in kinds {
            self.stats.record(k, uid, us);
        }
        Ok(Response::new(reply))
    }

    async fn diag(&self, req: Request<v1::DiagRequest>) -> Result<Response<v1::DiagReply>, Status> {
        self.admit(msg::STATS_INFO, uid_of(&req)).await?;
        let _t = self.stats.time(msg::STATS_INFO, uid_of(&req));
        let caller = who(&req)?;
        let reset = req.into_inner().reset;
        let mut r = self.ask(|reply| Msg::Diag { reset, caller, reply }).await?;
        if reset {
            self.stats.reset();
        }
        (r.rpc_types, r.rpc_users) = self.stats.snapshot();
        r.server_threads = tokio::runtime::Handle::current().metrics().num_workers() as u32;
        let t0 = std::time::Instant::now();
        for _ in 0..1000 {
            std::hint::black_box(std::time::SystemTime::now());
        }
        r.clock_latency_us = t0.elapsed().as_micros() as u32;
        Ok(Response::new(r))
    }

    type ListJobsStream = ListStream;

    async fn list_jobs(&self, req: Request<v1::StateRequest>) -> Result<Response<Self::ListJobsStream>, Status> {
        self.admit(msg::JOB_INFO, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_INFO, uid_of(&req));
        // In its turn, each batch is encoded on a reader thread, one ahead of the client
        // (see crate::readers).
        let view = self.view.load_full();
        let mut batches = Some(crate::view::job_batches(view, req.into_inner(), now()));
        let (tx, rx) = mpsc::channel(1);
        let readers = self.readers.clone();
        tokio::spawn(async move {
            let Ok(turn) = readers.turn().await else { return };
            let mut turn = Some(turn);
            while let Some(mut it) = batches.take() {
                let Ok((next, it)) = readers.run(move || (it.next(), it)).await else { break };
                let Some(b) = next else { break };
                if !readers.send(&tx, Ok(b), &mut turn).await {
                    break;
                }
                batches = Some(it);
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn cancel(&self, req: Request<v1::CancelRequest>) -> Result<Response<v1::CancelReply>, Status> {
        self.admit(msg::KILL_JOB, uid_of(&req)).await?;
        let _t = self.stats.time(msg::KILL_JOB, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::Cancel { req, caller, reply }).await.map(Response::new)
    }

    async fn job_control(&self, req: Request<v1::JobControlRequest>) -> Result<Response<v1::JobControlReply>, Status> {
        self.admit(msg::UPDATE_JOB, uid_of(&req)).await?;
        let _t = self.stats.time(msg::UPDATE_JOB, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::JobControl { req, caller, reply }).await.map(Response::new)
    }

    async fn update_node(&self, req: Request<v1::UpdateNodeRequest>) -> Result<Response<v1::Empty>, Status> {
        self.admit(msg::UPDATE_NODE, uid_of(&req)).await?;
        let _t = self.stats.time(msg::UPDATE_NODE, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::UpdateNode { req, caller, reply }).await.map(Response::new)
    }

    async fn get_crontab(&self, req: Request<v1::CrontabRequest>) -> Result<Response<v1::CrontabReply>, Status> {
        self.admit(msg::REQUEST_CRONTAB, uid_of(&req)).await?;
        let _t = self.stats.time(msg::REQUEST_CRONTAB, uid_of(&req));
        let caller = who(&req)?;
        let uid = req.into_inner().uid;
        self.ask(|reply| Msg::GetCrontab { uid, caller, reply }).await.map(Response::new)
    }

    async fn update_crontab(
        &self,
        req: Request<v1::CrontabUpdate>,
    ) -> Result<Response<v1::CrontabUpdateReply>, Status> {
        self.admit(msg::UPDATE_CRONTAB, uid_of(&req)).await?;
        let _t = self.stats.time(msg::UPDATE_CRONTAB, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::UpdateCrontab { req, caller, reply }).await.map(Response::new)
    }

    async fn explain(&self, req: Request<v1::ExplainRequest>) -> Result<Response<v1::ExplainReply>, Status> {
        self.admit(msg::JOB_INFO, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_INFO, uid_of(&req));
        let job = req.into_inner().job_id;
        self.ask(|reply| Msg::Explain { job, reply }).await.map(Response::new)
    }

    async fn forecast(&self, req: Request<v1::ForecastRequest>) -> Result<Response<v1::ForecastReply>, Status> {
        self.admit(msg::JOB_INFO, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_INFO, uid_of(&req));
        let h = req.into_inner().horizon_secs;
        let horizon = if h <= 0 { 86_400 } else { h.min(366 * 86_400) };
        self.ask(|reply| Msg::Forecast { horizon, reply }).await.map(Response::new)
    }

    async fn reservation(&self, req: Request<v1::ResvRequest>) -> Result<Response<v1::ResvReply>, Status> {
        self.admit(msg::UPDATE_RESERVATION, uid_of(&req)).await?;
        let _t = self.stats.time(msg::UPDATE_RESERVATION, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::Reservation { req, caller, reply }).await.map(Response::new)
    }

    async fn reconfigure(&self, req: Request<v1::Empty>) -> Result<Response<v1::Empty>, Status> {
        self.admit(msg::RECONFIGURE, uid_of(&req)).await?;
        let _t = self.stats.time(msg::RECONFIGURE, uid_of(&req));
        let caller = who(&req)?;
        self.ask(|reply| Msg::Reconfigure { caller, reply }).await.map(Response::new)
    }

    async fn ping(&self, _req: Request<v1::Empty>) -> Result<Response<v1::PingReply>, Status> {
        let _t = self.stats.time(msg::PING, uid_of(&_req));
        let view = self.view.load();
        let host = view.cfg.controller_hosts.first().map(|h| h.name.clone()).unwrap_or_default();
        Ok(Response::new(v1::PingReply { cluster: view.cfg.cluster_name.clone(), host }))
    }

    type WatchJobStream = EventStream;

    async fn watch_job(&self, req: Request<v1::WatchRequest>) -> Result<Response<Self::WatchJobStream>, Status> {
        self.admit(msg::JOB_READY, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_READY, uid_of(&req));
        let job = req.get_ref().job_id;
        let (tx, rx) = mpsc::unbounded_channel();
        self.ask(|reply| Msg::Watch { job, tx, reply }).await?;
        let s = UnboundedReceiverStream::new(rx).map(Ok);
        Ok(Response::new(Box::pin(s)))
    }

    async fn create_step(&self, req: Request<v1::StepCreateRequest>) -> Result<Response<v1::StepCreateReply>, Status> {
        self.admit(msg::JOB_STEP_CREATE, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_STEP_CREATE, uid_of(&req));
        let caller = who(&req)?;
        let r = req.into_inner();
        let spec = r.spec.ok_or_else(|| Status::invalid_argument("step request without a step"))?;
        let wait = r.wait;
        self.ask(|reply| Msg::CreateStep { spec: Box::new(spec), wait, caller, reply }).await.map(Response::new)
    }

    async fn step_stat(&self, req: Request<v1::StepStatRequest>) -> Result<Response<v1::StepStatReply>, Status> {
        self.admit(msg::JOB_STEP_STAT, uid_of(&req)).await?;
        let _t = self.stats.time(msg::JOB_STEP_STAT, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::StepStat { req, caller, reply }).await.map(Response::new)
    }

    async fn attach_step(&self, req: Request<v1::AttachRequest>) -> Result<Response<v1::StepCreateReply>, Status> {
        self.admit(msg::STEP_LAYOUT, uid_of(&req)).await?;
        let _t = self.stats.time(msg::STEP_LAYOUT, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::AttachStep { req, caller, reply }).await.map(Response::new)
    }

    async fn complete_job(&self, req: Request<v1::CompleteRequest>) -> Result<Response<v1::Empty>, Status> {
        self.admit(msg::COMPLETE_JOB_ALLOCATION, uid_of(&req)).await?;
        let _t = self.stats.time(msg::COMPLETE_JOB_ALLOCATION, uid_of(&req));
        let caller = who(&req)?;
        let req = req.into_inner();
        self.ask(|reply| Msg::CompleteJob { req, caller, reply }).await.map(Response::new)
    }

    /// Configless mode: `slurm.conf` and the files beside it that agents read (never a key,
    /// never `slurmdbd.conf`), for any authenticated caller, as Slurm serves them.
    async fn get_config(&self, req: Request<v1::Empty>) -> Result<Response<v1::ConfigReply>, Status> {
        self.admit(msg::CONFIG, uid_of(&req)).await?;
        let _t = self.stats.time(msg::CONFIG, uid_of(&req));
        who(&req)?;
        let cfg = self.view.load().cfg.clone();
        if !cfg.configless {
            return Err(Status::failed_precondition(
                "configless mode is off (SlurmctldParameters=enable_configless turns it on)",
            ));
        }
        let dir = std::path::Path::new(&cfg.path).parent().unwrap_or(std::path::Path::new("/"));
        let mut files = Vec::new();
        for name in CONFIGLESS_FILES {
            let path = if *name == "slurm.conf" { std::path::PathBuf::from(&cfg.path) } else { dir.join(name) };
            match tokio::fs::read_to_string(&path).await {
                Ok(text) => files.push(v1::ConfigFile { name: name.to_string(), text }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && *name != "slurm.conf" => {}
                Err(e) => return Err(Status::internal(format!("{}: {e}", path.display()))),
            }
        }
        Ok(Response::new(v1::ConfigReply { files }))
    }

    async fn shutdown(&self, req: Request<v1::Empty>) -> Result<Response<v1::Empty>, Status> {
        self.admit(msg::SHUTDOWN, uid_of(&req)).await?;
        let _t = self.stats.time(msg::SHUTDOWN, uid_of(&req));
        let caller = who(&req)?;
        // Root, SlurmUser, or the controller's own user (a `drover up` of an ordinary user).
        if !self.auth.is_trusted(caller.uid) && caller.uid != nix::unistd::getuid().as_raw() {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        self.shutdown.notify_one();
        Ok(Response::new(v1::Empty {}))
    }
}

#[tonic::async_trait]
impl NodeLink for Handlers {
    type SessionStream = NodeStream;

    async fn session(
        &self,
        req: Request<Streaming<v1::NodeToController>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        // Only root or SlurmUser (on any host of the cluster) may speak for a node: a node
        // link receives every launch of its node, scripts and environments included.
        let caller = who(&req)?;
        let from = drover_proto::origin(&req);
        let host = req.extensions().get::<drover_proto::auth::Peer>().map(|p| p.host.clone()).unwrap_or_default();
        if !self.auth.is_trusted(caller.uid) {
            crate::log(&format!(
                "refused a node registration from uid {} at {from}: only root or SlurmUser may register a node",
                caller.uid
            ));
            return Err(Status::permission_denied(
                "Access/permission denied: only root or SlurmUser may register a node",
            ));
        }
        let mut inbound = req.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("node session closed before registering"))?;
        let Some(node_to_controller::Msg::Register(reg)) = first.msg else {
            return Err(Status::invalid_argument("the first message of a node session must be Register"));
        };
        self.stats.record(msg::NODE_REGISTRATION, caller.uid, 0);
        let session = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        let node = reg.node.clone();
        let signer_node = node.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        self.tx
            .send(Msg::NodeRegister { reg, tx, session, host, from })
            .map_err(|_| Status::unavailable("controller is shutting down"))?;
        let owner = self.tx.clone();
        let stats = self.stats.clone();
        tokio::spawn(async move {
            while let Ok(Some(m)) = inbound.message().await {
                if let Some(msg) = m.msg {
                    // A step's or a batch script's end, as slurmd's RPCs report them.
                    if let node_to_controller::Msg::Ended(e) = &msg {
                        let kind = if e.step_id.is_some() { msg::STEP_COMPLETE } else { msg::COMPLETE_BATCH_SCRIPT };
                        stats.record(kind, caller.uid, 0);
                    }
                    if owner.send(Msg::FromNode { node: node.clone(), session, msg }).is_err() {
                        return;
                    }
                }
            }
            let _ = owner.send(Msg::NodeGone { node, session });
        });
        // Launches leave signed (off the state owner's thread: a MUNGE signature is a round
        // trip to munged). One that cannot be signed is not sent, and says why.
        let auth = self.auth.clone();
        let signed = UnboundedReceiverStream::new(rx).filter_map(move |m| match m {
            Ok(v1::ControllerToNode { msg: Some(controller_to_node::Msg::Launch(l)) }) => {
                use drover_proto::prost::Message;
                let job = l.job.as_ref().map_or(0, |j| j.job_id);
                match auth.sign_launch(l.encode_to_vec()) {
                    Ok(s) => Some(Ok(v1::ControllerToNode { msg: Some(controller_to_node::Msg::SignedLaunch(s)) })),
                    Err(e) => {
                        crate::log(&format!("error: cannot sign the launch of job {job} for node {signer_node}: {e}"));
                        None
                    }
                }
            }
            other => Some(other),
        });
        Ok(Response::new(Box::pin(signed)))
    }
}

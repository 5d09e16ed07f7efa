//! The `Accounting` gRPC service over the store.

use crate::store::Store;
use drover_proto::v1::{self, accounting_server::Accounting};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Jobs per streamed reply of a query.
const JOBS_PER_REPLY: usize = 1000;

#[derive(Clone)]
pub struct Service {
    pub store: Arc<Store>,
    pub host: String,
    /// Who speaks for the cluster's daemons (root, SlurmUser).
    pub auth: Arc<drover_proto::auth::Auth>,
}

impl Service {
    /// Changes come from root, the service's own user, or an accounting Operator or
    /// Administrator (the local socket's peer credentials, or a TCP connection's credential
    /// say who asks).
    async fn authorize<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let Some(c) = drover_proto::caller(req) else {
            return Err(Status::unauthenticated("Access/permission denied: no credentials"));
        };
        if c.uid == 0 || c.uid == nix::unistd::getuid().as_raw() {
            return Ok(());
        }
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(c.uid)).ok().flatten().map(|u| u.name);
        let st = self.store.admin_state().await.map_err(internal)?;
        let admin = st
            .users
            .iter()
            .any(|u| Some(&u.name) == name.as_ref() && matches!(u.admin_level.as_str(), "Operator" | "Administrator"));
        if admin {
            Ok(())
        } else {
            Err(Status::permission_denied("Access/permission denied"))
        }
    }
}

fn internal(e: crate::store::StoreError) -> Status {
    crate::log(&format!("error: {e}"));
    Status::unavailable(e.to_string())
}

#[tonic::async_trait]
impl Accounting for Service {
    async fn record(&self, req: Request<v1::AcctRecords>) -> Result<Response<v1::Empty>, Status> {
        // Job records, usage and the cluster's state come from a controller: a record of
        // anyone else would forge usage, fairshare and reports.
        let c = drover_proto::caller(&req).ok_or_else(|| Status::unauthenticated("Access/permission denied"))?;
        if !self.auth.is_trusted(c.uid) && c.uid != nix::unistd::getuid().as_raw() {
            crate::log(&format!(
                "refused records of cluster {} from uid {} at {}: only a controller (root or SlurmUser) records",
                req.get_ref().cluster,
                c.uid,
                drover_proto::origin(&req)
            ));
            return Err(Status::permission_denied(
                "Access/permission denied: only the cluster's controller (root or SlurmUser) records jobs",
            ));
        }
        self.store.record(req.get_ref()).await.map_err(internal)?;
        let r = req.get_ref();
        if r.control_port != 0 {
            // Where the controller is, as slurmdbd keeps it: the address its records came
            // from (the loopback address for one on this host's socket).
            let host = match req.extensions().get::<drover_proto::auth::Peer>().and_then(|p| p.addr) {
                Some(a) => a.ip().to_string(),
                None => "127.0.0.1".to_string(),
            };
            self.store.register_controller(&r.cluster, &host, r.control_port, r.rpc).await.map_err(internal)?;
        }
        Ok(Response::new(v1::Empty {}))
    }

    type JobsStream = tokio_stream::Iter<std::vec::IntoIter<Result<v1::AcctRows, Status>>>;

    async fn jobs(&self, req: Request<v1::AcctQuery>) -> Result<Response<Self::JobsStream>, Status> {
        let rows = self.store.jobs(req.get_ref()).await.map_err(internal)?;
        Ok(Response::new(tokio_stream::iter(split(rows).into_iter().map(Ok).collect::<Vec<_>>())))
    }

    async fn admin_get(&self, _req: Request<v1::Empty>) -> Result<Response<v1::AdminState>, Status> {
        Ok(Response::new(self.store.admin_state().await.map_err(internal)?))
    }

    async fn admin_put(&self, req: Request<v1::AdminState>) -> Result<Response<v1::Empty>, Status> {
        self.authorize(&req).await?;
        self.store.admin_put(req.get_ref()).await.map_err(internal)?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn admin_delete(&self, req: Request<v1::AdminState>) -> Result<Response<v1::Empty>, Status> {
        self.authorize(&req).await?;
        self.store.admin_delete(req.get_ref()).await.map_err(internal)?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn usage(&self, req: Request<v1::AcctUsageQuery>) -> Result<Response<v1::AcctUsage>, Status> {
        Ok(Response::new(self.store.usage(req.get_ref()).await.map_err(internal)?))
    }

    async fn ping(&self, _req: Request<v1::Empty>) -> Result<Response<v1::PingReply>, Status> {
        Ok(Response::new(v1::PingReply { cluster: String::new(), host: self.host.clone() }))
    }
}

/// A query's rows as replies of at most [`JOBS_PER_REPLY`] jobs, each with its jobs' steps.
fn split(rows: v1::AcctRows) -> Vec<v1::AcctRows> {
    use std::collections::HashMap;
    if rows.jobs.len() <= JOBS_PER_REPLY {
        return vec![rows];
    }
    let mut steps: HashMap<(String, u32, u32), Vec<v1::AcctStep>> = HashMap::new();
    for s in rows.steps {
        let job = s.info.as_ref().map_or(0, |i| i.job_id);
        steps.entry((s.cluster.clone(), job, s.restarts)).or_default().push(s);
    }
    let mut out = Vec::new();
    let mut jobs = rows.jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let mut r = v1::AcctRows::default();
        for j in jobs.by_ref().take(JOBS_PER_REPLY) {
            let (id, run) = j.info.as_ref().map_or((0, 0), |i| (i.job_id, i.restarts));
            r.steps.extend(steps.remove(&(j.cluster.clone(), id, run)).unwrap_or_default());
            r.jobs.push(j);
        }
        out.push(r);
    }
    out
}

//! The `ControllerHa` service: answered by every controller of a failover set, in control
//! or standing by.

use super::Ha;
use crate::owner::Msg;
use drover_proto::v1::{self, controller_ha_server::ControllerHa};
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status};

#[derive(Clone)]
pub struct HaService {
    pub ha: Arc<Ha>,
    /// The state owner's channel, once this controller is in control.
    pub tx: Arc<Mutex<Option<std::sync::mpsc::Sender<Msg>>>>,
}

impl HaService {
    /// Root, SlurmUser, or the controller's own user (a `drover up` of an ordinary user).
    fn operator<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let caller = drover_proto::caller(req)
            .ok_or_else(|| Status::unauthenticated("Access/permission denied: no credentials"))?;
        if self.ha.auth.is_trusted(caller.uid) || caller.uid == nix::unistd::getuid().as_raw() {
            Ok(())
        } else {
            Err(Status::permission_denied("Access/permission denied"))
        }
    }
}

#[tonic::async_trait]
impl ControllerHa for HaService {
    async fn status(&self, req: Request<v1::Empty>) -> Result<Response<v1::HaStatus>, Status> {
        drover_proto::caller(&req)
            .ok_or_else(|| Status::unauthenticated("Access/permission denied: no credentials"))?;
        let mut status = self.ha.status();
        // The standby's own server (no state owner) takes no commands: whoever asks it is
        // told "not in control", even in the moment this controller takes control and that
        // server is still letting its connections go (a command would otherwise keep such a
        // connection and send its request to a server without the commands).
        if self.tx.lock().map_or(true, |t| t.is_none()) {
            status.active = false;
        }
        Ok(Response::new(status))
    }

    async fn takeover(&self, req: Request<v1::Empty>) -> Result<Response<v1::Empty>, Status> {
        self.operator(&req)?;
        crate::log("asked to take control (scontrol takeover)");
        self.ha.takeover().await.map_err(Status::unavailable)?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn relinquish(&self, req: Request<v1::Empty>) -> Result<Response<v1::Empty>, Status> {
        self.operator(&req)?;
        let tx = self.tx.lock().ok().and_then(|t| t.clone());
        if let Some(tx) = tx {
            let who = drover_proto::origin(&req);
            crate::log(&format!("asked by {who} to hand control over"));
            tx.send(Msg::Relinquish).map_err(|_| Status::unavailable("controller is shutting down"))?;
        }
        Ok(Response::new(v1::Empty {}))
    }
}

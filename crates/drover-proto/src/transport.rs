//! Connecting and serving over Unix sockets and TCP.

use std::path::{Path, PathBuf};
use tonic::transport::{Channel, Endpoint, Uri};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("Unable to contact slurm controller (connect failure): {0}")]
    Unreachable(String),
}

/// A channel to the controller's local Unix socket.
pub async fn connect_unix(path: &Path) -> Result<Channel, ConnectError> {
    let path: PathBuf = path.to_path_buf();
    let shown = path.display().to_string();
    Endpoint::try_from("http://localhost")
        .map_err(|e| ConnectError::Unreachable(e.to_string()))?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| ConnectError::Unreachable(format!("{shown}: {e}")))
}

/// A channel to a TCP address (`host:port`).
pub async fn connect_tcp(addr: &str) -> Result<Channel, ConnectError> {
    Endpoint::try_from(format!("http://{addr}"))
        .map_err(|e| ConnectError::Unreachable(e.to_string()))?
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| ConnectError::Unreachable(format!("{addr}: {e}")))
}

/// Who is calling, from the Unix socket's peer credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

impl Caller {
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// The caller of a request that arrived over a Unix socket; `None` over TCP (cross-host
/// authentication arrives with MUNGE / `auth/drover`).
pub fn caller<T>(req: &tonic::Request<T>) -> Option<Caller> {
    let info = req.extensions().get::<tonic::transport::server::UdsConnectInfo>()?;
    let cred = info.peer_cred?;
    Some(Caller { uid: cred.uid(), gid: cred.gid(), pid: cred.pid() })
}

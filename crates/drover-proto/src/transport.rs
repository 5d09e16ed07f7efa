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

/// A bare HTTP/2 connection to the controller's local Unix socket, for the commands: no
/// buffer task and no endpoint balancing (tonic's `Channel` sets those up on every connect,
/// which a process that makes a call or two and exits pays for at its start). Like a
/// `Channel`, it connects again when a call finds the connection gone (a controller restart);
/// a call that cannot reach the controller fails `Unavailable`. Clones share the connection.
#[derive(Clone)]
pub struct LocalChannel {
    path: std::sync::Arc<PathBuf>,
    conn: std::sync::Arc<tokio::sync::Mutex<Option<LocalSender>>>,
}

type LocalSender = hyper::client::conn::http2::SendRequest<tonic::body::Body>;

/// Connects a [`LocalChannel`]; the connection is driven by a task on the current runtime.
pub async fn connect_local(path: &Path) -> Result<LocalChannel, ConnectError> {
    let send = handshake(path).await?;
    Ok(LocalChannel {
        path: std::sync::Arc::new(path.to_path_buf()),
        conn: std::sync::Arc::new(tokio::sync::Mutex::new(Some(send))),
    })
}

async fn handshake(path: &Path) -> Result<LocalSender, ConnectError> {
    let shown = path.display().to_string();
    let fail = |e: &dyn std::fmt::Display| ConnectError::Unreachable(format!("{shown}: {e}"));
    let s = tokio::net::UnixStream::connect(path).await.map_err(|e| fail(&e))?;
    let (send, conn) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .handshake(hyper_util::rt::TokioIo::new(s))
        .await
        .map_err(|e| fail(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

impl LocalChannel {
    /// The live connection, or a new one when it is gone.
    async fn sender(&self) -> Result<LocalSender, tonic::Status> {
        let mut conn = self.conn.lock().await;
        if let Some(s) = conn.as_ref().filter(|s| !s.is_closed()) {
            return Ok(s.clone());
        }
        *conn = None;
        let s = handshake(&self.path).await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        *conn = Some(s.clone());
        Ok(s)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<http::Request<tonic::body::Body>> for LocalChannel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = BoxError;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        // Readiness is the connection's, checked in the call (which may have to reconnect).
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<tonic::body::Body>) -> Self::Future {
        // HTTP/2 requests carry a scheme and an authority; the generated client sends the path.
        let mut parts = req.uri().clone().into_parts();
        parts.scheme = Some(http::uri::Scheme::HTTP);
        parts.authority = Some(http::uri::Authority::from_static("localhost"));
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
        let this = self.clone();
        Box::pin(async move {
            let unavailable = |e: hyper::Error| -> BoxError { Box::new(tonic::Status::unavailable(e.to_string())) };
            let mut send = this.sender().await?;
            std::future::poll_fn(|cx| send.poll_ready(cx)).await.map_err(unavailable)?;
            send.send_request(req).await.map_err(unavailable)
        })
    }
}

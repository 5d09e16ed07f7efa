//! Connecting and serving over Unix sockets and TCP.

use std::path::{Path, PathBuf};
use tonic::transport::{Channel, Endpoint, Uri};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("Unable to contact slurm controller (connect failure): {0}")]
    Unreachable(String),
    /// Reached, but this process's credential could not be made or was refused (or the
    /// server's was not believed).
    #[error("{0}")]
    Auth(crate::auth::AuthError),
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

/// The caller of a request: the peer credentials of a Unix socket, or the credential a TCP
/// connection was opened with ([`crate::auth::Peer`]); `None` on a connection that proved
/// nothing (there is none: servers take only these two).
pub fn caller<T>(req: &tonic::Request<T>) -> Option<Caller> {
    if let Some(info) = req.extensions().get::<tonic::transport::server::UdsConnectInfo>() {
        let cred = info.peer_cred?;
        return Some(Caller { uid: cred.uid(), gid: cred.gid(), pid: cred.pid() });
    }
    let p = req.extensions().get::<crate::auth::Peer>()?;
    Some(Caller { uid: p.uid, gid: p.gid, pid: None })
}

/// Where a request came from, for logs and refusals: `host (address)` of an authenticated TCP
/// connection, `local` on the Unix socket.
pub fn origin<T>(req: &tonic::Request<T>) -> String {
    match req.extensions().get::<crate::auth::Peer>() {
        Some(p) => match p.addr {
            Some(a) => format!("{} ({a})", p.host),
            None => p.host.clone(),
        },
        None => "local".into(),
    }
}

/// A bare HTTP/2 connection to the controller for the commands: over its local Unix socket
/// (peer credentials say who calls), or over TCP opened with this user's credential (a host
/// without the controller: a login node). No buffer task and no endpoint balancing (tonic's
/// `Channel` sets those up on every connect, which a process that makes a call or two and
/// exits pays for at its start). Like a `Channel`, it connects again when a call finds the
/// connection gone (a controller restart); a call that cannot reach the controller fails
/// `Unavailable`. Clones share the connection.
#[derive(Clone)]
pub struct LocalChannel {
    target: std::sync::Arc<Target>,
    conn: std::sync::Arc<tokio::sync::Mutex<Option<LocalSender>>>,
}

/// Where a [`LocalChannel`] connects.
pub enum Target {
    Unix(PathBuf),
    /// `host:port`, the credentials to open it with, and the service proved to.
    Tcp {
        addr: String,
        auth: std::sync::Arc<crate::auth::Auth>,
        service: &'static str,
    },
}

type LocalSender = hyper::client::conn::http2::SendRequest<tonic::body::Body>;

/// Connects a [`LocalChannel`] to a local socket; the connection is driven by a task on the
/// current runtime.
pub async fn connect_local(path: &Path) -> Result<LocalChannel, ConnectError> {
    connect_target(Target::Unix(path.to_path_buf())).await
}

/// Connects a [`LocalChannel`] to `target`.
pub async fn connect_target(target: Target) -> Result<LocalChannel, ConnectError> {
    let send = handshake(&target).await?;
    Ok(LocalChannel {
        target: std::sync::Arc::new(target),
        conn: std::sync::Arc::new(tokio::sync::Mutex::new(Some(send))),
    })
}

async fn handshake(target: &Target) -> Result<LocalSender, ConnectError> {
    async fn h2<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static>(
        s: S,
        shown: &str,
    ) -> Result<LocalSender, ConnectError> {
        let (send, conn) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(s))
            .await
            .map_err(|e| ConnectError::Unreachable(format!("{shown}: {e}")))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
    }
    match target {
        Target::Unix(path) => {
            let shown = path.display().to_string();
            let s = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| ConnectError::Unreachable(format!("{shown}: {e}")))?;
            h2(s, &shown).await
        }
        Target::Tcp { addr, auth, service } => {
            let mut s = tokio::net::TcpStream::connect(addr.as_str())
                .await
                .map_err(|e| ConnectError::Unreachable(format!("{addr}: {e}")))?;
            let _ = s.set_nodelay(true);
            crate::auth::client_handshake(&mut s, auth, service).await.map_err(ConnectError::Auth)?;
            h2(s, addr).await
        }
    }
}

impl LocalChannel {
    /// The live connection, or a new one when it is gone.
    async fn sender(&self) -> Result<LocalSender, tonic::Status> {
        let mut conn = self.conn.lock().await;
        if let Some(s) = conn.as_ref().filter(|s| !s.is_closed()) {
            return Ok(s.clone());
        }
        *conn = None;
        let s = handshake(&self.target).await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
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

/// A daemon's local socket at `sock` (in root's `/run/drover`, so that no one can put a socket
/// of their own there first), open to every local user: their peer credentials say who they
/// are. The directory is made (0755) when missing.
pub fn local_listener(sock: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = sock.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    let _ = std::fs::remove_file(sock);
    let l = tokio::net::UnixListener::bind(sock)?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

/// The first of `tries` to give something, each run at once beside the others and given
/// `within` at most: of several controllers, the one in control, found without waiting on
/// one that hangs (a frozen process accepts connections and never answers them).
pub async fn first_of<T: Send + 'static>(
    tries: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Option<T>> + Send>>>,
    within: std::time::Duration,
) -> Option<T> {
    let mut set = tokio::task::JoinSet::new();
    for t in tries {
        set.spawn(async move { tokio::time::timeout(within, t).await.ok().flatten() });
    }
    while let Some(r) = set.join_next().await {
        if let Ok(Some(v)) = r {
            return Some(v);
        }
    }
    None
}

/// Connects with `connect`, again and again, until the controller there says it is in
/// control (one of several `SlurmctldHost`s): a standby says it is not yet, a frozen one never
/// answers (each question is given two seconds), a dead one refuses the connection. Meant to
/// run beside the same for the other controllers ([`first_of`]).
pub async fn until_in_control<T, F, Fut>(connect: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
    T: Clone + tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let pause = std::time::Duration::from_millis(100);
    loop {
        if let Some(ch) = connect().await {
            let mut ha = crate::v1::controller_ha_client::ControllerHaClient::new(ch.clone());
            loop {
                match tokio::time::timeout(std::time::Duration::from_secs(2), ha.status(crate::v1::Empty {})).await {
                    Ok(Ok(s)) if s.get_ref().active => return ch,
                    Ok(Ok(_)) => tokio::time::sleep(pause).await,
                    _ => break,
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}

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
    gate: std::sync::Arc<Gate>,
}

/// Where a TCP connection stands with the server's answering credential (see [`Checked`]).
#[derive(Default)]
struct Gate {
    /// A request was handed to the connection: the answer may be checked once it is written.
    go: std::sync::atomic::AtomicBool,
    /// The connection's reader, waiting for that.
    reader: std::sync::Mutex<Option<std::task::Waker>>,
    /// Why the answer was not believed, once it was checked and failed: what a call then
    /// fails with.
    refused: std::sync::Mutex<Option<String>>,
}

impl Gate {
    fn reset(&self) {
        self.go.store(false, std::sync::atomic::Ordering::SeqCst);
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    fn open(&self) {
        self.go.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(w) = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }
    fn refused(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
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
    let gate = std::sync::Arc::new(Gate::default());
    let send = handshake(&target, &gate).await?;
    Ok(LocalChannel {
        target: std::sync::Arc::new(target),
        conn: std::sync::Arc::new(tokio::sync::Mutex::new(Some(send))),
        gate,
    })
}

/// A connection whose server has answered the client's credential with its own (auth/slurm),
/// which is checked once the client's first request is written: that request is on its way while
/// the answer is checked (a `munged` round trip, which a command would otherwise wait out
/// before it even sent its request, and which the server now spends handling it), and
/// nothing the server sent is read before the answer is believed. As in Slurm, whose
/// commands send their request with their credential and check the server's on its reply.
/// Not believed, every read fails and the reason is left in the [`Gate`].
struct Checked<S> {
    inner: S,
    answer: Option<(crate::auth::Unchecked, std::sync::Arc<crate::auth::Auth>)>,
    /// Something was written since the last read was tried.
    wrote: bool,
    /// The answer was checked and not believed: every read fails.
    disbelieved: bool,
    gate: std::sync::Arc<Gate>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Checked<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let denied = |why: String| Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why)));
        if self.answer.is_some() {
            // Parked before looking, so that a request handed over meanwhile wakes it.
            *self.gate.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            if !self.gate.go.load(std::sync::atomic::Ordering::SeqCst) {
                return Poll::Pending;
            }
            if self.wrote {
                // HTTP/2 writes what it has queued when its read waits: once more, after that.
                self.wrote = false;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.gate.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (answer, auth) = self.answer.take().expect("invariant: checked just above");
            if let Err(e) = answer.check(&auth) {
                let why = e.to_string();
                *self.gate.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
                self.disbelieved = true;
                return denied(why);
            }
        }
        if self.disbelieved {
            return denied("the server's credential was not believed".into());
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Checked<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote |= matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0);
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote |= matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0);
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

async fn handshake(target: &Target, gate: &std::sync::Arc<Gate>) -> Result<LocalSender, ConnectError> {
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
            let (s, answer) = crate::auth::connect_unchecked(addr, auth, service).await.map_err(|e| match e {
                crate::auth::ProvedError::Unreachable(e) => ConnectError::Unreachable(e),
                crate::auth::ProvedError::Auth(e) => ConnectError::Auth(e),
            })?;
            gate.reset();
            // auth/munge's answer is checked here and now (an HMAC: no request goes to a
            // server not believed); auth/slurm's, a credential, once the request is on its way.
            let answer = if answer.is_sealed() {
                answer.check(auth).map_err(ConnectError::Auth)?;
                None
            } else {
                Some((answer, auth.clone()))
            };
            let checked = Checked { inner: s, answer, wrote: false, disbelieved: false, gate: gate.clone() };
            h2(checked, addr).await
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
        let s = handshake(&self.target, &self.gate).await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
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
            let gate = this.gate.clone();
            let unavailable = move |e: hyper::Error| -> BoxError {
                match gate.refused() {
                    // The server's credential was not believed: that, not the connection's end.
                    Some(why) => Box::new(tonic::Status::unauthenticated(why)),
                    None => Box::new(tonic::Status::unavailable(e.to_string())),
                }
            };
            let mut send = this.sender().await?;
            std::future::poll_fn(|cx| send.poll_ready(cx)).await.map_err(&unavailable)?;
            // Handed over (hyper queues it at once): the connection may check the server's
            // answer once it has written it.
            let response = send.send_request(req);
            this.gate.open();
            response.await.map_err(unavailable)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Auth, Opening, Purpose};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef-cluster-key";

    /// A server on the other end of `s` that answers the exchange with a credential of
    /// `server`'s, then at once sends `then` (what it would have the client believe).
    async fn answer(mut s: tokio::io::DuplexStream, server: Auth, then: &'static [u8]) {
        let mut head = [0u8; 8];
        s.read_exact(&mut head).await.unwrap();
        let len = u32::from_be_bytes(head[4..8].try_into().unwrap()) as usize;
        let mut cred = vec![0; len];
        s.read_exact(&mut cred).await.unwrap();
        // Bound to the client's challenge where it can read it; a squatter cannot.
        let binding = server.verify(&cred, &Purpose::Connect("controller")).map(|(_, b)| b).unwrap_or_default();
        let reply = server.issue(&Purpose::Reply("controller"), &binding).unwrap();
        let mut out = vec![0u8];
        out.extend_from_slice(&(reply.len() as u32).to_be_bytes());
        out.extend_from_slice(&reply);
        out.extend_from_slice(then);
        s.write_all(&out).await.unwrap();
        // Reads what the client sends next, until it hangs up.
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    }

    async fn checked(server: Auth, then: &'static [u8]) -> (Checked<tokio::io::DuplexStream>, Arc<Gate>) {
        let ours = Arc::new(Auth::with_key(KEY, nix::unistd::geteuid().as_raw()));
        let (mut client, far) = tokio::io::duplex(1 << 16);
        tokio::spawn(answer(far, server, then));
        let unchecked = Opening::new(&ours, "controller").unwrap().present(&mut client, &ours).await.unwrap();
        let gate = Arc::new(Gate::default());
        let c = Checked {
            inner: client,
            answer: Some((unchecked, ours)),
            wrote: false,
            disbelieved: false,
            gate: gate.clone(),
        };
        (c, gate)
    }

    /// Reads with a deadline: `None` when the read waits.
    async fn read_some(c: &mut Checked<tokio::io::DuplexStream>) -> Option<std::io::Result<Vec<u8>>> {
        let mut b = [0u8; 64];
        match tokio::time::timeout(std::time::Duration::from_millis(200), c.read(&mut b)).await {
            Ok(r) => Some(r.map(|n| b[..n].to_vec())),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn nothing_is_read_before_a_request_is_out_and_the_answer_believed() {
        let (mut c, gate) = checked(Auth::with_key(KEY, 0), b"the response").await;
        // No request handed over yet: the read waits, though the server has sent.
        assert!(read_some(&mut c).await.is_none(), "read before any request");
        // Handed over and written: the first read after the write waits once more (for
        // HTTP/2 to write what it queued), then the answer is checked and the bytes come.
        gate.open();
        c.write_all(b"the request").await.unwrap();
        let got = read_some(&mut c).await.expect("reads once the request is out").unwrap();
        assert_eq!(got, b"the response");
        assert_eq!(gate.refused(), None);
    }

    #[tokio::test]
    async fn a_server_of_another_cluster_is_not_read_and_says_why() {
        let squatter = Auth::with_key(b"the squatter's own key, 32 bytes or more", 0);
        let (mut c, gate) = checked(squatter, b"believe me").await;
        gate.open();
        let e = read_some(&mut c).await.expect("the check ends the read").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        let why = gate.refused().expect("the reason is kept for the call");
        assert!(why.starts_with("Invalid authentication credential"), "{why}");
        // And every read after it fails too: the squatter's bytes are never delivered.
        let again = read_some(&mut c).await.expect("fails at once").unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::PermissionDenied);
    }
}

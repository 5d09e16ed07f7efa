//! The start of every TCP connection between Drover's processes, before any RPC:
//!
//! ```text
//!  client ── "DRV1", len, credential(connect/<service>, binding = challenge) ──────────► server
//!  client ◄── 0, len, credential(reply/<service>, binding = challenge)   (accepted)  ── server
//!  client ◄── 1, len, one-line reason                                    (refused)   ──
//! ```
//!
//! The server believes the client's credential (uid, gid, host) for the life of the
//! connection and hands it to every request on it ([`Peer`], tonic's connect info). The
//! client checks the server's answer where it can (root, `SlurmUser`, every MUNGE host): it
//! must come from the cluster's daemons and answer this connection's challenge, so neither a
//! process squatting on the port nor a replay of an old answer passes.

use super::{Auth, AuthError, Identity, Purpose};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

const MAGIC: &[u8; 4] = b"DRV1";
/// A credential is a few hundred bytes (a MUNGE one under 1 KB); anything larger is not one.
const MAX_FRAME: usize = 16 << 10;
/// How long a peer may take over its half of the exchange.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Who is on the other end of an accepted connection, for every request on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub host: String,
    pub addr: Option<SocketAddr>,
}

async fn read_frame<S: AsyncRead + Unpin>(s: &mut S) -> Result<Vec<u8>, AuthError> {
    let len = s.read_u32().await.map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))? as usize;
    if len > MAX_FRAME {
        return Err(AuthError::Protocol(format!("a {len}-byte credential")));
    }
    let mut b = vec![0u8; len];
    s.read_exact(&mut b).await.map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))?;
    Ok(b)
}

async fn write_frame<S: AsyncWrite + Unpin>(s: &mut S, head: &[u8], body: &[u8]) -> std::io::Result<()> {
    let mut b = Vec::with_capacity(head.len() + 4 + body.len());
    b.extend_from_slice(head);
    b.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    b.extend_from_slice(body);
    s.write_all(&b).await?;
    s.flush().await
}

/// The client's half: proves who this process is to `service`, then checks the server's
/// answer (where this process can check credentials). Returns the server's identity, if
/// checked.
pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<Option<Identity>, AuthError> {
    let opening = Opening::new(auth, service)?;
    opening.finish(s, auth).await
}

/// The client's credential for one connection to `service`, made before the connection is
/// (so that the two overlap: see [`connect_proved`]), and the challenge it binds.
pub struct Opening {
    service: &'static str,
    challenge: [u8; 16],
    cred: Vec<u8>,
}

impl Opening {
    pub fn new(auth: &Auth, service: &'static str) -> Result<Opening, AuthError> {
        let challenge = super::random::<16>();
        let cred = auth.issue(&Purpose::Connect(service), &challenge)?;
        Ok(Opening { service, challenge, cred })
    }

    /// Presents the credential on `s` and checks the server's answer (see
    /// [`client_handshake`]).
    pub async fn finish<S: AsyncRead + AsyncWrite + Unpin>(
        self,
        s: &mut S,
        auth: &Auth,
    ) -> Result<Option<Identity>, AuthError> {
        self.present(s).await?.check(auth)
    }

    /// Presents the credential on `s` and reads the server's answer, unchecked: a refusal is
    /// an error here; an answering credential is to be [checked](Unchecked::check) before
    /// anything the server sends after it is believed.
    pub async fn present<S: AsyncRead + AsyncWrite + Unpin>(self, s: &mut S) -> Result<Unchecked, AuthError> {
        let Opening { service, challenge, cred } = self;
        let body = send_credential(s, &cred, service).await?;
        Ok(Unchecked { service, challenge, body })
    }
}

/// The server's answering credential, read and not yet checked.
pub struct Unchecked {
    service: &'static str,
    challenge: [u8; 16],
    body: Vec<u8>,
}

impl Unchecked {
    /// Checks that the answer comes from the cluster's daemons and is for this connection
    /// (see [`client_handshake`]).
    pub fn check(self, auth: &Auth) -> Result<Option<Identity>, AuthError> {
        client_check(auth, self.service, &self.challenge, self.body)
    }
}

fn client_check(
    auth: &Auth,
    service: &'static str,
    challenge: &[u8],
    body: Vec<u8>,
) -> Result<Option<Identity>, AuthError> {
    match auth.verify(&body, &Purpose::Reply(service)) {
        Ok((who, binding)) => {
            if !auth.is_trusted(who.uid) {
                return Err(AuthError::Denied(format!(
                    "the {service} answering here runs as uid {} on {}, not as root or SlurmUser",
                    who.uid, who.host
                )));
            }
            if binding != challenge {
                return Err(AuthError::Invalid(format!("the {service}'s answer is not for this connection")));
            }
            Ok(Some(who))
        }
        // This user cannot check auth/slurm credentials (no key); the server checked ours.
        Err(AuthError::Unavailable(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens the exchange with `cred` as it is and returns the server's answering credential,
/// or its reason for refusing (the client half without its checks: for tools, and for tests
/// that present what an attacker would).
pub async fn send_credential<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    cred: &[u8],
    service: &str,
) -> Result<Vec<u8>, AuthError> {
    write_frame(s, MAGIC, cred).await.map_err(|e| AuthError::Protocol(format!("sending the credential: {e}")))?;
    let status = tokio::time::timeout(HANDSHAKE_TIMEOUT, s.read_u8())
        .await
        .map_err(|_| AuthError::Protocol(format!("no answer from {service} within {HANDSHAKE_TIMEOUT:?}")))?
        .map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))?;
    let body = read_frame(s).await?;
    if status != 0 {
        // The server's reason, as it said it.
        return Err(AuthError::Refused(String::from_utf8_lossy(&body).into_owned()));
    }
    Ok(body)
}

/// The server's half: checks the client's credential for `service`, answers with ours bound
/// to its challenge, or with the reason it is refused.
pub async fn server_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<Identity, AuthError> {
    let mut magic = [0u8; 4];
    s.read_exact(&mut magic).await.map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))?;
    if &magic != MAGIC {
        let e = AuthError::Protocol("no credential (a client of another protocol or an older Drover)".into());
        let _ = write_frame(s, &[1], e.to_string().as_bytes()).await;
        return Err(e);
    }
    let cred = read_frame(s).await?;
    let checked = auth.verify(&cred, &Purpose::Connect(service)).and_then(|(who, challenge)| {
        let reply = auth.issue(&Purpose::Reply(service), &challenge)?;
        Ok((who, reply))
    });
    match checked {
        Ok((who, reply)) => {
            write_frame(s, &[0], &reply).await.map_err(|e| AuthError::Protocol(format!("answering: {e}")))?;
            Ok(who)
        }
        Err(e) => {
            let _ = write_frame(s, &[1], e.to_string().as_bytes()).await;
            Err(e)
        }
    }
}

/// An accepted connection whose client proved who it is.
pub struct AuthedStream {
    inner: TcpStream,
    peer: Peer,
}

impl AuthedStream {
    pub fn peer(&self) -> &Peer {
        &self.peer
    }
}

impl AsyncRead for AuthedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for AuthedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for AuthedStream {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

/// The connections of `listener` whose clients proved who they are to `service` (each
/// exchange on a task of its own, so a slow or silent client holds up no one). Refusals go to
/// `refused` with the address they came from.
pub fn accept_authenticated(
    listener: tokio::net::TcpListener,
    auth: Arc<Auth>,
    service: &'static str,
    refused: impl Fn(SocketAddr, &AuthError) + Send + Sync + 'static,
) -> impl tokio_stream::Stream<Item = std::io::Result<AuthedStream>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let refused = Arc::new(refused);
    tokio::spawn(async move {
        loop {
            // Once the stream is dropped (its server stopped), the listener is let go at once:
            // a clone of it may serve on (a standby controller that took control).
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => return,
            };
            let (mut s, addr) = match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: pass, and keep accepting.
                    if tx.send(Err(e)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            let (tx, auth, refused) = (tx.clone(), auth.clone(), refused.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, server_handshake(&mut s, &auth, service)).await {
                    Ok(Ok(who)) => {
                        let peer = Peer { uid: who.uid, gid: who.gid, host: who.host, addr: Some(addr) };
                        let _ = tx.send(Ok(AuthedStream { inner: s, peer })).await;
                    }
                    Ok(Err(e)) => refused(addr, &e),
                    Err(_) => {
                        refused(addr, &AuthError::Protocol(format!("no credential within {HANDSHAKE_TIMEOUT:?}")))
                    }
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Why [`connect_proved`] failed: the address could not be reached, or it was and the
/// exchange failed (this process's credential could not be made, was refused, or the
/// server's was not believed).
#[derive(Debug)]
pub enum ProvedError {
    Unreachable(String),
    Auth(AuthError),
}

/// A TCP connection to `addr` (`host:port`) on which this process proved who it is to
/// `service` and, where it can, checked the server's answer.
///
/// The credential is made while the connection is being opened, not after: both wait on
/// another process (`munged`; the server's kernel), and a command that makes one connection
/// and exits spends a good part of its life on them. A name is looked up on this thread
/// where the runtime has only this one (a command, which has nothing else to do meanwhile:
/// a thread for it costs more than the lookup of a name in /etc/hosts) and on tokio's
/// blocking threads otherwise (a daemon, whose other work must not wait on a slow DNS).
pub async fn connect_proved(addr: &str, auth: &Auth, service: &'static str) -> Result<TcpStream, ProvedError> {
    let (s, answer) = connect_unchecked(addr, auth, service).await?;
    answer.check(auth).map_err(ProvedError::Auth)?;
    Ok(s)
}

/// [`connect_proved`] up to the server's answer, read and not yet checked: for a caller that
/// checks it while its first request is on its way (see `transport`), and believes nothing
/// the server sends before it has.
pub async fn connect_unchecked(
    addr: &str,
    auth: &Auth,
    service: &'static str,
) -> Result<(TcpStream, Unchecked), ProvedError> {
    let unreachable = |e: std::io::Error| ProvedError::Unreachable(format!("{addr}: {e}"));
    let addrs: Vec<SocketAddr> = match addr.parse::<SocketAddr>() {
        Ok(a) => vec![a],
        Err(_) => {
            let current_thread = tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
            if current_thread {
                use std::net::ToSocketAddrs;
                addr.to_socket_addrs().map_err(unreachable)?.collect()
            } else {
                tokio::net::lookup_host(addr).await.map_err(unreachable)?.collect()
            }
        }
    };
    // The connection is opened by a task of its own, which runs as soon as this one yields
    // (on this thread too, in a command's runtime): its connect(2) is under way in the kernel
    // while the credential is made here.
    let connecting = tokio::spawn(async move {
        let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, "the name has no address");
        for a in addrs {
            match TcpStream::connect(a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    });
    tokio::task::yield_now().await;
    let opening = Opening::new(auth, service);
    let mut s = match connecting.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(unreachable(e)),
        Err(e) => return Err(ProvedError::Unreachable(format!("{addr}: {e}"))),
    };
    let _ = s.set_nodelay(true);
    let answer = opening.map_err(ProvedError::Auth)?.present(&mut s).await.map_err(ProvedError::Auth)?;
    Ok((s, answer))
}

/// A TCP connection to `addr` on which this process proved who it is to `service` (and, where
/// it can, checked the server). Errors are one line for the user.
pub async fn connect_stream(addr: &str, auth: &Auth, service: &'static str) -> Result<TcpStream, String> {
    connect_proved(addr, auth, service).await.map_err(|e| match e {
        ProvedError::Unreachable(e) => e,
        ProvedError::Auth(e) => e.to_string(),
    })
}

/// A gRPC channel over an authenticated connection to `addr` (see [`connect_stream`]). It
/// does not reconnect by itself: each new connection needs a new credential, so callers
/// connect again.
pub async fn connect_authenticated(
    addr: &str,
    auth: &Auth,
    service: &'static str,
) -> Result<tonic::transport::Channel, String> {
    let s = connect_stream(addr, auth, service).await?;
    channel_over(s, addr).await
}

/// A gRPC channel over `s`, a connection already through its exchange (it does not
/// reconnect: see [`connect_authenticated`]).
pub async fn channel_over(s: TcpStream, addr: &str) -> Result<tonic::transport::Channel, String> {
    let once = Arc::new(std::sync::Mutex::new(Some(s)));
    tonic::transport::Endpoint::try_from(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        // A peer that stops answering (its host gone, its process frozen, the network cut)
        // ends the connection within seconds, even while nothing is asked of it: a node
        // agent then finds the controller that took over.
        .http2_keep_alive_interval(std::time::Duration::from_secs(2))
        .keep_alive_timeout(std::time::Duration::from_secs(5))
        .keep_alive_while_idle(true)
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let once = once.clone();
            async move {
                let s = once.lock().ok().and_then(|mut s| s.take()).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotConnected, "the authenticated connection is gone")
                })?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| format!("{addr}: {e}"))
}

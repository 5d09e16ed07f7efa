//! The start of every TCP connection between Drover's processes, before any RPC. Two
//! exchanges, by the cluster's `AuthType`:
//!
//! ```text
//! auth/munge: one credential, sealed to the daemon's uid, carries a secret for the answer
//!  client ── "DRV2", len, credential(connect/<service>, binding = secret; sealed to uid U) ──► server
//!  client ◄── 0, len, HMAC(secret; uid, gid, host) | uid | gid | host   (accepted)        ── server
//!  client ◄── 2, len, uid   (this daemon runs as uid, not U: the client seals again, once) ──
//!  client ◄── 1, len, one-line reason                                  (refused)         ──
//!
//! auth/slurm: the server answers with a credential of its own
//!  client ── "DRV1", len, credential(connect/<service>, binding = challenge) ──────────► server
//!  client ◄── 0, len, credential(reply/<service>, binding = challenge)   (accepted)  ── server
//!  client ◄── 1, len, one-line reason                                    (refused)   ──
//! ```
//!
//! The server believes the client's credential (uid, gid, host) for the life of the
//! connection and hands it to every request on it ([`Peer`], tonic's connect info). The
//! client checks the server's answer: it must come from the cluster's daemons (root or
//! `SlurmUser`) and answer this connection, so neither a process squatting on the port nor a
//! replay of an old answer passes. Under MUNGE that proof costs no credential of the
//! server's: only a process of uid U can have the secret (munged decodes a sealed credential
//! for that uid alone, and once), so an answer made with it is the daemon's. That halves the
//! MUNGE round trips of a connection (two instead of four), which is most of what a command
//! like `sbatch` spends. The uid is guessed from `SlurmUser` ([`Auth::daemon_uid`]); a daemon
//! that runs as another trusted uid says so and the client seals once more. Under auth/slurm
//! a credential is signed, not encrypted, so it carries no secret; a key holder checks the
//! server's credential, an ordinary user (who cannot) relies on the server checking theirs.

use super::{Auth, AuthError, Identity, Purpose};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The exchange of auth/slurm (the server answers with a credential).
const MAGIC: &[u8; 4] = b"DRV1";
/// The exchange of auth/munge (the client's credential is sealed to the daemon).
const MAGIC_SEALED: &[u8; 4] = b"DRV2";
/// Answer codes.
const ACCEPTED: u8 = 0;
const REFUSED: u8 = 1;
const SEAL_AGAIN: u8 = 2;
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
/// answer (where this process can check it). Returns the server's identity, if checked.
pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<Option<Identity>, AuthError> {
    let opening = Opening::new(auth, service)?;
    opening.finish(s, auth).await
}

/// The client's credential for one connection to `service`, made before the connection is
/// (so that the two overlap: see [`connect_proved`]), and what the server's answer must show.
pub struct Opening {
    service: &'static str,
    kind: Kind,
}

enum Kind {
    /// auth/slurm: the server answers with a credential bound to `challenge`.
    Answered { challenge: [u8; 16], cred: Vec<u8> },
    /// auth/munge: the credential is sealed to `uid` and carries `secret`.
    Sealed { secret: [u8; 32], uid: u32, cred: Vec<u8> },
}

impl Opening {
    pub fn new(auth: &Auth, service: &'static str) -> Result<Opening, AuthError> {
        match auth.kind() {
            super::AuthKind::Munge => Opening::sealed(auth, service, auth.daemon_uid(service)),
            super::AuthKind::Slurm => {
                let challenge = super::random::<16>();
                let cred = auth.issue(&Purpose::Connect(service), &challenge)?;
                Ok(Opening { service, kind: Kind::Answered { challenge, cred } })
            }
        }
    }

    fn sealed(auth: &Auth, service: &'static str, uid: u32) -> Result<Opening, AuthError> {
        let secret = super::random::<32>();
        let cred = auth.issue_sealed(&Purpose::Connect(service), &secret, uid)?;
        Ok(Opening { service, kind: Kind::Sealed { secret, uid, cred } })
    }

    /// Presents the credential on `s` and checks the server's answer (see
    /// [`client_handshake`]).
    pub async fn finish<S: AsyncRead + AsyncWrite + Unpin>(
        self,
        s: &mut S,
        auth: &Auth,
    ) -> Result<Option<Identity>, AuthError> {
        self.present(s, auth).await?.check(auth)
    }

    /// Presents the credential on `s` and reads the server's answer, unchecked: a refusal is
    /// an error here; an answer is to be [checked](Unchecked::check) before anything the
    /// server sends after it is believed. A daemon that says it runs as another uid than the
    /// one sealed to is sealed to once more, if that uid is one the cluster trusts.
    pub async fn present<S: AsyncRead + AsyncWrite + Unpin>(
        self,
        s: &mut S,
        auth: &Auth,
    ) -> Result<Unchecked, AuthError> {
        let service = self.service;
        match self.kind {
            Kind::Answered { challenge, cred } => {
                let body = send_credential(s, &cred, service).await?;
                Ok(Unchecked { service, kind: UncheckedKind::Answered { challenge, body } })
            }
            Kind::Sealed { mut secret, mut uid, mut cred } => {
                let mut again = false;
                loop {
                    match exchange(s, MAGIC_SEALED, &cred, service).await? {
                        (ACCEPTED, body) => {
                            return Ok(Unchecked {
                                service,
                                kind: UncheckedKind::Sealed { secret, uid, learned: again, body },
                            })
                        }
                        (SEAL_AGAIN, body) if !again => {
                            let theirs =
                                <[u8; 4]>::try_from(body.as_slice()).map(u32::from_be_bytes).map_err(|_| {
                                    AuthError::Protocol(format!("the {service} asked to seal again to no uid"))
                                })?;
                            if !auth.is_trusted(theirs) {
                                return Err(untrusted(service, theirs, "the server said so"));
                            }
                            let o = Opening::sealed(auth, service, theirs)?;
                            let Kind::Sealed { secret: s2, uid: u2, cred: c2 } = o.kind else {
                                unreachable!("Opening::sealed makes a sealed opening")
                            };
                            (secret, uid, cred, again) = (s2, u2, c2, true);
                        }
                        (SEAL_AGAIN, _) => {
                            return Err(AuthError::Protocol(format!(
                            "the {service} could not open a credential sealed to uid {uid}, which it said it runs as"
                        )))
                        }
                        (code, _) => {
                            return Err(AuthError::Protocol(format!("the {service} answered with code {code}")))
                        }
                    }
                }
            }
        }
    }
}

fn untrusted(service: &str, uid: u32, host: &str) -> AuthError {
    AuthError::Denied(format!("the {service} answering here runs as uid {uid} ({host}), not as root or SlurmUser"))
}

/// The server's answer, read and not yet checked.
pub struct Unchecked {
    service: &'static str,
    kind: UncheckedKind,
}

enum UncheckedKind {
    Answered { challenge: [u8; 16], body: Vec<u8> },
    Sealed { secret: [u8; 32], uid: u32, learned: bool, body: Vec<u8> },
}

impl Unchecked {
    /// Whether this is auth/munge's answer, made with the credential's secret: checked in
    /// microseconds, with nothing to ask of munged.
    pub fn is_sealed(&self) -> bool {
        matches!(self.kind, UncheckedKind::Sealed { .. })
    }

    /// Checks that the answer comes from the cluster's daemons and is for this connection
    /// (see [`client_handshake`]).
    pub fn check(self, auth: &Auth) -> Result<Option<Identity>, AuthError> {
        let service = self.service;
        match self.kind {
            UncheckedKind::Answered { challenge, body } => client_check(auth, service, &challenge, body),
            UncheckedKind::Sealed { secret, uid, learned, body } => {
                let who = open_answer(&secret, service, &body)
                    .ok_or_else(|| AuthError::Invalid(format!("the {service}'s answer is not for this connection")))?;
                if who.uid != uid {
                    return Err(AuthError::Invalid(format!(
                        "the {service}'s answer names uid {}, not uid {uid} its credential was sealed to",
                        who.uid
                    )));
                }
                if !auth.is_trusted(who.uid) {
                    return Err(untrusted(service, who.uid, &who.host));
                }
                if learned {
                    auth.learn_daemon_uid(service, uid);
                }
                Ok(Some(who))
            }
        }
    }
}

/// The server's answer to a sealed credential: who it is, under the credential's secret.
fn sealed_answer(secret: &[u8], service: &str, who: &Identity) -> Vec<u8> {
    let (uid, gid) = (who.uid.to_be_bytes(), who.gid.to_be_bytes());
    let mac = super::io_mac(secret, &[b"drover/answer", service.as_bytes(), &uid, &gid, who.host.as_bytes()]);
    let mut b = Vec::with_capacity(40 + who.host.len());
    b.extend_from_slice(&mac);
    b.extend_from_slice(&uid);
    b.extend_from_slice(&gid);
    b.extend_from_slice(who.host.as_bytes());
    b
}

/// Who a [`sealed_answer`] says answered, if it was made with `secret`.
fn open_answer(secret: &[u8], service: &str, body: &[u8]) -> Option<Identity> {
    if body.len() < 40 {
        return None;
    }
    let (mac, rest) = body.split_at(32);
    let (uid, rest) = rest.split_at(4);
    let (gid, host) = rest.split_at(4);
    if !super::io_mac_ok(secret, &[b"drover/answer", service.as_bytes(), uid, gid, host], mac) {
        return None;
    }
    Some(Identity {
        uid: u32::from_be_bytes(uid.try_into().ok()?),
        gid: u32::from_be_bytes(gid.try_into().ok()?),
        host: String::from_utf8_lossy(host).into_owned(),
    })
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
                return Err(untrusted(service, who.uid, &format!("on {}", who.host)));
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

/// Opens auth/slurm's exchange (`DRV1`) with `cred` as it is and returns the server's
/// answering credential, or its reason for refusing (the client half without its checks: for
/// tools, and for tests that present what an attacker would).
pub async fn send_credential<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    cred: &[u8],
    service: &str,
) -> Result<Vec<u8>, AuthError> {
    send_as_is(s, MAGIC, cred, service).await
}

/// As [`send_credential`], in auth/munge's exchange (`DRV2`): the server's answer is returned
/// unchecked, and a request to seal again is an error.
pub async fn send_sealed<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    cred: &[u8],
    service: &str,
) -> Result<Vec<u8>, AuthError> {
    send_as_is(s, MAGIC_SEALED, cred, service).await
}

async fn send_as_is<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    magic: &[u8; 4],
    cred: &[u8],
    service: &str,
) -> Result<Vec<u8>, AuthError> {
    match exchange(s, magic, cred, service).await? {
        (ACCEPTED, body) => Ok(body),
        (SEAL_AGAIN, _) => Err(AuthError::Refused(format!("the {service} runs as another uid than sealed to"))),
        (code, _) => Err(AuthError::Protocol(format!("the {service} answered with code {code}"))),
    }
}

/// Writes `magic` and `cred`, reads the server's code and body; a refusal is an error with
/// the server's reason.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    magic: &[u8; 4],
    cred: &[u8],
    service: &str,
) -> Result<(u8, Vec<u8>), AuthError> {
    write_frame(s, magic, cred).await.map_err(|e| AuthError::Protocol(format!("sending the credential: {e}")))?;
    let status = tokio::time::timeout(HANDSHAKE_TIMEOUT, s.read_u8())
        .await
        .map_err(|_| AuthError::Protocol(format!("no answer from {service} within {HANDSHAKE_TIMEOUT:?}")))?
        .map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))?;
    let body = read_frame(s).await?;
    if status == REFUSED {
        // The server's reason, as it said it.
        return Err(AuthError::Refused(String::from_utf8_lossy(&body).into_owned()));
    }
    Ok((status, body))
}

/// The server's half: checks the client's credential for `service` and answers (see the
/// module's exchanges), or says why it is refused.
pub async fn server_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<Identity, AuthError> {
    let result = match read_magic(s).await? {
        m if &m == MAGIC => serve_answered(s, auth, service).await,
        m if &m == MAGIC_SEALED => serve_sealed(s, auth, service).await,
        _ => Err(AuthError::Protocol("no credential (a client of another protocol or an older Drover)".into())),
    };
    match result {
        Ok((who, answer)) => {
            write_frame(s, &[ACCEPTED], &answer).await.map_err(|e| AuthError::Protocol(format!("answering: {e}")))?;
            Ok(who)
        }
        Err(e) => {
            let _ = write_frame(s, &[REFUSED], e.to_string().as_bytes()).await;
            Err(e)
        }
    }
}

async fn read_magic<S: AsyncRead + Unpin>(s: &mut S) -> Result<[u8; 4], AuthError> {
    let mut magic = [0u8; 4];
    s.read_exact(&mut magic).await.map_err(|e| AuthError::Protocol(format!("connection ended: {e}")))?;
    Ok(magic)
}

/// auth/slurm's exchange: the client's identity, and our credential bound to its challenge.
async fn serve_answered<S: AsyncRead + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<(Identity, Vec<u8>), AuthError> {
    let cred = read_frame(s).await?;
    let (who, challenge) = auth.verify(&cred, &Purpose::Connect(service))?;
    let reply = auth.issue(&Purpose::Reply(service), &challenge)?;
    Ok((who, reply))
}

/// auth/munge's exchange: the client's identity, and our answer under its secret. A
/// credential sealed to another uid is answered with ours, once, for the client to seal again.
async fn serve_sealed<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    auth: &Auth,
    service: &'static str,
) -> Result<(Identity, Vec<u8>), AuthError> {
    let me = || Identity {
        uid: nix::unistd::geteuid().as_raw(),
        gid: nix::unistd::getegid().as_raw(),
        host: auth.host().to_string(),
    };
    let mut asked = false;
    loop {
        let cred = read_frame(s).await?;
        match auth.verify_sealed(&cred, &Purpose::Connect(service)) {
            Ok((who, secret)) => {
                if secret.len() != 32 {
                    return Err(AuthError::Invalid("a sealed credential without its secret".into()));
                }
                return Ok((who, sealed_answer(&secret, service, &me())));
            }
            Err(AuthError::NotOurs(_)) if !asked => {
                asked = true;
                write_frame(s, &[SEAL_AGAIN], &me().uid.to_be_bytes())
                    .await
                    .map_err(|e| AuthError::Protocol(format!("answering: {e}")))?;
                if &read_magic(s).await? != MAGIC_SEALED {
                    return Err(AuthError::Protocol("asked to seal again, the client sent something else".into()));
                }
            }
            Err(e) => return Err(e),
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
    let answer = opening.map_err(ProvedError::Auth)?.present(&mut s, auth).await.map_err(ProvedError::Auth)?;
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

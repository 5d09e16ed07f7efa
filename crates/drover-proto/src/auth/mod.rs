//! Who is on the other end: credentials, their checks, and the authenticated connection.
//!
//! ```text
//!  issuer ── Auth::issue(purpose, binding) ──► AuthCredential ──► Auth::verify(purpose) ──► Identity
//!             auth/slurm: claims + HMAC-SHA256 under slurm.key (root and SlurmUser only)
//!             auth/munge: claims as a MUNGE credential's payload (munged vouches uid/gid)
//! ```
//!
//! A credential carries uid, gid, the issuing host, its life (issued, expires), a nonce, a
//! purpose (`connect/<service>`, `reply/<service>`, `launch`) and a binding (what it vouches
//! for beyond its sender). Each is taken once: auth/slurm's nonces are remembered until they
//! expire; MUNGE refuses a replayed credential itself. Connections over TCP start with a
//! [`handshake`]: the client's credential, answered by the server's bound to the client's
//! nonce, so each side knows the other before a byte of RPC flows. Launches are signed by the
//! controller ([`Auth::sign_launch`]) and checked by agents.

pub mod handshake;
mod key;
mod munge;
mod replay;
pub mod sack;

use crate::v1;
use prost::Message;
use std::path::PathBuf;
use std::sync::Mutex;

pub use drover_model::auth_conf::{AuthConf, AuthKind};
pub use handshake::{
    accept_authenticated, channel_over, client_handshake, connect_authenticated, connect_proved, connect_stream,
    connect_unchecked, send_credential, send_sealed, server_handshake, AuthedStream, Opening, Peer, ProvedError,
    Unchecked,
};

/// Who a verified credential says sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub host: String,
}

/// Why a credential could not be made or was not believed. Each message names what to check;
/// the first words are Slurm's where Slurm has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Forged, altered, truncated, for another purpose or of another mechanism.
    #[error("Invalid authentication credential: {0}")]
    Invalid(String),
    #[error("Invalid authentication credential: expired {ago} s ago (issued on {host}; credentials live {ttl} s: if the clocks of {host} and this host differ, synchronise them)")]
    Expired { host: String, ago: i64, ttl: u32 },
    #[error("Invalid authentication credential: issued {ahead} s in the future on {host} (clock skew: synchronise the clocks of {host} and this host)")]
    Future { host: String, ahead: i64 },
    #[error("Invalid authentication credential: replayed (a credential is good for one use)")]
    Replayed,
    /// A credential sealed to another uid than this process's (MUNGE's "Unauthorized
    /// credential"): made for a daemon of another user.
    #[error("Invalid authentication credential: {0}")]
    NotOurs(String),
    /// This process cannot make credentials: the key or munged is missing or unusable.
    #[error("{0}")]
    Unavailable(String),
    /// The peer broke the authentication exchange.
    #[error("Protocol authentication error: {0}")]
    Protocol(String),
    /// The server refused this connection and said why.
    #[error("{0}")]
    Refused(String),
    /// A valid credential of someone not allowed this.
    #[error("Access/permission denied: {0}")]
    Denied(String),
}

/// What a credential may be used for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// Opening a connection to `service` (`controller`, `node`, `accounting`).
    Connect(&'static str),
    /// A server's answer to a connection of `service`, bound to the client's nonce.
    Reply(&'static str),
    /// A launch, bound to its SHA-256.
    Launch,
}

impl Purpose {
    fn text(&self) -> String {
        match self {
            Purpose::Connect(s) => format!("connect/{s}"),
            Purpose::Reply(s) => format!("reply/{s}"),
            Purpose::Launch => "launch".into(),
        }
    }
}

/// How this process makes and checks credentials.
enum Mech {
    /// auth/slurm with the key (root and SlurmUser); `None` where this user cannot read it:
    /// such a process can check nothing and must get its credentials from a local daemon.
    Slurm(Option<key::Key>),
    Munge(munge::Munge),
}

/// A process's authenticator: built once from `slurm.conf` and shared.
pub struct Auth {
    mech: Mech,
    /// Launch credentials (`CredType`), where it differs from `AuthType`.
    cred_mech: Option<Mech>,
    kind: AuthKind,
    ttl: u32,
    cred_expire: u32,
    host: String,
    /// Uids whose credentials speak for the cluster's daemons: root and `SlurmUser`.
    trusted: Vec<u32>,
    seen: Mutex<replay::Seen>,
    key_path: PathBuf,
    /// The uid each service's daemon was found to run as, where it is not the one guessed
    /// (see [`Auth::daemon_uid`]).
    learned: Mutex<Vec<(&'static str, u32)>>,
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// `N` random bytes from the kernel.
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("invariant: the kernel gives random bytes");
    b
}

/// Writes `bytes` to `path` for its owner alone (mode 0600), whole or not at all (a temporary
/// file, synced, renamed): keys and secrets.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A new auth/slurm key at `path`: 1024 random bytes, as Slurm's documentation makes one.
pub fn write_new_key(path: &std::path::Path) -> std::io::Result<()> {
    let mut key = vec![0u8; 1024];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    write_private(path, &key)
}

/// 32 new random bytes: a secret of the controller's (I/O keys are derived from it).
pub fn new_secret() -> Vec<u8> {
    random::<32>().to_vec()
}

/// The key of a job's (`step` None) or a step's I/O connection back to srun, derived from
/// the controller's secret: sent to srun with its job or step and to the nodes in the signed
/// launch, stored nowhere.
pub fn io_key_for(secret: &[u8], job: u32, step: Option<u32>, submit_time: i64) -> Vec<u8> {
    let step = step.map_or([0xff; 4], u32::to_be_bytes);
    key::mac_parts(secret, &[b"io", &job.to_be_bytes(), &step, &submit_time.to_be_bytes()]).to_vec()
}

/// Proves at start that this process can make and check the credentials it will need (the
/// key is readable and sound, munged answers), so that a daemon stops with the reason
/// instead of refusing everyone later.
pub fn self_check(auth: &Auth) -> Result<(), AuthError> {
    let s = auth.sign_launch(b"self-check".to_vec())?;
    auth.verify_with(auth.cred_mech(), &s.cred, &Purpose::Launch, auth.cred_expire, false)?;
    let c = auth.issue(&Purpose::Connect("self-check"), b"")?;
    auth.verify(&c, &Purpose::Connect("self-check"))?;
    if auth.kind() == AuthKind::Munge {
        // What clients send a daemon: a credential sealed to it (munged's cipher works).
        let c = auth.issue_sealed(&Purpose::Connect("self-check"), b"", nix::unistd::geteuid().as_raw())?;
        auth.verify_sealed(&c, &Purpose::Connect("self-check"))?;
    }
    Ok(())
}

/// Where a daemon of `service` runs as another uid than its clients seal their credentials
/// to (auth/munge: `SlurmUser`'s), a line for its log: every connection then costs two more
/// MUNGE round trips, as the client seals again.
pub fn running_as_note(auth: &Auth, service: &str) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    let guessed = auth.daemon_uid(service);
    (auth.kind() == AuthKind::Munge && me != guessed).then(|| {
        format!(
            "this {service} runs as uid {me}, not as SlurmUser (uid {guessed}): each client's connection \
             takes two more MUNGE round trips (start it as SlurmUser, or set SlurmUser to its user)"
        )
    })
}

fn this_host() -> String {
    nix::unistd::gethostname().map(|h| h.to_string_lossy().to_string()).unwrap_or_default()
}

impl Auth {
    /// The authenticator of `slurm.conf` at `conf_path`. auth/slurm reads `slurm.key` where
    /// this user may (a daemon needs it: `require_key`); auth/munge loads libmunge.
    pub fn new(conf: &AuthConf, conf_path: &str, require_key: bool) -> Result<Auth, AuthError> {
        Auth::with_key_file(conf, AuthConf::key_file(conf_path), require_key)
    }

    /// As [`Auth::new`], with auth/slurm's key at `key_path` (a host without `slurm.conf`:
    /// configless mode).
    pub fn with_key_file(conf: &AuthConf, key_path: PathBuf, require_key: bool) -> Result<Auth, AuthError> {
        let mech_of = |kind: AuthKind| -> Result<Mech, AuthError> {
            Ok(match kind {
                AuthKind::Slurm => match key::Key::load(&key_path) {
                    Ok(k) => Mech::Slurm(Some(k)),
                    Err(e) if require_key => return Err(e),
                    Err(_) => Mech::Slurm(None),
                },
                AuthKind::Munge => Mech::Munge(munge::Munge::open(conf.munge_socket.as_deref())?),
            })
        };
        let mech = mech_of(conf.kind)?;
        let cred_mech = if conf.cred_kind() == conf.kind { None } else { Some(mech_of(conf.cred_kind())?) };
        let mut trusted = vec![0];
        match nix::unistd::User::from_name(&conf.slurm_user) {
            Ok(Some(u)) => trusted.push(u.uid.as_raw()),
            _ if conf.slurm_user == "root" => {}
            _ => {
                return Err(AuthError::Unavailable(format!(
                    "SlurmUser={} is not a user on this host (getpwnam found none)",
                    conf.slurm_user
                )))
            }
        }
        Ok(Auth {
            mech,
            cred_mech,
            kind: conf.kind,
            ttl: conf.ttl,
            cred_expire: conf.cred_expire,
            host: this_host(),
            trusted,
            seen: Mutex::new(replay::Seen::default()),
            key_path,
            learned: Mutex::default(),
        })
    }

    /// An authenticator of auth/slurm with this key, for tests and tools.
    pub fn with_key(key: &[u8], slurm_user_uid: u32) -> Auth {
        Auth {
            mech: Mech::Slurm(Some(key::Key::from_bytes(key))),
            cred_mech: None,
            kind: AuthKind::Slurm,
            ttl: 60,
            cred_expire: 120,
            host: this_host(),
            trusted: vec![0, slurm_user_uid],
            seen: Mutex::new(replay::Seen::default()),
            key_path: PathBuf::new(),
            learned: Mutex::default(),
        }
    }

    pub fn kind(&self) -> AuthKind {
        self.kind
    }

    /// The name of this host, as credentials made here carry it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether `uid` speaks for the cluster's daemons (root or `SlurmUser`).
    pub fn is_trusted(&self, uid: u32) -> bool {
        self.trusted.contains(&uid)
    }

    /// A credential of this process's user for `purpose`.
    pub fn issue(&self, purpose: &Purpose, binding: &[u8]) -> Result<Vec<u8>, AuthError> {
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        self.issue_with(&self.mech, (uid, gid), purpose, binding, self.ttl, None)
    }

    /// A credential of this process's user for `purpose` that only processes of `to` can
    /// read (auth/munge: encrypted, restricted to that uid), so that `binding` may be a
    /// secret shared with them alone.
    pub fn issue_sealed(&self, purpose: &Purpose, binding: &[u8], to: u32) -> Result<Vec<u8>, AuthError> {
        if !matches!(self.mech, Mech::Munge(_)) {
            return Err(AuthError::Unavailable("only auth/munge seals credentials to a uid".into()));
        }
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        self.issue_with(&self.mech, (uid, gid), purpose, binding, self.ttl, Some(to))
    }

    /// The uid the daemon of `service` (`controller`, `accounting`) is taken to run as:
    /// `SlurmUser`, as Slurm's slurmctld and slurmdbd do, unless a connection found another.
    pub fn daemon_uid(&self, service: &str) -> u32 {
        let learned = self.learned.lock().ok().and_then(|l| l.iter().find(|(s, _)| *s == service).map(|(_, u)| *u));
        learned.unwrap_or_else(|| self.trusted.last().copied().unwrap_or(0))
    }

    /// Remembers that the daemon of `service` runs as `uid` (it proved it).
    pub fn learn_daemon_uid(&self, service: &'static str, uid: u32) {
        if let Ok(mut l) = self.learned.lock() {
            l.retain(|(s, _)| *s != service);
            l.push((service, uid));
        }
    }

    /// A credential for another user: what a key holder (root, SlurmUser) makes for a local
    /// process whose peer credentials it checked. auth/slurm only: MUNGE vouches for the
    /// caller's own uid and nothing else.
    pub fn issue_for(&self, uid: u32, gid: u32, purpose: &Purpose, binding: &[u8]) -> Result<Vec<u8>, AuthError> {
        match &self.mech {
            Mech::Slurm(_) => self.issue_with(&self.mech, (uid, gid), purpose, binding, self.ttl, None),
            Mech::Munge(_) => {
                Err(AuthError::Unavailable("auth/munge makes credentials of the calling user only".into()))
            }
        }
    }

    fn issue_with(
        &self,
        mech: &Mech,
        (uid, gid): (u32, u32),
        purpose: &Purpose,
        binding: &[u8],
        ttl: u32,
        seal: Option<u32>,
    ) -> Result<Vec<u8>, AuthError> {
        let issued = now();
        let claims = v1::AuthClaims {
            uid,
            gid,
            host: self.host.clone(),
            issued,
            expires: issued + i64::from(ttl),
            nonce: random::<16>().to_vec().into(),
            purpose: purpose.text(),
            binding: binding.to_vec().into(),
        }
        .encode_to_vec();
        let cred = match mech {
            Mech::Slurm(Some(k)) => {
                v1::AuthCredential { mac: k.mac(&claims).to_vec().into(), claims: claims.into(), munge: String::new() }
            }
            Mech::Slurm(None) => {
                // An ordinary user: the host's daemon signs for them, after checking who asks.
                return match purpose {
                    Purpose::Connect(service) => sack::request(service, binding),
                    _ => Err(AuthError::Unavailable(format!(
                        "auth/slurm: {} is not readable by uid {uid}, so this process cannot sign a {} \
                         credential (only root and SlurmUser may)",
                        self.key_path.display(),
                        purpose.text()
                    ))),
                };
            }
            Mech::Munge(m) => v1::AuthCredential { munge: m.encode(&claims, ttl, seal)?, ..Default::default() },
        };
        Ok(cred.encode_to_vec())
    }

    /// Signs `claims` as they are (auth/slurm's key holders: tools, and tests that present
    /// what a forger would).
    pub fn sign_claims(&self, claims: &v1::AuthClaims) -> Result<Vec<u8>, AuthError> {
        let Mech::Slurm(Some(k)) = &self.mech else {
            return Err(AuthError::Unavailable("only auth/slurm's key signs claims".into()));
        };
        let c = claims.encode_to_vec();
        Ok(v1::AuthCredential { mac: k.mac(&c).to_vec().into(), claims: c.into(), munge: String::new() }
            .encode_to_vec())
    }

    /// Checks a credential made for `purpose` and returns who sent it and what it bound.
    pub fn verify(&self, cred: &[u8], purpose: &Purpose) -> Result<(Identity, Vec<u8>), AuthError> {
        self.verify_with(&self.mech, cred, purpose, self.ttl, false)
    }

    /// As [`Auth::verify`], for a credential that must have been [sealed](Auth::issue_sealed)
    /// (to this process's uid: munged decodes no other).
    pub fn verify_sealed(&self, cred: &[u8], purpose: &Purpose) -> Result<(Identity, Vec<u8>), AuthError> {
        self.verify_with(&self.mech, cred, purpose, self.ttl, true)
    }

    fn verify_with(
        &self,
        mech: &Mech,
        cred: &[u8],
        purpose: &Purpose,
        ttl: u32,
        sealed: bool,
    ) -> Result<(Identity, Vec<u8>), AuthError> {
        let c = v1::AuthCredential::decode(cred).map_err(|_| AuthError::Invalid("not a credential".into()))?;
        let (claims, uid, gid) = match mech {
            Mech::Slurm(_) if sealed => {
                return Err(AuthError::Invalid("a sealed credential where auth/slurm is configured".into()))
            }
            Mech::Slurm(key) => {
                if !c.munge.is_empty() {
                    return Err(AuthError::Invalid("a MUNGE credential where auth/slurm is configured".into()));
                }
                let Some(k) = key else {
                    return Err(AuthError::Unavailable(format!(
                        "auth/slurm: {} is not readable here, so no credential can be checked",
                        self.key_path.display()
                    )));
                };
                if !k.verify(&c.claims, &c.mac) {
                    return Err(AuthError::Invalid("bad signature (not made with this cluster's slurm.key)".into()));
                }
                let claims = v1::AuthClaims::decode(c.claims.as_ref())
                    .map_err(|_| AuthError::Invalid("unreadable claims".into()))?;
                let t = now();
                if t > claims.expires {
                    return Err(AuthError::Expired { host: claims.host, ago: t - claims.expires, ttl });
                }
                if claims.issued > t + i64::from(ttl) {
                    return Err(AuthError::Future { ahead: claims.issued - t, host: claims.host });
                }
                if claims.nonce.len() != 16 {
                    return Err(AuthError::Invalid("no nonce".into()));
                }
                if !self.seen.lock().map_err(|_| AuthError::Replayed)?.first_use(&claims.nonce, claims.expires, t) {
                    return Err(AuthError::Replayed);
                }
                let (uid, gid) = (claims.uid, claims.gid);
                (claims, uid, gid)
            }
            Mech::Munge(m) => {
                if c.munge.is_empty() {
                    return Err(AuthError::Invalid("an auth/slurm credential where auth/munge is configured".into()));
                }
                let d = m.decode(&c.munge)?;
                if sealed && !d.sealed {
                    return Err(AuthError::Invalid(
                        "a credential anyone could read where one for this daemon alone belongs".into(),
                    ));
                }
                let claims = v1::AuthClaims::decode(d.payload.as_slice())
                    .map_err(|_| AuthError::Invalid("unreadable claims".into()))?;
                (claims, d.uid, d.gid)
            }
        };
        if claims.purpose != purpose.text() {
            return Err(AuthError::Invalid(format!("made for {}, not {}", claims.purpose, purpose.text())));
        }
        Ok((Identity { uid, gid, host: claims.host }, claims.binding.to_vec()))
    }

    fn cred_mech(&self) -> &Mech {
        self.cred_mech.as_ref().unwrap_or(&self.mech)
    }

    /// Signs an encoded launch (`CredType`, good for `AuthInfo=cred_expire`).
    pub fn sign_launch(&self, launch: Vec<u8>) -> Result<v1::SignedLaunch, AuthError> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(&launch);
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let cred = self.issue_with(self.cred_mech(), (uid, gid), &Purpose::Launch, &digest, self.cred_expire, None)?;
        Ok(v1::SignedLaunch { launch: launch.into(), cred: cred.into() })
    }

    /// Checks a signed launch: made by root or `SlurmUser` for exactly these bytes, in its
    /// life, once. Returns the launch.
    pub fn verify_launch(&self, s: &v1::SignedLaunch) -> Result<v1::Launch, AuthError> {
        use sha2::Digest;
        let (who, binding) = self.verify_with(self.cred_mech(), &s.cred, &Purpose::Launch, self.cred_expire, false)?;
        if !self.is_trusted(who.uid) {
            return Err(AuthError::Denied(format!(
                "a launch signed by uid {} on {}, not by the controller",
                who.uid, who.host
            )));
        }
        if binding.as_slice() != sha2::Sha256::digest(&s.launch).as_slice() {
            return Err(AuthError::Invalid("the launch is not the one signed".into()));
        }
        v1::Launch::decode(s.launch.as_ref()).map_err(|_| AuthError::Invalid("unreadable launch".into()))
    }
}

/// HMAC-SHA256 of `parts` under `key` (the I/O connection's proofs).
pub fn io_mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    key::mac_parts(key, parts)
}

/// Whether `mac` is HMAC-SHA256 of `parts` under `key`, compared in constant time.
pub fn io_mac_ok(key: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
    key::verify_parts(key, parts, mac)
}

#[cfg(test)]
mod tests;

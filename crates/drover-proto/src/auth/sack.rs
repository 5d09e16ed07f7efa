//! auth/slurm for processes that may not read `slurm.key` (every ordinary user): a daemon of
//! the host that holds the key — the node agent on a compute host, `drover sackd` on a login
//! host (Slurm 23.11's `sackd`) — takes the caller's uid and gid from its Unix socket's peer
//! credentials and signs a connection credential for them, never another user's and never a
//! launch.
//!
//! ```text
//!  command ──unix socket: [len u32][SackRequest]──► daemon (SO_PEERCRED: uid, gid)
//!  command ◄──[len u32][SackReply: credential or why not]──
//! ```

use super::{Auth, AuthError, Purpose};
use crate::v1;
use prost::Message;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// The socket: `$RUNTIME_DIRECTORY/sack.socket` (as Slurm's sackd, under systemd), else
/// `/run/drover/sack.socket`.
pub fn socket_path() -> PathBuf {
    std::env::var_os("RUNTIME_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/drover"))
        .join("sack.socket")
}

fn service(name: &str) -> Option<&'static str> {
    ["controller", "accounting"].into_iter().find(|s| *s == name)
}

/// Asks the host's daemon for a credential of this process's user for `service`.
pub fn request(service: &'static str, binding: &[u8]) -> Result<Vec<u8>, AuthError> {
    let path = socket_path();
    let unavailable = |e: &dyn std::fmt::Display| {
        AuthError::Unavailable(format!(
            "auth/slurm: this user cannot read slurm.key, and no authentication daemon answers at {} ({e}): \
             on a login host run `drover sackd` (as root), on a compute host the node agent serves it",
            path.display()
        ))
    };
    let mut s = std::os::unix::net::UnixStream::connect(&path).map_err(|e| unavailable(&e))?;
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let req = v1::SackRequest { service: service.into(), binding: binding.to_vec().into() }.encode_to_vec();
    s.write_all(&(req.len() as u32).to_be_bytes()).and_then(|_| s.write_all(&req)).map_err(|e| unavailable(&e))?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(|e| unavailable(&e))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 64 << 10 {
        return Err(AuthError::Protocol("an oversized answer from the authentication daemon".into()));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| unavailable(&e))?;
    let r = v1::SackReply::decode(body.as_slice())
        .map_err(|_| AuthError::Protocol("an unreadable answer from the authentication daemon".into()))?;
    if r.error.is_empty() {
        Ok(r.cred.to_vec())
    } else {
        Err(AuthError::Denied(r.error))
    }
}

/// Serves credentials on `listener` (mode 0666: every local user may ask, for themselves)
/// for as long as the runtime runs.
pub async fn serve(listener: tokio::net::UnixListener, auth: Arc<Auth>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    while let Ok((mut s, _)) = listener.accept().await {
        let auth = auth.clone();
        tokio::spawn(async move {
            let Ok(cred) = s.peer_cred() else { return };
            let read = async {
                let len = s.read_u32().await.ok()? as usize;
                if len > 64 << 10 {
                    return None;
                }
                let mut b = vec![0u8; len];
                s.read_exact(&mut b).await.ok()?;
                v1::SackRequest::decode(b.as_slice()).ok()
            };
            let Ok(Some(req)) = tokio::time::timeout(std::time::Duration::from_secs(10), read).await else { return };
            let reply = match service(&req.service) {
                None => v1::SackReply { error: format!("no credentials for `{}`", req.service), ..Default::default() },
                Some(svc) => match auth.issue_for(cred.uid(), cred.gid(), &Purpose::Connect(svc), &req.binding) {
                    Ok(c) => v1::SackReply { cred: c.into(), ..Default::default() },
                    Err(e) => v1::SackReply { error: e.to_string(), ..Default::default() },
                },
            }
            .encode_to_vec();
            let _ = s.write_all(&(reply.len() as u32).to_be_bytes()).await;
            let _ = s.write_all(&reply).await;
        });
    }
}

/// Binds the host's credential socket unless a live daemon already serves it (several agents
/// of one host: the first serves). `Ok(None)`: another one does.
pub fn bind() -> std::io::Result<Option<tokio::net::UnixListener>> {
    let path = socket_path();
    if std::os::unix::net::UnixStream::connect(&path).is_ok() {
        return Ok(None);
    }
    crate::local_listener(&path).map(Some)
}

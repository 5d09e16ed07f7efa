//! Configless mode (`SlurmctldParameters=enable_configless`): a host that has no
//! `slurm.conf` — a compute host's agent (`drover node --conf-server HOST[:PORT]`), a login
//! host's `drover sackd --conf-server` — asks the controller for its configuration and keeps
//! it in `/run/drover/conf` (`$RUNTIME_DIRECTORY/conf`), where the host's commands find it
//! too. Only the key is the host's own: auth/slurm's `slurm.key` (`--key-file`, default
//! `/etc/slurm/slurm.key`) or, without one, the host's munged.

use crate::NodeError;
use drover_proto::auth::{Auth, AuthConf, AuthKind};
use drover_proto::v1;
use std::path::{Path, PathBuf};

/// Where a configless host keeps the configuration it was given.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("RUNTIME_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/drover"))
        .join("conf")
}

/// auth/slurm's key where no `slurm.conf` says (Slurm's default).
pub const DEFAULT_KEY_FILE: &str = "/etc/slurm/slurm.key";

/// Fetches the configuration from the controller at `server` (`host[:port]`, port 6817 by
/// default) into [`cache_dir`] and returns the path of its `slurm.conf`.
pub async fn fetch(server: &str, key_file: &Path) -> Result<PathBuf, NodeError> {
    let addr = if server.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        server.to_string()
    } else {
        format!("{server}:6817")
    };
    // The key decides the mechanism: a host of an auth/slurm cluster holds it.
    let kind = if key_file.exists() { AuthKind::Slurm } else { AuthKind::Munge };
    let conf = AuthConf { kind, ..Default::default() };
    let auth = Auth::with_key_file(&conf, key_file.to_path_buf(), true)?;
    // A host may start before its controller (a cluster booting): it waits for it, as
    // slurmd does; a refusal is final.
    let mut said = false;
    let chan = loop {
        let mut s = match tokio::net::TcpStream::connect(&addr).await {
            Ok(s) => s,
            Err(e) => {
                if !said {
                    eprintln!("configless: waiting for the controller at {addr} ({e})");
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        };
        let _ = s.set_nodelay(true);
        drover_proto::auth::client_handshake(&mut s, &auth, "controller")
            .await
            .map_err(|e| NodeError::Gres(format!("configless: the controller at {addr}: {e}")))?;
        break drover_proto::auth::channel_over(s, &addr).await.map_err(NodeError::Gres)?;
    };
    let reply = v1::controller_client::ControllerClient::new(chan)
        .get_config(v1::Empty {})
        .await
        .map_err(|s| NodeError::Gres(format!("configless: the controller at {addr} said: {}", s.message())))?
        .into_inner();
    let dir = cache_dir();
    let io = |source: std::io::Error| NodeError::Spool { path: dir.display().to_string(), source };
    std::fs::create_dir_all(&dir).map_err(io)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    for f in &reply.files {
        // Names the controller chose, but never a path: a file lands in the cache or nowhere.
        if f.name.contains('/') || f.name.starts_with('.') {
            continue;
        }
        let path = dir.join(&f.name);
        let tmp = dir.join(format!(".{}.tmp", f.name));
        std::fs::write(&tmp, &f.text).and_then(|_| std::fs::rename(&tmp, &path)).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    }
    if kind == AuthKind::Slurm {
        // The configuration looks for its key beside it.
        let link = dir.join("slurm.key");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(key_file, &link).map_err(io)?;
    }
    let conf = dir.join("slurm.conf");
    if !conf.exists() {
        return Err(NodeError::Gres(format!("configless: the controller at {addr} sent no slurm.conf")));
    }
    Ok(conf)
}

//! `slurm.conf`'s authentication keys: `AuthType` (how a connection proves who made it),
//! `CredType` (how the controller signs launches), `AuthInfo` (`socket=`, `ttl=`,
//! `cred_expire=`) and `SlurmUser` (who besides root the daemons trust). auth/slurm's key is
//! `slurm.key` in the directory of `slurm.conf`, as in Slurm 23.11.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How credentials are made and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum AuthKind {
    /// `auth/munge` (`cred/munge`): the host's `munged` vouches for the uid and gid; every
    /// host shares `munge.key`. Slurm's default.
    #[default]
    Munge,
    /// `auth/slurm` (`cred/slurm`): tokens signed with `slurm.key`, readable by root and
    /// `SlurmUser` only; other users get theirs from a local daemon that checked their
    /// peer credentials.
    Slurm,
}

impl AuthKind {
    pub fn plugin(self) -> &'static str {
        match self {
            AuthKind::Munge => "auth/munge",
            AuthKind::Slurm => "auth/slurm",
        }
    }
    pub fn cred_plugin(self) -> &'static str {
        match self {
            AuthKind::Munge => "cred/munge",
            AuthKind::Slurm => "cred/slurm",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthConf {
    /// `AuthType`.
    pub kind: AuthKind,
    /// `CredType` (launch credentials); `None` follows `AuthType`.
    pub cred: Option<AuthKind>,
    /// `AuthInfo=socket=PATH`: munged's socket (default: libmunge's).
    pub munge_socket: Option<String>,
    /// `AuthInfo=ttl=SECONDS`: how long a connection credential is good for.
    pub ttl: u32,
    /// `AuthInfo=cred_expire=SECONDS`: how long a launch credential is good for.
    pub cred_expire: u32,
    /// `SlurmUser`: the daemons' user; with root, the only one that may register a node,
    /// record accounting or sign launches.
    pub slurm_user: String,
}

impl Default for AuthConf {
    fn default() -> Self {
        AuthConf {
            kind: AuthKind::Munge,
            cred: None,
            munge_socket: None,
            ttl: 60,
            cred_expire: 120,
            slurm_user: "root".into(),
        }
    }
}

/// The keys this module reads, lower-cased.
pub const KEYS: &[&str] = &["authtype", "credtype", "authinfo", "slurmuser"];

impl AuthConf {
    /// The mechanism that signs and checks launches.
    pub fn cred_kind(&self) -> AuthKind {
        self.cred.unwrap_or(self.kind)
    }

    /// auth/slurm's key: `slurm.key` beside `slurm.conf` (`conf_path`).
    pub fn key_file(conf_path: &str) -> PathBuf {
        Path::new(conf_path).parent().unwrap_or(Path::new("/etc/slurm")).join("slurm.key")
    }

    /// Takes one key (lower-cased) and its value; Err: what was wrong. Returns the `AuthInfo`
    /// options not honoured (to report).
    pub fn set(&mut self, key: &str, v: &str) -> Result<Vec<String>, String> {
        let kind = |v: &str, what: &str| match v.trim().to_ascii_lowercase().as_str() {
            s if s == format!("{what}/munge") => Ok(AuthKind::Munge),
            s if s == format!("{what}/slurm") => Ok(AuthKind::Slurm),
            _ => Err(format!("expected {what}/munge or {what}/slurm, found `{v}`")),
        };
        match key {
            "authtype" => self.kind = kind(v, "auth")?,
            "credtype" => self.cred = Some(kind(v, "cred")?),
            "slurmuser" => {
                let u = v.trim();
                if u.is_empty() {
                    return Err("expected a user name".into());
                }
                self.slurm_user = u.to_string();
            }
            "authinfo" => {
                let mut ignored = Vec::new();
                for opt in v.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                    let (k, val) = opt.split_once('=').unwrap_or((opt, ""));
                    let secs = |val: &str| {
                        val.parse::<u32>()
                            .ok()
                            .filter(|s| *s > 0)
                            .ok_or_else(|| format!("{k}: expected seconds, found `{val}`"))
                    };
                    match k.to_ascii_lowercase().as_str() {
                        "socket" if !val.is_empty() => self.munge_socket = Some(val.to_string()),
                        "ttl" => self.ttl = secs(val)?,
                        "cred_expire" => self.cred_expire = secs(val)?,
                        _ => ignored.push(format!("AuthInfo={opt}")),
                    }
                }
                return Ok(ignored);
            }
            _ => return Err(format!("not an authentication key: {key}")),
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_defaults() {
        let mut a = AuthConf::default();
        assert_eq!(
            (a.kind, a.cred_kind(), a.ttl, a.slurm_user.as_str()),
            (AuthKind::Munge, AuthKind::Munge, 60, "root")
        );
        a.set("authtype", "auth/slurm").unwrap();
        assert_eq!(a.cred_kind(), AuthKind::Slurm, "CredType follows AuthType");
        a.set("credtype", "Cred/Munge").unwrap();
        assert_eq!(a.cred_kind(), AuthKind::Munge);
        assert_eq!(a.set("authinfo", "socket=/run/m.sock,ttl=30,cred_expire=600,foo").unwrap(), ["AuthInfo=foo"]);
        assert_eq!((a.munge_socket.as_deref(), a.ttl, a.cred_expire), (Some("/run/m.sock"), 30, 600));
        assert!(a.set("authtype", "auth/none").unwrap_err().contains("auth/munge or auth/slurm"));
        assert!(a.set("authinfo", "ttl=0").is_err());
        assert_eq!(AuthConf::key_file("/etc/slurm/slurm.conf"), PathBuf::from("/etc/slurm/slurm.key"));
    }
}

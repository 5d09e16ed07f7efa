//! `slurmdbd.conf`: how `drover accounting` listens and where it stores records, in Slurm's
//! keys. `StorageType` names the SQL store: `accounting_storage/mysql` (MariaDB or MySQL, as
//! in Slurm), `accounting_storage/pgsql` and `accounting_storage/sqlite` (Drover's additions).

/// The SQL store behind `drover accounting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    Sqlite,
    Postgres,
    MySql,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DbdConf {
    /// `DbdAddr` (else `DbdHost`, else `localhost`) and `DbdPort` (6819): where it listens.
    pub addr: String,
    pub port: u16,
    pub storage: StorageKind,
    pub storage_host: String,
    /// 0: the store's default (5432, 3306).
    pub storage_port: u16,
    pub storage_user: String,
    pub storage_pass: String,
    /// The database name (`slurm_acct_db`), or for SQLite the database file's path.
    pub storage_loc: String,
    pub log_file: Option<String>,
    pub pid_file: Option<String>,
    /// `PurgeJobAfter` in seconds (None: keep for ever).
    pub purge_job_after: Option<u64>,
    /// `PurgeStepAfter` in seconds (default: `PurgeJobAfter`).
    pub purge_step_after: Option<u64>,
    /// `AuthType`, `AuthInfo`, `SlurmUser` (auth/slurm's key is `slurm.key` beside this file).
    pub auth: crate::auth_conf::AuthConf,
    /// Keys Drover does not act on: (line, key).
    pub unsupported: Vec<(usize, String)>,
}

impl Default for DbdConf {
    fn default() -> Self {
        DbdConf {
            addr: "localhost".into(),
            port: 6819,
            storage: StorageKind::MySql,
            storage_host: "localhost".into(),
            storage_port: 0,
            storage_user: String::new(),
            storage_pass: String::new(),
            storage_loc: "slurm_acct_db".into(),
            log_file: None,
            pid_file: None,
            purge_job_after: None,
            purge_step_after: None,
            auth: Default::default(),
            unsupported: Vec::new(),
        }
    }
}

/// Slurm's purge periods: `N` months, or `Nhours`, `Ndays`, `Nmonths` (a month is 30 days here).
fn parse_purge(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits].parse().ok()?;
    let unit = match &v[digits..] {
        "" | "month" | "months" => 30 * 86_400,
        "day" | "days" => 86_400,
        "hour" | "hours" => 3_600,
        _ => return None,
    };
    Some(n * unit)
}

impl DbdConf {
    pub fn parse(name: &str, text: &str) -> Result<DbdConf, String> {
        let mut c = DbdConf::default();
        let (mut host, mut addr) = (None, None);
        for (n, k, v) in crate::conf::key_value_lines(name, text)? {
            let k = k.as_str();
            match k.to_ascii_lowercase().as_str() {
                "dbdhost" => host = Some(v),
                "dbdaddr" => addr = Some(v),
                "dbdport" => c.port = v.parse().map_err(|_| format!("{name}:{n}: DbdPort: expected a port, found `{v}`"))?,
                "storagetype" => {
                    c.storage = match v.to_ascii_lowercase().as_str() {
                        "accounting_storage/mysql" => StorageKind::MySql,
                        "accounting_storage/pgsql" => StorageKind::Postgres,
                        "accounting_storage/sqlite" => StorageKind::Sqlite,
                        _ => return Err(format!(
                            "{name}:{n}: StorageType: expected accounting_storage/mysql, accounting_storage/pgsql or accounting_storage/sqlite, found `{v}`"
                        )),
                    }
                }
                "storagehost" => c.storage_host = v,
                "storageport" => {
                    c.storage_port =
                        v.parse().map_err(|_| format!("{name}:{n}: StoragePort: expected a port, found `{v}`"))?
                }
                "storageuser" => c.storage_user = v,
                "storagepass" => c.storage_pass = v,
                "storageloc" => c.storage_loc = v,
                "logfile" => c.log_file = Some(v),
                "pidfile" => c.pid_file = Some(v),
                "purgejobafter" | "purgestepafter" => {
                    let secs = parse_purge(&v).ok_or_else(|| {
                        format!("{name}:{n}: {k}: expected N, Nhours, Ndays or Nmonths, found `{v}`")
                    })?;
                    if k.eq_ignore_ascii_case("purgejobafter") {
                        c.purge_job_after = Some(secs);
                    } else {
                        c.purge_step_after = Some(secs);
                    }
                }
                // Identity and logging knobs with nothing to do in Drover yet.
                a @ ("authtype" | "authinfo" | "slurmuser") => {
                    for opt in c.auth.set(a, &v).map_err(|e| format!("{name}:{n}: {k}: {e}"))? {
                        c.unsupported.push((n, opt));
                    }
                }
                "debuglevel" => {}
                other => c.unsupported.push((n, other.to_string())),
            }
        }
        c.addr = addr.or(host).unwrap_or(c.addr);
        c.purge_step_after = c.purge_step_after.or(c.purge_job_after);
        Ok(c)
    }

    /// The sqlx URL of the store.
    pub fn storage_url(&self) -> String {
        let auth = if self.storage_user.is_empty() {
            String::new()
        } else if self.storage_pass.is_empty() {
            format!("{}@", pct(&self.storage_user))
        } else {
            format!("{}:{}@", pct(&self.storage_user), pct(&self.storage_pass))
        };
        let port = |d: u16| if self.storage_port == 0 { d } else { self.storage_port };
        match self.storage {
            StorageKind::Sqlite => format!("sqlite://{}?mode=rwc", self.storage_loc),
            StorageKind::Postgres => {
                format!("postgres://{auth}{}:{}/{}", self.storage_host, port(5432), pct(&self.storage_loc))
            }
            StorageKind::MySql => {
                format!("mysql://{auth}{}:{}/{}", self.storage_host, port(3306), pct(&self.storage_loc))
            }
        }
    }
}

/// The local socket of the accounting service listening on `port`: changes (sacctmgr) come
/// through it, where the caller's identity is the socket's peer credentials.
pub fn local_socket(port: u16) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/run/drover/accounting-{port}.sock"))
}

/// Percent-encodes what a URL's user, password or path part may not hold.
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_slurmdbd_conf() {
        let c = DbdConf::parse(
            "slurmdbd.conf",
            "AuthType=auth/munge\nDbdHost=db1\nDbdPort=7031\nStorageType=accounting_storage/pgsql\n\
             StorageUser=slurm\nStoragePass=p@ss word\nStorageLoc=acct\nPurgeJobAfter=12months\nArchiveJobs=yes\n",
        )
        .unwrap();
        assert_eq!((c.addr.as_str(), c.port), ("db1", 7031));
        assert_eq!(c.storage, StorageKind::Postgres);
        assert_eq!(c.storage_url(), "postgres://slurm:p%40ss%20word@localhost:5432/acct");
        assert_eq!(c.purge_job_after, Some(360 * 86_400));
        assert_eq!(c.unsupported, [(9, "archivejobs".to_string())]);
        let s =
            DbdConf::parse("d", "StorageType=accounting_storage/sqlite\nStorageLoc=/var/lib/drover/acct.db\n").unwrap();
        assert_eq!(s.storage_url(), "sqlite:///var/lib/drover/acct.db?mode=rwc");
        assert_eq!(
            DbdConf::parse("d", "StorageType=accounting_storage/mysql\nStorageUser=slurm\nStoragePort=3307\n")
                .unwrap()
                .storage_url(),
            "mysql://slurm@localhost:3307/slurm_acct_db"
        );
        assert!(DbdConf::parse("d", "StorageType=oracle").unwrap_err().starts_with("d:1: StorageType:"));
        assert!(DbdConf::parse("d", "PurgeJobAfter=soon").is_err());
    }
}

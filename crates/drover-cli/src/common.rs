//! What every command needs: the configuration, a connection to the controller, times in
//! Slurm's format, user and group names.

use drover_model::conf::Config;
use drover_proto::v1;
use drover_proto::v1::controller_client::ControllerClient;
use std::path::PathBuf;

/// The controller, over its local socket (a bare HTTP/2 connection: see
/// [`drover_proto::LocalChannel`]).
pub type Client = ControllerClient<drover_proto::LocalChannel>;

/// The flags every command has: `-V/--version`, `--help`, `--usage` (flattened into each
/// command's arguments).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct StdFlags {
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    #[arg(long = "help")]
    pub help: bool,
    #[arg(long = "usage")]
    pub usage: bool,
}

/// As [`StdFlags`], for the commands where `-h` is `--help` too (srun, salloc, sacct; `-h`
/// is `--noheader` in squeue and sinfo).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct StdFlagsH {
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    #[arg(short = 'h', long = "help")]
    pub help: bool,
    #[arg(long = "usage")]
    pub usage: bool,
}

/// What [`parse_command`] reads of a command's standard flags.
pub trait Std {
    fn flags(&self) -> (bool, bool, bool);
}

impl Std for StdFlags {
    fn flags(&self) -> (bool, bool, bool) {
        (self.version, self.help, self.usage)
    }
}

impl Std for StdFlagsH {
    fn flags(&self) -> (bool, bool, bool) {
        (self.version, self.help, self.usage)
    }
}

/// Parses a command's arguments. `Err(code)` when the command is already answered: a parse
/// error printed in Slurm's words, `--version`, or `--help`/`--usage`.
pub fn parse_command<T: clap::Parser, F: Std>(
    prog: &str,
    args: impl IntoIterator<Item = String>,
    flags: impl Fn(&T) -> &F,
) -> Result<T, i32> {
    let args: Vec<String> = args.into_iter().collect();
    let a = T::try_parse_from(std::iter::once(prog.to_string()).chain(args.iter().cloned())).map_err(|e| {
        let msg = crate::sbatch::clap_error_in(prog, &e, &args);
        // sacct and sstat print getopt's line alone, without the pointer to --help.
        let msg = match prog {
            "sacct" | "sstat" => msg.lines().filter(|l| !l.starts_with("Try \"")).collect::<Vec<_>>().join("\n"),
            _ => msg,
        };
        eprintln!("{msg}");
        crate::sbatch::clap_status(prog, &e)
    })?;
    let (version, help, usage) = flags(&a).flags();
    if version {
        print_version();
        return Err(0);
    }
    if help || usage {
        return Err(crate::help::print(prog, !help));
    }
    Ok(a)
}

/// `--version`'s line, the same for every command: Debian's Slurm prints its package name
/// and release (`print_slurm_version`), which scripts parse.
pub fn print_version() {
    println!("slurm-wlm {}", drover_model::SLURM_COMPAT_VERSION);
}

/// The configuration, or the one-line error a command prints before exiting 1.
pub fn config_for(prog: &str) -> Result<Config, i32> {
    load_config().map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })
}

/// Where `slurm.conf` is: `SLURM_CONF`, else (inside a job whose tool stripped it) the job's,
/// else Slurm's default location, else (a configless host) the copy its agent or sackd
/// fetched from the controller.
pub fn conf_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SLURM_CONF") {
        return PathBuf::from(p);
    }
    if let Some(p) = job_conf_of_ancestors() {
        return p;
    }
    let default = PathBuf::from("/etc/slurm/slurm.conf");
    if default.exists() {
        return default;
    }
    let fetched = std::env::var_os("RUNTIME_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/drover"))
        .join("conf/slurm.conf");
    if fetched.exists() {
        fetched
    } else {
        default
    }
}

/// The `SLURM_CONF` a job's processes started with, from the nearest ancestor that is a job's
/// process (its environment has `SLURM_JOB_ID` and `SLURM_CONF`): tools that clean a job's
/// environment before a nested `srun` (Snakemake's Slurm executor keeps only a job's ids)
/// drop `SLURM_CONF`, and a cluster of `drover up` has no `/etc/slurm/slurm.conf` for them to
/// fall back on. Only processes of this user are readable, so only the job's own are read.
fn job_conf_of_ancestors() -> Option<PathBuf> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..64 {
        if pid <= 1 {
            return None;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let var = |name: &[u8]| {
            env.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix(b"=")))
        };
        if let (Some(_), Some(conf)) = (var(b"SLURM_JOB_ID"), var(b"SLURM_CONF")) {
            use std::os::unix::ffi::OsStrExt;
            return Some(PathBuf::from(std::ffi::OsStr::from_bytes(conf))).filter(|p| p.is_file());
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        pid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
    }
    None
}

pub fn load_config() -> Result<Config, String> {
    let p = conf_path();
    if !p.exists() {
        // Configless, on a host whose daemons fetched nothing: ask the controller itself.
        if let Some(server) = std::env::var("SLURM_CONF_SERVER").ok().filter(|s| !s.is_empty()) {
            return fetch_config(&server);
        }
    }
    drover_model::conf::parse_file(&p).map_err(|e| e.to_string())
}

/// The controller's `slurm.conf`, from the controller at `server` (`host[:port]`,
/// `SLURM_CONF_SERVER`), with this user's credential: auth/slurm where the host has the key or
/// a credential daemon, the host's munged otherwise.
fn fetch_config(server: &str) -> Result<Config, String> {
    use drover_proto::auth::{AuthConf, AuthKind};
    let addr = if server.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        server.to_string()
    } else {
        format!("{server}:6817")
    };
    let key = PathBuf::from("/etc/slurm/slurm.key");
    let kind = if key.exists() || drover_proto::auth::sack::socket_path().exists() {
        AuthKind::Slurm
    } else {
        AuthKind::Munge
    };
    let auth = drover_proto::auth::Auth::with_key_file(&AuthConf { kind, ..Default::default() }, key, false)
        .map_err(|e| e.to_string())?;
    // On a thread of its own: a command may load its configuration from inside its runtime
    // (reconnecting after a controller restart).
    let server_s = server.to_string();
    let fetch = move || -> Result<v1::ConfigReply, String> {
        let server = server_s.as_str();
        runtime().block_on(async {
            let target = drover_proto::Target::Tcp {
                addr: addr.clone(),
                auth: std::sync::Arc::new(auth),
                service: "controller",
            };
            let ch = drover_proto::connect_target(target).await.map_err(|e| match e {
                drover_proto::ConnectError::Unreachable(_) => {
                    format!("Unable to contact slurm controller (connect failure) at SLURM_CONF_SERVER={server}")
                }
                drover_proto::ConnectError::Auth(a) => a.to_string(),
            })?;
            ControllerClient::new(ch)
                .get_config(v1::Empty {})
                .await
                .map(|r| r.into_inner())
                .map_err(|s| format!("SLURM_CONF_SERVER={server}: {}", s.message()))
        })
    };
    let reply = std::thread::spawn(fetch).join().map_err(|_| "fetching the configuration failed".to_string())??;
    let text = reply
        .files
        .iter()
        .find(|f| f.name == "slurm.conf")
        .map(|f| f.text.clone())
        .ok_or_else(|| format!("SLURM_CONF_SERVER={server} sent no slurm.conf"))?;
    let mut cfg = drover_model::conf::parse_str("slurm.conf", &text).map_err(|e| e.to_string())?;
    // Where a file beside it would be (auth/slurm's key): Slurm's default place.
    cfg.path = "/etc/slurm/slurm.conf".into();
    Ok(cfg)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("invariant: a runtime starts")
}

/// This process's credentials for TCP connections (made once; a command on the
/// controller's host uses its local socket and never needs them).
pub fn client_auth(cfg: &Config) -> Result<std::sync::Arc<drover_proto::auth::Auth>, String> {
    static AUTH: std::sync::OnceLock<Result<std::sync::Arc<drover_proto::auth::Auth>, String>> =
        std::sync::OnceLock::new();
    AUTH.get_or_init(|| {
        drover_proto::auth::Auth::new(&cfg.auth, &cfg.path, false).map(std::sync::Arc::new).map_err(|e| e.to_string())
    })
    .clone()
}

/// The controller: over its local socket on its own host, else over TCP with this user's
/// credential. Errors are Slurm's one line (an authentication failure says what failed).
///
/// Where slurm.conf names several controllers, the one in control: the local socket and
/// every controller are asked at once ([`find_active`]).
pub async fn connect(cfg: &Config) -> Result<Client, String> {
    let client =
        |ch| ControllerClient::new(ch).max_decoding_message_size(512 << 20).max_encoding_message_size(64 << 20);
    if cfg.controller_failover() {
        return find_active(cfg).await.map(client);
    }
    if let Ok(ch) = drover_proto::connect_local(&cfg.controller_socket()).await {
        return Ok(client(ch));
    }
    tcp_channel(cfg, &cfg.controller_addr()).await.map(client)
}

/// Of several controllers, the one in control: the local socket (on a controller's host)
/// and every controller's address are asked at once, each again and again while it is not
/// in control (a standby taking over) or does not answer (a frozen controller accepts
/// connections and never answers them), for up to one and a half `SlurmctldTimeout`s and a
/// `MessageTimeout` (10 s) more, as Slurm's commands wait out a failover (they ask a standby
/// again for a `SlurmctldTimeout` and retry connections for a `MessageTimeout`): on a busy
/// host the standby's takeover and recovery take longer than on an idle one.
async fn find_active(cfg: &Config) -> Result<drover_proto::LocalChannel, String> {
    type Try = std::pin::Pin<Box<dyn std::future::Future<Output = Option<drover_proto::LocalChannel>> + Send>>;
    fn ask(target: impl Fn() -> drover_proto::Target + Send + Sync + 'static) -> Try {
        Box::pin(async move {
            let connect = || {
                let t = target();
                async move { drover_proto::connect_target(t).await.ok() }
            };
            Some(drover_proto::until_in_control(connect).await)
        })
    }
    let auth = client_auth(cfg)?;
    let sock = cfg.controller_socket();
    let mut tries = vec![ask(move || drover_proto::Target::Unix(sock.clone()))];
    for addr in cfg.controller_addrs() {
        let auth = auth.clone();
        tries.push(ask(move || drover_proto::Target::Tcp {
            addr: addr.clone(),
            auth: auth.clone(),
            service: "controller",
        }));
    }
    let within = cfg.controller_lease() * 3 / 2 + std::time::Duration::from_secs(10);
    drover_proto::first_of(tries, within)
        .await
        .ok_or_else(|| "Unable to contact slurm controller (connect failure)".to_string())
}

/// A connection over TCP, with this user's credential, to the controller at `addr` (of
/// several `SlurmctldHost`s, in control or not).
pub async fn tcp_channel(cfg: &Config, addr: &str) -> Result<drover_proto::LocalChannel, String> {
    let auth = client_auth(cfg)?;
    let target = drover_proto::Target::Tcp { addr: addr.to_string(), auth, service: "controller" };
    drover_proto::connect_target(target).await.map_err(|e| match e {
        drover_proto::ConnectError::Unreachable(_) => {
            "Unable to contact slurm controller (connect failure)".to_string()
        }
        drover_proto::ConnectError::Auth(a) => a.to_string(),
    })
}

/// What the controller at `addr` says of itself (scontrol ping).
pub async fn ha_status(cfg: &Config, addr: &str) -> Result<v1::HaStatus, String> {
    let ch = tcp_channel(cfg, addr).await?;
    let mut c = v1::controller_ha_client::ControllerHaClient::new(ch);
    match tokio::time::timeout(std::time::Duration::from_secs(5), c.status(v1::Empty {})).await {
        Ok(Ok(s)) => Ok(s.into_inner()),
        Ok(Err(s)) => Err(s.message().to_string()),
        Err(_) => Err("no answer".into()),
    }
}

/// Accounting (`drover accounting`): over its local socket on its host, else over TCP with
/// this user's credential.
pub async fn accounting(
    cfg: &Config,
) -> Result<v1::accounting_client::AccountingClient<tonic::transport::Channel>, String> {
    let sock = drover_model::dbd_conf::local_socket(cfg.accounting_storage_port);
    let ch = match drover_proto::connect_unix(&sock).await {
        Ok(ch) => ch,
        Err(_) => {
            let addr = cfg.accounting_addr().ok_or("Slurm accounting storage is disabled")?;
            let auth = client_auth(cfg)?;
            drover_proto::auth::connect_authenticated(&addr, &auth, "accounting").await.map_err(|e| {
                if e.contains("Connection refused") {
                    format!("Problem talking to the database: Connection refused ({addr})")
                } else {
                    format!("Problem talking to the database: {e}")
                }
            })?
        }
    };
    Ok(v1::accounting_client::AccountingClient::new(ch)
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20))
}

/// Connects for command `prog`; failing, says so in Slurm's words and gives the exit code.
pub async fn connect_or_exit(cfg: &Config, prog: &str) -> Result<Client, i32> {
    connect(cfg).await.map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })
}

/// Connects, waiting out a controller restart (up to `MessageTimeout`-like 60 s), as srun
/// and salloc do: a job script's `srun` must not fail because the controller restarts.
pub async fn connect_patiently(cfg: &Config, prog: &str) -> Result<Client, String> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut said = false;
    loop {
        match connect(cfg).await {
            Ok(c) => return Ok(c),
            Err(e) if std::time::Instant::now() >= until => return Err(e),
            Err(_) => {
                if !said {
                    eprintln!("{prog}: error: Slurm controller not responding, sleeping and retrying.");
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
    }
}

/// A new connection to the controller of `SLURM_CONF` (to reconnect after a restart).
pub async fn connect_config() -> Result<Client, String> {
    connect(&load_config()?).await
}

/// Job ids from comma lists (`12,13_2,14.0`): the job part of each, as the commands take them.
pub fn parse_job_ids<'a>(lists: impl IntoIterator<Item = &'a String>) -> Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    for list in lists {
        for id in list.split(',').filter(|s| !s.is_empty()) {
            let base = id.split(['_', '.']).next().unwrap_or(id);
            ids.push(base.parse::<u32>().map_err(|_| id.to_string())?);
        }
    }
    Ok(ids)
}

/// Job ids as Slurm's commands take them: `12`, `12_3` (one array task), `12_[1-3,7]` (some),
/// `12.0` or `12_3.batch` (a step: commands that act on jobs take its job), comma-separated,
/// brackets kept together.
pub fn parse_targets<'a>(lists: impl IntoIterator<Item = &'a String>) -> Result<Vec<v1::JobTarget>, String> {
    let mut out = Vec::new();
    for list in lists {
        let mut items = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in list.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&list[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&list[start..]);
        for item in items.into_iter().filter(|s| !s.is_empty()) {
            let bad = || item.to_string();
            let (item, step_id) = match item.rsplit_once('.') {
                Some((j, s)) => (j, Some(drover_model::step::parse_step(s).ok_or_else(bad)?)),
                None => (item, None),
            };
            let (job, tasks) = match item.split_once('_') {
                Some((j, t)) => (j, Some(t)),
                None => (item.split('.').next().unwrap_or(item), None),
            };
            let job_id = job.parse::<u32>().map_err(|_| bad())?;
            let tasks = match tasks {
                None => None,
                Some(t) => {
                    let t = t.split('.').next().unwrap_or(t);
                    let t = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(t);
                    if t == "*" {
                        None
                    } else {
                        drover_model::array::ArraySpec::parse(t).map_err(|_| bad())?;
                        Some(t.to_string())
                    }
                }
            };
            out.push(v1::JobTarget { job_id, tasks, step_id });
        }
    }
    Ok(out)
}

/// This process's arguments, bytes that are not UTF-8 kept (see [`drover_model::bytes`]).
pub fn args() -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    std::env::args_os().map(|a| drover_model::bytes::encode(a.as_bytes())).collect()
}

/// This process's environment, bytes that are not UTF-8 kept.
pub fn vars() -> Vec<(String, String)> {
    use drover_model::bytes::encode;
    use std::os::unix::ffi::OsStrExt;
    std::env::vars_os().map(|(k, v)| (encode(k.as_bytes()), encode(v.as_bytes()))).collect()
}

/// The working directory, its bytes kept (`fallback` where there is none).
pub fn cwd(fallback: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    std::env::current_dir()
        .map(|p| drover_model::bytes::encode(p.as_os_str().as_bytes()))
        .unwrap_or_else(|_| fallback.to_string())
}

/// Writes a command's output to stdout, the bytes its strings carry given back as they were
/// (a job name or path that is not UTF-8 prints as Slurm prints it).
pub fn print_raw(text: &str) {
    write_stdout(&drover_model::bytes::decode_output(text.as_bytes()));
}

/// Writes `out` to stdout; a reader that has gone (`squeue | head`) ends the command by
/// SIGPIPE, silently, as Slurm's commands end.
pub fn write_stdout(out: &[u8]) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(out).and_then(|_| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            use nix::sys::signal::{raise, signal, SigHandler, Signal};
            // SAFETY: restoring the default disposition has no handler to be unsafe about;
            // the signal then ends the process.
            unsafe {
                let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
            }
            let _ = raise(Signal::SIGPIPE);
        }
    }
}

/// One read of the controller's state.
pub fn fetch_state(cfg: &Config, req: drover_proto::v1::StateRequest) -> Result<drover_proto::v1::StateReply, String> {
    runtime().block_on(async {
        let mut c = connect(cfg).await?;
        c.get_state(req).await.map(|r| r.into_inner()).map_err(|s| status_msg(&s))
    })
}

/// Every job of a state reply: those sent as messages and those sent encoded.
pub fn jobs_in(reply: drover_proto::v1::StateReply) -> Vec<drover_proto::v1::JobInfo> {
    let mut jobs = reply.jobs;
    for r in &reply.job_records {
        let mut j = drover_proto::v1::JobInfo::default();
        if drover_proto::decode_job_into(&mut j, r).is_ok() {
            jobs.push(j);
        }
    }
    jobs
}

/// The jobs a request selects, as the controller streams them: `each` sees one batch at a
/// time (every batch carries `now` and the cluster name).
pub fn list_jobs(
    cfg: &Config,
    req: drover_proto::v1::StateRequest,
    mut each: impl FnMut(drover_proto::v1::StateReply),
) -> Result<(), String> {
    runtime().block_on(async {
        let mut c = connect(cfg).await?;
        let mut stream = c.list_jobs(req).await.map_err(|s| status_msg(&s))?.into_inner();
        while let Some(batch) = stream.message().await.map_err(|s| status_msg(&s))? {
            each(batch);
        }
        Ok(())
    })
}

/// Slurm's timestamp form in local time: `2026-12-02T11:57:03`.
pub fn fmt_time(t: i64) -> String {
    if t <= 0 {
        return "Unknown".into();
    }
    jiff::Timestamp::from_second(t)
        .map(|ts| ts.to_zoned(tz()).strftime("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_else(|_| "Unknown".into())
}

pub fn tz() -> jiff::tz::TimeZone {
    jiff::tz::TimeZone::system()
}

/// The header date of `-l` outputs: `Wed Dec 02 11:56:55 2026`.
pub fn fmt_header_date(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|ts| ts.to_zoned(tz()).strftime("%a %b %d %H:%M:%S %Y").to_string())
        .unwrap_or_default()
}

/// `-i/--iterate`'s seconds as squeue and sinfo read them (`atoi`: leading digits); `None`
/// where that is not above 0.
pub fn iterate_secs(v: &str) -> Option<u64> {
    let v = v.trim_start();
    let digits: String = v.strip_prefix('+').unwrap_or(v).chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u64>().ok().filter(|n| *n > 0)
}

/// `-i/--iterate`'s value, if given: its seconds, or, refused, `refusal` followed by the
/// value printed and exit status 1.
pub fn iterate_opt(v: Option<&str>, refusal: &str) -> Result<Option<u64>, i32> {
    match v {
        None => Ok(None),
        Some(v) => iterate_secs(v).map(Some).ok_or_else(|| {
            eprintln!("{refusal}{v}");
            1
        }),
    }
}

/// Runs `show` once, or with `every` again and again that many seconds apart (a blank line
/// between, as squeue and sinfo print them), until it fails; `show` is told whether it
/// repeats (its header then carries the date).
pub fn repeat(every: Option<u64>, mut show: impl FnMut(bool) -> i32) -> i32 {
    let Some(secs) = every else { return show(false) };
    loop {
        let code = show(true);
        if code != 0 {
            return code;
        }
        println!();
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
}

/// `-M/--clusters`: this cluster (or `all`) is served; any other name is refused as Slurm's
/// commands refuse a cluster their database does not know.
pub fn check_clusters(prog: &str, list: Option<&str>, local: &str) -> Result<(), i32> {
    let Some(list) = list else { return Ok(()) };
    match list.split(',').filter(|c| !c.is_empty()).find(|c| !c.eq_ignore_ascii_case("all") && *c != local) {
        None => Ok(()),
        Some(bad) => {
            eprintln!("{prog}: error: No cluster '{bad}' known by database.");
            eprintln!(
                "{prog}: error: '{bad}' can't be reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr \
                 list clusters' to see available clusters."
            );
            Err(1)
        }
    }
}

pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

pub fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name)
        .unwrap_or_else(|| gid.to_string())
}

pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw())
}

pub fn hostname() -> String {
    nix::unistd::gethostname().map(|h| h.to_string_lossy().to_string()).unwrap_or_else(|_| "localhost".into())
}

/// The name Slurm shows as a job's `AllocNode`: the submitting host's address (its name
/// resolved) named back by the resolver, as Slurm's auth/munge does with the address in the
/// credential (`getnameinfo`): `localhost` where the host's name is 127.0.0.1 in
/// `/etc/hosts` behind `localhost`. The host's own name where either lookup fails. Cached per
/// host for the process (one `scontrol show job` asks for every job).
pub fn alloc_node_name(host: &str) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(n) = seen.lock().ok().and_then(|m| m.get(host).cloned()) {
        return n;
    }
    let name = resolve_back(host).unwrap_or_else(|| host.to_string());
    if let Ok(mut m) = seen.lock() {
        m.insert(host.to_string(), name.clone());
    }
    name
}

fn resolve_back(host: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    if host.is_empty() {
        return None;
    }
    match (host, 0).to_socket_addrs().ok()?.next()? {
        std::net::SocketAddr::V4(a) => name_info(&libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
            sin_zero: [0; 8],
        }),
        std::net::SocketAddr::V6(a) => name_info(&libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
            sin6_scope_id: a.scope_id(),
        }),
    }
}

/// The resolver's name of a socket address (`getnameinfo`, a name required). `sa` is a
/// `sockaddr_in` or `sockaddr_in6`.
fn name_info<T>(sa: &T) -> Option<String> {
    let mut name = [0 as libc::c_char; 1025];
    // SAFETY: `sa` is a whole socket address of `size_of::<T>()` bytes; `name` is writable
    // for its whole length, and no service name is asked for (null, 0).
    let rc = unsafe {
        libc::getnameinfo(
            (sa as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
            name.as_mut_ptr(),
            name.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: getnameinfo wrote a NUL-terminated string into `name`.
    let s = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    Some(s.to_string_lossy().into_owned())
}

/// `ExitCode=` style `code:signal` from a raw wait status.
pub fn exit_code(status: i32) -> String {
    let sig = status & 0x7f;
    if sig != 0 {
        format!("0:{sig}")
    } else {
        format!("{}:0", (status >> 8) & 0xff)
    }
}

/// Parses `--begin`/`StartTime=` values: `now+N[seconds|minutes|hours|days|weeks]`,
/// `YYYY-MM-DD[THH:MM[:SS]]`, `HH:MM[:SS]` (today, or tomorrow when past), `midnight`,
/// `noon`, `teatime`, `today`, `tomorrow`, or Unix seconds.
pub fn parse_time_spec(s: &str, now: i64) -> Option<i64> {
    let s = s.trim();
    let zone = tz();
    let today = jiff::Timestamp::from_second(now).ok()?.to_zoned(zone.clone());
    // A time of day that does not exist (`25:00`) is no time, not a panic.
    let clock = |h: i8, m: i8, sec: i8| jiff::civil::Time::new(h, m, sec, 0).ok();
    let at = |h: i8, m: i8, sec: i8, next_if_past: bool| -> Option<i64> {
        let d = today.date().to_datetime(clock(h, m, sec)?).to_zoned(zone.clone()).ok()?;
        let t = d.timestamp().as_second();
        if next_if_past && t <= now {
            Some(t + 86400)
        } else {
            Some(t)
        }
    };
    let lower = s.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("now") {
        if rest.is_empty() {
            return Some(now);
        }
        let (sign, rest) = match rest.strip_prefix('+') {
            Some(r) => (1, r),
            None => (-1, rest.strip_prefix('-')?),
        };
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let n: i64 = digits.parse().ok()?;
        let unit = &rest[digits.len()..];
        let mult = match unit {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86400,
            "w" | "week" | "weeks" => 604800,
            _ => return None,
        };
        return now.checked_add(n.checked_mul(mult)?.checked_mul(sign)?);
    }
    match lower.as_str() {
        "today" => return at(0, 0, 0, false),
        "tomorrow" => return at(0, 0, 0, false).map(|t| t + 86400),
        "midnight" => return at(0, 0, 0, true),
        "noon" => return at(12, 0, 0, true),
        "teatime" => return at(16, 0, 0, true),
        _ => {}
    }
    if let Ok(n) = s.parse::<i64>() {
        if n > 100_000 {
            return Some(n);
        }
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        return dt.to_zoned(zone).ok().map(|z| z.timestamp().as_second());
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        return d.at(0, 0, 0, 0).to_zoned(zone).ok().map(|z| z.timestamp().as_second());
    }
    if let Some((date, time)) = s.split_once('T') {
        let d: jiff::civil::Date = date.parse().ok()?;
        let parts: Vec<i8> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        let (h, m, sec) =
            (parts.first().copied()?, parts.get(1).copied().unwrap_or(0), parts.get(2).copied().unwrap_or(0));
        return d.to_datetime(clock(h, m, sec)?).to_zoned(zone).ok().map(|z| z.timestamp().as_second());
    }
    let parts: Vec<i8> = s.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    if parts.len() >= 2 {
        return at(parts[0], parts[1], parts.get(2).copied().unwrap_or(0), true);
    }
    None
}

/// A tonic error as the one line Slurm prints.
pub fn status_msg(s: &tonic::Status) -> String {
    if s.code() == tonic::Code::Unavailable || s.code() == tonic::Code::Unknown && s.message().contains("connect") {
        return "Unable to contact slurm controller (connect failure)".into();
    }
    s.message().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn iterate_reads_seconds_as_atoi_does() {
        assert_eq!(super::iterate_secs("5"), Some(5));
        assert_eq!(super::iterate_secs("10s"), Some(10), "leading digits");
        assert_eq!(super::iterate_secs(" +3"), Some(3));
        for bad in ["x", "0", "-2", ""] {
            assert_eq!(super::iterate_secs(bad), None, "{bad}");
        }
    }

    #[test]
    fn clusters_other_than_this_one_are_refused() {
        use super::check_clusters;
        assert_eq!(check_clusters("squeue", None, "lab"), Ok(()));
        assert_eq!(check_clusters("squeue", Some("lab"), "lab"), Ok(()));
        assert_eq!(check_clusters("squeue", Some("ALL"), "lab"), Ok(()));
        assert_eq!(check_clusters("squeue", Some("lab,nosuch"), "lab"), Err(1));
    }

    #[test]
    fn repeat_runs_once_without_a_period_and_stops_on_a_failure() {
        let mut runs = Vec::new();
        assert_eq!(
            super::repeat(None, |d| {
                runs.push(d);
                0
            }),
            0
        );
        assert_eq!(runs, [false]);
        let mut n = 0;
        let code = super::repeat(Some(1), |d| {
            assert!(d);
            n += 1;
            if n == 2 {
                3
            } else {
                0
            }
        });
        assert_eq!((code, n), (3, 2));
    }

    #[test]
    fn the_alloc_node_is_the_hosts_address_named_back() {
        // 127.0.0.1 is named `localhost` by every resolver configuration Debian ships.
        assert_eq!(alloc_node_name("127.0.0.1"), "localhost");
        assert_eq!(alloc_node_name("no-such-host.invalid"), "no-such-host.invalid");
        assert_eq!(alloc_node_name(""), "");
    }

    use super::*;

    #[test]
    fn time_specs() {
        let now = 1_796_212_615;
        assert_eq!(parse_time_spec("now+60", now), Some(now + 60));
        // Found by fuzzing (scripts/fuzz values): an hour past 23 panicked, and so did an
        // offset that overflows.
        assert_eq!(parse_time_spec("055:0", now), None);
        assert_eq!(parse_time_spec("2026-12-05T25:00", now), None);
        assert_eq!(parse_time_spec("now+9999999999999999weeks", now), None);
        assert_eq!(parse_time_spec("now+2hours", now), Some(now + 7200));
        assert_eq!(parse_time_spec("now", now), Some(now));
        assert_eq!(parse_time_spec("now-30days", now), Some(now - 30 * 86400));
        assert!(parse_time_spec("2026-12-25T10:00:00", now).is_some());
        assert!(parse_time_spec("2026-12-25", now).is_some());
        let t = parse_time_spec("16:00", now).unwrap();
        assert!(t > now && t <= now + 86400);
        assert_eq!(parse_time_spec("bogus", now), None);
    }

    #[test]
    fn job_targets_parse_like_slurm_ids() {
        let t = parse_targets([&"12,13_2,14_[1-3,7],15.0,16_4.batch,17_*".to_string()]).unwrap();
        let got: Vec<(u32, Option<&str>)> = t.iter().map(|t| (t.job_id, t.tasks.as_deref())).collect();
        assert_eq!(got, [(12, None), (13, Some("2")), (14, Some("1-3,7")), (15, None), (16, Some("4")), (17, None)]);
        let steps: Vec<Option<u32>> = t.iter().map(|t| t.step_id).collect();
        let batch = Some(drover_model::step::BATCH_STEP);
        assert_eq!(steps, [None, None, None, Some(0), batch, None]);
        assert_eq!(parse_targets([&"12.x".to_string()]), Err("12.x".to_string()));
        assert_eq!(parse_targets([&"12_x".to_string()]), Err("12_x".to_string()));
        assert_eq!(parse_targets([&"abc".to_string()]), Err("abc".to_string()));
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(0), "0:0");
        assert_eq!(exit_code(3 << 8), "3:0");
        assert_eq!(exit_code(9), "0:9");
    }
}

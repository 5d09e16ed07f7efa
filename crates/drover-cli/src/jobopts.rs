//! Job options shared by `sbatch` and `srun` (raw clap arguments), and their validation into a
//! [`JobSpec`]. Precedence as in Slurm: command line > `SBATCH_*` environment > `#SBATCH`
//! directives, realised by parsing them in that reverse order with later values overriding.

use clap::Parser;
use drover_model::duration::parse_time_limit;
use drover_model::hostlist::Hostlist;
use drover_model::job::{parse_dependency, JobSpec};
use drover_model::memsize::parse_mb;

#[derive(Parser, Debug, Default, Clone)]
#[command(disable_help_flag = true, disable_version_flag = true, args_override_self = true, infer_long_args = true)]
pub struct JobArgs {
    #[arg(short = 'J', long = "job-name")]
    pub job_name: Option<String>,
    #[arg(short = 'p', long = "partition")]
    pub partition: Option<String>,
    #[arg(short = 'N', long = "nodes")]
    pub nodes: Option<String>,
    #[arg(short = 'n', long = "ntasks")]
    pub ntasks: Option<String>,
    #[arg(long = "ntasks-per-node", alias = "tasks-per-node")]
    pub ntasks_per_node: Option<String>,
    #[arg(short = 'c', long = "cpus-per-task")]
    pub cpus_per_task: Option<String>,
    #[arg(long = "mem")]
    pub mem: Option<String>,
    #[arg(long = "mem-per-cpu")]
    pub mem_per_cpu: Option<String>,
    #[arg(short = 't', long = "time")]
    pub time: Option<String>,
    #[arg(short = 'w', long = "nodelist")]
    pub nodelist: Option<String>,
    #[arg(short = 'x', long = "exclude")]
    pub exclude: Option<String>,
    #[arg(short = 'C', long = "constraint")]
    pub constraint: Option<String>,
    #[arg(long = "exclusive", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub exclusive: Option<String>,
    #[arg(short = 'H', long = "hold")]
    pub hold: bool,
    #[arg(short = 'b', long = "begin")]
    pub begin: Option<String>,
    #[arg(short = 'd', long = "dependency")]
    pub dependency: Option<String>,
    #[arg(short = 'D', long = "chdir", alias = "workdir")]
    pub chdir: Option<String>,
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    #[arg(short = 'e', long = "error")]
    pub error: Option<String>,
    #[arg(short = 'i', long = "input")]
    pub input: Option<String>,
    #[arg(long = "export")]
    pub export: Option<String>,
    /// `--get-user-env[=TIMEOUT][S|L]`: the batch job starts from the user's login environment
    /// on its node (the timeout and mode are accepted; the login shell is always `su -`'s).
    #[arg(long = "get-user-env", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub get_user_env: Option<String>,
    #[arg(long = "comment")]
    pub comment: Option<String>,
    #[arg(long = "mail-type")]
    pub mail_type: Option<String>,
    #[arg(long = "mail-user")]
    pub mail_user: Option<String>,
    #[arg(long = "signal")]
    pub signal: Option<String>,
    #[arg(long = "requeue")]
    pub requeue: bool,
    #[arg(long = "no-requeue")]
    pub no_requeue: bool,
    #[arg(long = "open-mode")]
    pub open_mode: Option<String>,
    #[arg(short = 'A', long = "account")]
    pub account: Option<String>,
    #[arg(short = 'q', long = "qos")]
    pub qos: Option<String>,
    #[arg(long = "wckey")]
    pub wckey: Option<String>,
    #[arg(long = "gres")]
    pub gres: Option<String>,
    #[arg(short = 'G', long = "gpus")]
    pub gpus: Option<String>,
    #[arg(long = "gpus-per-node")]
    pub gpus_per_node: Option<String>,
    #[arg(long = "gpus-per-task")]
    pub gpus_per_task: Option<String>,
    #[arg(long = "cpus-per-gpu")]
    pub cpus_per_gpu: Option<String>,
    #[arg(long = "mem-per-gpu")]
    pub mem_per_gpu: Option<String>,
    #[arg(long = "ntasks-per-gpu")]
    pub ntasks_per_gpu: Option<String>,
    #[arg(short = 'L', long = "licenses")]
    pub licenses: Option<String>,
    #[arg(long = "gpus-per-socket")]
    pub gpus_per_socket: Option<String>,
    #[arg(long = "sockets-per-node")]
    pub sockets_per_node: Option<String>,
    #[arg(long = "contiguous")]
    pub contiguous: bool,
    #[arg(long = "spread-job")]
    pub spread_job: bool,
    #[arg(long = "use-min-nodes")]
    pub use_min_nodes: bool,
    #[arg(short = 'O', long = "overcommit")]
    pub overcommit: bool,
    #[arg(long = "tmp")]
    pub tmp: Option<String>,
    #[arg(long = "time-min")]
    pub time_min: Option<String>,
    #[arg(long = "mincpus")]
    pub mincpus: Option<String>,
    #[arg(short = 's', long = "oversubscribe", alias = "share")]
    pub oversubscribe: bool,
    #[arg(short = 'k', long = "no-kill", num_args = 0..=1, default_missing_value = "set", require_equals = true)]
    pub no_kill: Option<String>,
    #[arg(long = "kill-on-invalid-dep")]
    pub kill_on_invalid_dep: Option<String>,
    #[arg(long = "cores-per-socket")]
    pub cores_per_socket: Option<String>,
    #[arg(long = "threads-per-core")]
    pub threads_per_core: Option<String>,
    #[arg(long = "ntasks-per-core")]
    pub ntasks_per_core: Option<String>,
    #[arg(short = 'B', long = "extra-node-info")]
    pub extra_node_info: Option<String>,
    #[arg(long = "hint")]
    pub hint: Option<String>,
    #[arg(long = "deadline")]
    pub deadline: Option<String>,
    #[arg(long = "profile")]
    pub profile: Option<String>,
    #[arg(long = "acctg-freq")]
    pub acctg_freq: Option<String>,
    #[arg(long = "nice", num_args = 0..=1, default_missing_value = "100", require_equals = true)]
    pub nice: Option<String>,
    #[arg(long = "priority")]
    pub priority: Option<String>,
    #[arg(long = "switches")]
    pub switches: Option<String>,
    #[arg(long = "segment")]
    pub segment: Option<String>,
    #[arg(short = 'I', long = "immediate", num_args = 0..=1, default_missing_value = "0", require_equals = true)]
    pub immediate: Option<String>,
    #[arg(long = "array", short = 'a')]
    pub array: Option<String>,
    #[arg(short = 'Q', long = "quiet")]
    pub quiet: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[arg(long = "uid")]
    pub uid: Option<String>,
    #[arg(long = "gid")]
    pub gid: Option<String>,
    #[arg(long = "reservation")]
    pub reservation: Option<String>,
}

/// Splits a directive line as a POSIX shell would split words (quotes, backslashes).
pub fn shell_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unterminated quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) => cur.push(x),
                            None => return Err("unterminated quote".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unterminated quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// The `#SBATCH` (or other `prefix`) directives of a script: options from the lines before the
/// first command, as Slurm reads them.
pub fn directives(script: &str, prefix: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (i, line) in script.lines().enumerate() {
        let t = line.trim_start();
        if i == 0 && t.starts_with("#!") {
            continue;
        }
        if let Some(rest) = t.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                args.extend(shell_words(rest).map_err(|e| format!("line {}: {e}", i + 1))?);
            }
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        break;
    }
    Ok(args)
}

/// Sets `key` in a job's environment (replacing what the submitter's had).
pub(crate) fn set_env(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    env.retain(|(k, _)| k != key);
    env.push((key.into(), value.into()));
}

/// `SBATCH_*` input environment variables as options.
pub fn env_args(prefix: &str) -> Vec<String> {
    const MAP: &[(&str, &str)] = &[
        ("ACCOUNT", "--account"),
        ("CONSTRAINT", "--constraint"),
        ("EXCLUSIVE", "--exclusive"),
        ("EXPORT", "--export"),
        ("JOB_NAME", "--job-name"),
        ("PARTITION", "--partition"),
        ("QOS", "--qos"),
        ("TIMELIMIT", "--time"),
        ("MEM_PER_CPU", "--mem-per-cpu"),
        ("MEM_PER_NODE", "--mem"),
        ("OPEN_MODE", "--open-mode"),
        ("REQUEUE", "--requeue"),
        ("NO_REQUEUE", "--no-requeue"),
        ("OVERCOMMIT", "--overcommit"),
        ("SIGNAL", "--signal"),
        ("WCKEY", "--wckey"),
        ("RESERVATION", "--reservation"),
        ("GRES", "--gres"),
        ("GPUS", "--gpus"),
        ("DEPENDENCY", "--dependency"),
        ("HOLD", "--hold"),
        ("NODES", "--nodes"),
        ("NTASKS", "--ntasks"),
        ("CPUS_PER_TASK", "--cpus-per-task"),
        ("OUTPUT", "--output"),
        ("ERROR", "--error"),
        ("INPUT", "--input"),
        ("CHDIR", "--chdir"),
    ];
    let mut out = Vec::new();
    for (suffix, opt) in MAP {
        if let Ok(v) = std::env::var(format!("{prefix}{suffix}")) {
            match *opt {
                "--requeue" | "--no-requeue" | "--hold" | "--overcommit" => out.push(opt.to_string()),
                "--exclusive" => out.push(if v.is_empty() { "--exclusive".into() } else { format!("--exclusive={v}") }),
                _ => out.push(format!("{opt}={v}")),
            }
        }
    }
    out
}

/// What a user asked for, validated.
pub struct Validated {
    pub spec: JobSpec,
}

fn num<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, String> {
    v.trim().parse().map_err(|_| format!("Invalid {what} specification: {v}"))
}

/// A date as Slurm's `parse_time` reads it for `--begin` and `--deadline`, with its two
/// lines of complaint (the parser says where it stopped, after a word it knows).
fn time_spec(v: &str, opt: &str) -> Result<i64, String> {
    crate::common::parse_time_spec(v, crate::common::now()).ok_or_else(|| {
        let lower = v.to_ascii_lowercase();
        let pos = ["tomorrow", "midnight", "elevenses", "teatime", "today", "noon", "fika", "now"]
            .iter()
            .find(|w| lower.starts_with(*w))
            .map_or(0, |w| w.len());
        format!("Invalid time specification (pos={pos}): {v}\n{EXIT_255}Invalid --{opt} specification")
    })
}

/// `-B sockets[:cores[:threads]]`, each a count or `*` (any), as Slurm's
/// `verify_socket_core_thread_count` reads it.
fn extra_node_info(v: &str) -> Result<[Option<u32>; 3], String> {
    let mut out = [None; 3];
    let parts: Vec<&str> = v.split(':').collect();
    for (i, p) in parts.iter().enumerate().take(3) {
        if *p == "*" {
            continue;
        }
        // A range's minimum is what counts (`2-4`).
        let min = p.split_once('-').map_or(*p, |(lo, _)| lo);
        match min.parse::<u32>() {
            Ok(n) => out[i] = Some(n),
            Err(_) => {
                let which = ["first", "second", "third"][i];
                return Err(format!("Invalid numeric value \"{min}\" for {which} arg of -B."));
            }
        }
    }
    if parts.len() > 3 {
        return Err(format!("{EXIT_255}Invalid --extra-node-info specification"));
    }
    Ok(out)
}

/// `--hint`: what each word implies for threads per core and tasks per core, as Slurm's
/// `verify_hint`.
fn hint(v: &str, spec: &mut JobSpec) -> Result<(), String> {
    for word in v.split([',', ';']) {
        match word.to_ascii_lowercase().as_str() {
            "compute_bound" | "nomultithread" => spec.threads_per_core = Some(1),
            "memory_bound" => {
                spec.cores_per_socket = Some(1);
                spec.threads_per_core = Some(1);
            }
            "multithread" => spec.threads_per_core = None,
            _ => return Err(format!("unrecognized --hint argument \"{word}\", see --hint=help")),
        }
    }
    Ok(())
}

/// `--acctg-freq`: comma-separated `task|energy|network|filesystem=SECONDS`, or seconds
/// alone (the task sampling), as Slurm's `validate_acctg_freq`; each bad one named.
fn acctg_freq(v: &str) -> Result<(), String> {
    let bad: Vec<String> = v
        .split(',')
        .filter(|t| !t.is_empty())
        .filter(|t| {
            let n = t.split_once('=').map_or(Some(*t), |(k, n)| {
                ["task", "energy", "network", "filesystem"].contains(&k.to_ascii_lowercase().as_str()).then_some(n)
            });
            !n.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|t| format!("Invalid --acctg-freq specification: {t}"))
        .collect();
    match bad.split_last() {
        None => Ok(()),
        Some((last, rest)) => {
            let mut msg: Vec<String> = rest.iter().map(|m| format!("error: {m}")).collect();
            msg.push(format!("{EXIT_255}{last}"));
            Err(msg.join("\n"))
        }
    }
}

/// A positive count as Slurm's parse_int reads it: `Invalid numeric value "x" for --opt.`
pub(crate) fn count(v: &str, opt: &str) -> Result<u32, String> {
    match v.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("Invalid numeric value \"{v}\" for --{opt}.")),
    }
}

/// `-N MIN[-MAX]` as Slurm's `verify_node_count` reads it: a count may carry a k or m
/// suffix, a range's minimum without digits is 1 (`-N-3` is `1-3`), a maximum of 0 is none.
/// Errors in Slurm's words (exit 255).
pub(crate) fn node_range(v: &str) -> Result<(u32, Option<u32>), String> {
    // strtol, then Slurm's suffixes: the value (None without digits) and what is left.
    fn nodes(s: &str) -> (Option<i64>, &str) {
        let t = s.trim_start();
        let (neg, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return (None, s);
        }
        let mut n: i64 = t[..digits].parse().unwrap_or(i64::from(i32::MAX));
        let mut rest = &t[digits..];
        for (suffix, by) in [(['k', 'K'], 1024), (['m', 'M'], 1024 * 1024)] {
            if let Some(r) = rest.strip_prefix(suffix) {
                n = n.saturating_mul(by);
                rest = r;
            }
        }
        (Some(if neg { -n } else { n }.clamp(i64::from(i32::MIN), i64::from(i32::MAX))), rest)
    }
    let bad = |s: &str| format!("{EXIT_255}\"{s}\" is not a valid node count");
    let blank = |s: &str| s.trim().is_empty();
    let Some((a, b)) = v.split_once('-') else {
        return match nodes(v) {
            (Some(n), rest) if blank(rest) && n >= 0 => Ok((n as u32, Some(n as u32))),
            _ => Err(bad(v)),
        };
    };
    let (lo, rest) = nodes(a);
    if !blank(rest) {
        return Err(bad(a));
    }
    let lo = lo.filter(|n| *n >= 0).unwrap_or(1);
    let (hi, rest) = nodes(b);
    if !blank(rest) {
        return Err(bad(b));
    }
    let hi = hi.unwrap_or(-1);
    if hi != 0 && hi < lo {
        return Err(format!("{EXIT_255}Maximum node count {hi} is less than minimum node count {lo}"));
    }
    Ok((lo as u32, (hi != 0).then_some(hi as u32)))
}

/// The mail types Slurm knows (`--mail-type`, comma separated, any case), the flags in the
/// order Slurm's `print_mail_type` writes them, then `NONE` and `ALL`.
const MAIL_TYPES: &[&str] = &[
    "ARRAY_TASKS",
    "INVALID_DEPEND",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "STAGE_OUT",
    "TIME_LIMIT_50",
    "TIME_LIMIT_80",
    "TIME_LIMIT_90",
    "TIME_LIMIT",
    "NONE",
    "ALL",
];

/// A `--mail-type` as Slurm prints it back (`scontrol show job`): its flags in Slurm's
/// order, `ALL` as those it stands for, `NONE` alone.
pub(crate) fn mail_type_text(given: &str) -> String {
    const ALL: &[&str] = &["BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT"];
    let words: Vec<String> = given.split(',').map(|w| w.trim().to_ascii_uppercase()).collect();
    let all = words.iter().any(|w| w == "ALL");
    let set: Vec<&str> = MAIL_TYPES[..MAIL_TYPES.len() - 2]
        .iter()
        .copied()
        .filter(|f| words.iter().any(|w| w == f) || (all && ALL.contains(f)))
        .collect();
    if set.is_empty() {
        "NONE".into()
    } else {
        set.join(",")
    }
}

/// How validation errors say what Slurm's commands do with them (see [`report`]): an option
/// value Slurm's option parser refuses exits 255; a request the controller would refuse is
/// told as a failed submission; `fatal: ` is Slurm's fatal(); lines before a `\n` are printed
/// as they are.
pub(crate) const EXIT_255: &str = "255:";
const REFUSED: &str = "submit:";

impl JobArgs {
    pub fn validate(&self, batch: bool) -> Result<Validated, String> {
        let mut spec = JobSpec { batch, ..Default::default() };
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        // Only root may run a job as someone else (Slurm's option parser says so, exit 255).
        if uid != 0 {
            if self.uid.is_some() {
                return Err(format!("{EXIT_255}--uid only permitted by root user"));
            }
            if self.gid.is_some() {
                return Err(format!("{EXIT_255}--gid only permitted by root user"));
            }
        }
        spec.uid = match &self.uid {
            Some(u) => crate::common::uid_of(u).ok_or_else(|| format!("{EXIT_255}Invalid --uid specification"))?,
            None => uid,
        };
        spec.gid = match &self.gid {
            Some(g) => match g.parse() {
                Ok(n) => n,
                Err(_) => nix::unistd::Group::from_name(g)
                    .ok()
                    .flatten()
                    .map(|gr| gr.gid.as_raw())
                    .ok_or_else(|| format!("{EXIT_255}Invalid --gid specification"))?,
            },
            None if self.uid.is_some() => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(spec.uid))
                .ok()
                .flatten()
                .map(|u| u.gid.as_raw())
                .unwrap_or(gid),
            None => gid,
        };
        // Names are resolved by the controller, which trusts only the caller's credentials.
        if let Some(p) = &self.partition {
            spec.partitions = p.split(',').filter(|s| !s.is_empty()).map(String::from).collect();
        }
        if let Some(n) = &self.nodes {
            let (lo, hi) = node_range(n)?;
            if lo == 0 {
                return Err(format!("{REFUSED}Node count specification invalid"));
            }
            spec.min_nodes = Some(lo);
            spec.max_nodes = Some(hi.unwrap_or(lo));
        }
        if let Some(n) = &self.ntasks {
            spec.ntasks = Some(count(n, "ntasks")?);
        }
        if let Some(n) = &self.ntasks_per_node {
            spec.ntasks_per_node = Some(count(n, "ntasks-per-node")?);
        }
        if let Some(c) = &self.cpus_per_task {
            spec.cpus_per_task = Some(count(c, "cpus-per-task")?);
        }
        let mems = [&self.mem, &self.mem_per_cpu, &self.mem_per_gpu].iter().filter(|m| m.is_some()).count();
        if mems > 1 {
            return Err("fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.".into());
        }
        if self.cpus_per_gpu.is_some() && self.cpus_per_task.is_some() {
            return Err("--cpus-per-gpu is mutually exclusive with --cpus-per-task".into());
        }
        if let Some(m) = &self.mem {
            spec.mem_per_node_mb = Some(parse_mb(m).map_err(|_| format!("{EXIT_255}Invalid --mem specification"))?);
        }
        if let Some(m) = &self.mem_per_cpu {
            spec.mem_per_cpu_mb =
                Some(parse_mb(m).map_err(|_| format!("{EXIT_255}Invalid --mem-per-cpu specification"))?);
        }
        if let Some(t) = &self.time {
            spec.time_limit =
                Some(parse_time_limit(t).map_err(|_| format!("{EXIT_255}Invalid --time specification")).map(|l| {
                    // Slurm rounds a limit of seconds up to whole minutes.
                    l.map(|s| s.div_ceil(60) * 60)
                })?);
        }
        if let Some(w) = &self.nodelist {
            let hl = if std::path::Path::new(w).is_file() && w.contains('/') {
                let text = std::fs::read_to_string(w).map_err(|e| format!("{w}: {e}"))?;
                Hostlist::parse(&text.split_whitespace().collect::<Vec<_>>().join(","))
            } else {
                Hostlist::parse(w)
            };
            spec.nodelist = hl.map_err(|e| e.to_string())?.names();
        }
        if let Some(x) = &self.exclude {
            spec.exclude = Hostlist::parse(x).map_err(|e| e.to_string())?.names();
        }
        if let Some(c) = &self.constraint {
            drover_model::job::Constraint::parse(c).map_err(|_| "Invalid feature specification".to_string())?;
            spec.constraint = Some(c.clone());
        }
        if let Some(e) = &self.exclusive {
            match e.as_str() {
                "" | "mcs" => spec.exclusive = true,
                "user" => spec.exclusive_user = true,
                _ => return Err(format!("{EXIT_255}Invalid --exclusive specification")),
            }
        }
        spec.hold = self.hold;
        if let Some(b) = &self.begin {
            spec.begin_time = Some(time_spec(b, "begin")?);
        }
        if let Some(d) = &self.deadline {
            spec.deadline = Some(time_spec(d, "deadline")?);
        }
        if let Some(d) = &self.dependency {
            spec.dependency = parse_dependency(d).map_err(|_| format!("{REFUSED}Job dependency problem"))?;
        }
        let cwd = crate::common::cwd("/tmp");
        spec.work_dir = match &self.chdir {
            Some(d) if d.starts_with('/') => d.clone(),
            Some(d) => format!("{cwd}/{d}"),
            None => cwd,
        };
        spec.stdout = self.output.clone();
        spec.stderr = self.error.clone();
        spec.stdin = self.input.clone();
        spec.environment = export_env(self.export.as_deref().unwrap_or("ALL"))?;
        // A batch job that exports less than everything (or asks) gets the user's login
        // environment on its node beneath what it exports, as Slurm's sbatch asks slurmd.
        let partial = self.export.as_deref().is_some_and(|e| !e.split(',').any(|i| i.eq_ignore_ascii_case("ALL")));
        if batch && (partial || self.get_user_env.is_some()) {
            set_env(&mut spec.environment, "SLURM_GET_USER_ENV", "1");
        }
        spec.comment = self.comment.clone();
        if let Some(m) = &self.mail_type {
            if !m.split(',').all(|t| MAIL_TYPES.iter().any(|k| k.eq_ignore_ascii_case(t))) {
                return Err(format!("{EXIT_255}Invalid --mail-type specification"));
            }
        }
        spec.mail_type = self.mail_type.clone();
        spec.mail_user = self.mail_user.clone();
        if let Some(s) = &self.signal {
            validate_signal(s).map_err(|_| format!("{EXIT_255}Invalid --signal specification"))?;
            spec.signal = Some(s.clone());
        }
        if self.requeue {
            spec.requeue = Some(true);
        }
        if self.no_requeue {
            spec.requeue = Some(false);
        }
        if let Some(m) = &self.open_mode {
            spec.open_mode_append = match m.as_str() {
                "append" | "a" | "A" => true,
                "truncate" | "t" | "T" => false,
                _ => return Err(format!("{EXIT_255}Invalid --open-mode specification")),
            };
        }
        // sbatch passes its open mode to the job's steps (srun reads SLURM_OPEN_MODE), so a
        // step's `--output` of an `--open-mode=append` job appends too, as Slurm's does.
        if batch && self.open_mode.is_some() {
            let mode = if spec.open_mode_append { "a" } else { "t" };
            set_env(&mut spec.environment, "SLURM_OPEN_MODE", mode);
        }
        // And its dependency, as given.
        if let (true, Some(d)) = (batch, &self.dependency) {
            set_env(&mut spec.environment, "SLURM_JOB_DEPENDENCY", d);
        }
        if let Some(i) = &self.immediate {
            spec.immediate = Some(if i.is_empty() { 0 } else { num(i, "immediate")? });
        }
        let bad_gres = |_| "Invalid generic resource (gres) specification".to_string();
        if let Some(g) = &self.gres {
            spec.gres = drover_model::gres::parse_gres_request(g).map_err(bad_gres)?;
        }
        spec.gpus_per_node =
            self.gpus_per_node.as_deref().map(drover_model::gres::parse_gpus).transpose().map_err(bad_gres)?;
        spec.gpus = self.gpus.as_deref().map(drover_model::gres::parse_gpus).transpose().map_err(bad_gres)?;
        spec.gpus_per_task =
            self.gpus_per_task.as_deref().map(drover_model::gres::parse_gpus).transpose().map_err(bad_gres)?;
        spec.gpus_per_socket =
            self.gpus_per_socket.as_deref().map(drover_model::gres::parse_gpus).transpose().map_err(bad_gres)?;
        spec.sockets_per_node = self.sockets_per_node.as_deref().map(|c| num(c, "sockets-per-node")).transpose()?;
        spec.cpus_per_gpu = self.cpus_per_gpu.as_deref().map(|c| count(c, "cpus-per-gpu")).transpose()?;
        spec.mem_per_gpu_mb = self
            .mem_per_gpu
            .as_deref()
            .map(|m| parse_mb(m).map_err(|_| format!("{EXIT_255}Invalid --mem-per-gpu specification")))
            .transpose()?;
        spec.ntasks_per_gpu = self.ntasks_per_gpu.as_deref().map(|n| num(n, "ntasks-per-gpu")).transpose()?;
        spec.account = self.account.clone();
        spec.qos = self.qos.clone();
        if let Some(n) = &self.nice {
            spec.nice = parse_nice(n).ok_or("Invalid --nice value, out of range (+/- 2147483645)")?;
        }
        if let Some(p) = &self.priority {
            spec.priority = Some(parse_priority(p)?);
        }
        spec.reservation = self.reservation.clone().filter(|r| !r.is_empty());
        spec.contiguous = self.contiguous;
        spec.spread_job = self.spread_job;
        spec.use_min_nodes = self.use_min_nodes;
        spec.overcommit = self.overcommit;
        if let Some(t) = &self.tmp {
            spec.tmp_mb =
                Some(drover_model::memsize::parse_mb(t).map_err(|_| format!("{EXIT_255}Invalid --tmp specification"))?);
        }
        if let Some(s) = &self.segment {
            spec.segment = Some(num(s, "segment")?);
        }
        if let Some(t) = &self.time_min {
            // Slurm's time_str2mins: 0 is no minimum.
            spec.time_min = match parse_time_limit(t) {
                Ok(Some(0) | None) => None,
                Ok(Some(secs)) => Some(secs.div_ceil(60) * 60),
                Err(_) => return Err(format!("{EXIT_255}Invalid --time-min specification")),
            };
        }
        if let Some(n) = &self.mincpus {
            spec.min_cpus_per_node = Some(count(n, "mincpus")?);
        }
        spec.oversubscribe = self.oversubscribe;
        if let Some(k) = &self.no_kill {
            spec.no_kill = match k.to_ascii_lowercase().as_str() {
                "set" => true,
                "off" | "no" => false,
                _ => return Err(format!("{EXIT_255}Invalid --no-kill specification")),
            };
        }
        if let Some(k) = &self.kill_on_invalid_dep {
            spec.kill_on_invalid_dep = match k.to_ascii_lowercase().as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => return Err(format!("{EXIT_255}Invalid --kill-on-invalid-dep specification")),
            };
        }
        if let Some(b) = &self.extra_node_info {
            let [sockets, cores, threads] = extra_node_info(b)?;
            spec.sockets_per_node = sockets.or(spec.sockets_per_node);
            spec.cores_per_socket = cores;
            spec.threads_per_core = threads;
        }
        if let Some(h) = &self.hint {
            hint(h, &mut spec)?;
        }
        if let Some(c) = &self.cores_per_socket {
            spec.cores_per_socket = Some(count(c, "cores-per-socket")?);
        }
        if let Some(t) = &self.threads_per_core {
            spec.threads_per_core = Some(count(t, "threads-per-core")?);
        }
        if let Some(t) = &self.ntasks_per_core {
            spec.ntasks_per_core = Some(count(t, "ntasks-per-core")?);
        }
        if let Some(p) = &self.profile {
            let l = p.to_ascii_lowercase();
            if !["none", "all", "energy", "task", "lustre", "network"].iter().any(|w| l.contains(w)) {
                return Err(format!("{EXIT_255}invalid --profile={p} option"));
            }
            spec.profile = Some(p.clone());
        }
        if let Some(f) = &self.acctg_freq {
            acctg_freq(f)?;
            spec.acctg_freq = Some(f.clone());
        }

        if let Some(sw) = &self.switches {
            let (n, wait) = sw.split_once('@').map_or((sw.as_str(), None), |(n, w)| (n, Some(w)));
            spec.switches = Some(num(n, "switches")?);
            spec.switch_wait = wait
                .map(|w| match drover_model::duration::parse_time_limit(w) {
                    Ok(Some(secs)) => Ok(secs.min(u64::from(u32::MAX)) as u32),
                    _ => Err(format!("invalid time specification {w}")),
                })
                .transpose()?;
        }
        spec.resolve_per_gpu()?;
        if let Some(l) = &self.licenses {
            drover_model::job::parse_licenses(l)?;
            spec.licenses = Some(l.clone());
        }
        if let Some(a) = &self.array {
            let a = drover_model::array::ArraySpec::parse(a)
                .map_err(|_| format!("{REFUSED}Invalid job array specification"))?;
            spec.array = Some(a.canonical());
        }
        spec.submit_host = crate::common::hostname();
        Ok(Validated { spec })
    }
}

/// A nice value as Slurm reads one (`strtoll`: leading digits, else 0), within ±[`NICE_MAX`].
pub fn parse_nice(s: &str) -> Option<i32> {
    let v = leading_int(s);
    (v.abs() <= drover_model::job::NICE_MAX).then_some(v as i32)
}

/// `--priority=N|TOP`: TOP is the highest priority a job can be given (`NO_VAL - 1`).
pub fn parse_priority(s: &str) -> Result<u32, String> {
    if s.eq_ignore_ascii_case("TOP") {
        return Ok(u32::MAX - 2);
    }
    match leading_int(s) {
        v if v < 0 => Err("Priority must be >= 0".into()),
        v if v >= i64::from(u32::MAX - 1) => Err(format!("Priority must be < {}", u32::MAX - 1)),
        v => Ok(v as u32),
    }
}

/// C's `strtoll(s, NULL, 10)`: an optional sign and the digits that follow; 0 if none.
fn leading_int(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    let v = digits[..end].parse::<i64>().unwrap_or(if end == 0 { 0 } else { i64::MAX });
    if neg {
        -v
    } else {
        v
    }
}

/// Prints a validation error as `prog` (sbatch, salloc, srun) prints it: Slurm's `fatal:`
/// ones as such, the rest as `error:` lines; lines before the last as they are, or as `prog`'s
/// errors where they start with `error: `. Returns the exit status.
pub fn report(prog: &str, e: &str) -> i32 {
    let (before, last) = e.rsplit_once('\n').unwrap_or(("", e));
    for line in before.lines() {
        match line.strip_prefix("error: ") {
            Some(m) => eprintln!("{prog}: error: {m}"),
            None => eprintln!("{line}"),
        }
    }
    if let Some(m) = last.strip_prefix("fatal: ") {
        eprintln!("{prog}: fatal: {m}");
        1
    } else if let Some(m) = last.strip_prefix(EXIT_255) {
        eprintln!("{prog}: error: {m}");
        255
    } else if let Some(m) = last.strip_prefix(REFUSED) {
        let failed = if prog == "sbatch" { "Batch job submission failed" } else { "Unable to allocate resources" };
        eprintln!("{prog}: error: {failed}: {m}");
        1
    } else {
        eprintln!("{prog}: error: {last}");
        1
    }
}

fn validate_signal(s: &str) -> Result<(), String> {
    drover_model::signal::SignalSpec::parse(s).map(|_| ())
}

/// `--export` for a new job: as [`exported_env`], without the variables that name an
/// enclosing allocation.
fn export_env(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut env = exported_env(spec)?;
    env.retain(|(k, _)| !matches!(k.as_str(), "SLURM_JOB_ID" | "SLURM_JOBID"));
    Ok(env)
}

/// `--export`: `ALL` (default), `NONE`, or a list with optional `ALL,` and `VAR=value` items.
pub fn exported_env(spec: &str) -> Result<Vec<(String, String)>, String> {
    let items: Vec<&str> = spec.split(',').filter(|s| !s.is_empty()).collect();
    let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
    let none = items.iter().any(|i| i.eq_ignore_ascii_case("NONE"));
    // Without ALL, only what the list names, and the SLURM_* variables (Slurm's
    // env_array_merge_slurm): NONE too.
    let env: Vec<(String, String)> = if all || (!none && items.is_empty()) {
        crate::common::vars()
    } else {
        crate::common::vars().into_iter().filter(|(k, _)| k.starts_with("SLURM_")).collect()
    };
    let mut env = env;
    for it in items {
        if it.eq_ignore_ascii_case("ALL") || it.eq_ignore_ascii_case("NONE") {
            continue;
        }
        match it.split_once('=') {
            Some((k, v)) => {
                env.retain(|(ek, _)| ek != k);
                env.push((k.to_string(), v.to_string()));
            }
            None => {
                if let Some(v) = std::env::var_os(it) {
                    use std::os::unix::ffi::OsStrExt;
                    env.retain(|(ek, _)| ek != it);
                    env.push((it.to_string(), drover_model::bytes::encode(v.as_bytes())));
                }
            }
        }
    }
    // The submitter's file-creation mask and resource limits go with every job and step
    // whatever --export says (as Slurm's SLURM_UMASK and SLURM_RLIMIT_*): the job creates its
    // files and meets its limits as the user's own shell would.
    if !env.iter().any(|(k, _)| k == "SLURM_UMASK") {
        let mask = std::env::var("SLURM_UMASK").ok().unwrap_or_else(|| format!("{:04o}", current_umask()));
        env.push(("SLURM_UMASK".into(), mask));
    }
    for name in drover_model::rlimits::NAMES {
        let key = format!("{}{name}", drover_proto::rlimit::ENV_PREFIX);
        if env.iter().any(|(k, _)| *k == key) {
            continue;
        }
        if let Some(soft) = soft_limit(name) {
            env.push((key, soft.to_string()));
        }
    }
    Ok(env)
}

/// This process's soft limit `name` (`RLIM_INFINITY` as u64::MAX).
fn soft_limit(name: &str) -> Option<u64> {
    nix::sys::resource::getrlimit(drover_proto::rlimit::resource(name)?).ok().map(|(soft, _)| soft)
}

/// This process's umask. umask(2) only sets it, so it is set and put back: a command is one
/// thread when it builds its request, so nothing else creates a file in between.
pub fn current_umask() -> u32 {
    let m = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    nix::sys::stat::umask(m);
    m.bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_counts_read_as_slurms_verify_node_count() {
        assert_eq!(node_range("4"), Ok((4, Some(4))));
        assert_eq!(node_range(" 2-4"), Ok((2, Some(4))));
        // Slurm's own test suite runs `srun -N-3`: a range without a minimum starts at 1.
        assert_eq!(node_range("-3"), Ok((1, Some(3))));
        assert_eq!(node_range("2-0"), Ok((2, None)));
        assert_eq!(node_range("1k"), Ok((1024, Some(1024))));
        assert_eq!(node_range("x"), Err("255:\"x\" is not a valid node count".into()));
        assert_eq!(node_range("2-y"), Err("255:\"y\" is not a valid node count".into()));
        assert_eq!(node_range("4-2"), Err("255:Maximum node count 2 is less than minimum node count 4".into()));
        assert_eq!(node_range("2-"), Err("255:Maximum node count -1 is less than minimum node count 2".into()));
    }

    #[test]
    fn directives_stop_at_the_first_command() {
        let s = "#!/bin/bash\n#SBATCH -N 2 --ntasks=4\n# comment\n\n#SBATCH   --job-name  \"my job\"\nhostname\n#SBATCH --time=5\n";
        assert_eq!(directives(s, "#SBATCH").unwrap(), ["-N", "2", "--ntasks=4", "--job-name", "my job"]);
    }

    #[test]
    fn later_values_override_earlier_ones() {
        let a = JobArgs::try_parse_from(["x", "-N", "1", "--nodes=3", "-J", "a", "--job-name", "b"]).unwrap();
        assert_eq!(a.nodes.as_deref(), Some("3"));
        assert_eq!(a.job_name.as_deref(), Some("b"));
    }

    #[test]
    fn validates_counts_and_limits() {
        let a = JobArgs::try_parse_from(["x", "-N", "2-4", "-t", "1-00:00:00", "--mem=4G"]).unwrap();
        let v = a.validate(true).unwrap();
        assert_eq!((v.spec.min_nodes, v.spec.max_nodes), (Some(2), Some(4)));
        assert_eq!(v.spec.time_limit, Some(Some(86400)));
        assert_eq!(v.spec.mem_per_node_mb, Some(4096));
        let bad = JobArgs::try_parse_from(["x", "-t", "abc"]).unwrap();
        assert!(bad.validate(true).is_err());
        let bad = JobArgs::try_parse_from(["x", "-N", "0"]).unwrap();
        assert!(bad.validate(true).is_err());
    }

    /// The node-shape, time and accounting options as Slurm's option parsers read them, and
    /// their errors in Slurm's words (a `255:` prefix: sbatch leaves with 255).
    #[test]
    fn node_shape_time_and_accounting_options() {
        let spec = |args: &[&str]| {
            let mut all = vec!["x"];
            all.extend_from_slice(args);
            JobArgs::try_parse_from(all).unwrap().validate(true).map(|v| v.spec)
        };
        let s = spec(&["-B", "2:*:1", "--ntasks-per-core=1", "--mincpus=3", "-s", "-k"]).unwrap();
        assert_eq!((s.sockets_per_node, s.cores_per_socket, s.threads_per_core), (Some(2), None, Some(1)));
        assert_eq!(
            (s.ntasks_per_core, s.min_cpus_per_node, s.oversubscribe, s.no_kill),
            (Some(1), Some(3), true, true)
        );
        assert!(!spec(&["--no-kill=off"]).unwrap().no_kill);
        assert_eq!(spec(&["-B", "x:y:z:w"]).unwrap_err(), "Invalid numeric value \"x\" for first arg of -B.");
        assert_eq!(spec(&["-B", "1:2:3:4"]).unwrap_err(), "255:Invalid --extra-node-info specification");
        let s = spec(&["--hint=memory_bound"]).unwrap();
        assert_eq!((s.cores_per_socket, s.threads_per_core), (Some(1), Some(1)));
        assert_eq!(spec(&["--hint=multithread"]).unwrap().threads_per_core, None);
        assert_eq!(spec(&["--hint=x"]).unwrap_err(), "unrecognized --hint argument \"x\", see --hint=help");
        // --time-min rounds up to minutes; 0 is none.
        assert_eq!(spec(&["--time-min=90"]).unwrap().time_min, Some(5400));
        assert_eq!(spec(&["--time-min=0:30"]).unwrap().time_min, Some(60));
        assert_eq!(spec(&["--time-min=0"]).unwrap().time_min, None);
        assert_eq!(spec(&["--time-min=x"]).unwrap_err(), "255:Invalid --time-min specification");
        assert_eq!(spec(&["--kill-on-invalid-dep=No"]).unwrap().kill_on_invalid_dep, Some(false));
        assert_eq!(spec(&["--kill-on-invalid-dep=x"]).unwrap_err(), "255:Invalid --kill-on-invalid-dep specification");
        assert!(spec(&["--deadline=bogus"]).unwrap_err().ends_with("\n255:Invalid --deadline specification"));
        assert!(spec(&["--deadline=2030-01-01T00:00:00"]).unwrap().deadline.is_some());
        assert!(spec(&["--acctg-freq=task=10,energy=0", "--profile=task,energy"]).is_ok());
        assert!(spec(&["--acctg-freq=30"]).is_ok());
        assert_eq!(
            spec(&["--acctg-freq=bogus=5,task=x"]).unwrap_err(),
            "error: Invalid --acctg-freq specification: bogus=5\n255:Invalid --acctg-freq specification: task=x"
        );
        assert_eq!(spec(&["--profile=bogus"]).unwrap_err(), "255:invalid --profile=bogus option");
    }

    #[test]
    fn mail_types_print_back_in_slurms_order() {
        assert_eq!(mail_type_text("fail,end"), "END,FAIL");
        assert_eq!(mail_type_text("ALL,time_limit_50"), "BEGIN,END,FAIL,REQUEUE,STAGE_OUT,TIME_LIMIT_50");
        assert_eq!(mail_type_text("NONE"), "NONE");
    }

    #[test]
    fn nice_and_priority_as_slurm_reads_them() {
        let nice = |args: &[&str]| JobArgs::try_parse_from(args).unwrap().validate(true).map(|v| v.spec.nice);
        assert_eq!(nice(&["x", "--nice"]), Ok(100));
        assert_eq!(nice(&["x", "--nice=-20"]), Ok(-20));
        assert_eq!(nice(&["x", "--nice=12abc"]), Ok(12));
        assert_eq!(nice(&["x", "--nice=2147483645"]), Ok(2_147_483_645));
        assert_eq!(
            nice(&["x", "--nice=-2147483646"]),
            Err("Invalid --nice value, out of range (+/- 2147483645)".into())
        );
        assert_eq!(parse_priority("top"), Ok(4_294_967_293));
        assert_eq!(parse_priority("500"), Ok(500));
        assert_eq!(parse_priority("-1"), Err("Priority must be >= 0".into()));
        assert_eq!(parse_priority("4294967294"), Err("Priority must be < 4294967294".into()));
    }

    proptest::proptest! {
        #[test]
        fn directive_parsing_never_panics(s in "[#!SBATCH \\t\\n'\"\\\\a-z=-]{0,80}") {
            let _ = shell_words(&s);
            let _ = directives(&s, "#SBATCH");
        }
    }

    #[test]
    fn shell_words_handle_quotes() {
        assert_eq!(shell_words(r#"--a="x y" 'b c' d\ e # tail"#).unwrap(), ["--a=x y", "b c", "d e"]);
    }
}

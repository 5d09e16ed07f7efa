//! `squeue`: the queue, in Slurm's formats.

use crate::common;
use crate::format::{self, Item};
use crate::jobview::{self, squeue_header};
use clap::Parser;
use drover_model::state::JobState;
use drover_proto::v1;

#[derive(Parser, Debug)]
#[command(
    name = "squeue",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct Args {
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    #[arg(short = 'j', long = "jobs", num_args = 0..=1, default_missing_value = "")]
    jobs: Vec<String>,
    #[arg(short = 'u', long = "user")]
    users: Option<String>,
    #[arg(long = "me")]
    me: bool,
    #[arg(short = 'p', long = "partition")]
    partitions: Option<String>,
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    #[arg(short = 'n', long = "name")]
    names: Option<String>,
    #[arg(short = 'w', long = "nodelist")]
    nodes: Option<String>,
    // getopt takes the next word whatever it is: `-S -p` sorts by descending priority.
    #[arg(short = 'S', long = "sort", allow_hyphen_values = true)]
    sort: Option<String>,
    #[arg(short = 'r', long = "array")]
    array: bool,
    #[arg(long = "start")]
    start: bool,
    #[arg(long = "json")]
    json: bool,
    #[arg(short = 'a', long = "all")]
    all: bool,
    #[arg(short = 'A', long = "account")]
    account: Option<String>,
    #[arg(short = 'q', long = "qos")]
    qos: Option<String>,
    #[arg(short = 'L', long = "licenses")]
    licenses: Option<String>,
    #[arg(short = 'R', long = "reservation")]
    reservation: Option<String>,
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    #[arg(short = 'i', long = "iterate")]
    iterate: Option<String>,
    #[arg(short = 's', long = "steps", num_args = 0..=1, default_missing_value = "")]
    steps: Option<String>,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(flatten)]
    std: common::StdFlags,
    /// Job ids may also be given bare.
    #[arg(trailing_var_arg = true)]
    rest: Vec<String>,
}

const DEFAULT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

/// `-O` fields with no `%` code of their own (or another header than the code's), as
/// (lowercase name, header): each is a code of Unicode's private use area from
/// [`EXTRA_BASE`] on, by its place here, answered by [`jobview::squeue_extra`].
pub(crate) const EXTRA: &[(&str, &str)] = &[
    ("accruetime", "ACCRUE_TIME"),
    ("admin_comment", "ADMIN_COMMENT"),
    ("allocnodes", "ALLOC_NODES"),
    ("batchflag", "BATCH_FLAG"),
    ("boardspernode", "BOARDS_PER_NODE"),
    ("burstbuffer", "BURST_BUFFER"),
    ("burstbufferstate", "BURST_BUFFER_STATE"),
    ("cluster", "CLUSTER"),
    ("clusterfeature", "CLUSTER_FEATURES"),
    ("container", "CONTAINER"),
    ("contiguous", "CONTIGUOUS"),
    ("cores", "CORES_PER_SOCKET"),
    ("corespec", "CORE_SPEC"),
    ("cpus-per-task", "CPUS_PER_TASK"),
    ("cpuspertask", "CPUS_PER_TASK"),
    ("cpus-per-tres", "CPUS_PER_TRES"),
    ("deadline", "DEADLINE"),
    ("delayboot", "DELAY_BOOT"),
    ("derivedec", "DERIVED_EC"),
    ("eligibletime", "ELIGIBLE_TIME"),
    ("exit_code", "EXIT_CODE"),
    ("hetjobid", "HET_JOB_ID"),
    ("hetjobidset", "HET_JOB_ID_SET"),
    ("hetjoboffset", "HET_JOB_OFFSET"),
    ("licenses", "LICENSES"),
    ("maxcpus", "MAX_CPUS"),
    ("maxnodes", "MAX_NODES"),
    ("mcslabel", "MCSLABEL"),
    ("mem-per-tres", "MEM_PER_TRES"),
    ("mincpus", "MIN_CPUS"),
    ("mintime", "TIME_MIN"),
    ("mintmpdisk", "MIN_TMP_DISK"),
    ("network", "NETWORK"),
    ("numtasks", "TASKS"),
    ("ntperboard", "NTASKS_PER_BOARD"),
    ("ntpercore", "NTASKS_PER_CORE"),
    ("ntpernode", "NTASKS_PER_NODE"),
    ("ntpersocket", "NTASKS_PER_SOCKET"),
    ("origin", "ORIGIN"),
    ("originraw", "ORIGIN_RAW"),
    ("oversubscribe", "OVER_SUBSCRIBE"),
    ("shared", "OVER_SUBSCRIBE"),
    ("preempttime", "PREEMPT_TIME"),
    ("prefer", "PREFER"),
    ("profile", "PROFILE"),
    // -O's ReasonList: a waiting job's reason cut to the column (a node list is whole), where
    // -o's %R prints both whole.
    ("reasonlist", "NODELIST(REASON)"),
    ("reboot", "REBOOT"),
    ("reqswitch", "REQ_SWITCH"),
    ("requeue", "REQUEUE"),
    ("resizetime", "RESIZE_TIME"),
    ("restartcnt", "RESTART_COUNT"),
    ("sct", "S:C:T"),
    ("siblingsactive", "ACTIVE_SIBLINGS"),
    ("siblingsactiveraw", "ACTIVE_SIBLINGS_RAW"),
    ("siblingsviable", "VIABLE_SIBLINGS"),
    // Slurm 22.05's own spelling.
    ("siblingsviableraw", "VIALBLE_SIBLINGS_RAW"),
    ("sockets", "SOCKETS_PER_NODE"),
    ("sperboard", "SOCKETS_PER_BOARD"),
    ("stderr", "STDERR"),
    ("stdin", "STDIN"),
    ("stdout", "STDOUT"),
    ("system_comment", "SYSTEM_COMMENT"),
    ("threads", "THREADS_PER_CORE"),
    ("tres-alloc", "TRES_ALLOC"),
    ("tres-bind", "TRES_BIND"),
    ("tres-freq", "TRES_FREQ"),
    ("tres-per-job", "TRES_PER_JOB"),
    ("tres-per-node", "TRES_PER_NODE"),
    ("gres", "TRES_PER_NODE"),
    ("tres-per-socket", "TRES_PER_SOCKET"),
    ("tres-per-task", "TRES_PER_TASK"),
    ("wait4switch", "WAIT4SWITCH"),
    ("wckey", "WCKEY"),
];

/// The first code of [`EXTRA`].
pub(crate) const EXTRA_BASE: u32 = 0xE000;

/// `-O` long field names and the `%` code each stands for.
fn long_field(name: &str) -> Option<char> {
    let lower = name.to_ascii_lowercase();
    if let Some(i) = EXTRA.iter().position(|(n, _)| *n == lower) {
        return char::from_u32(EXTRA_BASE + i as u32);
    }
    Some(match lower.as_str() {
        "account" => 'a',
        "arrayjobid" => 'F',
        "arraytaskid" => 'K',
        "batchhost" => 'B',
        "command" => 'o',
        "comment" => 'k',
        "dependency" => 'E',
        "endtime" => 'e',
        "feature" => 'f',
        "groupid" => 'G',
        "groupname" => 'g',
        // JobID is each job's own id (a pending array's is its base id); JobArrayID is
        // `12_[1-3]`, `12_1`.
        "jobid" => 'A',
        "jobarrayid" => 'i',
        "minmemory" => 'm',
        "name" => 'j',
        "nice" => 'y',
        "nodelist" => 'N',
        "numcpus" => 'C',
        "numnodes" => 'D',
        "partition" => 'P',
        "priority" => 'p',
        "prioritylong" => 'Q',
        "qos" => 'q',
        "reason" => 'r',
        "reqnodes" => 'n',
        "reservation" => 'v',
        "starttime" => 'S',
        "state" => 'T',
        "statecompact" => 't',
        "submittime" => 'V',
        "timeleft" => 'L',
        "timelimit" => 'l',
        "timeused" => 'M',
        "userid" => 'U',
        "username" => 'u',
        "workdir" => 'Z',
        "schednodes" => 'Y',
        _ => return None,
    })
}

pub(crate) fn parse_long_format(spec: &str) -> (Vec<Item>, Vec<String>) {
    long_items(spec, long_field, "job")
}

/// `-O Name[:[.][width][suffix]],...` as format items, each name's code from `code`: 20 wide
/// by default, the width the whole column's (no separator between columns), what follows
/// the width's digits printed after the field, as squeue's `_parse_long_token` reads it. An
/// unknown name is left out, and what to say about it (a `what` format) is returned beside
/// the items: Slurm reports it and goes on.
pub(crate) fn long_items(spec: &str, code: impl Fn(&str) -> Option<char>, what: &str) -> (Vec<Item>, Vec<String>) {
    let (mut items, mut errors) = (Vec::new(), Vec::new());
    for f in spec.split(',').filter(|f| !f.is_empty()) {
        let (name, width, right, suffix) = format::long_token(f);
        let Some(code) = code(name) else {
            errors.push(format!("Invalid {what} format specification: {name}"));
            continue;
        };
        format::push_long_field(&mut items, code, width, right, suffix);
    }
    (items, errors)
}

/// The request fields (`JobSpec` tags) the text output will not read with these items: the
/// workers skip them instead of copying and checking them (paths, submit lines, mail...).
fn spec_skip(items: &[Item]) -> Vec<u32> {
    let codes: Vec<char> =
        items.iter().filter_map(|i| if let Item::Field { code, .. } = i { Some(*code) } else { None }).collect();
    // script, stdout, stderr, stdin, environment, mail type/user, signal, submit host/line, io,
    // array expression (the record's array fields carry what squeue prints).
    let mut skip = vec![23, 26, 27, 28, 29, 31, 32, 33, 36, 37, 40, 41];
    for (code, tag) in [('n', 16), ('x', 17), ('f', 18), ('E', 22), ('o', 24), ('Z', 25), ('k', 30)] {
        if !codes.contains(&code) {
            skip.push(tag);
        }
    }
    // -O STDOUT, STDERR (which falls back on stdout) and STDIN read their paths.
    let wants = |name: &str| long_field(name).is_some_and(|c| codes.contains(&c));
    if wants("stdout") || wants("stderr") {
        skip.retain(|t| *t != 26);
    }
    if wants("stderr") {
        skip.retain(|t| *t != 27);
    }
    if wants("stdin") {
        skip.retain(|t| *t != 28);
    }
    skip
}

/// Sort keys (`-S`): each key's field and direction.
pub(crate) fn parse_sort(keys: &str) -> Vec<(bool, char)> {
    keys.split(',')
        .filter_map(|k| {
            let desc = k.starts_with('-');
            let k = k.trim_start_matches(['-', '+']);
            k.chars().next().map(|c| (desc, c))
        })
        .collect()
}

/// Appends the job's sort key in an order-preserving byte encoding: comparing two keys as
/// bytes compares the jobs by every `-S` field in turn, then by job id. Strings escape NUL
/// and end with a terminator, numbers are big-endian, and a descending field is inverted, so
/// the encoding stays prefix-free and a whole queue sorts with one `memcmp` per comparison.
fn push_sort_key(out: &mut Vec<u8>, j: &v1::JobInfo, keys: &[(bool, char)], now: i64) {
    fn text(out: &mut Vec<u8>, s: &str) {
        for &b in s.as_bytes() {
            out.push(b);
            if b == 0 {
                out.push(0xff);
            }
        }
        out.extend_from_slice(&[0, 1]);
    }
    fn num(out: &mut Vec<u8>, n: u64) {
        out.extend_from_slice(&n.to_be_bytes());
    }
    fn signed(out: &mut Vec<u8>, n: i64) {
        num(out, (n as u64) ^ (1 << 63));
    }
    for &(desc, key) in keys {
        let at = out.len();
        match key {
            'P' => text(out, &j.partition),
            // By the state's name, as Slurm compares them (CA < CD < CG < PD < R).
            't' => match JobState::parse(&j.state) {
                Some(st) => text(out, st.short()),
                None => text(out, &j.state),
            },
            'T' => text(out, &j.state),
            'p' | 'Q' => num(out, j.priority),
            // An array's tasks by their array and task id, its pending remainder after them
            // (its task id is Slurm's NO_VAL), as Slurm's `_sort_job_by_id`.
            'i' => match j.array_task_id {
                Some(t) if j.array_job_id != 0 => {
                    num(out, u64::from(j.array_job_id));
                    num(out, u64::from(t));
                }
                _ => {
                    num(out, u64::from(j.job_id));
                    num(out, u64::from(if j.array_job_id != 0 { 0xffff_fffe_u32 } else { 0 }));
                }
            },
            'A' => num(out, u64::from(j.job_id)),
            'j' => text(out, &jobview::spec(j).name),
            'u' => text(out, &jobview::user(j)),
            'S' => signed(out, if j.start_time > 0 { j.start_time } else { j.planned_start }),
            'V' => signed(out, j.submit_time),
            'M' => num(out, jobview::used(j, now)),
            'D' => num(out, u64::from(jobview::num_nodes(j))),
            'C' => num(out, u64::from(jobview::num_cpus(j))),
            'N' => text(out, &j.nodes),
            'y' => signed(out, i64::from(jobview::spec(j).nice)),
            _ => {}
        }
        if desc {
            out[at..].iter_mut().for_each(|b| *b = !*b);
        }
    }
    num(out, u64::from(j.job_id));
    num(out, u64::from(j.array_task_id.unwrap_or(0)));
}

/// Which jobs the command line selects.
struct Filter {
    /// `-j N_M`: array elements asked for, as (array id, tasks).
    elements: Vec<(u32, Option<drover_model::array::TaskSet>)>,
    states: Option<Vec<String>>,
    users: Option<Vec<String>>,
    parts: Option<Vec<String>>,
    names: Option<Vec<String>>,
    nodes: Option<Vec<String>>,
    /// `-A`, `-q`: matched whatever their case, as squeue's `_filter_job` does.
    accounts: Option<Vec<String>>,
    qos: Option<Vec<String>>,
    /// `-L`: a job whose licenses name one of these (a substring of one of its `name:count`).
    licenses: Option<Vec<String>>,
    /// `-R`: the job's reservation, exactly.
    reservation: Option<String>,
}

impl Filter {
    /// Whether a record (or, with `task`, one pending task of an array's remainder) is among
    /// the ids asked for.
    fn element_ok(&self, j: &v1::JobInfo, task: Option<u32>) -> bool {
        self.elements.is_empty()
            || self.elements.iter().any(|(id, tasks)| match tasks {
                None => j.job_id == *id || j.array_job_id == *id,
                Some(set) => j.array_job_id == *id && task.is_some_and(|t| set.contains(t)),
            })
    }

    /// Whether an array's remainder must be listed task by task for these ids.
    fn wants_elements_of(&self, array: u32) -> bool {
        self.elements.iter().any(|(id, tasks)| *id == array && tasks.is_some())
    }

    fn keep(&self, j: &v1::JobInfo) -> bool {
        let st = JobState::parse(&j.state);
        let state_ok = match &self.states {
            Some(list) => list.iter().any(|s| s == "ALL" || JobState::parse(s).is_some_and(|want| Some(want) == st)),
            // Pending, running and completing, whether or not ids were given (real squeue -j
            // of a completed job within MinJobAge prints the header alone).
            None => st.is_some_and(|s| !s.is_finished()),
        };
        state_ok
            && self.users.as_ref().is_none_or(|u| {
                let uid = jobview::spec(j).uid;
                u.iter().any(|x| *x == jobview::user(j) || x.parse::<u32>() == Ok(uid))
            })
            && self.parts.as_ref().is_none_or(|p| p.contains(&j.partition))
            && self.names.as_ref().is_none_or(|n| n.contains(&jobview::spec(j).name))
            && self.nodes.as_ref().is_none_or(|n| j.alloc.iter().any(|a| n.contains(&a.node)))
            && self.accounts.as_ref().is_none_or(|l| {
                let have = drover_proto::jobinfo::account(jobview::spec(j));
                l.iter().any(|x| x.eq_ignore_ascii_case(have))
            })
            && self.qos.as_ref().is_none_or(|l| {
                let have = drover_proto::jobinfo::qos(jobview::spec(j));
                l.iter().any(|x| x.eq_ignore_ascii_case(have))
            })
            && self.licenses.as_ref().is_none_or(|l| {
                let have = jobview::spec(j).licenses.as_deref().unwrap_or("");
                have.split(',').any(|token| !token.is_empty() && l.iter().any(|x| token.contains(x.as_str())))
            })
            && self.reservation.as_ref().is_none_or(|r| jobview::spec(j).reservation.as_deref() == Some(r.as_str()))
    }
}

/// A comma-separated option's words.
fn list(v: &Option<String>) -> Option<Vec<String>> {
    v.as_ref().map(|s| s.split(',').filter(|x| !x.is_empty()).map(String::from).collect())
}

/// The job states squeue knows, in the order its error lists them.
const JOB_STATES: &str = "PENDING,RUNNING,SUSPENDED,COMPLETED,CANCELLED,FAILED,TIMEOUT,NODE_FAIL,PREEMPTED,\
BOOT_FAIL,DEADLINE,OUT_OF_MEMORY,COMPLETING,CONFIGURING,RESIZING,RESV_DEL_HOLD,REQUEUED,REQUEUE_FED,REQUEUE_HOLD,\
REVOKED,SIGNALING,SPECIAL_EXIT,STAGE_OUT,STOPPED";

/// The first of `-t`'s states that is none of Slurm's (long or short names, or `all`).
fn bad_job_state(list: &str) -> Option<&str> {
    const SHORT: &[&str] = &[
        "PD", "R", "S", "CD", "CA", "F", "TO", "NF", "PR", "BF", "DL", "OOM", "CG", "CF", "RS", "RD", "RQ", "RF", "RH",
        "RV", "SI", "SE", "SO", "ST",
    ];
    list.split(',').filter(|s| !s.is_empty()).find(|s| {
        let u = s.to_ascii_uppercase();
        u != "ALL" && !SHORT.contains(&u.as_str()) && !JOB_STATES.split(',').any(|n| n == u)
    })
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("squeue", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if let Some(steps) = &a.steps {
        return steps_main(&a, steps);
    }
    // Bare words are job ids only after a bare -j (getopt's optional argument), as squeue's
    // opts.c takes them.
    if let Some(word) = a.rest.first().filter(|_| !a.jobs.iter().any(|j| j.is_empty())) {
        eprintln!("squeue: error: Unrecognized option: {word}");
        crate::help::print("squeue", true);
        return 1;
    }
    // Slurm's error() line, and a newline of its format string's own.
    let every = match common::iterate_opt(a.iterate.as_deref(), "squeue: error: --iterate=") {
        Ok(e) => e,
        Err(code) => {
            eprintln!();
            return code;
        }
    };
    common::repeat(every, |dated| show(&a, dated))
}

/// One listing; `dated`: with the date line above the header (`-i`, as `-l` has it).
fn show(a: &Args, dated: bool) -> i32 {
    let targets = match common::parse_targets(a.jobs.iter().chain(a.rest.iter())) {
        Ok(t) => t,
        Err(id) => {
            eprintln!("squeue: error: Invalid job id: {id}");
            return 1;
        }
    };
    let job_ids: Vec<u32> = targets.iter().map(|t| t.job_id).collect();
    let elements = targets
        .iter()
        .map(|t| {
            let tasks = t.tasks.as_deref().and_then(|e| drover_model::array::ArraySpec::parse(e).ok()).map(|a| a.tasks);
            (t.job_id, tasks)
        })
        .collect();
    let cfg = match common::config_for("squeue") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let _ = jobview::CLUSTER.set(cfg.cluster_name.clone());
    if let Err(code) = common::check_clusters("squeue", a.clusters.as_deref(), &cfg.cluster_name) {
        return code;
    }
    let timing = std::env::var_os("DROVER_TIMING").is_some();
    if let Some(bad) = a.states.as_deref().and_then(bad_job_state) {
        eprintln!("squeue: error: Invalid job state specified: {bad}");
        eprintln!("squeue: error: Valid job states include: {JOB_STATES}\n");
        return 1;
    }
    // A node the cluster does not have is refused; a user who does not exist is reported and
    // shows no job (Slurm's words; the empty line is its).
    if let Some(n) = &a.nodes {
        let names = drover_model::hostlist::Hostlist::parse(n).map(|h| h.names()).unwrap_or_default();
        if let Some(bad) = names.iter().find(|x| cfg.node(x).is_none()).or(names.is_empty().then_some(n)) {
            eprintln!("squeue: error: Invalid node name {bad}");
            return 1;
        }
    }
    if !a.me {
        for u in a.users.iter().flat_map(|u| u.split(',')) {
            if u.parse::<u32>().is_err() && nix::unistd::User::from_name(u).ok().flatten().is_none() {
                eprintln!("squeue: error: Invalid user: {u}\n");
            }
        }
    }
    let t0 = std::time::Instant::now();
    let active_only = a.states.is_none();
    let req = v1::StateRequest { job_ids: job_ids.clone(), jobs: true, active_only, ..Default::default() };
    let filter = Filter {
        elements,
        states: a.states.as_ref().map(|s| s.split(',').map(|x| x.to_ascii_uppercase()).collect()),
        users: if a.me {
            Some(vec![common::user_name(nix::unistd::getuid().as_raw())])
        } else {
            a.users.as_ref().map(|u| u.split(',').map(String::from).collect())
        },
        parts: a.partitions.as_ref().map(|p| p.split(',').map(String::from).collect()),
        names: a.names.as_ref().map(|p| p.split(',').map(String::from).collect()),
        nodes: a.nodes.as_ref().and_then(|n| drover_model::hostlist::Hostlist::parse(n).ok()).map(|h| h.names()),
        accounts: list(&a.account),
        qos: list(&a.qos),
        licenses: list(&a.licenses),
        reservation: a.reservation.clone(),
    };
    let sort = a.sort.clone().or_else(|| std::env::var("SQUEUE_SORT").ok()).unwrap_or_else(|| {
        if a.start {
            "S".into()
        } else {
            "P,t,-p".into()
        }
    });
    let sort = parse_sort(&sort);
    let items = if let Some(f) = &a.format_long {
        let (items, errors) = parse_long_format(f);
        for e in errors {
            eprintln!("squeue: error: {e}");
        }
        items
    } else {
        let fmt = a.format.clone().or_else(|| std::env::var("SQUEUE_FORMAT").ok()).unwrap_or_else(|| {
            if a.start {
                START.into()
            } else if a.long {
                LONG.into()
            } else {
                DEFAULT.into()
            }
        });
        format::parse(&fmt)
    };
    // One pass over the records as they stream in. Workers (one per core, at most four) each
    // take whole batches: decode each record into one reused message, keep it or not, and
    // render its line and sort key into their own arenas; nothing per job outlives its turn.
    let mut now = 0;
    let mut cluster = String::new();
    let mut seen = 0usize;
    let mut kept: Vec<v1::JobInfo> = Vec::new();
    let workers = if a.json { 0 } else { std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4) };
    let skip = spec_skip(&items);
    let (r, lines) = std::thread::scope(|scope| {
        let mut queues = Vec::new();
        let mut done = Vec::new();
        for _ in 0..workers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(i64, Vec<drover_proto::bytes::Bytes>)>(8);
            queues.push(tx);
            let (filter, items, sort, start, skip, expand) = (&filter, &items, &sort, a.start, &skip, a.array);
            done.push(scope.spawn(move || {
                let mut lines = Lines::default();
                let mut j = v1::JobInfo::default();
                let mut scratch = String::new();
                for (now, records) in rx {
                    for r in &records {
                        if drover_proto::decode_job_partial(&mut j, r, skip).is_ok()
                            && filter.keep(&j)
                            && (!start || jobview::is_pending(&j))
                        {
                            // `-r` (or ids of single tasks) lists an array's remainder task
                            // by task, each line as if the task had a record of its own.
                            let split =
                                jobview::is_array_remainder(&j) && (expand || filter.wants_elements_of(j.array_job_id));
                            if let Some(tasks) = jobview::array_pending(&j).filter(|_| split) {
                                for t in tasks.iter() {
                                    if filter.element_ok(&j, Some(t)) {
                                        j.array_task_id = Some(t);
                                        lines.push(&j, items, sort, now, &mut scratch);
                                    }
                                }
                                j.array_task_id = None;
                            } else if filter.element_ok(&j, j.array_task_id) {
                                lines.push(&j, items, sort, now, &mut scratch);
                            }
                        }
                    }
                }
                lines
            }));
        }
        let mut next = 0;
        let r = common::list_jobs(&cfg, req, |batch| {
            now = batch.now;
            cluster = batch.cluster_name;
            seen += batch.job_records.len();
            if queues.is_empty() {
                let mut j = v1::JobInfo::default();
                for r in &batch.job_records {
                    if drover_proto::decode_job_into(&mut j, r).is_ok() && filter.keep(&j) {
                        kept.push(j.clone());
                    }
                }
            } else if !batch.job_records.is_empty() {
                let _ = queues[next % queues.len()].send((batch.now, batch.job_records));
                next += 1;
            }
        });
        drop(queues);
        let mut lines = Lines::default();
        for d in done {
            lines.append(d.join().expect("invariant: a squeue worker does not panic"));
        }
        (r, lines)
    });
    if let Err(e) = r {
        eprintln!("slurm_load_jobs error: {e}");
        return 1;
    }
    if timing {
        eprintln!("fetch+render {:?}", t0.elapsed());
    }
    if !job_ids.is_empty() && seen == 0 {
        eprintln!("slurm_load_jobs error: Invalid job id specified");
        return 1;
    }
    if a.json {
        println!("{}", crate::json::squeue_json(&kept, &cluster, now));
        return 0;
    }
    let order = lines.sorted();
    if timing {
        eprintln!("sort {:?}", t0.elapsed());
    }
    let mut out = Vec::with_capacity(lines.text.len() + 256);
    if (a.long || dated) && !a.noheader {
        out.extend_from_slice(common::fmt_header_date(now).as_bytes());
        out.push(b'\n');
    }
    if !a.noheader {
        out.extend_from_slice(format::render(&items, |c| squeue_header(c).to_string()).as_bytes());
        out.push(b'\n');
    }
    for i in order {
        out.extend_from_slice(lines.line(i).as_bytes());
    }
    common::write_stdout(&drover_model::bytes::decode_output(&out));
    if timing {
        eprintln!("write {:?}", t0.elapsed());
    }
    0
}

/// `squeue -s`: the steps of running jobs (`-s12.0,13.batch` picks some; `-j`, `-u`, `-p`
/// filter them).
fn steps_main(a: &Args, steps: &str) -> i32 {
    let wanted = match common::parse_targets(std::iter::once(&steps.to_string()).chain(a.rest.iter())) {
        Ok(t) => t,
        Err(id) => {
            eprintln!("squeue: error: Invalid job step id: {id}");
            return 1;
        }
    };
    let jobs_of = match common::parse_targets(a.jobs.iter()) {
        Ok(t) => t,
        Err(id) => {
            eprintln!("squeue: error: Invalid job id: {id}");
            return 1;
        }
    };
    let cfg = match common::config_for("squeue") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let _ = jobview::CLUSTER.set(cfg.cluster_name.clone());
    let mut reply =
        match common::fetch_state(&cfg, v1::StateRequest { jobs: true, active_only: true, ..Default::default() }) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("slurm_load_jobs error: {e}");
                return 1;
            }
        };
    let jobs = drover_proto::reply_jobs(&mut reply);
    let mut rows = crate::steps::rows(&jobs);
    // Slurm's default step order: partition, then job id and step id.
    rows.sort_by(|x, y| (&x.job.partition, x.job.job_id, x.id).cmp(&(&y.job.partition, y.job.job_id, y.id)));
    let users: Option<Vec<String>> = if a.me {
        Some(vec![common::user_name(nix::unistd::getuid().as_raw())])
    } else {
        a.users.as_ref().map(|u| u.split(',').map(String::from).collect())
    };
    let parts: Option<Vec<String>> = a.partitions.as_ref().map(|p| p.split(',').map(String::from).collect());
    let items = match &a.format_long {
        Some(spec) => {
            let (items, errors) = crate::steps::squeue_long_items(spec);
            for e in errors {
                eprintln!("squeue: error: {e}");
            }
            items
        }
        None => crate::format::parse(&a.format.clone().unwrap_or_else(|| crate::steps::SQUEUE_DEFAULT.into())),
    };
    let (text, errors) = crate::steps::squeue_text(&rows, items, !a.noheader, a.long, reply.now, |r| {
        let id_ok =
            wanted.is_empty() || wanted.iter().any(|t| t.job_id == r.job.job_id && t.step_id.is_none_or(|s| s == r.id));
        let job_ok = jobs_of.is_empty() || jobs_of.iter().any(|t| t.job_id == r.job.job_id);
        let user_ok = users.as_ref().is_none_or(|u| {
            let spec = jobview::spec(r.job);
            u.iter().any(|x| *x == spec.user || *x == spec.uid.to_string())
        });
        let part_ok = parts.as_ref().is_none_or(|p| p.contains(&r.job.partition));
        id_ok && job_ok && user_ok && part_ok
    });
    print!("{text}");
    for e in errors {
        eprintln!("squeue: error: {e}");
    }
    0
}

/// Rendered lines and their sort keys, each in one arena.
/// What squeue prints whole however narrow its column (Slurm's print.c passes no cut for
/// them): times left, limits and used, node lists, the reason list, and a pending array's
/// `N_[1-3]`.
fn uncut(code: char, value: &str) -> bool {
    matches!(code, 'L' | 'l' | 'M' | 'N' | 'Y' | 'R')
        || (code == 'i' && value.contains('['))
        || (Some(code) == *REASON_LIST_LONG && !value.starts_with('('))
}

/// `-O ReasonList`'s code, found once: [`uncut`] is asked about every field of every line.
static REASON_LIST_LONG: std::sync::LazyLock<Option<char>> = std::sync::LazyLock::new(|| long_field("reasonlist"));

#[derive(Default)]
struct Lines {
    text: String,
    text_ends: Vec<usize>,
    keys: Vec<u8>,
    key_ends: Vec<usize>,
}

impl Lines {
    fn push(&mut self, j: &v1::JobInfo, items: &[Item], sort: &[(bool, char)], now: i64, scratch: &mut String) {
        format::render_fields_uncut_into(
            &mut self.text,
            items,
            scratch,
            &mut |buf, c| jobview::squeue_field_into(buf, j, c, now),
            &uncut,
        );
        self.text.push('\n');
        self.text_ends.push(self.text.len());
        push_sort_key(&mut self.keys, j, sort, now);
        self.key_ends.push(self.keys.len());
    }

    /// Takes another arena's lines after this one's.
    fn append(&mut self, other: Lines) {
        if self.text_ends.is_empty() {
            *self = other;
            return;
        }
        let (t, k) = (self.text.len(), self.keys.len());
        self.text.push_str(&other.text);
        self.text_ends.extend(other.text_ends.iter().map(|e| e + t));
        self.keys.extend_from_slice(&other.keys);
        self.key_ends.extend(other.key_ends.iter().map(|e| e + k));
    }

    fn range(ends: &[usize], i: usize) -> std::ops::Range<usize> {
        let start = if i == 0 { 0 } else { ends[i - 1] };
        start..ends[i]
    }

    fn line(&self, i: usize) -> &str {
        &self.text[Self::range(&self.text_ends, i)]
    }

    fn sorted(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.key_ends.len()).collect();
        order.sort_by(|&x, &y| {
            self.keys[Self::range(&self.key_ends, x)].cmp(&self.keys[Self::range(&self.key_ends, y)])
        });
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, partition: &str, state: &str, priority: u64, name: &str) -> v1::JobInfo {
        v1::JobInfo {
            job_id: id,
            partition: partition.into(),
            state: state.into(),
            priority,
            spec: Some(v1::JobSpec { name: name.into(), ..Default::default() }),
            ..Default::default()
        }
    }

    fn order(jobs: &[v1::JobInfo], keys: &str) -> Vec<u32> {
        let items = format::parse("%i");
        let sort = parse_sort(keys);
        let mut halves = [Lines::default(), Lines::default()];
        let mut scratch = String::new();
        for (i, j) in jobs.iter().enumerate() {
            halves[i % 2].push(j, &items, &sort, 0, &mut scratch);
        }
        let [mut a, b] = halves;
        a.append(b);
        a.sorted().into_iter().map(|i| a.line(i).trim().parse().unwrap()).collect()
    }

    #[test]
    fn sort_keys_order_like_slurm_default() {
        let jobs = [
            job(1, "debug", "RUNNING", 10, "a"),
            job(2, "debug", "PENDING", 5, "b"),
            job(3, "batch", "PENDING", 1, "c"),
            job(4, "debug", "PENDING", 9, "d"),
            job(5, "debug", "PENDING", 9, "e"),
        ];
        // Partition ascending, pending before running, priority descending, then job id.
        assert_eq!(order(&jobs, "P,t,-p"), [3, 4, 5, 2, 1]);
        assert_eq!(order(&jobs, "-i"), [5, 4, 3, 2, 1]);
        assert_eq!(order(&jobs, "-j"), [5, 4, 3, 2, 1]);
    }

    #[test]
    fn skipped_request_fields_never_change_a_field_squeue_prints() {
        use drover_proto::prost::Message;
        let spec = v1::JobSpec {
            name: "n".into(),
            uid: 7,
            gid: 8,
            user: "u".into(),
            group: "g".into(),
            partitions: vec!["p".into()],
            min_nodes: Some(2),
            ntasks: Some(4),
            cpus_per_task: Some(2),
            mem_per_cpu_mb: Some(100),
            nodelist: vec!["a1".into(), "a2".into()],
            exclude: vec!["b1".into()],
            constraint: Some("f1&f2".into()),
            dependency: "afterok:3".into(),
            script: "#!/bin/sh".into(),
            argv: vec!["cmd".into(), "x".into()],
            work_dir: "/w".into(),
            stdout: Some("o".into()),
            stderr: Some("e".into()),
            comment: Some("c".into()),
            submit_host: "h".into(),
            submit_line: "sbatch x".into(),
            exclusive: true,
            ..Default::default()
        };
        let info = v1::JobInfo {
            job_id: 9,
            spec: Some(spec),
            state: "RUNNING".into(),
            reason: "None".into(),
            partition: "p".into(),
            nodes: "a[1-2]".into(),
            start_time: 100,
            submit_time: 50,
            time_limit_secs: Some(600),
            priority: 3,
            ..Default::default()
        };
        let record = info.encode_to_vec();
        for code in ('a'..='z').chain('A'..='Z') {
            let items = format::parse(&format!("%{code}"));
            let mut partial = v1::JobInfo::default();
            drover_proto::decode_job_partial(&mut partial, &record, &spec_skip(&items)).unwrap();
            assert_eq!(jobview::squeue_field(&partial, code, 200), jobview::squeue_field(&info, code, 200), "%{code}");
        }
    }

    #[test]
    fn string_keys_are_prefix_free_in_both_directions() {
        let jobs = [job(1, "ab", "PENDING", 0, ""), job(2, "a", "PENDING", 0, ""), job(3, "a\0", "PENDING", 0, "")];
        assert_eq!(order(&jobs, "P"), [2, 3, 1]);
        assert_eq!(order(&jobs, "-P"), [1, 3, 2]);
    }
}

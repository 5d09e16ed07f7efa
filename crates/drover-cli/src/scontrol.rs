//! `scontrol`: show and change jobs, nodes and partitions; hostlist helpers; ping.

use crate::common::{self, exit_code, fmt_time, status_msg};
use crate::jobview::{self, spec};
use drover_model::duration::{fmt_limit_long, fmt_long};
use drover_model::hostlist::Hostlist;
use drover_model::memsize::fmt_tres_mb;
use drover_proto::v1;

struct Opts {
    oneliner: bool,
    json: bool,
    details: bool,
    quiet: bool,
}

pub fn main(args: Vec<String>) -> i32 {
    let mut opts = Opts { oneliner: false, json: false, details: false, quiet: false };
    let mut words: Vec<String> = Vec::new();
    for a in args {
        match a.as_str() {
            "-o" | "--oneliner" => opts.oneliner = true,
            "--json" => opts.json = true,
            "-d" | "--details" => opts.details = true,
            "-Q" | "--quiet" => opts.quiet = true,
            "-a" | "--all" | "-v" | "--verbose" => {}
            "-V" | "--version" => {
                // As every command (`drover --version` names Drover's own release).
                crate::common::print_version();
                return 0;
            }
            "-h" | "--help" | "--usage" => return crate::help::print("scontrol", false),
            s if s.starts_with('-') && words.is_empty() => {
                eprintln!("scontrol: unrecognized option '{s}'\nTry \"scontrol --help\" for more information");
                return 1;
            }
            _ => words.push(a),
        }
    }
    let Some(cmd) = words.first().map(|w| w.to_ascii_lowercase()) else {
        eprintln!("scontrol: error: no command given (interactive mode is not supported)");
        return 1;
    };
    let rest = &words[1..];
    match cmd.as_str() {
        "show" => show(rest, &opts),
        "version" => {
            crate::common::print_version();
            0
        }
        "ping" => ping(),
        "takeover" => takeover(rest),
        "hold" | "uhold" | "release" | "requeue" | "requeuehold" | "suspend" | "resume" => job_action(&cmd, rest, &[]),
        "update" => update(rest),
        "top" => top(rest),
        "create" => match rest.first().map(|w| w.to_ascii_lowercase()) {
            // The entity word may itself name the reservation (`ReservationName=X`,
            // `reservation=X`), as scontrol reads it: the whole line goes to the parser.
            Some(w) if w.starts_with("res") => crate::resv::create(rest),
            Some(w) => {
                eprintln!("scontrol: error: Invalid creation entity: {w}");
                1
            }
            None => {
                eprintln!("too few arguments for keyword:create");
                1
            }
        },
        "delete" => match rest.first().map(|w| w.to_ascii_lowercase()) {
            Some(w) if w.starts_with("res") => crate::resv::delete(rest),
            Some(w) => {
                eprintln!("scontrol: error: Invalid deletion entity: {w}");
                1
            }
            None => {
                eprintln!("too few arguments for keyword:delete");
                1
            }
        },
        "reconfigure" | "reconfig" => simple(|mut c| async move { c.reconfigure(v1::Empty {}).await.map(|_| ()) }),
        "shutdown" => simple(|mut c| async move { c.shutdown(v1::Empty {}).await.map(|_| ()) }),
        other => {
            eprintln!("invalid keyword: {other}");
            1
        }
    }
}

fn simple<F, Fut>(f: F) -> i32
where
    F: FnOnce(common::Client) -> Fut,
    Fut: std::future::Future<Output = Result<(), tonic::Status>>,
{
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = common::runtime();
    let r = rt.block_on(async {
        let c = common::connect(&cfg).await?;
        f(c).await.map_err(|s| status_msg(&s))
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("slurm_reconfigure error: {e}");
            1
        }
    }
}

/// Each controller, as Slurm prints them: `Slurmctld(primary) at HOST is UP`, then
/// `backup` (or `backup1`, `backup2`, ... where there are more than two); UP for the one in
/// control and for standbys that answer. Exit 1 when none answers.
fn ping() -> i32 {
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = common::runtime();
    let up: Vec<(String, bool)> = rt.block_on(async {
        if !cfg.controller_failover() {
            let host = cfg.controller_hosts.first().map(|h| h.name.clone()).unwrap_or_else(common::hostname);
            let up = match common::connect(&cfg).await {
                Ok(mut c) => c.ping(v1::Empty {}).await.is_ok(),
                Err(_) => false,
            };
            return vec![(host, up)];
        }
        let mut out = Vec::new();
        for (h, addr) in cfg.controller_hosts.iter().zip(cfg.controller_addrs()) {
            out.push((h.name.clone(), common::ha_status(&cfg, &addr).await.is_ok()));
        }
        out
    });
    let n = up.len();
    for (i, (host, ok)) in up.iter().enumerate() {
        let mode = match i {
            0 => "primary".to_string(),
            1 if n == 2 => "backup".to_string(),
            i => format!("backup{i}"),
        };
        println!("Slurmctld({mode}) at {host} is {}", if *ok { "UP" } else { "DOWN" });
    }
    if up.iter().any(|(_, ok)| !ok) && nix::unistd::getuid().is_root() {
        println!("*****************************************");
        println!("** RESTORE SLURMCTLD DAEMON TO SERVICE **");
        println!("*****************************************");
    }
    if up.iter().any(|(_, ok)| *ok) {
        0
    } else {
        1
    }
}

/// `scontrol takeover [INDEX]`: asks backup INDEX (default 1) to take control; it asks the
/// controller in control to hand over and answers once it is in control itself.
fn takeover(rest: &[String]) -> i32 {
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let n = cfg.controller_hosts.len();
    let index = match rest.first() {
        _ if rest.len() > 1 => {
            eprintln!("takeover: too many arguments");
            return 1;
        }
        Some(a) => match a.parse::<usize>() {
            Ok(i) if i >= 1 && i < n => i,
            _ => {
                eprintln!("takeover: invalid backup controller index ({})", a.parse::<i64>().unwrap_or(0));
                return 1;
            }
        },
        None if n < 2 => {
            eprintln!("slurm_takeover error: Unable to contact slurm controller (connect failure)");
            return 1;
        }
        None => 1,
    };
    let addr = cfg.controller_addrs()[index].clone();
    let rt = common::runtime();
    let r = rt.block_on(async {
        let ch = common::tcp_channel(&cfg, &addr).await?;
        v1::controller_ha_client::ControllerHaClient::new(ch)
            .takeover(v1::Empty {})
            .await
            .map(|_| ())
            .map_err(|s| status_msg(&s))
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("slurm_takeover error: {e}");
            1
        }
    }
}

fn fetch(req: v1::StateRequest) -> Result<v1::StateReply, String> {
    common::fetch_state(&common::load_config()?, req)
}

fn show(rest: &[String], o: &Opts) -> i32 {
    let Some(what) = rest.first().map(|w| w.to_ascii_lowercase()) else {
        eprintln!("too few arguments for keyword:show");
        return 1;
    };
    let arg = rest.get(1).cloned();
    match what.as_str() {
        "hostnames" | "hostname" => {
            let expr = arg.or_else(|| std::env::var("SLURM_JOB_NODELIST").ok()).unwrap_or_default();
            match Hostlist::parse(&expr) {
                Ok(h) => {
                    let mut out = String::new();
                    for n in h.iter() {
                        out.push_str(&n);
                        out.push('\n');
                    }
                    crate::common::print_raw(&out);
                    0
                }
                Err(e) => {
                    for l in e.slurm_lines("scontrol") {
                        eprintln!("{l}");
                    }
                    0
                }
            }
        }
        "hostlist" | "hostlistsorted" => {
            let expr = arg.unwrap_or_default();
            match Hostlist::parse(&expr) {
                Ok(h) => {
                    let s = if what == "hostlist" { h.ranged() } else { h.sorted().ranged() };
                    println!("{s}");
                    0
                }
                Err(e) => {
                    for l in e.slurm_lines("scontrol") {
                        eprintln!("{l}");
                    }
                    1
                }
            }
        }
        "step" | "steps" => {
            let wanted = match arg.as_ref().map(|a| common::parse_targets([a])) {
                None => Vec::new(),
                Some(Ok(t)) => t,
                Some(Err(_)) => {
                    eprintln!("Invalid job step id specified");
                    return 1;
                }
            };
            let mut reply = match fetch(v1::StateRequest { jobs: true, active_only: true, ..Default::default() }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_get_job_steps error: {e}");
                    return 1;
                }
            };
            let jobs = drover_proto::reply_jobs(&mut reply);
            let rows = crate::steps::rows(&jobs);
            let shown: Vec<&crate::steps::StepRow<'_>> = rows
                .iter()
                .filter(|r| {
                    wanted.is_empty()
                        || wanted.iter().any(|t| t.job_id == r.job.job_id && t.step_id.is_none_or(|s| s == r.id))
                })
                .collect();
            if shown.is_empty() {
                match &arg {
                    Some(a) => println!("Job step {a} not found"),
                    None => println!("No job steps in the system"),
                }
                return 0;
            }
            let text: String = shown.iter().map(|r| crate::steps::show_text(r, o.oneliner)).collect();
            crate::common::print_raw(&text);
            0
        }
        "job" | "jobs" | "jobid" => {
            let targets = match &arg {
                Some(a) => match common::parse_targets([a]) {
                    Ok(t) => t,
                    Err(_) => {
                        // Refused before any RPC, in scontrol_print_job's words.
                        eprintln!("scontrol_print_job error: Invalid job id specified");
                        return 1;
                    }
                },
                None => Vec::new(),
            };
            let ids: Vec<u32> = targets.iter().map(|t| t.job_id).collect();
            let mut reply = match fetch(v1::StateRequest {
                job_ids: ids.clone(),
                jobs: true,
                partitions: true,
                nodes: true,
                ..Default::default()
            }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_load_jobs error: {e}");
                    return 1;
                }
            };
            reply.jobs = drover_proto::reply_jobs(&mut reply);
            // `N_M`: the task's record, or the array's remainder while the task is in it.
            let elements: Vec<(u32, drover_model::array::TaskSet)> = targets
                .iter()
                .filter_map(|t| {
                    let tasks = drover_model::array::ArraySpec::parse(t.tasks.as_deref()?).ok()?.tasks;
                    Some((t.job_id, tasks))
                })
                .collect();
            if !elements.is_empty() {
                reply.jobs.retain(|j| {
                    elements.iter().any(|(id, tasks)| {
                        j.array_job_id == *id
                            && match j.array_task_id {
                                Some(t) => tasks.contains(t),
                                None => jobview::array_pending(j).is_some_and(|p| tasks.iter().any(|t| p.contains(t))),
                            }
                    })
                });
            }
            order_like_slurm(&mut reply.jobs, !ids.is_empty());
            if !ids.is_empty() && reply.jobs.is_empty() {
                eprintln!("slurm_load_jobs error: Invalid job id specified");
                return 1;
            }
            if o.json {
                println!("{}", crate::json::squeue_json(&reply.jobs, &reply.cluster_name, reply.now));
                return 0;
            }
            if reply.jobs.is_empty() {
                println!("No jobs in the system");
                return 0;
            }
            let mut out = String::new();
            // -d: a waiting job's blockers too (Drover's; Slurm's layout otherwise).
            let cfg = if o.details { common::config_for("scontrol").ok() } else { None };
            for j in &reply.jobs {
                let extra = match &cfg {
                    Some(cfg) if j.state == "PENDING" => crate::explain::detail_lines(cfg, j.job_id),
                    _ => Vec::new(),
                };
                out.push_str(&job_text(j, &reply, o.oneliner, o.details, extra));
            }
            crate::common::print_raw(&out);
            0
        }
        "node" | "nodes" => {
            let reply = match fetch(v1::StateRequest { nodes: true, ..Default::default() }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_load_node error: {e}");
                    return 1;
                }
            };
            let wanted: Option<Vec<String>> = arg.as_ref().and_then(|a| Hostlist::parse(a).ok()).map(|h| h.names());
            let nodes: Vec<&v1::NodeInfo> =
                reply.nodes.iter().filter(|n| wanted.as_ref().is_none_or(|w| w.contains(&n.name))).collect();
            if nodes.is_empty() {
                if let Some(a) = arg {
                    // On standard output, as scontrol prints it.
                    println!("Node {a} not found");
                    return 1;
                }
            }
            if o.json {
                println!("{}", crate::json::nodes_json(&nodes));
                return 0;
            }
            let mut out = String::new();
            for n in nodes {
                out.push_str(&node_text(n, o.oneliner, o.details));
            }
            crate::common::print_raw(&out);
            0
        }
        "lic" | "license" | "licenses" => {
            let reply = match fetch(v1::StateRequest { config: true, ..Default::default() }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_load_licenses error: {e}");
                    return 1;
                }
            };
            if reply.licenses.is_empty() {
                println!("No licenses configured in Slurm.");
                return 0;
            }
            let mut out = String::new();
            for l in reply.licenses.iter().filter(|l| arg.as_ref().is_none_or(|a| *a == l.name)) {
                let sep = if o.oneliner { " " } else { "\n    " };
                out.push_str(&format!(
                    "LicenseName={}{sep}Total={} Used={} Free={} Reserved=0 Remote=no\n",
                    l.name,
                    l.total,
                    l.used,
                    l.total.saturating_sub(l.used)
                ));
            }
            crate::common::print_raw(&out);
            0
        }
        w if w.len() >= 3 && "reservations".starts_with(w) => crate::resv::show(arg.as_deref(), o.oneliner),
        w if w.len() >= 3 && "topology".starts_with(w) => show_topology(arg.as_deref()),
        "partition" | "partitions" => {
            let reply = match fetch(v1::StateRequest { partitions: true, ..Default::default() }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_load_partitions error: {e}");
                    return 1;
                }
            };
            let parts: Vec<&v1::PartitionInfo> =
                reply.partitions.iter().filter(|p| arg.as_ref().is_none_or(|a| *a == p.name)).collect();
            if parts.is_empty() {
                if let Some(a) = arg {
                    println!("Partition {a} not found");
                    return 1;
                }
                println!("No partitions in the system");
                return 0;
            }
            let mut out = String::new();
            for p in parts {
                out.push_str(&partition_text(p, o.oneliner));
            }
            crate::common::print_raw(&out);
            0
        }
        "config" => {
            let reply = match fetch(v1::StateRequest { config: true, ..Default::default() }) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("slurm_load_ctl_conf error: {e}");
                    return 1;
                }
            };
            let mut out = format!("Configuration data as of {}\n", fmt_time(reply.last_update.max(1)));
            // In the controller's order (Slurm's).
            for e in &reply.config {
                out.push_str(&format!("{:<23} = {}\n", e.key, e.value));
            }
            let host = reply
                .config
                .iter()
                .find(|e| e.key == "SlurmctldHost[0]")
                .map(|e| e.value.split('(').next().unwrap_or("").to_string())
                .unwrap_or_default();
            out.push_str(&format!("\nSlurmctld(primary) at {host} is UP\n"));
            crate::common::print_raw(&out);
            0
        }
        other => {
            // Slurm's line ends with a space.
            eprintln!("invalid entity:{other} for keyword:show ");
            1
        }
    }
}

/// `scontrol show topology [SWITCH|NODE]`: the switches of topology.conf, as the daemons
/// read it beside slurm.conf; for a node, every switch above it.
fn show_topology(name: Option<&str>) -> i32 {
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(t) = cfg.topology.as_ref().filter(|t| !t.blocks.is_empty()) {
        return show_blocks(t, name);
    }
    let Some(t) = cfg.topology.as_ref().filter(|t| !t.switches.is_empty()) else {
        eprintln!("scontrol: error: No topology information available");
        return 0;
    };
    let all: Vec<usize> = (0..t.switches.len()).collect();
    let shown: Vec<usize> = match name {
        None => all,
        Some(n) => match t.switches.iter().position(|s| s.name == n) {
            Some(i) => vec![i],
            None => {
                let under = |i: &usize| {
                    let within = Hostlist::parse(n).map(|h| h.names()).unwrap_or_default();
                    !within.is_empty() && within.iter().all(|w| t.switches[*i].nodes.contains(w))
                };
                all.into_iter().filter(under).collect()
            }
        },
    };
    if shown.is_empty() {
        eprintln!("scontrol: error: Topology information contains no switch or node named {}", name.unwrap_or(""));
        return 0;
    }
    for i in shown {
        println!("{}", t.show_line(i));
    }
    0
}

/// `scontrol show topology [BLOCK|NODES]` with `topology/block`: the base blocks, then the
/// aggregated ones; a block by name, or every block holding all the nodes named.
fn show_blocks(t: &drover_model::topology::Topology, name: Option<&str>) -> i32 {
    let lines = t.block_lines();
    let shown: Vec<&String> = match name {
        None => lines.iter().map(|l| &l.line).collect(),
        Some(n) => match lines.iter().find(|l| l.name == n) {
            Some(l) => vec![&l.line],
            None => {
                let within = Hostlist::parse(n).map(|h| h.names()).unwrap_or_default();
                lines
                    .iter()
                    .filter(|l| !within.is_empty() && within.iter().all(|w| l.nodes.contains(w)))
                    .map(|l| &l.line)
                    .collect()
            }
        },
    };
    if shown.is_empty() {
        eprintln!("scontrol: error: Topology information contains no block or node named {}", name.unwrap_or(""));
        return 0;
    }
    for l in shown {
        println!("{l}");
    }
    0
}

/// Memory of the smallest node of the job's partition (what Slurm shows for a pending job
/// that asked for no memory).
fn partition_node_mem(j: &v1::JobInfo, reply: &v1::StateReply) -> u64 {
    reply
        .partitions
        .iter()
        .find(|p| p.name == j.partition)
        .map(|p| {
            p.node_names
                .iter()
                .filter_map(|n| reply.nodes.iter().find(|x| &x.name == n))
                .map(|n| n.real_memory_mb)
                .min()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

fn job_text(j: &v1::JobInfo, reply: &v1::StateReply, oneliner: bool, details: bool, extra: Vec<String>) -> String {
    let s = spec(j);
    let pending = jobview::is_pending(j);
    // Slurm has no eligible time for a job that is held, waits on a dependency or on its
    // array's throttle, and accrues no time while held or waiting on a dependency.
    let (no_accrue, not_eligible) = (!jobview::accrues(j), !jobview::eligible(j));
    let now = reply.now;
    let run_time = jobview::used(j, now);
    let nodes = jobview::num_nodes(j);
    let cpus = jobview::num_cpus(j);
    let tasks = jobview::num_tasks(j);
    let num_nodes = if pending && s.max_nodes.is_some() {
        format!("{}-{}", s.min_nodes.unwrap_or(1), s.max_nodes.unwrap_or(1))
    } else {
        nodes.to_string()
    };
    let tres = if pending {
        drover_proto::jobinfo::req_tres(j, jobview::gpus_tracked(), partition_node_mem(j, reply))
    } else {
        jobview::tres(j)
    };
    let end = if j.end_time > 0 {
        fmt_time(j.end_time)
    } else if j.start_time > 0 && !pending {
        // A suspension moves the end by its length.
        let suspended = j.suspended_secs + if j.state == "SUSPENDED" { now - j.suspend_time } else { 0 };
        j.time_limit_secs.map(|l| fmt_time(j.start_time + l as i64 + suspended)).unwrap_or_else(|| "Unknown".into())
    } else if pending && j.planned_start > 0 {
        // The planner's expected start, and its end by the time limit.
        j.time_limit_secs.map(|l| fmt_time(j.planned_start + l as i64)).unwrap_or_else(|| "Unknown".into())
    } else {
        "Unknown".into()
    };
    // Slurm's reasons with spaces (`launch failed requeued held`) read as one word here.
    let reason = jobview::reason_text(j).replace(' ', "_");
    let req_nodes = if s.nodelist.is_empty() { "(null)".into() } else { Hostlist::from_iter(&s.nodelist).ranged() };
    let exc_nodes = if s.exclude.is_empty() { "(null)".into() } else { Hostlist::from_iter(&s.exclude).ranged() };
    let command = s.argv.first().cloned().filter(|c| !c.is_empty()).unwrap_or_else(|| "(null)".into());
    let min_mem = match (s.mem_per_node_mb, s.mem_per_cpu_mb) {
        (Some(m), _) => format!("MinMemoryNode={}", fmt_tres_mb(m)),
        (None, Some(m)) => format!("MinMemoryCPU={}", fmt_tres_mb(m)),
        _ => "MinMemoryNode=0".into(),
    };
    let mut lines: Vec<String> = vec![
        {
            let mut l = format!("JobId={} ", j.job_id);
            if j.array_job_id != 0 {
                match j.array_task_id {
                    Some(t) => l.push_str(&format!("ArrayJobId={} ArrayTaskId={t} ", j.array_job_id)),
                    None => l.push_str(&format!(
                        "ArrayJobId={} ArrayTaskId={} ",
                        j.array_job_id,
                        jobview::array_task_str(j)
                    )),
                }
                if j.array_max_tasks > 0 {
                    l.push_str(&format!("ArrayTaskThrottle={} ", j.array_max_tasks));
                }
            }
            l.push_str(&format!("JobName={}", s.name));
            l
        },
        format!("UserId={}({}) GroupId={}({}) MCS_label=N/A", jobview::user(j), s.uid, jobview::group(j), s.gid),
        format!(
            "Priority={} Nice={} Account={} QOS={}",
            j.priority,
            s.nice,
            drover_proto::jobinfo::account(s),
            drover_proto::jobinfo::qos(s)
        ),
        format!("JobState={} Reason={} Dependency={}", j.state, reason, jobview::dependency_text(j)),
        format!(
            "Requeue={} Restarts={} BatchFlag={} Reboot=0 ExitCode={}",
            u8::from(s.requeue != Some(false)),
            j.restarts,
            u8::from(s.batch),
            exit_code(j.exit_status)
        ),
        format!(
            "RunTime={} TimeLimit={} TimeMin={}",
            fmt_long(run_time),
            fmt_limit_long(j.time_limit_secs),
            s.time_min_secs.map_or("N/A".into(), fmt_long)
        ),
        format!(
            "SubmitTime={} EligibleTime={}",
            fmt_time(j.submit_time),
            if not_eligible { "Unknown".into() } else { fmt_time(j.eligible_time) }
        ),
        format!("AccrueTime={}", if no_accrue { "Unknown".into() } else { fmt_time(j.eligible_time) }),
        format!(
            "StartTime={} EndTime={} Deadline={}",
            if j.start_time > 0 {
                fmt_time(j.start_time)
            } else if pending && j.planned_start > 0 {
                fmt_time(j.planned_start)
            } else if pending && j.reason == "BeginTime" {
                // Slurm's expected start of a job that waits for its --begin.
                fmt_time(j.eligible_time)
            } else {
                "Unknown".into()
            },
            end,
            s.deadline.map_or("N/A".into(), fmt_time)
        ),
        format!(
            "SuspendTime={} SecsPreSuspend={} LastSchedEval={} Scheduler=Main",
            if j.suspend_time > 0 { fmt_time(j.suspend_time) } else { "None".into() },
            j.pre_suspend_secs,
            fmt_time(if j.last_sched_eval > 0 { j.last_sched_eval } else { j.submit_time })
        ),
        format!("Partition={} AllocNode:Sid={}:{}", j.partition, common::alloc_node_name(&s.submit_host), 0),
        format!("ReqNodeList={req_nodes} ExcNodeList={exc_nodes}"),
        if pending && !j.sched_nodes.is_empty() {
            format!("NodeList={} SchedNodeList={}", j.nodes, j.sched_nodes)
        } else {
            format!("NodeList={}", j.nodes)
        },
    ];
    if !j.batch_host.is_empty() && s.batch {
        lines.push(format!("BatchHost={}", j.batch_host));
    }
    lines.extend([
        format!(
            "NumNodes={num_nodes} NumCPUs={cpus} NumTasks={tasks} CPUs/Task={} ReqB:S:C:T=0:0:{}:{}",
            s.cpus_per_task.unwrap_or(1),
            star(s.cores_per_socket),
            star(s.threads_per_core)
        ),
        format!("TRES={tres}"),
        format!(
            "Socks/Node={} NtasksPerN:B:S:C={}:0:*:{} CoreSpec=*",
            star(s.sockets_per_node),
            s.ntasks_per_node.unwrap_or(0),
            star(s.ntasks_per_core)
        ),
    ]);
    if details && !j.alloc.is_empty() {
        lines.extend(alloc_detail_lines(&j.alloc));
    }
    lines.extend([
        format!(
            "MinCPUsNode={} {min_mem} MinTmpDiskNode={}",
            (s.cpus_per_task.unwrap_or(1) * s.ntasks_per_node.unwrap_or(1)).max(s.min_cpus_per_node.unwrap_or(0)),
            s.tmp_mb.filter(|&t| t > 0).map_or("0".into(), fmt_tres_mb)
        ),
        format!("Features={} DelayBoot=00:00:00", s.constraint.clone().unwrap_or_else(|| "(null)".into())),
    ]);
    if let Some(r) = &s.reservation {
        lines.push(format!("Reservation={r}"));
    }
    lines.extend([
        format!(
            "OverSubscribe={} Contiguous={} Licenses={} Network=(null)",
            drover_proto::jobinfo::oversubscribe(s),
            u8::from(s.contiguous),
            s.licenses.as_deref().unwrap_or("(null)")
        ),
        format!("Command={command}"),
        format!("WorkDir={}", s.work_dir),
    ]);
    if let Some(c) = &s.comment {
        lines.push(format!("Comment={c} "));
    }
    if s.batch {
        lines.push(format!("StdErr={}", jobview::std_path(j, 'e')));
        lines.push(format!("StdIn={}", jobview::std_path(j, 'i')));
        lines.push(format!("StdOut={}", jobview::std_path(j, 'o')));
    }
    if let Some(n) = s.switches {
        let wait = drover_model::duration::fmt_long(u64::from(s.switch_wait.unwrap_or(0)));
        lines.push(format!("Switches={n}@{wait}"));
    }
    lines.push("Power=".into());
    // Slurm's job flags share one line, without a separator.
    let flags: String = [
        (s.kill_on_invalid_dep == Some(true), "KillOInInvalidDependent=Yes"),
        (s.kill_on_invalid_dep == Some(false), "KillOInInvalidDependent=No"),
        (s.spread_job, "SpreadJob=Yes"),
    ]
    .iter()
    .filter(|f| f.0)
    .map(|f| f.1)
    .collect();
    if !flags.is_empty() {
        lines.push(flags);
    }
    if let Some(c) = s.cpus_per_gpu {
        lines.push(format!("CpusPerTres=gres:gpu:{c}"));
    }
    if let Some(m) = s.mem_per_gpu_mb {
        lines.push(format!("MemPerTres=gres:gpu:{m}"));
    }
    for (k, v) in [
        ("TresPerJob", jobview::tres_per_job(j)),
        ("TresPerNode", jobview::tres_per_node(j)),
        ("TresPerTask", jobview::tres_per_task(j)),
    ] {
        if let Some(v) = v {
            lines.push(format!("{k}={v}"));
        }
    }
    if let Some(t) = s.mail_type.as_deref().filter(|t| !t.is_empty()) {
        let user = s.mail_user.clone().unwrap_or_else(|| jobview::user(j));
        lines.push(format!("MailUser={user} MailType={}", crate::jobopts::mail_type_text(t)));
    }
    lines.extend(extra);
    block(&lines, oneliner, "   \n\n")
}

/// A count Slurm leaves unset (`NO_VAL16`) as `*`.
fn star(v: Option<u32>) -> String {
    v.map_or("*".into(), |n| n.to_string())
}

/// Jobs in the order slurmctld lists them. All of them: by id, except that an array's
/// pending remainder comes after the tasks that left it (Slurm's remainder is the newest
/// record: each task takes the old one). Asked for by id: an array's remainder first, then
/// its tasks newest first (the array's own hash chain).
fn order_like_slurm(jobs: &mut [v1::JobInfo], by_id: bool) {
    // Each array's newest task that left it, in one pass.
    let mut last_task: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for t in jobs.iter().filter(|t| t.array_task_id.is_some() && t.job_id != t.array_job_id) {
        let e = last_task.entry(t.array_job_id).or_insert(t.job_id);
        *e = (*e).max(t.job_id);
    }
    jobs.sort_by_cached_key(|j| {
        let remainder = j.array_job_id != 0 && j.array_task_id.is_none();
        if by_id && j.array_job_id != 0 {
            // (the array, its remainder first, then newest first)
            (j.array_job_id, u32::from(!remainder), -i64::from(j.job_id))
        } else if remainder {
            (last_task.get(&j.array_job_id).copied().unwrap_or(j.job_id), 1, 0)
        } else {
            (j.job_id, 0, 0)
        }
    });
}

/// `scontrol -d show job`'s lines of what a job holds: `JOB_GRES=` (its GRES in all) and
/// one `  Nodes=` line per run of nodes that hold the same cores, memory and GRES.
fn alloc_detail_lines(alloc: &[v1::NodeAlloc]) -> Vec<String> {
    let gres_name = |g: &v1::GresAlloc| match &g.r#type {
        Some(t) => format!("{}:{t}", g.name),
        None => g.name.clone(),
    };
    let mut totals: Vec<(String, usize)> = Vec::new();
    for g in alloc.iter().flat_map(|a| &a.gres) {
        let key = gres_name(g);
        let n = if g.indices.is_empty() { g.count as usize } else { g.indices.len() };
        match totals.iter_mut().find(|(k, _)| *k == key) {
            Some((_, t)) => *t += n,
            None => totals.push((key, n)),
        }
    }
    let job_gres = if totals.is_empty() {
        "(null)".to_string()
    } else {
        totals.iter().map(|(k, n)| format!("{k}:{n}")).collect::<Vec<_>>().join(",")
    };
    let mut out = vec![format!("JOB_GRES={job_gres}")];
    let mut runs: Vec<(Vec<String>, String)> = Vec::new();
    for a in alloc {
        let gres: Vec<String> = a
            .gres
            .iter()
            .map(|g| {
                let name = gres_name(g);
                if g.indices.is_empty() {
                    format!("{name}:{}", g.count)
                } else {
                    format!("{name}:{}(IDX:{})", g.indices.len(), drover_model::gres::fmt_indices(&g.indices))
                }
            })
            .collect();
        let rest =
            format!("CPU_IDs={} Mem={} GRES={}", drover_model::gres::fmt_indices(&a.cpu_ids), a.mem_mb, gres.join(","));
        match runs.last_mut() {
            Some((nodes, r)) if *r == rest => nodes.push(a.node.clone()),
            _ => runs.push((vec![a.node.clone()], rest)),
        }
    }
    for (nodes, rest) in runs {
        out.push(format!("  Nodes={} {rest}", drover_model::hostlist::Hostlist::from_iter(&nodes).ranged()));
    }
    out
}

fn node_text(n: &v1::NodeInfo, oneliner: bool, details: bool) -> String {
    let feats = if n.features.is_empty() { "(null)".to_string() } else { n.features.join(",") };
    let mut lines = vec![
        format!(
            "NodeName={} Arch={} CoresPerSocket={} ",
            n.name,
            if n.arch.is_empty() { "x86_64" } else { &n.arch },
            n.cores_per_socket
        ),
        format!("CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad={:.2}", n.alloc_cpus, n.cpus, n.cpus, n.cpu_load),
        format!("AvailableFeatures={feats}"),
        format!("ActiveFeatures={feats}"),
        format!("Gres={}", if n.gres.is_empty() { "(null)" } else { &n.gres }),
    ];
    if details && !n.gres.is_empty() {
        lines.push("GresDrain=N/A".into());
        lines.push(format!("GresUsed={}", n.gres_used));
    }
    // Drover's addition: how the node confines jobs (with -d), and always when it cannot.
    if !n.confinement.is_empty() && (details || n.confinement.starts_with("off")) {
        lines.push(format!("Confinement={}", n.confinement));
    }
    lines.extend(vec![
        format!(
            "NodeAddr={} NodeHostName={} Port={} Version={}",
            n.addr,
            n.hostname,
            n.port,
            if n.version.is_empty() { "(null)" } else { &n.version }
        ),
        format!("OS={} ", if n.os.is_empty() { "(null)" } else { &n.os }),
        format!(
            "RealMemory={} AllocMem={} FreeMem={} Sockets={} Boards={}",
            n.real_memory_mb,
            n.alloc_mem_mb,
            if n.free_mem_mb > 0 { n.free_mem_mb.to_string() } else { "N/A".into() },
            n.sockets,
            n.boards
        ),
        format!(
            "State={} ThreadsPerCore={} TmpDisk={} Weight={} Owner=N/A MCS_label=N/A",
            n.state_scontrol, n.threads_per_core, n.tmp_disk_mb, n.weight
        ),
        format!("Partitions={} ", n.partitions.join(",")),
        format!(
            "BootTime={} SlurmdStartTime={}",
            if n.boot_time > 0 { fmt_time(n.boot_time) } else { "None".into() },
            if n.slurmd_start_time > 0 { fmt_time(n.slurmd_start_time) } else { "None".into() }
        ),
        format!(
            "LastBusyTime={}",
            if n.last_busy_time > 0 { fmt_time(n.last_busy_time) } else { fmt_time(n.slurmd_start_time) }
        ),
        format!(
            "CfgTRES={}",
            jobview::with_gpu_tres(
                format!("cpu={},mem={},billing={}", n.cpus, fmt_tres_mb(n.real_memory_mb), n.cpus),
                || jobview::gpu_count(&n.gres)
            )
        ),
        format!(
            "AllocTRES={}",
            jobview::with_gpu_tres(
                if n.alloc_cpus > 0 {
                    if n.alloc_mem_mb > 0 {
                        format!("cpu={},mem={}", n.alloc_cpus, fmt_tres_mb(n.alloc_mem_mb))
                    } else {
                        format!("cpu={}", n.alloc_cpus)
                    }
                } else {
                    String::new()
                },
                || jobview::gpu_count(&n.gres_used)
            )
        ),
        "CapWatts=n/a".into(),
        "CurrentWatts=0 AveWatts=0".into(),
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s".into(),
    ]);
    if !n.reason.is_empty() {
        lines.push(format!("Reason={} [{}@{}]", n.reason, common::user_name(n.reason_uid), fmt_time(n.reason_time)));
    }
    block(&lines, oneliner, "\n")
}

fn partition_text(p: &v1::PartitionInfo, oneliner: bool) -> String {
    let lines = [
        format!("PartitionName={}", p.name),
        format!("AllowGroups={} AllowAccounts=ALL AllowQos=ALL", p.allow_groups),
        format!("AllocNodes=ALL Default={} QoS=N/A", if p.default { "YES" } else { "NO" }),
        format!(
            "DefaultTime={} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden={}",
            if p.default_time_set { fmt_limit_long(p.default_time_secs) } else { "NONE".into() },
            if p.hidden { "YES" } else { "NO" }
        ),
        format!(
            "MaxNodes={} MaxTime={} MinNodes={} LLN=NO MaxCPUsPerNode=UNLIMITED",
            p.max_nodes.map(|m| m.to_string()).unwrap_or_else(|| "UNLIMITED".into()),
            fmt_limit_long(p.max_time_secs),
            p.min_nodes
        ),
        format!("Nodes={}", if p.nodes.is_empty() { "(null)" } else { &p.nodes }),
        format!("PriorityJobFactor=1 PriorityTier={} RootOnly=NO ReqResv=NO OverSubscribe=NO", p.priority_tier),
        "OverTimeLimit=NONE PreemptMode=OFF".into(),
        format!(
            "State={} TotalCPUs={} TotalNodes={} SelectTypeParameters=NONE",
            p.state,
            p.total_cpus,
            p.node_names.len()
        ),
        "JobDefaults=(null)".into(),
        "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED".into(),
        format!(
            "TRES=cpu={},mem={},node={},billing={}",
            p.total_cpus,
            fmt_tres_mb(p.total_mem_mb),
            p.node_names.len(),
            p.total_cpus
        ),
    ];
    block(&lines, oneliner, "\n")
}

/// `scontrol show` layout: the first line flush, the rest indented by three spaces, then
/// `trailer`; with `-o`, everything on one line.
fn block(lines: &[String], oneliner: bool, trailer: &str) -> String {
    if oneliner {
        // A job's block ends with an empty indented line: on one line, a trailing space.
        let tail = if trailer.starts_with(' ') { " " } else { "" };
        // Lines joined as Slurm joins them (a line that ends with a space leaves two).
        return format!("{}{tail}\n", lines.join(" "));
    }
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("   ");
        }
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(trailer);
    out
}

fn parse_ids(list: &str) -> Result<Vec<v1::JobTarget>, String> {
    common::parse_targets([&list.to_string()]).map_err(|id| format!("Invalid job id specified: {id}"))
}

fn job_action(action: &str, rest: &[String], fields: &[v1::KeyValue]) -> i32 {
    let Some(list) = rest.first() else {
        eprintln!("too few arguments for keyword:{action}");
        return 1;
    };
    let ids = match parse_ids(list.trim_start_matches("jobid=").trim_start_matches("JobId=")) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let req = v1::JobControlRequest {
        action: action.to_string(),
        targets: ids,
        fields: fields.to_vec(),
        ..Default::default()
    };
    if action.starts_with("requeue") && std::env::var_os("SLURM_JOB_ID").is_some() {
        // A job requeueing itself (submitit's and Lightning's preemption handlers): the
        // requeue sends SIGTERM to the job's processes, this one among them, perhaps before
        // its answer is read; it must not die of it and report the requeue failed.
        // SAFETY: no handler is installed; SIGTERM is only ignored (KillWait's SIGKILL stays).
        let _ = unsafe {
            nix::sys::signal::signal(nix::sys::signal::Signal::SIGTERM, nix::sys::signal::SigHandler::SigIgn)
        };
    }
    let rt = common::runtime();
    let r = rt.block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.job_control(req).await.map(|r| r.into_inner()).map_err(|s| status_msg(&s))
    });
    match r {
        Ok(reply) => {
            let mut rc = 0;
            let mut last = None;
            for res in reply.results {
                if !res.error.is_empty() {
                    last = Some(res.error.clone());
                    if matches!(action, "suspend" | "resume") {
                        // Slurm's words for these, job by job.
                        let e = if res.error == "Invalid job id specified" {
                            "Unexpected message received"
                        } else {
                            res.error.as_str()
                        };
                        eprintln!("{e} for job {}", res.target);
                    } else {
                        // Slurm's words, job by job: `Job is no longer pending execution for job 5`.
                        eprintln!("{} for job {}", res.error, res.target);
                    }
                    rc = 1;
                }
            }
            // Hold and release go through slurm_suspend's error path in scontrol, which
            // ends with the last refusal once more.
            if let (Some(e), "hold" | "uhold" | "release") = (last, action) {
                eprintln!("slurm_suspend error: {e}");
            }
            rc
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// `scontrol top JOB_LIST`: one request for the whole list, whose order matters.
fn top(rest: &[String]) -> i32 {
    let Some(list) = rest.first() else {
        eprintln!("too few arguments for keyword:top");
        return 1;
    };
    let list = ["jobid=", "job="]
        .iter()
        .find_map(|p| list.get(..p.len()).filter(|h| h.eq_ignore_ascii_case(p)).map(|_| &list[p.len()..]))
        .unwrap_or(list);
    let targets = match parse_ids(list) {
        Ok(t) => t,
        Err(_) => {
            eprintln!("Invalid job id specified for job {list}");
            return 1;
        }
    };
    let cfg = match common::config_for("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let req = v1::JobControlRequest { action: "top".into(), targets, ..Default::default() };
    let rt = common::runtime();
    let r = rt.block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.job_control(req).await.map(|r| r.into_inner()).map_err(|s| status_msg(&s))
    });
    match r.map(|reply| reply.results.into_iter().find(|r| !r.error.is_empty())) {
        Ok(None) => 0,
        Ok(Some(res)) => {
            eprintln!("{} for job {list}", res.error);
            1
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// The job fields `scontrol update JobId=...` takes (lower case), as its update_job.c
/// knows them.
const JOB_UPDATE_KEYS: &[&str] = &[
    "account",
    "admincomment",
    "arraytaskthrottle",
    "batchfeatures",
    "begintime",
    "burstbuffer",
    "clusterfeatures",
    "comment",
    "contiguous",
    "corespec",
    "cpuspertask",
    "cpuspertres",
    "deadline",
    "delayboot",
    "dependency",
    "eligibletime",
    "endtime",
    "excnodelist",
    "exclude",
    "features",
    "gres",
    "jobname",
    "licenses",
    "mailtype",
    "mailuser",
    "mcslabel",
    "mincpusnode",
    "minnodes",
    "minmemorycpu",
    "minmemorynode",
    "mintmpdisknode",
    "name",
    "nice",
    "nodelist",
    "numcpus",
    "numnodes",
    "numtasks",
    "oversubscribe",
    "partition",
    "prefer",
    "priority",
    "qos",
    "reboot",
    "reqcores",
    "reqnodelist",
    "reqnodes",
    "reqprocs",
    "reqsockets",
    "reqthreads",
    "requeue",
    "reservationname",
    "resetaccruetime",
    "shared",
    "sitefactor",
    "starttime",
    "stderr",
    "stdin",
    "stdout",
    "switches",
    "taskspernode",
    "timelimit",
    "timemin",
    "tresperjob",
    "trespernode",
    "userid",
    "wait4switch",
    "wckey",
    "workdir",
    "mem",
    "mempercpu",
    "minmemory",
    "cpus",
    "ntasks",
    "nodes",
    "tres",
    "gid",
    "uid",
];

/// A node state scontrol's update takes: its own words, or any node state's name (3 letters
/// at least, any case), as update_node.c matches them.
fn node_state_ok(v: &str) -> bool {
    const WORDS: &[&str] = &[
        "NoResp",
        "DRAIN",
        "FAIL",
        "FUTURE",
        "RESUME",
        "POWER_DOWN",
        "POWER_DOWN_ASAP",
        "POWER_DOWN_FORCE",
        "POWER_UP",
        "UNDRAIN",
        "UNKNOWN",
        "DOWN",
        "IDLE",
        "ALLOCATED",
        "ERROR",
        "MIXED",
        "CANCEL_REBOOT",
        "REBOOT",
    ];
    WORDS.iter().any(|w| names_state(w, v))
}

/// Whether `v` names node state `word`: 3 letters of it at least, any case (update_node.c's
/// `xstrncasecmp(val, word, MAX(len, 3))`).
fn names_state(word: &str, v: &str) -> bool {
    v.len() >= 3 && word.len() >= v.len() && word[..v.len()].eq_ignore_ascii_case(v)
}

fn update(rest: &[String]) -> i32 {
    // Any `ReservationName=` makes it a reservation's update, as scontrol decides.
    let names_resv = |w: &String| {
        let k = w.split_once('=').map_or(w.as_str(), |(k, _)| k);
        k.len() >= 3 && "reservationname".starts_with(&k.to_ascii_lowercase())
    };
    if rest.iter().any(names_resv) {
        return crate::resv::update(rest);
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    for w in rest {
        match w.split_once('=') {
            Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
            // A bare `Nice` is `Nice=100`, as in scontrol.
            None if w.eq_ignore_ascii_case("nice") => pairs.push((w.to_string(), "100".into())),
            None => {
                eprintln!("Invalid input: {w}\nRequest aborted");
                return 1;
            }
        }
    }
    let Some((k0, v0)) = pairs.first().cloned() else {
        eprintln!("too few arguments for keyword:update");
        return 1;
    };

    match k0.to_ascii_lowercase().as_str() {
        "jobid" | "job" => {
            let now = common::now();
            let mut fields = Vec::new();
            for (k, v) in &pairs[1..] {
                let value = match k.to_ascii_lowercase().as_str() {
                    "starttime" | "begintime" => match common::parse_time_spec(v, now) {
                        Some(t) => t.to_string(),
                        None => {
                            eprintln!("Invalid time specification {v}");
                            return 1;
                        }
                    },
                    // What scontrol's job update knows; any other key is refused before a
                    // request leaves.
                    lower if !JOB_UPDATE_KEYS.contains(&lower) => {
                        eprintln!("Update of this parameter is not supported: {k}={v}");
                        eprintln!("Request aborted");
                        return 1;
                    }
                    "nice" => match crate::jobopts::parse_nice(v) {
                        Some(n) => n.to_string(),
                        None => {
                            eprintln!("scontrol: error: Nice value out of range (+/- 2147483645). Value ignored");
                            return 1;
                        }
                    },
                    "priority" => match v.parse::<u32>() {
                        Ok(p) if p < u32::MAX - 1 => p.to_string(),
                        _ => {
                            eprintln!("scontrol: error: Invalid Priority value: {v}");
                            return 1;
                        }
                    },
                    _ => v.clone(),
                };
                fields.push(v1::KeyValue { key: k.clone(), value });
            }
            job_action("update", &[v0], &fields)
        }
        "nodename" | "node" => {
            let mut state = String::new();
            let mut reason = String::new();
            for (k, v) in &pairs[1..] {
                match k.to_ascii_lowercase().as_str() {
                    "state" if !node_state_ok(v) => {
                        eprintln!("Invalid input: {k}={v}");
                        eprintln!("Request aborted");
                        eprintln!("Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN");
                        eprintln!("Not all states are valid given a node's prior state");
                        return 1;
                    }
                    "state" => state = v.clone(),
                    "reason" => reason = v.clone(),
                    other => {
                        eprintln!("Update of {other} is not supported for nodes");
                        return 1;
                    }
                }
            }
            // scontrol's own check, before any request, in its words alone.
            let takes_down = ["DOWN", "DRAIN", "FAIL"].iter().any(|w| names_state(w, &state));
            if takes_down && reason.is_empty() {
                eprintln!("You must specify a reason when DOWNING or DRAINING a node. Request denied");
                return 1;
            }
            let cfg = match common::load_config() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("scontrol: error: {e}");
                    return 1;
                }
            };
            let rt = common::runtime();
            let r = rt.block_on(async {
                let mut c = common::connect(&cfg).await?;
                c.update_node(v1::UpdateNodeRequest { nodes: v0, state, reason })
                    .await
                    .map(|_| ())
                    .map_err(|s| status_msg(&s))
            });
            match r {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("slurm_update error: {e}");
                    1
                }
            }
        }
        other if ["partitionname", "frontendname", "slurmctlddebug", "suspendexcnodes"].contains(&other) => {
            eprintln!("Update of {other} is not supported");
            1
        }
        _ => {
            eprintln!("No valid entity in update command");
            eprintln!(
                "Input line must include \"NodeName\", \"PartitionName\", \"Reservation\", \"JobId\", or \"SlurmctldDebug\""
            );
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_job_holds_reads_as_slurms_detail_lines() {
        let gpu =
            |i: u32| v1::GresAlloc { name: "gpu".into(), r#type: Some("fake".into()), indices: vec![i], count: 1 };
        let node = |n: &str, cpus: &[u32], g: Option<v1::GresAlloc>| v1::NodeAlloc {
            node: n.into(),
            cpu_ids: cpus.to_vec(),
            mem_mb: 0,
            tasks: 1,
            gres: g.into_iter().collect(),
        };
        // Slurm 22.05's `scontrol -d show job` of a job on two nodes with a GPU on each.
        assert_eq!(
            alloc_detail_lines(&[node("node1", &[1], Some(gpu(0))), node("node2", &[0, 1], Some(gpu(0)))]),
            [
                "JOB_GRES=gpu:fake:2",
                "  Nodes=node1 CPU_IDs=1 Mem=0 GRES=gpu:fake:1(IDX:0)",
                "  Nodes=node2 CPU_IDs=0-1 Mem=0 GRES=gpu:fake:1(IDX:0)"
            ]
        );
        // Nodes that hold the same share one line; no GRES is `(null)` and an empty `GRES=`.
        assert_eq!(
            alloc_detail_lines(&[node("node1", &[0], None), node("node2", &[0], None)]),
            ["JOB_GRES=(null)", "  Nodes=node[1-2] CPU_IDs=0 Mem=0 GRES="]
        );
        assert_eq!(drover_model::gres::fmt_indices(&[4, 0, 1, 2, 7, 8]), "0-2,4,7-8");
    }
}

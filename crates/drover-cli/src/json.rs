//! `--json` output in the shape of Slurm 22.05's OpenAPI v0.0.38 (the fields tools read).

use crate::jobview::{self, spec};
use drover_proto::v1;
use serde_json::{json, Value};

fn meta() -> Value {
    json!({
        "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": drover_model::SLURM_COMPAT_VERSION},
        "Drover": {"version": env!("CARGO_PKG_VERSION")}
    })
}

pub fn job_json(j: &v1::JobInfo, cluster: &str, now: i64) -> Value {
    let s = spec(j);
    json!({
        "account": drover_proto::jobinfo::account(s),
        "accrue_time": j.eligible_time,
        "array_job_id": j.array_job_id,
        "array_task_id": j.array_task_id,
        "array_max_tasks": j.array_max_tasks,
        "array_task_string": jobview::array_task_str(j),
        "batch_flag": s.batch,
        "batch_host": j.batch_host,
        "cluster": cluster,
        "command": s.argv.first().cloned().unwrap_or_default(),
        "comment": s.comment.clone().unwrap_or_default(),
        "cpus": jobview::num_cpus(j),
        "current_working_directory": s.work_dir,
        "dependency": s.dependency,
        "eligible_time": j.eligible_time,
        "end_time": j.end_time,
        "exit_code": (j.exit_status >> 8) & 0xff,
        "features": s.constraint.clone().unwrap_or_default(),
        "group_id": s.gid,
        "job_id": j.job_id,
        "job_state": j.state,
        "name": s.name,
        "node_count": jobview::num_nodes(j),
        "nodes": j.nodes,
        "partition": j.partition,
        "priority": j.priority,
        "qos": drover_proto::jobinfo::qos(s),
        "requeue": s.requeue != Some(false),
        "restart_cnt": j.restarts,
        "standard_error": jobview::std_path(j, 'e'),
        "standard_input": jobview::std_path(j, 'i'),
        "standard_output": jobview::std_path(j, 'o'),
        "start_time": j.start_time,
        "state_reason": jobview::reason_text(j),
        "submit_time": j.submit_time,
        "tasks": jobview::num_tasks(j),
        "time_limit": j.time_limit_secs.map(|t| t / 60),
        "tres_per_job": jobview::tres_per_job(j).unwrap_or_default(),
        "tres_per_node": jobview::tres_per_node(j).unwrap_or_default(),
        "tres_per_socket": "",
        "tres_per_task": jobview::tres_per_task(j).unwrap_or_default(),
        "tres_alloc_str": if j.alloc.is_empty() { String::new() } else { jobview::tres(j) },
        "tres_req_str": jobview::tres(j),
        "user_id": s.uid,
        "user_name": jobview::user(j),
        "run_time": jobview::used(j, now),
    })
}

pub fn squeue_json(jobs: &[v1::JobInfo], cluster: &str, now: i64) -> String {
    let v = json!({
        "meta": meta(),
        "errors": [],
        "jobs": jobs.iter().map(|j| job_json(j, cluster, now)).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

fn node_json(n: &v1::NodeInfo) -> Value {
    json!({
        "architecture": n.arch,
        "boards": n.boards,
        "boot_time": n.boot_time,
        "cores": n.cores_per_socket,
        "cpu_load": (n.cpu_load * 100.0) as i64,
        "cpus": n.cpus,
        "features": n.features.join(","),
        "gres": n.gres,
        "hostname": n.hostname,
        "name": n.name,
        "address": n.addr,
        "operating_system": n.os,
        "partitions": n.partitions,
        "port": n.port,
        "real_memory": n.real_memory_mb,
        "reason": n.reason,
        "reason_changed_at": n.reason_time,
        "slurmd_start_time": n.slurmd_start_time,
        "sockets": n.sockets,
        "threads": n.threads_per_core,
        "state": n.state_long.trim_end_matches('*'),
        "state_flags": if n.state_scontrol.contains('+') { n.state_scontrol.split('+').skip(1).map(String::from).collect::<Vec<_>>() } else { Vec::new() },
        "alloc_cpus": n.alloc_cpus,
        "alloc_memory": n.alloc_mem_mb,
        "free_memory": n.free_mem_mb,
        "version": n.version,
        "weight": n.weight,
    })
}

pub fn nodes_json(nodes: &[&v1::NodeInfo]) -> String {
    let v = json!({"meta": meta(), "errors": [], "nodes": nodes.iter().map(|n| node_json(n)).collect::<Vec<_>>()});
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

pub fn sinfo_json(r: &v1::StateReply) -> String {
    let v = json!({
        "meta": meta(),
        "errors": [],
        "nodes": r.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "partitions": r.partitions.iter().map(|p| json!({
            "name": p.name,
            "nodes": p.nodes,
            "state": p.state,
            "default": p.default,
            "maximum_time": p.max_time_secs.map(|t| t / 60),
            "total_cpus": p.total_cpus,
            "total_nodes": p.node_names.len(),
            "priority_tier": p.priority_tier,
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// A TRES list (`cpu=2,mem=8000M,node=2,billing=2,gres/gpu=1`) as the DB plugin lists it:
/// `{type, name, id, count}` in TRES id order (memory in MB).
fn tres_list(t: &str) -> Value {
    let mut out: Vec<(u32, Value)> = Vec::new();
    for part in t.split(',').filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else { continue };
        let count: u64 =
            if k == "mem" { drover_model::memsize::parse_mb(v).unwrap_or(0) } else { v.parse().unwrap_or(0) };
        let (kind, name, id) = match k {
            "cpu" => ("cpu", Value::Null, 1),
            "mem" => ("mem", Value::Null, 2),
            "energy" => ("energy", Value::Null, 3),
            "node" => ("node", Value::Null, 4),
            "billing" => ("billing", Value::Null, 5),
            g => match g.split_once('/') {
                Some((kind, name)) => (kind, Value::from(name), 1001),
                None => continue,
            },
        };
        out.push((id, json!({"type": kind, "name": name, "id": id, "count": count})));
    }
    out.sort_by_key(|(id, _)| *id);
    Value::Array(out.into_iter().map(|(_, v)| v).collect())
}

/// An exit status as the DB plugin gives it: `{status, return_code}` (and the signal).
fn exit_json(status: i32) -> Value {
    let sig = status & 0x7f;
    if sig != 0 {
        json!({"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": sig, "name": drover_model::signal::signal_name(sig).unwrap_or_default()}})
    } else if status == 0 {
        json!({"status": "SUCCESS", "return_code": 0})
    } else {
        json!({"status": "FAILED", "return_code": (status >> 8) & 0xff})
    }
}

fn cpu_json(secs: f64) -> Value {
    let us = (secs.max(0.0) * 1e6).round() as u64;
    json!({"seconds": us / 1_000_000, "microseconds": us % 1_000_000})
}

fn step_json(j: &v1::JobInfo, s: &v1::AcctStep, now: i64) -> Value {
    let i = s.info.clone().unwrap_or_default();
    let nodes: Vec<String> = i.nodes.iter().map(|n| n.node.clone()).collect();
    let sum = |f: fn(&v1::TaskUsage) -> f64| s.usage.iter().map(f).sum::<f64>();
    let energy = json!([{"type": "energy", "name": null, "id": 3, "count": 0}]);
    let usage = json!({"max": [], "min": [], "average": energy, "total": energy});
    let script = i.step_id >= drover_model::step::INTERACTIVE_STEP;
    let end = if i.end_time > 0 { i.end_time } else { now };
    json!({
        "nodes": {
            "list": nodes,
            "count": nodes.len(),
            "range": drover_model::hostlist::Hostlist::from_iter(nodes.iter().map(String::as_str)).ranged(),
        },
        "tres": {"requested": usage, "consumed": usage, "allocated": tres_list(&s.alloc_tres)},
        "time": {
            "elapsed": if i.start_time > 0 { (end - i.start_time).max(0) } else { 0 },
            "end": i.end_time,
            "start": i.start_time,
            "suspended": 0,
            "system": cpu_json(sum(|t| t.sys_secs)),
            "total": cpu_json(sum(|t| t.cpu_secs.max(t.user_secs + t.sys_secs))),
            "user": cpu_json(sum(|t| t.user_secs)),
        },
        "exit_code": exit_json(i.exit_status),
        "tasks": {"count": s.ntasks},
        "pid": null,
        "CPU": {
            "requested_frequency": if script { json!({"min": 0, "max": 0}) } else { json!({"min": null, "max": null}) },
            "governor": [],
        },
        "kill_request_user": null,
        "state": i.state,
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {
            "job_id": j.job_id,
            "het": {"component": null},
            "id": if script { Value::from(drover_model::step::step_name(i.step_id)) } else { Value::from(i.step_id) },
            "name": i.name,
        },
        "task": {"distribution": if script { "Unknown".to_string() } else { crate::sacct::layout(&i.distribution) }},
    })
}

/// `sacct --json`: the jobs and their steps in the shape of Slurm 22.05's OpenAPI DB v0.0.38.
pub fn sacct_json(rows: &[(&v1::AcctJob, Vec<&v1::AcctStep>)], now: i64) -> String {
    let jobs: Vec<Value> = rows
        .iter()
        .map(|(a, steps)| {
            let j = a.info.clone().unwrap_or_default();
            let s = spec(&j).clone();
            let sum = |f: fn(&v1::TaskUsage) -> f64| steps.iter().flat_map(|st| st.usage.iter()).map(f).sum::<f64>();
            let worst = steps
                .iter()
                .filter_map(|st| st.info.as_ref())
                .filter(|i| i.step_id < drover_model::step::INTERACTIVE_STEP)
                .map(|i| i.exit_status)
                .max_by_key(|st| ((st >> 8) & 0xff, st & 0x7f))
                .unwrap_or(0);
            let end = if j.end_time > 0 { j.end_time } else { now };
            json!({
                "account": a.account,
                "comment": {"administrator": null, "job": s.comment, "system": null},
                "allocation_nodes": j.alloc.len(),
                "array": {
                    "job_id": j.array_job_id,
                    "limits": {"max": {"running": {"tasks": j.array_max_tasks}}},
                    "task": if j.array_job_id != 0 && j.array_task_id.is_none() { Value::from(j.array_pending.clone()) } else { Value::Null },
                    "task_id": j.array_task_id,
                },
                "association": {"account": a.account, "cluster": a.cluster, "partition": null, "user": s.user},
                "cluster": a.cluster,
                "constraints": s.constraint.clone().unwrap_or_default(),
                "container": null,
                "derived_exit_code": exit_json(worst),
                "time": {
                    "elapsed": if j.start_time > 0 { (end - j.start_time - j.suspended_secs).max(0) } else { 0 },
                    "eligible": j.eligible_time,
                    "end": j.end_time,
                    "start": j.start_time,
                    "submission": j.submit_time,
                    "suspended": j.suspended_secs,
                    "system": cpu_json(sum(|t| t.sys_secs)),
                    "limit": j.time_limit_secs.map(|t| t / 60),
                    "total": cpu_json(sum(|t| t.cpu_secs.max(t.user_secs + t.sys_secs))),
                    "user": cpu_json(sum(|t| t.user_secs)),
                },
                "exit_code": match j.state.as_str() {
                    "CANCELLED" | "TIMEOUT" | "REQUEUED" => exit_json(0),
                    _ => exit_json(j.exit_status),
                },
                "flags": if j.start_time > 0 { json!(["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"]) } else { json!([]) },
                "group": if s.group.is_empty() { crate::common::group_name(s.gid) } else { s.group.clone() },
                "het": {"job_id": 0, "job_offset": null},
                "job_id": j.job_id,
                "name": s.name,
                "mcs": {"label": ""},
                "nodes": if j.nodes.is_empty() { "None assigned".to_string() } else { j.nodes.clone() },
                "partition": j.partition,
                "priority": j.priority,
                "qos": a.qos,
                "required": {"CPUs": drover_proto::jobinfo::num_tasks(&j) * s.cpus_per_task.unwrap_or(1), "memory": s.mem_per_node_mb.or(s.mem_per_cpu_mb).unwrap_or(0)},
                "kill_request_user": j.cancelled_by.map(crate::common::user_name),
                "reservation": {"id": 0, "name": 0},
                "state": {"current": j.state, "reason": if j.state == "PENDING" && !j.reason.is_empty() { j.reason.clone() } else { "None".into() }},
                "steps": steps.iter().map(|st| step_json(&j, st, now)).collect::<Vec<_>>(),
                "tres": {"allocated": tres_list(&a.alloc_tres), "requested": tres_list(&a.req_tres)},
                "user": s.user,
                "wckey": {"wckey": "", "flags": []},
                "working_directory": s.work_dir,
            })
        })
        .collect();
    let mut m = meta();
    m["plugin"] = json!({"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"});
    serde_json::to_string_pretty(&json!({"meta": m, "errors": [], "jobs": jobs})).unwrap_or_default()
}

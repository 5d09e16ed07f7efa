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

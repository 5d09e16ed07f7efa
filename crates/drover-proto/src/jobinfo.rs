//! What Slurm derives from a job record: its node, task and CPU counts and its TRES. Shared by
//! the commands (squeue, scontrol) and the controller (the records it sends to accounting).

use crate::v1;
use drover_model::memsize::fmt_tres_mb;

pub fn spec(j: &v1::JobInfo) -> &v1::JobSpec {
    static EMPTY: std::sync::OnceLock<v1::JobSpec> = std::sync::OnceLock::new();
    j.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(v1::JobSpec::default))
}

/// The account a job runs under (without accounting: its user's name, as Drover shows it).
pub fn account(s: &v1::JobSpec) -> &str {
    s.account.as_deref().unwrap_or(&s.user)
}

/// The QoS a job runs under (`normal` when none was given or resolved).
pub fn qos(s: &v1::JobSpec) -> &str {
    s.qos.as_deref().unwrap_or("normal")
}

/// squeue's OVER_SUBSCRIBE and scontrol's `OverSubscribe=`: `NO` (`--exclusive`), `USER`
/// (`--exclusive=user`) or `OK`.
pub fn oversubscribe(s: &v1::JobSpec) -> &'static str {
    if s.exclusive {
        "NO"
    } else if s.exclusive_user {
        "USER"
    } else if s.oversubscribe {
        "YES"
    } else {
        "OK"
    }
}

pub fn num_nodes(j: &v1::JobInfo) -> u32 {
    if !j.alloc.is_empty() {
        j.alloc.len() as u32
    } else {
        let s = spec(j);
        s.min_nodes.unwrap_or(1).max(1)
    }
}

pub fn num_tasks(j: &v1::JobInfo) -> u32 {
    let s = spec(j);
    match (s.ntasks, s.ntasks_per_node) {
        (Some(n), _) => n,
        (None, Some(p)) => p * s.min_nodes.unwrap_or(1),
        (None, None) => s.min_nodes.unwrap_or(1),
    }
    .max(s.min_nodes.unwrap_or(1))
}

pub fn num_cpus(j: &v1::JobInfo) -> u32 {
    if !j.alloc.is_empty() {
        j.alloc.iter().map(|a| a.cpu_ids.len() as u32).sum()
    } else {
        num_tasks(j) * spec(j).cpus_per_task.unwrap_or(1)
    }
}

/// The job's TRES, what it holds (or, pending, asks for), in Slurm's order
/// (`cpu=2,mem=8000M,node=2,billing=2[,gres/gpu=N]`); GPUs only where they are tracked
/// (`AccountingStorageTRES=gres/gpu`).
pub fn tres(j: &v1::JobInfo, gpus_tracked: bool) -> String {
    if j.alloc.is_empty() {
        req_tres(j, gpus_tracked, 0)
    } else {
        let cpus = num_cpus(j);
        let mem: u64 = j.alloc.iter().map(|a| a.mem_mb).sum();
        tres_text(cpus, mem, num_nodes(j), if gpus_tracked { job_gpus(j) } else { 0 })
    }
}

/// What the job asks for, whether or not it holds it yet. A job that names no memory asks
/// for its nodes' whole memory, `node_mem_mb` each (Slurm's `MinMemoryNode=0`).
pub fn req_tres(j: &v1::JobInfo, gpus_tracked: bool, node_mem_mb: u64) -> String {
    let s = spec(j);
    let nodes = s.min_nodes.unwrap_or(1).max(1);
    let cpus = num_tasks(j) * s.cpus_per_task.unwrap_or(1);
    let mem = s
        .mem_per_node_mb
        .map(|m| m * u64::from(nodes))
        .or(s.mem_per_cpu_mb.map(|m| m * u64::from(cpus)))
        .unwrap_or(node_mem_mb * u64::from(nodes));
    let gpus = if gpus_tracked { requested_gpus(s, nodes) } else { 0 };
    tres_text(cpus, mem, nodes, gpus)
}

fn tres_text(cpus: u32, mem_mb: u64, nodes: u32, gpus: u64) -> String {
    let mut t = if mem_mb > 0 {
        format!("cpu={cpus},mem={},node={nodes},billing={cpus}", fmt_tres_mb(mem_mb))
    } else {
        format!("cpu={cpus},node={nodes},billing={cpus}")
    };
    if gpus > 0 {
        t.push_str(&format!(",gres/gpu={gpus}"));
    }
    t
}

/// GPUs in GRES text: a node's `Gres=`/`GresUsed` (`gpu:a100:2,gpu:v100:1(IDX:2)`) or a
/// request (`gpu:2`).
pub fn gpu_count(gres: &str) -> u64 {
    gres.split(',')
        .filter(|g| g.starts_with("gpu"))
        .filter_map(|g| g.split('(').next()?.rsplit(':').next()?.parse::<u64>().ok())
        .sum()
}

/// GPUs a job holds (or, pending, asks for).
pub fn job_gpus(j: &v1::JobInfo) -> u64 {
    if !j.alloc.is_empty() {
        return j.alloc.iter().flat_map(|a| a.gres.iter()).filter(|g| g.name == "gpu").map(|g| g.count).sum();
    }
    requested_gpus(spec(j), num_nodes(j))
}

/// GPUs a request asks for on `nodes` nodes.
fn requested_gpus(s: &v1::JobSpec, nodes: u32) -> u64 {
    let nodes = u64::from(nodes);
    let count = |t: &String| gpu_count(t);
    let per_node: u64 = s.gres.iter().chain(s.gpus_per_node.iter()).map(count).sum::<u64>() * nodes;
    let per_task = s.gpus_per_task.as_ref().map_or(0, |g| count(g) * u64::from(s.ntasks.unwrap_or(1)));
    per_node + per_task + s.gpus.as_ref().map_or(0, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_of_a_pending_and_a_running_job() {
        let mut j = v1::JobInfo {
            spec: Some(v1::JobSpec { ntasks: Some(4), mem_per_cpu_mb: Some(1000), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(tres(&j, false), "cpu=4,mem=4000M,node=1,billing=4");
        j.alloc = vec![
            v1::NodeAlloc { node: "n1".into(), cpu_ids: vec![0, 1], mem_mb: 2000, ..Default::default() },
            v1::NodeAlloc { node: "n2".into(), cpu_ids: vec![0, 1], mem_mb: 2000, ..Default::default() },
        ];
        assert_eq!(tres(&j, false), "cpu=4,mem=4000M,node=2,billing=4");
        assert_eq!(req_tres(&j, false, 0), "cpu=4,mem=4000M,node=1,billing=4");
        j.spec.as_mut().unwrap().gpus = Some("gpu:2".into());
        assert_eq!(req_tres(&j, true, 0), "cpu=4,mem=4000M,node=1,billing=4,gres/gpu=2");
        assert_eq!(req_tres(&j, false, 0), "cpu=4,mem=4000M,node=1,billing=4");
        j.spec.as_mut().unwrap().mem_per_cpu_mb = None;
        j.spec.as_mut().unwrap().min_nodes = Some(2);
        assert_eq!(req_tres(&j, false, 4000), "cpu=4,mem=8000M,node=2,billing=4", "whole nodes' memory");
    }
}

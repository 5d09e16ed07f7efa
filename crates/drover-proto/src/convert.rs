//! Wire ↔ model conversions, all in one place.

use crate::v1;
use drover_model::alloc::{Allocation, NodeAlloc};
use drover_model::gres::{GresAlloc, GresReq};
use drover_model::job::{fmt_dependency, parse_dependency, JobSpec};
use drover_model::step::{Distribution, StepLayout, StepNode, StepShape};

pub fn spec_to_wire(s: &JobSpec) -> v1::JobSpec {
    v1::JobSpec {
        name: s.name.clone(),
        uid: s.uid,
        gid: s.gid,
        user: s.user.clone(),
        group: s.group.clone(),
        partitions: s.partitions.clone(),
        min_nodes: s.min_nodes,
        max_nodes: s.max_nodes,
        ntasks: s.ntasks,
        ntasks_per_node: s.ntasks_per_node,
        cpus_per_task: s.cpus_per_task,
        mem_per_node_mb: s.mem_per_node_mb,
        mem_per_cpu_mb: s.mem_per_cpu_mb,
        time_limit_set: s.time_limit.is_some(),
        time_limit_secs: s.time_limit.flatten(),
        nodelist: s.nodelist.clone(),
        exclude: s.exclude.clone(),
        constraint: s.constraint.clone(),
        exclusive: s.exclusive,
        hold: s.hold,
        begin_time: s.begin_time,
        dependency: if s.dependency.is_empty() { String::new() } else { fmt_dependency(&s.dependency) },
        script: s.script.clone(),
        argv: s.argv.clone(),
        work_dir: s.work_dir.clone(),
        stdout: s.stdout.clone(),
        stderr: s.stderr.clone(),
        stdin: s.stdin.clone(),
        environment: s.environment.iter().map(|(k, v)| v1::KeyValue { key: k.clone(), value: v.clone() }).collect(),
        comment: s.comment.clone(),
        mail_type: s.mail_type.clone(),
        mail_user: s.mail_user.clone(),
        signal: s.signal.clone(),
        requeue: s.requeue,
        open_mode_append: s.open_mode_append,
        submit_host: s.submit_host.clone(),
        submit_line: s.submit_line.clone(),
        batch: s.batch,
        immediate: s.immediate,
        io_addr: s.io_addr.clone(),
        array: s.array.clone(),
        gres: s.gres.iter().map(|g| g.text()).collect(),
        gpus: s.gpus.as_ref().map(|g| g.text()),
        gpus_per_task: s.gpus_per_task.as_ref().map(|g| g.text()),
        gpus_per_node: s.gpus_per_node.as_ref().map(|g| g.text()),
        cpus_per_gpu: s.cpus_per_gpu,
        mem_per_gpu_mb: s.mem_per_gpu_mb,
        ntasks_per_gpu: s.ntasks_per_gpu,
        licenses: s.licenses.clone(),
        gpus_per_socket: s.gpus_per_socket.as_ref().map(|g| g.text()),
        sockets_per_node: s.sockets_per_node,
        account: s.account.clone(),
        qos: s.qos.clone(),
        nice: s.nice,
        priority: s.priority,
        reservation: s.reservation.clone(),
        switches: s.switches,
        switch_wait: s.switch_wait,
        contiguous: s.contiguous,
        spread_job: s.spread_job,
        use_min_nodes: s.use_min_nodes,
        overcommit: s.overcommit,
        tmp_mb: s.tmp_mb,
        exclusive_user: s.exclusive_user,
        segment: s.segment,
        time_min_secs: s.time_min,
        min_cpus_per_node: s.min_cpus_per_node,
        oversubscribe: s.oversubscribe,
        no_kill: s.no_kill,
        kill_on_invalid_dep: s.kill_on_invalid_dep,
        cores_per_socket: s.cores_per_socket,
        threads_per_core: s.threads_per_core,
        ntasks_per_core: s.ntasks_per_core,
        deadline: s.deadline,
        profile: s.profile.clone(),
        acctg_freq: s.acctg_freq.clone(),
        cron: s.cron.clone(),
        cron_line_start: s.cron_lines.0,
        cron_line_end: s.cron_lines.1,
    }
}

/// One request read back from its `gpu[:type]:N` text.
fn gres_one(s: &str) -> Result<GresReq, String> {
    drover_model::gres::parse_gres_request(s)?.into_iter().next().ok_or_else(|| format!("empty GRES request `{s}`"))
}

pub fn gres_alloc_to_wire(g: &[GresAlloc]) -> Vec<v1::GresAlloc> {
    g.iter()
        .map(|g| v1::GresAlloc {
            name: g.name.clone(),
            r#type: g.kind.clone(),
            indices: g.indices.clone(),
            count: g.count,
        })
        .collect()
}

pub fn gres_alloc_from_wire(g: &[v1::GresAlloc]) -> Vec<GresAlloc> {
    g.iter()
        .map(|g| GresAlloc { name: g.name.clone(), kind: g.r#type.clone(), indices: g.indices.clone(), count: g.count })
        .collect()
}

pub fn spec_from_wire(w: v1::JobSpec) -> Result<JobSpec, String> {
    Ok(JobSpec {
        name: w.name,
        uid: w.uid,
        gid: w.gid,
        user: w.user,
        group: w.group,
        partitions: w.partitions,
        min_nodes: w.min_nodes,
        max_nodes: w.max_nodes,
        ntasks: w.ntasks,
        ntasks_per_node: w.ntasks_per_node,
        cpus_per_task: w.cpus_per_task,
        mem_per_node_mb: w.mem_per_node_mb,
        mem_per_cpu_mb: w.mem_per_cpu_mb,
        time_limit: if w.time_limit_set { Some(w.time_limit_secs) } else { None },
        nodelist: w.nodelist,
        exclude: w.exclude,
        constraint: w.constraint,
        exclusive: w.exclusive,
        hold: w.hold,
        begin_time: w.begin_time,
        dependency: if w.dependency.is_empty() { Default::default() } else { parse_dependency(&w.dependency)? },
        script: w.script,
        argv: w.argv,
        work_dir: w.work_dir,
        stdout: w.stdout,
        stderr: w.stderr,
        stdin: w.stdin,
        environment: w.environment.into_iter().map(|kv| (kv.key, kv.value)).collect(),
        comment: w.comment,
        mail_type: w.mail_type,
        mail_user: w.mail_user,
        signal: w.signal,
        requeue: w.requeue,
        open_mode_append: w.open_mode_append,
        submit_host: w.submit_host,
        submit_line: w.submit_line,
        batch: w.batch,
        immediate: w.immediate,
        io_addr: w.io_addr,
        array: w.array,
        gres: w.gres.iter().map(|g| gres_one(g)).collect::<Result<_, _>>()?,
        gpus: w.gpus.as_deref().map(gres_one).transpose()?,
        gpus_per_task: w.gpus_per_task.as_deref().map(gres_one).transpose()?,
        gpus_per_node: w.gpus_per_node.as_deref().map(gres_one).transpose()?,
        cpus_per_gpu: w.cpus_per_gpu,
        mem_per_gpu_mb: w.mem_per_gpu_mb,
        ntasks_per_gpu: w.ntasks_per_gpu,
        licenses: w.licenses,
        gpus_per_socket: w.gpus_per_socket.as_deref().map(gres_one).transpose()?,
        sockets_per_node: w.sockets_per_node,
        account: w.account,
        qos: w.qos,
        nice: w.nice,
        priority: w.priority,
        reservation: w.reservation,
        switches: w.switches,
        switch_wait: w.switch_wait,
        contiguous: w.contiguous,
        spread_job: w.spread_job,
        use_min_nodes: w.use_min_nodes,
        overcommit: w.overcommit,
        tmp_mb: w.tmp_mb,
        exclusive_user: w.exclusive_user,
        segment: w.segment,
        time_min: w.time_min_secs,
        min_cpus_per_node: w.min_cpus_per_node,
        oversubscribe: w.oversubscribe,
        no_kill: w.no_kill,
        kill_on_invalid_dep: w.kill_on_invalid_dep,
        cores_per_socket: w.cores_per_socket,
        threads_per_core: w.threads_per_core,
        ntasks_per_core: w.ntasks_per_core,
        deadline: w.deadline,
        profile: w.profile,
        acctg_freq: w.acctg_freq,
        cron: w.cron,
        cron_lines: (w.cron_line_start, w.cron_line_end),
    })
}

pub fn alloc_to_wire(a: &Allocation) -> Vec<v1::NodeAlloc> {
    a.nodes
        .iter()
        .map(|n| v1::NodeAlloc {
            node: n.node.clone(),
            cpu_ids: n.cpu_ids.clone(),
            mem_mb: n.mem_mb,
            tasks: n.tasks,
            gres: gres_alloc_to_wire(&n.gres),
        })
        .collect()
}

pub fn alloc_from_wire(partition: &str, nodes: &[v1::NodeAlloc]) -> Allocation {
    Allocation {
        partition: partition.to_string(),
        nodes: nodes
            .iter()
            .map(|n| NodeAlloc {
                node: n.node.clone(),
                cpu_ids: n.cpu_ids.clone(),
                mem_mb: n.mem_mb,
                tasks: n.tasks,
                gres: gres_alloc_from_wire(&n.gres),
            })
            .collect(),
    }
}

/// The resource part of a step request.
pub fn step_shape_from_wire(w: &v1::StepSpec) -> Result<StepShape, String> {
    Ok(StepShape {
        ntasks: w.ntasks,
        min_nodes: w.min_nodes,
        max_nodes: w.max_nodes,
        ntasks_per_node: w.ntasks_per_node,
        cpus_per_task: w.cpus_per_task.max(1),
        mem_per_node_mb: w.mem_per_node_mb,
        mem_per_cpu_mb: w.mem_per_cpu_mb,
        nodelist: w.nodelist.clone(),
        exclude: w.exclude.clone(),
        exact: w.exact,
        overlap: w.overlap,
        overcommit: w.overcommit,
        distribution: Distribution::parse(&w.distribution)?,
        // None: the job's GRES; `none`: no GRES; otherwise the step's own.
        gres: if w.gres.is_empty() {
            None
        } else {
            Some(
                w.gres
                    .iter()
                    .map(|g| drover_model::gres::parse_gres_request(g))
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter()
                    .flatten()
                    .collect(),
            )
        },
    })
}

pub fn step_nodes_to_wire(l: &StepLayout) -> Vec<v1::StepNode> {
    l.nodes
        .iter()
        .map(|n| v1::StepNode {
            node: n.node.clone(),
            cpu_ids: n.cpu_ids.clone(),
            mem_mb: n.mem_mb,
            task_ids: n.task_ids.clone(),
            gres: gres_alloc_to_wire(&n.gres),
        })
        .collect()
}

/// A step's placement from its wire form (`distribution` as `StepInfo` carries it).
pub fn step_layout_from_wire(s: &v1::StepInfo) -> StepLayout {
    StepLayout {
        nodes: s
            .nodes
            .iter()
            .map(|n| StepNode {
                node: n.node.clone(),
                cpu_ids: n.cpu_ids.clone(),
                mem_mb: n.mem_mb,
                task_ids: n.task_ids.clone(),
                gres: gres_alloc_from_wire(&n.gres),
            })
            .collect(),
        distribution: Distribution::parse(&s.distribution).ok().flatten().unwrap_or_default(),
        overlap: s.overlap,
        own_gres: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips() {
        let s = JobSpec {
            name: "x".into(),
            time_limit: Some(None),
            dependency: parse_dependency("afterok:3").unwrap(),
            environment: vec![("A".into(), "1".into())],
            ..Default::default()
        };
        assert_eq!(spec_from_wire(spec_to_wire(&s)).unwrap(), s);
        let s2 = JobSpec { time_limit: Some(Some(60)), ..Default::default() };
        assert_eq!(spec_from_wire(spec_to_wire(&s2)).unwrap(), s2);
    }
}

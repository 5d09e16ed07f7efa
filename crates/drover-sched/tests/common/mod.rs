//! Builders and decision readers the scheduler's integration tests share.
#![allow(dead_code)]

use drover_sched::{Core, Decision, Event, NodeRes, PartitionRes, SchedJob};

pub fn cluster(nodes: u32, cpus: u32, mem: u64) -> Core {
    let mut c = Core::new();
    let mut names = Vec::new();
    for i in 1..=nodes {
        let name = format!("node{i}");
        c.handle(Event::NodeDefined(NodeRes::new(&name, cpus, mem, vec![], 1)));
        c.handle(Event::NodeSchedulable { node: name.clone(), schedulable: true });
        names.push(name);
    }
    c.handle(Event::PartitionDefined(PartitionRes::open("cpu", names)));
    c
}

pub fn job(id: u32) -> SchedJob {
    SchedJob {
        id,
        priority: u64::from(u32::MAX - id),
        partitions: vec!["cpu".into()],
        min_nodes: 1,
        max_nodes: None,
        ntasks: 1,
        cpus_per_task: 1,
        mem_per_node_mb: None,
        mem_per_cpu_mb: None,
        time_limit: None,
        exclusive: false,
        hold: None,
        uid: 0,
        queued: 0,
        more: None,
    }
}

/// For passes that start no array task.
pub fn no_ids() -> u32 {
    panic!("no array task was expected to start apart from its array")
}

pub fn started(d: &[Decision]) -> Vec<u32> {
    d.iter().filter_map(|d| if let Decision::Start { job, .. } = d { Some(*job) } else { None }).collect()
}

pub fn limited(id: u32, tasks: u32, secs: u64) -> SchedJob {
    let mut j = job(id);
    j.ntasks = tasks;
    j.time_limit = Some(Some(secs));
    j
}

pub fn planned(d: &[Decision], id: u32) -> Option<(Option<i64>, Vec<String>)> {
    d.iter().find_map(|d| match d {
        Decision::Planned { job, start, nodes } if *job == id => Some((*start, nodes.clone())),
        _ => None,
    })
}

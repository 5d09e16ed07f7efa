//! Placing a job step inside its job's allocation (what `srun` inside a job asks for).
//!
//! ```text
//!  job allocation (nodes, CPU ids, memory) ─┐
//!  running steps (what they hold)  ─────────┼─► place_step ─► StepLayout (nodes, CPUs, task ids)
//!  the step's shape (-n -N -c -w -x ...)  ──┘              └► StepRefusal (busy now, or never)
//! ```
//!
//! Slurm 22.05's rules: steps do not share CPUs unless one of them says `--overlap`; without
//! `--exact` a step takes every free CPU the job has on each node it uses, with `--exact` (or
//! `-c`) only the CPUs its tasks need. A step that does not fit now but would fit in the
//! empty allocation is *busy* (srun waits: "step creation temporarily disabled"); one that
//! could never fit is refused with Slurm's message.

use drover_model::alloc::Allocation;
use drover_model::gres::{GresAlloc, GresReq};
use drover_model::step::{block_counts, Distribution, StepLayout, StepNode, StepShape};
use std::collections::{BTreeSet, HashMap};

/// Why a step cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepRefusal {
    /// It fits the allocation, but running steps hold what it needs.
    Busy,
    /// More nodes than the job has (`srun: error: Only allocated 2 nodes asked for 3`).
    NodeCount { allocated: u32, asked: u32 },
    /// More tasks × CPUs than the nodes it may use hold.
    TooManyProcessors,
    /// A node it names is not in the allocation, or is excluded.
    NodeConfig,
    /// More memory than the job holds on a node.
    Memory,
    /// More GRES than the job holds on a node.
    Gres,
}

impl StepRefusal {
    /// The text after `srun: error: Unable to create step for job N: `.
    pub fn message(&self) -> String {
        match self {
            StepRefusal::Busy => "Requested nodes are busy".into(),
            StepRefusal::NodeCount { allocated, asked } => {
                format!("Only allocated {allocated} nodes asked for {asked}")
            }
            StepRefusal::TooManyProcessors => "More processors requested than permitted".into(),
            StepRefusal::NodeConfig => "Requested node configuration is not available".into(),
            StepRefusal::Memory => "Memory required by task is not available".into(),
            StepRefusal::Gres => "Invalid generic resource (gres) specification".into(),
        }
    }
}

/// Free resources of the job on one node.
struct Free {
    cpus: Vec<u32>,
    mem: u64,
    /// The job holds memory on this node (a job that asked for none shares the node's).
    tracks_mem: bool,
    /// The job's GRES here not held by steps that asked for theirs: (name, type, index or
    /// count-only unit).
    gres: Vec<GresAlloc>,
}

/// Units of `r`'s GRES in `free`.
fn gres_free(free: &[GresAlloc], r: &GresReq) -> u64 {
    free.iter()
        .filter(|g| g.name == r.name && r.kind.as_ref().is_none_or(|k| g.kind.as_ref() == Some(k)))
        .map(|g| if g.indices.is_empty() { g.count } else { g.indices.len() as u64 })
        .sum()
}

/// The lowest `n` units of `r`'s GRES in `free`.
fn gres_pick(free: &[GresAlloc], r: &GresReq, n: u64) -> Vec<GresAlloc> {
    let mut left = n;
    let mut out = Vec::new();
    for g in free.iter().filter(|g| g.name == r.name && r.kind.as_ref().is_none_or(|k| g.kind.as_ref() == Some(k))) {
        if left == 0 {
            break;
        }
        if g.indices.is_empty() {
            let take = g.count.min(left);
            out.push(GresAlloc { indices: Vec::new(), count: take, ..g.clone() });
            left -= take;
        } else {
            let idx: Vec<u32> = g.indices.iter().copied().take(left as usize).collect();
            left -= idx.len() as u64;
            out.push(GresAlloc { count: idx.len() as u64, indices: idx, ..g.clone() });
        }
    }
    out
}

/// Places a step of `shape` in `job`'s allocation, given the steps running in it.
pub fn place_step(job: &Allocation, running: &[&StepLayout], shape: &StepShape) -> Result<StepLayout, StepRefusal> {
    let all_free = free_of(job, &[], shape.overlap);
    let free = free_of(job, running, shape.overlap);
    match select(job, &free, shape) {
        Ok(layout) => Ok(layout),
        // Would it fit the empty allocation? Then it only waits.
        Err(_) if select(job, &all_free, shape).is_ok() => Err(StepRefusal::Busy),
        Err(e) => Err(e),
    }
}

fn free_of(job: &Allocation, running: &[&StepLayout], overlap: bool) -> Vec<Free> {
    let mut used_cpus: HashMap<&str, BTreeSet<u32>> = HashMap::new();
    let mut used_mem: HashMap<&str, u64> = HashMap::new();
    let mut used_gres: HashMap<&str, Vec<&GresAlloc>> = HashMap::new();
    if !overlap {
        for s in running.iter().filter(|s| !s.overlap) {
            for n in &s.nodes {
                used_cpus.entry(n.node.as_str()).or_default().extend(n.cpu_ids.iter().copied());
                *used_mem.entry(n.node.as_str()).or_default() += n.mem_mb;
                if s.own_gres {
                    used_gres.entry(n.node.as_str()).or_default().extend(n.gres.iter());
                }
            }
        }
    }
    job.nodes
        .iter()
        .map(|n| {
            let used = used_cpus.get(n.node.as_str());
            let held = used_gres.get(n.node.as_str());
            let gres = n
                .gres
                .iter()
                .map(|g| {
                    let taken: Vec<&&GresAlloc> = held
                        .map(|h| h.iter().filter(|x| x.name == g.name && x.kind == g.kind).collect())
                        .unwrap_or_default();
                    if g.indices.is_empty() {
                        let used: u64 = taken.iter().map(|x| x.count).sum();
                        GresAlloc { count: g.count.saturating_sub(used), ..g.clone() }
                    } else {
                        let idx: Vec<u32> = g
                            .indices
                            .iter()
                            .copied()
                            .filter(|i| !taken.iter().any(|x| x.indices.contains(i)))
                            .collect();
                        GresAlloc { count: idx.len() as u64, indices: idx, ..g.clone() }
                    }
                })
                .collect();
            Free {
                cpus: n.cpu_ids.iter().copied().filter(|c| used.is_none_or(|u| !u.contains(c))).collect(),
                mem: n.mem_mb.saturating_sub(used_mem.get(n.node.as_str()).copied().unwrap_or(0)),
                tracks_mem: n.mem_mb > 0,
                gres,
            }
        })
        .collect()
}

fn select(job: &Allocation, free: &[Free], s: &StepShape) -> Result<StepLayout, StepRefusal> {
    let cpt = s.cpus_per_task.max(1);
    let job_nodes = job.nodes.len() as u32;
    let index = |name: &str| job.nodes.iter().position(|n| n.node == name);
    let mut required = Vec::new();
    for name in &s.nodelist {
        let i = index(name).ok_or(StepRefusal::NodeConfig)?;
        if s.exclude.contains(name) {
            return Err(StepRefusal::NodeConfig);
        }
        if !required.contains(&i) {
            required.push(i);
        }
    }
    required.sort_unstable();
    let candidates: Vec<usize> = (0..job.nodes.len()).filter(|&i| !s.exclude.contains(&job.nodes[i].node)).collect();
    if let Some(min) = s.min_nodes {
        if min > job_nodes {
            return Err(StepRefusal::NodeCount { allocated: job_nodes, asked: min });
        }
        if min as usize > candidates.len() {
            return Err(StepRefusal::NodeConfig);
        }
    }
    let per_node = s.ntasks_per_node.filter(|p| *p > 0);
    // Without -n or -N a step runs one task (or --ntasks-per-node) on every node it may use.
    let (ntasks, min_nodes) = match (s.ntasks, s.min_nodes) {
        (Some(n), Some(m)) => (n.max(1), m.min(n.max(1)).max(required.len() as u32)),
        (Some(n), None) => (n.max(1), (required.len() as u32).max(1)),
        (None, Some(m)) => (m * per_node.unwrap_or(1), m.max(required.len() as u32)),
        (None, None) => {
            let m = candidates.len() as u32;
            (m * per_node.unwrap_or(1), m)
        }
    };
    if min_nodes == 0 || min_nodes as usize > candidates.len() {
        return Err(StepRefusal::NodeConfig);
    }
    let max_nodes = s.max_nodes.unwrap_or(u32::MAX).max(min_nodes).min(candidates.len() as u32) as usize;
    // Memory for `tasks` tasks on node i (overcommitted tasks share the CPUs there).
    let mem_need = |i: usize, tasks: u32| -> Option<u64> {
        let cpus = (tasks * cpt).min(free[i].cpus.len() as u32);
        s.mem_per_node_mb.or(s.mem_per_cpu_mb.map(|m| m * u64::from(cpus)))
    };
    // Tasks node i can take now (by its CPUs: an overcommitting step needs one free there).
    let capacity = |i: usize| -> Result<u32, StepRefusal> {
        let f = &free[i];
        let mut cap = f.cpus.len() as u32 / cpt;
        if s.overcommit && cap == 0 && !f.cpus.is_empty() {
            cap = 1;
        }
        if let Some(p) = per_node {
            // Overcommitted, --ntasks-per-node's tasks share the node's CPUs.
            cap = if cap >= p || (s.overcommit && cap > 0) { p } else { 0 };
        }
        if let Some(reqs) = &s.gres {
            for r in reqs {
                if gres_free(&job.nodes[i].gres, r) < r.count {
                    return Err(StepRefusal::Gres);
                }
                if gres_free(&f.gres, r) < r.count {
                    return Ok(0);
                }
            }
        }
        if cap > 0 && f.tracks_mem {
            if let Some(m) = mem_need(i, cap.min(ntasks)) {
                if m > job.nodes[i].mem_mb {
                    return Err(StepRefusal::Memory);
                }
                if m > f.mem {
                    return Ok(0);
                }
            }
        }
        Ok(cap)
    };
    let mut picked: Vec<(usize, u32)> = Vec::new();
    let mut sum = 0u64;
    for &i in &required {
        let cap = capacity(i)?;
        if cap == 0 {
            return Err(StepRefusal::TooManyProcessors);
        }
        picked.push((i, cap));
        sum += u64::from(cap);
    }
    // Nodes with the most free CPUs first (as Slurm picks them), in allocation order among
    // equals: parallel steps spread instead of crowding the first node.
    let mut order = candidates.clone();
    order.sort_by_key(|&i| std::cmp::Reverse(free[i].cpus.len()));
    for &i in &order {
        if picked.len() >= min_nodes as usize && sum >= u64::from(ntasks) {
            break;
        }
        if picked.len() >= max_nodes || required.contains(&i) {
            continue;
        }
        let cap = capacity(i)?;
        if cap == 0 {
            continue;
        }
        picked.push((i, cap));
        sum += u64::from(cap);
    }
    if picked.len() < min_nodes as usize {
        return Err(StepRefusal::TooManyProcessors);
    }
    if sum < u64::from(ntasks) && !s.overcommit {
        return Err(StepRefusal::TooManyProcessors);
    }
    picked.sort_unstable_by_key(|p| p.0);
    let counts =
        block_counts(&picked.iter().map(|p| p.1).collect::<Vec<_>>(), ntasks, per_node.is_some(), s.overcommit);
    let nnodes = picked.len() as u32;
    let dist = s.distribution.unwrap_or_else(|| Distribution::default_for(ntasks, nnodes));
    let ids = dist.task_ids(&counts);
    let nodes = picked
        .iter()
        .zip(counts.iter().zip(ids))
        .map(|(&(i, _), (&count, task_ids))| {
            let f = &free[i];
            let cpu_ids: Vec<u32> =
                if s.exact { f.cpus.iter().copied().take((count * cpt) as usize).collect() } else { f.cpus.clone() };
            let mem_mb = if f.tracks_mem { mem_need(i, count).unwrap_or(0) } else { 0 };
            let gres = match &s.gres {
                Some(reqs) => reqs.iter().flat_map(|r| gres_pick(&f.gres, r, r.count)).collect(),
                None => job.nodes[i].gres.clone(),
            };
            StepNode { node: job.nodes[i].node.clone(), cpu_ids, mem_mb, task_ids, gres }
        })
        .collect();
    Ok(StepLayout { nodes, distribution: dist, overlap: s.overlap, own_gres: s.gres.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_model::alloc::NodeAlloc;

    fn job(nodes: &[(&str, u32, u64)]) -> Allocation {
        Allocation {
            partition: "debug".into(),
            nodes: nodes
                .iter()
                .map(|&(n, c, m)| NodeAlloc {
                    node: n.into(),
                    cpu_ids: (0..c).collect(),
                    mem_mb: m,
                    tasks: c,
                    gres: Vec::new(),
                })
                .collect(),
        }
    }

    fn shape(ntasks: Option<u32>, nodes: Option<u32>) -> StepShape {
        StepShape { ntasks, min_nodes: nodes, max_nodes: nodes, cpus_per_task: 1, ..Default::default() }
    }

    fn tasks(l: &StepLayout) -> Vec<(String, Vec<u32>)> {
        l.nodes.iter().map(|n| (n.node.clone(), n.task_ids.clone())).collect()
    }

    #[test]
    fn the_whole_allocation_by_default() {
        let j = job(&[("n1", 2, 0), ("n2", 2, 0)]);
        // As in a batch job of -N2 -n4: srun reads SLURM_NNODES and SLURM_NTASKS.
        let l = place_step(&j, &[], &shape(Some(4), Some(2))).unwrap();
        assert_eq!(tasks(&l), [("n1".into(), vec![0, 1]), ("n2".into(), vec![2, 3])]);
        assert_eq!(l.distribution, Distribution::Block);
        // A stripped environment (only SLURM_JOB_ID): one task per node.
        let l = place_step(&j, &[], &shape(None, None)).unwrap();
        assert_eq!(tasks(&l), [("n1".into(), vec![0]), ("n2".into(), vec![1])]);
        assert_eq!(l.distribution, Distribution::Cyclic);
        assert_eq!(l.cpus(), 4, "without --exact a step holds every CPU of its nodes");
    }

    #[test]
    fn tasks_spread_like_slurm_block_layout() {
        let j = job(&[("n1", 2, 0), ("n2", 2, 0)]);
        let l = place_step(&j, &[], &shape(Some(3), None)).unwrap();
        assert_eq!(l.tasks_per_node(), [2, 1]);
        let l = place_step(&j, &[], &shape(Some(1), None)).unwrap();
        assert_eq!(l.node_names(), ["n1"]);
    }

    #[test]
    fn overcommit_runs_more_tasks_than_cpus_filling_cpus_first() {
        let j = job(&[("n1", 1, 0), ("n2", 2, 0)]);
        let n5 = shape(Some(5), None);
        assert_eq!(place_step(&j, &[], &n5), Err(StepRefusal::TooManyProcessors));
        let l = place_step(&j, &[], &StepShape { overcommit: true, ..n5 }).unwrap();
        // One on n1, two on n2 (their CPUs), then one more on each.
        assert_eq!(tasks(&l), [("n1".into(), vec![0, 1]), ("n2".into(), vec![2, 3, 4])]);
        assert_eq!(l.cpus(), 3, "the tasks share the CPUs the step holds");
        // Each node still needs a free CPU.
        let all = place_step(&j, &[], &shape(None, None)).unwrap();
        let s = StepShape { overcommit: true, ..shape(Some(8), None) };
        assert_eq!(place_step(&j, &[&all], &s), Err(StepRefusal::Busy));
    }

    #[test]
    fn overcommit_runs_ntasks_per_node_on_fewer_cpus() {
        // srun -N1 --ntasks-per-node=2 -O: the allocation holds one CPU.
        let j = job(&[("n1", 1, 0)]);
        let s = StepShape { ntasks_per_node: Some(2), ..shape(Some(2), Some(1)) };
        assert_eq!(place_step(&j, &[], &s), Err(StepRefusal::TooManyProcessors));
        let l = place_step(&j, &[], &StepShape { overcommit: true, ..s }).unwrap();
        assert_eq!(tasks(&l), [("n1".into(), vec![0, 1])]);
    }

    #[test]
    fn parallel_steps_do_not_share_cpus() {
        let j = job(&[("n1", 2, 0), ("n2", 2, 0)]);
        let first = place_step(&j, &[], &shape(Some(1), None)).unwrap();
        assert_eq!(first.node_names(), ["n1"]);
        // The next one goes where CPUs are free.
        let second = place_step(&j, &[&first], &shape(Some(1), None)).unwrap();
        assert_eq!(second.node_names(), ["n2"]);
        // A step that needs every CPU waits.
        assert_eq!(place_step(&j, &[&first, &second], &shape(Some(1), None)), Err(StepRefusal::Busy));
        assert_eq!(place_step(&j, &[&first], &shape(Some(4), Some(2))), Err(StepRefusal::Busy));
        // --overlap runs anyway.
        let over = StepShape { overlap: true, ..shape(Some(4), Some(2)) };
        assert!(place_step(&j, &[&first, &second], &over).is_ok());
    }

    #[test]
    fn exact_steps_take_only_what_their_tasks_need() {
        let j = job(&[("n1", 2, 0)]);
        let s = StepShape { exact: true, ..shape(Some(1), None) };
        let a = place_step(&j, &[], &s).unwrap();
        assert_eq!(a.nodes[0].cpu_ids, [0]);
        let b = place_step(&j, &[&a], &s).unwrap();
        assert_eq!(b.nodes[0].cpu_ids, [1]);
        assert_eq!(place_step(&j, &[&a, &b], &s), Err(StepRefusal::Busy));
        // With two nodes the next exact step goes to the emptier one, as in Slurm.
        let j = job(&[("n1", 2, 0), ("n2", 2, 0)]);
        let a = place_step(&j, &[], &s).unwrap();
        assert_eq!(a.node_names(), ["n1"]);
        assert_eq!(place_step(&j, &[&a], &s).unwrap().node_names(), ["n2"]);
    }

    #[test]
    fn impossible_steps_get_slurms_messages() {
        let j = job(&[("n1", 2, 0), ("n2", 2, 0)]);
        assert_eq!(place_step(&j, &[], &shape(Some(9), None)), Err(StepRefusal::TooManyProcessors));
        assert_eq!(place_step(&j, &[], &shape(Some(4), Some(1))), Err(StepRefusal::TooManyProcessors));
        assert_eq!(place_step(&j, &[], &shape(None, Some(3))), Err(StepRefusal::NodeCount { allocated: 2, asked: 3 }));
        assert_eq!(StepRefusal::NodeCount { allocated: 2, asked: 3 }.message(), "Only allocated 2 nodes asked for 3");
        let w = StepShape { nodelist: vec!["n4".into()], ..shape(None, None) };
        assert_eq!(place_step(&j, &[], &w), Err(StepRefusal::NodeConfig));
        let w = StepShape { nodelist: vec!["n2".into()], ..shape(Some(1), None) };
        assert_eq!(place_step(&j, &[], &w).unwrap().node_names(), ["n2"]);
    }

    #[test]
    fn memory_is_held_where_the_job_holds_it() {
        let j = job(&[("n1", 4, 1000)]);
        let s = StepShape { exact: true, mem_per_node_mb: Some(600), ..shape(Some(1), None) };
        let a = place_step(&j, &[], &s).unwrap();
        assert_eq!(a.nodes[0].mem_mb, 600);
        assert_eq!(place_step(&j, &[&a], &s), Err(StepRefusal::Busy));
        let big = StepShape { mem_per_node_mb: Some(2000), ..s.clone() };
        assert_eq!(place_step(&j, &[], &big), Err(StepRefusal::Memory));
        // A job without memory shares the node's: steps hold none.
        let j = job(&[("n1", 4, 0)]);
        let a = place_step(&j, &[], &s).unwrap();
        assert!(place_step(&j, &[&a], &s).is_ok());
    }

    #[test]
    fn ntasks_per_node_and_distributions() {
        let j = job(&[("n1", 4, 0), ("n2", 4, 0)]);
        let s = StepShape { ntasks_per_node: Some(2), ..shape(None, Some(2)) };
        let l = place_step(&j, &[], &s).unwrap();
        assert_eq!(l.tasks_per_node(), [2, 2]);
        let s = StepShape { distribution: Some(Distribution::Cyclic), ..shape(Some(4), Some(2)) };
        let l = place_step(&j, &[], &s).unwrap();
        assert_eq!(tasks(&l), [("n1".into(), vec![0, 2]), ("n2".into(), vec![1, 3])]);
    }

    #[test]
    fn steps_use_the_jobs_gpus() {
        let mut j = job(&[("n1", 4, 0)]);
        j.nodes[0].gres =
            vec![GresAlloc { name: "gpu".into(), kind: Some("fake".into()), indices: vec![0, 1], count: 2 }];
        let gpu = |n: u64| Some(vec![GresReq { name: "gpu".into(), kind: None, count: n }]);
        // Without a request a step sees all of them, shared.
        let all = place_step(&j, &[], &StepShape { exact: true, ..shape(Some(1), None) }).unwrap();
        assert_eq!(all.nodes[0].gres[0].indices, [0, 1]);
        let s1 = StepShape { exact: true, gres: gpu(1), ..shape(Some(1), None) };
        let a = place_step(&j, &[&all], &s1).unwrap();
        assert_eq!(a.nodes[0].gres[0].indices, [0]);
        let b = place_step(&j, &[&all, &a], &s1).unwrap();
        assert_eq!(b.nodes[0].gres[0].indices, [1]);
        assert_eq!(place_step(&j, &[&a, &b], &s1), Err(StepRefusal::Busy));
        let s3 = StepShape { gres: gpu(3), ..s1 };
        assert_eq!(place_step(&j, &[], &s3), Err(StepRefusal::Gres));
    }

    proptest::proptest! {
        /// Steps never hold a CPU twice, never leave the allocation, and place every task.
        #[test]
        fn steps_never_oversubscribe(
            cpus in proptest::collection::vec(1u32..5, 1..4),
            reqs in proptest::collection::vec((1u32..6, 0u32..3, proptest::bool::ANY), 1..12),
        ) {
            let names: Vec<String> = (0..cpus.len()).map(|i| format!("n{i}")).collect();
            let spec: Vec<(&str, u32, u64)> = names.iter().zip(&cpus).map(|(n, c)| (n.as_str(), *c, 0)).collect();
            let j = job(&spec);
            let mut running: Vec<StepLayout> = Vec::new();
            for (n, nodes, exact) in reqs {
                let s = StepShape {
                    ntasks: Some(n),
                    min_nodes: if nodes == 0 { None } else { Some(nodes) },
                    max_nodes: if nodes == 0 { None } else { Some(nodes) },
                    exact,
                    cpus_per_task: 1,
                    ..Default::default()
                };
                let refs: Vec<&StepLayout> = running.iter().collect();
                if let Ok(l) = place_step(&j, &refs, &s) {
                    proptest::prop_assert_eq!(l.ntasks(), n);
                    let mut all: Vec<u32> = l.nodes.iter().flat_map(|x| x.task_ids.clone()).collect();
                    all.sort_unstable();
                    proptest::prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
                    for sn in &l.nodes {
                        proptest::prop_assert!(sn.cpu_ids.len() as u32 >= sn.task_ids.len() as u32);
                        let owned = &j.nodes.iter().find(|x| x.node == sn.node).unwrap().cpu_ids;
                        for c in &sn.cpu_ids {
                            proptest::prop_assert!(owned.contains(c));
                            for r in &running {
                                for rn in r.nodes.iter().filter(|rn| rn.node == sn.node) {
                                    proptest::prop_assert!(!rn.cpu_ids.contains(c), "CPU {} of {} held twice", c, sn.node);
                                }
                            }
                        }
                    }
                    running.push(l);
                }
            }
        }
    }
}

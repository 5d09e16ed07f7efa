//! Job steps: their ids (`12.0`, `12.batch`, `12.extern`), the shape a step asks for inside its
//! job's allocation, how its tasks are laid out over nodes (`--distribution`), and the formats
//! steps print (`SLURM_STEP_TASKS_PER_NODE`, `Dist=`).

use serde::{Deserialize, Serialize};

pub type StepId = u32;

/// Slurm's reserved step ids (`slurm.h`): the batch script, the extern step (`PrologFlags=
/// Contain`), and the interactive step (`salloc` with `use_interactive_step`).
pub const BATCH_STEP: StepId = 0xffff_fffb;
pub const EXTERN_STEP: StepId = 0xffff_fffc;
pub const INTERACTIVE_STEP: StepId = 0xffff_fffa;

/// A step id as Slurm prints it after the job id: `0`, `batch`, `extern`, `interactive`.
pub fn step_name(id: StepId) -> String {
    match id {
        BATCH_STEP => "batch".into(),
        EXTERN_STEP => "extern".into(),
        INTERACTIVE_STEP => "interactive".into(),
        n => n.to_string(),
    }
}

/// srun's `-i/-o/-e` given as `all` (or not given), `none` or a task id: does `task` take
/// part in that stream?
pub fn io_mode_includes(mode: &str, task: u32) -> bool {
    match mode {
        "" | "all" => true,
        "none" => false,
        n => n.parse::<u32>().is_ok_and(|n| n == task),
    }
}

/// Parses the part after the dot of `12.0`, `12.batch`, `12.extern`.
pub fn parse_step(s: &str) -> Option<StepId> {
    match s {
        "batch" => Some(BATCH_STEP),
        "extern" => Some(EXTERN_STEP),
        "interactive" => Some(INTERACTIVE_STEP),
        n => n.parse::<u32>().ok().filter(|n| *n < INTERACTIVE_STEP),
    }
}

/// How a step's tasks are numbered over its nodes (`-m/--distribution`, first level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Distribution {
    /// Consecutive task ids on each node (Slurm's default when tasks outnumber nodes).
    #[default]
    Block,
    /// Task ids dealt round-robin over the nodes (the default when nodes ≥ tasks).
    Cyclic,
    /// Blocks of `size` ids dealt round-robin.
    Plane(u32),
}

impl Distribution {
    /// Parses `-m` as Slurm does: the node level before the first `:` (`block:cyclic` is
    /// `block`), `plane=N`; `arbitrary` is not supported yet.
    pub fn parse(s: &str) -> Result<Option<Distribution>, String> {
        let bad = || "Invalid --distribution specification".to_string();
        let first = s.split([':', ',']).next().unwrap_or("");
        Ok(Some(match first {
            "" | "*" => return Ok(None),
            "block" => Distribution::Block,
            "cyclic" => Distribution::Cyclic,
            p if p.starts_with("plane") => {
                let size = p.strip_prefix("plane=").or_else(|| s.strip_prefix("plane=")).ok_or_else(bad)?;
                let size: u32 = size.split([':', ',']).next().unwrap_or("").parse().map_err(|_| bad())?;
                if size == 0 {
                    return Err(bad());
                }
                Distribution::Plane(size)
            }
            _ => return Err(bad()),
        }))
    }

    /// What Slurm picks when `-m` is not given: cyclic when every task can have a node of
    /// its own, block otherwise.
    pub fn default_for(ntasks: u32, nnodes: u32) -> Distribution {
        if ntasks <= nnodes {
            Distribution::Cyclic
        } else {
            Distribution::Block
        }
    }

    /// The form [`Distribution::parse`] reads back (`plane=4`).
    pub fn spec(self) -> String {
        match self {
            Distribution::Plane(n) => format!("plane={n}"),
            d => d.env_name().to_string(),
        }
    }

    /// `SLURM_DISTRIBUTION`.
    pub fn env_name(self) -> &'static str {
        match self {
            Distribution::Block => "block",
            Distribution::Cyclic => "cyclic",
            Distribution::Plane(_) => "plane",
        }
    }

    /// `Dist=` of `scontrol show step`.
    pub fn show_name(self) -> &'static str {
        match self {
            Distribution::Block => "Block",
            Distribution::Cyclic => "Cyclic",
            Distribution::Plane(_) => "Plane",
        }
    }

    /// Deals task ids to nodes that hold `counts[i]` tasks each.
    pub fn task_ids(self, counts: &[u32]) -> Vec<Vec<u32>> {
        let mut ids: Vec<Vec<u32>> = counts.iter().map(|c| Vec::with_capacity(*c as usize)).collect();
        let total: u32 = counts.iter().sum();
        match self {
            Distribution::Block => {
                let mut next = 0;
                for (i, &c) in counts.iter().enumerate() {
                    ids[i].extend(next..next + c);
                    next += c;
                }
            }
            Distribution::Cyclic | Distribution::Plane(_) => {
                let chunk = if let Distribution::Plane(s) = self { s } else { 1 };
                let mut next = 0;
                while next < total {
                    for (i, &c) in counts.iter().enumerate() {
                        let room = c - ids[i].len() as u32;
                        let take = room.min(chunk).min(total - next);
                        ids[i].extend(next..next + take);
                        next += take;
                    }
                }
            }
        }
        ids
    }
}

/// What a step asks of its job's allocation (the resource part of `srun` inside a job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StepShape {
    /// `-n`; `None`: one per node (times `--ntasks-per-node`).
    pub ntasks: Option<u32>,
    /// `-N`; `None`: as few nodes as the tasks need (all the job's when no `-n` either).
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: u32,
    /// Memory per node the step reserves (`--mem`), or per CPU (`--mem-per-cpu`); none: the
    /// step shares the job's memory.
    pub mem_per_node_mb: Option<u64>,
    pub mem_per_cpu_mb: Option<u64>,
    /// `-w`: nodes that must be in the step (all in the job's allocation).
    pub nodelist: Vec<String>,
    /// `-x`.
    pub exclude: Vec<String>,
    /// `--exact` (also implied by `-c` and a step's `--exclusive`): only the CPUs the tasks
    /// need; otherwise every free CPU of the job on each node of the step.
    pub exact: bool,
    /// `--overlap`: shares everything with every other step and holds nothing.
    pub overlap: bool,
    /// `-O/--overcommit`: more tasks than CPUs may run on a node (a node needs one free CPU).
    pub overcommit: bool,
    pub distribution: Option<Distribution>,
    /// GRES per node the step asks for (`srun --gres`, `--gpus-per-node`); `None`: it uses
    /// the job's on its nodes, shared with the job's other steps.
    pub gres: Option<Vec<crate::gres::GresReq>>,
}

/// Where a step runs on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepNode {
    pub node: String,
    pub cpu_ids: Vec<u32>,
    pub mem_mb: u64,
    /// Global task ids (`SLURM_PROCID`) of the tasks on this node.
    pub task_ids: Vec<u32>,
    /// GRES the step uses on this node (by default the job's).
    pub gres: Vec<crate::gres::GresAlloc>,
}

/// A step placed in its job's allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLayout {
    pub nodes: Vec<StepNode>,
    pub distribution: Distribution,
    /// Held nothing: `--overlap`.
    pub overlap: bool,
    /// Its GRES were asked for and are its own (other steps may not use them meanwhile).
    #[serde(default)]
    pub own_gres: bool,
}

impl StepLayout {
    pub fn ntasks(&self) -> u32 {
        self.nodes.iter().map(|n| n.task_ids.len() as u32).sum()
    }
    pub fn cpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.cpu_ids.len() as u32).sum()
    }
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.node.clone()).collect()
    }
    pub fn tasks_per_node(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.task_ids.len() as u32).collect()
    }
}

/// Tasks per node as Slurm's block layout counts them: dealt one at a time over the nodes,
/// each up to its capacity, so they spread evenly (`-n3` on two 2-CPU nodes: `2,1`); with
/// `--ntasks-per-node` (`fixed`), that many on each node until the tasks run out. Tasks left
/// when every node is full are dealt on over all of them when `oversubscribe` (`-O`, as
/// Slurm's layout over-subscribes), and left out otherwise.
pub fn block_counts(caps: &[u32], ntasks: u32, fixed: bool, oversubscribe: bool) -> Vec<u32> {
    let mut counts = vec![0u32; caps.len()];
    let mut left = ntasks;
    if fixed {
        for (c, cap) in counts.iter_mut().zip(caps) {
            let take = (*cap).min(left);
            *c = take;
            left -= take;
        }
    } else {
        let mut round = 0;
        while left > 0 {
            let mut placed = false;
            for (c, &cap) in counts.iter_mut().zip(caps) {
                if left > 0 && round < cap {
                    *c += 1;
                    left -= 1;
                    placed = true;
                }
            }
            if !placed {
                break;
            }
            round += 1;
        }
    }
    while oversubscribe && left > 0 && !counts.is_empty() {
        for c in counts.iter_mut() {
            if left > 0 {
                *c += 1;
                left -= 1;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    #[test]
    fn block_counts_fill_cpus_then_oversubscribe_only_when_asked() {
        assert_eq!(super::block_counts(&[2, 2], 3, false, false), [2, 1]);
        assert_eq!(super::block_counts(&[4, 2, 4, 2], 16, false, true), [5, 3, 5, 3]);
        assert_eq!(super::block_counts(&[1], 8, false, true), [8]);
        assert_eq!(super::block_counts(&[1, 1], 5, false, false), [1, 1]);
        assert_eq!(super::block_counts(&[2, 2], 5, true, true), [3, 2]);
    }

    #[test]
    fn io_modes_select_tasks() {
        assert!(io_mode_includes("", 3) && io_mode_includes("all", 0));
        assert!(!io_mode_includes("none", 0));
        assert!(io_mode_includes("2", 2) && !io_mode_includes("2", 0));
    }
    use super::*;

    #[test]
    fn step_ids_print_and_parse_like_slurm() {
        assert_eq!(step_name(0), "0");
        assert_eq!(step_name(BATCH_STEP), "batch");
        assert_eq!(step_name(EXTERN_STEP), "extern");
        assert_eq!(parse_step("batch"), Some(BATCH_STEP));
        assert_eq!(parse_step("17"), Some(17));
        assert_eq!(parse_step("x"), None);
        assert_eq!(parse_step("4294967291"), None);
    }

    #[test]
    fn distributions_parse_and_deal_ids() {
        assert_eq!(Distribution::parse("block:cyclic").unwrap(), Some(Distribution::Block));
        assert_eq!(Distribution::parse("cyclic").unwrap(), Some(Distribution::Cyclic));
        assert_eq!(Distribution::parse("plane=2").unwrap(), Some(Distribution::Plane(2)));
        assert!(Distribution::parse("plane").is_err());
        assert!(Distribution::parse("diagonal").is_err());
        assert_eq!(Distribution::Block.task_ids(&[2, 1]), vec![vec![0, 1], vec![2]]);
        assert_eq!(Distribution::Cyclic.task_ids(&[2, 1]), vec![vec![0, 2], vec![1]]);
        assert_eq!(Distribution::Cyclic.task_ids(&[3, 1, 2]), vec![vec![0, 3, 5], vec![1], vec![2, 4]]);
        assert_eq!(Distribution::Plane(2).task_ids(&[4, 2]), vec![vec![0, 1, 4, 5], vec![2, 3]]);
        assert_eq!(Distribution::default_for(1, 2), Distribution::Cyclic);
        assert_eq!(Distribution::default_for(4, 2), Distribution::Block);
    }
}

//! Consumable generic resources on a node: GPUs and the like, as device indices per GRES
//! name (Slurm numbers a node's GPUs 0..n across their types, in configuration order), or as
//! plain counts for large counted GRES (`bandwidth:4G`).
//!
//! ```text
//!  Gres=gpu:a100:2,gpu:v100:2  ──►  pools  gpu/a100 idx 0-1 · gpu/v100 idx 2-3
//!  a job's need (gpu:v100:1 per node, or per task) ──► pick ──► GresAlloc { gpu, v100, [2] }
//! ```

use drover_model::gres::{GresAlloc, NodeGres};

/// Pools larger than this are counted, not indexed.
const MAX_INDEXED: u64 = 1024;

/// What a job needs of one GRES on each node it uses: a fixed amount and an amount per task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresNeed {
    pub name: String,
    pub kind: Option<String>,
    pub per_node: u64,
    pub per_task: u64,
}

impl GresNeed {
    fn matches(&self, p: &Pool) -> bool {
        p.name == self.name && self.kind.as_ref().is_none_or(|k| p.kind.as_ref() == Some(k))
    }

    /// How many `tasks` tasks need on one node.
    pub fn for_tasks(&self, tasks: u32) -> u64 {
        self.per_node + self.per_task * u64::from(tasks)
    }

    /// The most tasks `avail` units can serve on one node (`None`: not even the fixed part).
    pub fn tasks_within(&self, avail: u64) -> Option<u32> {
        let left = avail.checked_sub(self.per_node)?;
        Some(left.checked_div(self.per_task).map_or(u32::MAX, |t| t.min(u64::from(u32::MAX)) as u32))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pool {
    name: String,
    kind: Option<String>,
    count: u64,
    no_consume: bool,
    /// The index of this pool's first device among the node's devices of its name.
    base: u32,
    /// Per device, whether a job holds it (indexed pools).
    used_idx: Vec<bool>,
    /// Held units (counted pools).
    used: u64,
}

impl Pool {
    fn indexed(&self) -> bool {
        self.count <= MAX_INDEXED
    }
    fn free(&self) -> u64 {
        if self.no_consume {
            self.count
        } else if self.indexed() {
            self.used_idx.iter().filter(|u| !**u).count() as u64
        } else {
            self.count - self.used.min(self.count)
        }
    }
}

/// A node's GRES and what of them is held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeGresState {
    pools: Vec<Pool>,
}

impl NodeGresState {
    pub fn new(list: &[NodeGres]) -> NodeGresState {
        let mut pools: Vec<Pool> = Vec::new();
        for g in list {
            let base: u64 = pools.iter().filter(|p| p.name == g.name).map(|p| p.count).sum();
            let indexed = g.count <= MAX_INDEXED;
            pools.push(Pool {
                name: g.name.clone(),
                kind: g.kind.clone(),
                count: g.count,
                no_consume: g.no_consume,
                base: base.min(u64::from(u32::MAX)) as u32,
                used_idx: if indexed { vec![false; g.count as usize] } else { Vec::new() },
                used: 0,
            });
        }
        NodeGresState { pools }
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// Units of `need`'s GRES free now.
    pub fn free(&self, need: &GresNeed) -> u64 {
        self.pools.iter().filter(|p| need.matches(p)).map(Pool::free).sum()
    }

    /// Units of `need`'s GRES the node has at all.
    pub fn total(&self, need: &GresNeed) -> u64 {
        self.pools.iter().filter(|p| need.matches(p)).map(|p| p.count).sum()
    }

    /// Consumable GPUs free now, of any type (what the planner's timeline counts).
    pub fn gpus_free(&self) -> u32 {
        self.pools
            .iter()
            .filter(|p| p.name == "gpu" && !p.no_consume)
            .map(Pool::free)
            .sum::<u64>()
            .min(u64::from(u32::MAX)) as u32
    }

    pub fn gpus_total(&self) -> u32 {
        self.pools
            .iter()
            .filter(|p| p.name == "gpu" && !p.no_consume)
            .map(|p| p.count)
            .sum::<u64>()
            .min(u64::from(u32::MAX)) as u32
    }

    /// Concrete GRES for `n` units of `need` (lowest free indices first), if there are that many.
    pub fn pick(&self, need: &GresNeed, n: u64) -> Option<Vec<GresAlloc>> {
        self.pick_by(need, n, |free, k| free.into_iter().take(k).collect())
    }

    /// As [`Self::pick`], with `choose` taking `k` of a pool's free device indices
    /// (ascending): GPUs near the job's CPUs, or linked to each other, first.
    pub fn pick_by(
        &self,
        need: &GresNeed,
        n: u64,
        choose: impl Fn(Vec<u32>, usize) -> Vec<u32>,
    ) -> Option<Vec<GresAlloc>> {
        let mut left = n;
        let mut out = Vec::new();
        for p in self.pools.iter().filter(|p| need.matches(p)) {
            if left == 0 {
                break;
            }
            let take = p.free().min(left);
            if take == 0 {
                continue;
            }
            let indices: Vec<u32> = if p.indexed() {
                let free: Vec<u32> = p
                    .used_idx
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| !**u || p.no_consume)
                    .map(|(k, _)| p.base + k as u32)
                    .collect();
                let mut got = choose(free, take as usize);
                got.sort_unstable();
                got
            } else {
                Vec::new()
            };
            out.push(GresAlloc { name: p.name.clone(), kind: p.kind.clone(), indices, count: take });
            left -= take;
        }
        (left == 0).then_some(out)
    }

    /// Everything consumable on the node (what an `--exclusive` job holds).
    pub fn all(&self) -> Vec<GresAlloc> {
        self.pools
            .iter()
            .filter(|p| !p.no_consume && p.count > 0)
            .map(|p| GresAlloc {
                name: p.name.clone(),
                kind: p.kind.clone(),
                indices: if p.indexed() { (0..p.count as u32).map(|k| p.base + k).collect() } else { Vec::new() },
                count: p.count,
            })
            .collect()
    }

    fn pool_mut(&mut self, g: &GresAlloc) -> Option<&mut Pool> {
        self.pools.iter_mut().find(|p| p.name == g.name && p.kind == g.kind)
    }

    /// Whether exactly these units are free (a suspended job's, to resume it).
    pub fn can_take(&self, held: &[GresAlloc]) -> bool {
        held.iter().all(|g| {
            let Some(p) = self.pools.iter().find(|p| p.name == g.name && p.kind == g.kind) else { return false };
            if p.no_consume {
                true
            } else if p.indexed() {
                g.indices.iter().all(|&i| p.used_idx.get(i.wrapping_sub(p.base) as usize) == Some(&false))
            } else {
                p.count.saturating_sub(p.used) >= g.count
            }
        })
    }

    pub fn take(&mut self, held: &[GresAlloc]) {
        for g in held {
            if let Some(p) = self.pool_mut(g) {
                if p.no_consume {
                    continue;
                }
                if p.indexed() {
                    for &i in &g.indices {
                        if let Some(u) = p.used_idx.get_mut(i.wrapping_sub(p.base) as usize) {
                            *u = true;
                        }
                    }
                } else {
                    p.used += g.count;
                }
            }
        }
    }

    pub fn give_back(&mut self, held: &[GresAlloc]) {
        for g in held {
            if let Some(p) = self.pool_mut(g) {
                if p.indexed() {
                    for &i in &g.indices {
                        if let Some(u) = p.used_idx.get_mut(i.wrapping_sub(p.base) as usize) {
                            *u = false;
                        }
                    }
                } else {
                    p.used = p.used.saturating_sub(g.count);
                }
            }
        }
    }

    /// Keeps what is held, for the same GRES configured again (reconfigure).
    pub fn carry_over(&mut self, old: &NodeGresState) {
        for p in &mut self.pools {
            if let Some(o) = old.pools.iter().find(|o| o.name == p.name && o.kind == p.kind) {
                for (k, u) in p.used_idx.iter_mut().enumerate() {
                    *u = o.used_idx.get(k).copied().unwrap_or(false);
                }
                p.used = o.used;
            }
        }
    }

    /// `GresUsed` as `scontrol -d show node` prints it: `gpu:fake:1(IDX:0),nvme:0`.
    pub fn used_text(&self) -> String {
        self.pools
            .iter()
            .map(|p| {
                let mut s = p.name.clone();
                if let Some(k) = &p.kind {
                    s.push(':');
                    s.push_str(k);
                }
                if p.indexed() {
                    let idx: Vec<u32> =
                        p.used_idx.iter().enumerate().filter(|(_, u)| **u).map(|(k, _)| p.base + k as u32).collect();
                    let shown = if idx.is_empty() { "N/A".to_string() } else { drover_model::gres::fmt_indices(&idx) };
                    format!("{s}:{}(IDX:{shown})", idx.len())
                } else {
                    format!("{s}:{}", p.used)
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// (name, type, used, configured) per pool, for checks and displays.
    pub fn usage(&self) -> Vec<(String, Option<String>, u64, u64)> {
        self.pools
            .iter()
            .map(|p| {
                let used = if p.indexed() { p.used_idx.iter().filter(|u| **u).count() as u64 } else { p.used };
                (p.name.clone(), p.kind.clone(), used, p.count)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_model::gres::parse_node_gres;

    fn need(name: &str, kind: Option<&str>, n: u64) -> GresNeed {
        GresNeed { name: name.into(), kind: kind.map(String::from), per_node: n, per_task: 0 }
    }

    #[test]
    fn devices_are_numbered_per_name_across_types() {
        let mut g = NodeGresState::new(&parse_node_gres("gpu:a100:2,gpu:v100:2,nvme:1").unwrap());
        assert_eq!(g.gpus_total(), 4);
        let v = g.pick(&need("gpu", Some("v100"), 1), 1).unwrap();
        assert_eq!(v[0].indices, [2]);
        g.take(&v);
        assert_eq!(g.free(&need("gpu", Some("v100"), 1)), 1);
        assert_eq!(g.gpus_free(), 3);
        let any = g.pick(&need("gpu", None, 3), 3).unwrap();
        let idx: Vec<u32> = any.iter().flat_map(|a| a.indices.clone()).collect();
        assert_eq!(idx, [0, 1, 3]);
        g.take(&any);
        assert!(g.pick(&need("gpu", None, 1), 1).is_none());
        g.give_back(&v);
        assert_eq!(g.pick(&need("gpu", None, 1), 1).unwrap()[0].indices, [2]);
        assert_eq!(g.free(&need("nvme", None, 1)), 1);
    }

    #[test]
    fn counted_and_shared_gres() {
        let mut g = NodeGresState::new(&parse_node_gres("bandwidth:4G,lic:no_consume:2").unwrap());
        let b = g.pick(&need("bandwidth", None, 1 << 30), 1 << 30).unwrap();
        assert!(b[0].indices.is_empty());
        g.take(&b);
        assert_eq!(g.free(&need("bandwidth", None, 1)), 3 << 30);
        let l = g.pick(&need("lic", None, 2), 2).unwrap();
        g.take(&l);
        assert_eq!(g.free(&need("lic", None, 1)), 2, "no_consume is never used up");
        assert_eq!(g.all().len(), 1);
    }
}

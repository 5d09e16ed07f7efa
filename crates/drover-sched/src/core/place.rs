//! Placement: which nodes, cores and GPUs a job takes, given what each node has free (now,
//! or over a window of the plan): first fit, best fit, contiguous runs, counted features,
//! switches and blocks.

use super::*;

impl Core {
    /// What a job takes of node `i` for `tasks` tasks.
    pub(super) fn claim(&self, job: &SchedJob, i: usize, tasks: u32) -> Res {
        let n = &self.nodes[i];
        let cpus = if job.exclusive { n.cpus } else { (tasks * job.cpus_per_task.max(1)).max(job.more().min_cpus) };
        let mem = match (job.mem_per_node_mb, job.mem_per_cpu_mb) {
            (Some(m), _) => m,
            (None, Some(m)) => m * u64::from(cpus),
            (None, None) => 0,
        };
        let gpus = if job.exclusive { n.gres.gpus_total() } else { gpu_need(job, tasks) };
        Res { cpus, mem: if job.exclusive { mem.max(n.mem_mb) } else { mem }, gpus }
    }

    /// GPUs of the type `job` asks for that are free on `n` now (all of them when it asks
    /// for none, so that its placement is not limited by them).
    pub(super) fn gpus_free_for(&self, job: &SchedJob, n: &NodeRes) -> u32 {
        match job.more().gres.iter().find(|g| g.name == "gpu") {
            Some(g) => n.gres.free(g).min(u64::from(u32::MAX)) as u32,
            None => n.gres.gpus_free(),
        }
    }

    /// Whether `tasks` tasks of `job` could have their GRES on `n` were it empty.
    pub(super) fn gres_could_fit(&self, job: &SchedJob, n: &NodeRes, tasks: u32) -> bool {
        job.more().gres.iter().all(|g| g.for_tasks(tasks) <= n.gres.total(g))
    }

    /// Tasks of `job` that fit in `f`.
    pub(super) fn capacity(&self, job: &SchedJob, n: &NodeRes, f: Free) -> u32 {
        if !(n.users.is_empty() || self.user_ok(job, n)) {
            return 0;
        }
        let cpt = job.cpus_per_task.max(1);
        if job.exclusive {
            if !f.idle {
                return 0;
            }
            let mem = job.mem_per_node_mb.unwrap_or(0);
            if mem > n.mem_mb {
                return 0;
            }
            let mut cap = n.cpus / cpt;
            for g in &job.more().gres {
                match g.tasks_within(n.gres.total(g)) {
                    Some(t) => cap = cap.min(t),
                    None => return 0,
                }
            }
            return job.more().ntasks_per_node.map_or(cap, |p| if p <= cap { p } else { 0 });
        }
        if f.cpus < job.more().min_cpus {
            return 0;
        }
        let mut cap = f.cpus / cpt;
        if let Some(m) = job.mem_per_node_mb {
            if m > f.mem {
                return 0;
            }
        }
        if let Some(m) = job.mem_per_cpu_mb {
            if m > 0 {
                cap = cap.min((f.mem / (m * cpt as u64)) as u32);
            }
        }
        // GRES: GPUs as the timeline (or, now, the node) has them free; other GRES as the
        // node has them now.
        for g in &job.more().gres {
            let avail = if g.name == "gpu" { u64::from(f.gpus).min(n.gres.total(g)) } else { n.gres.free(g) };
            match g.tasks_within(avail) {
                Some(t) => cap = cap.min(t),
                None => return 0,
            }
        }
        match job.more().ntasks_per_node {
            Some(p) if p > cap => 0,
            Some(p) => p,
            None => cap,
        }
    }

    /// Picks nodes and task counts for `job` in `part` from what `free` says each node has.
    pub(super) fn place(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let order = self.part_order(part);
        let more = job.more.as_deref();
        let cands: Vec<usize> = match more {
            // The common request: the partition's nodes as they are.
            None => order.iter().copied().filter(|&i| self.nodes[i].schedulable).collect(),
            Some(m) => {
                let mut cands: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|&i| {
                        let n = &self.nodes[i];
                        !m.exclude.contains(&n.name) && m.constraint.as_ref().is_none_or(|c| c.matches(&n.features))
                    })
                    .collect();
                let mut required = Vec::with_capacity(m.nodelist.len());
                for w in &m.nodelist {
                    match self.node_idx.get(w) {
                        Some(&i) if self.nodes[i].schedulable && cands.contains(&i) => required.push(i),
                        _ => return Err(PendingReason::ReqNodeNotAvail),
                    }
                }
                // Required nodes first, then the rest in partition order.
                cands.retain(|i| self.nodes[*i].schedulable && !required.contains(i));
                required.sort_by_key(|&i| (self.nodes[i].weight, i));
                required.extend(cands);
                required
            }
        };
        let k_min = job.min_nodes.max(job.more().nodelist.len() as u32).max(1);
        let k_max = job.max_nodes.unwrap_or(u32::MAX).max(k_min);
        match job.more().constraint.as_ref() {
            // Matching OR: all on nodes with the same one of the features, tried in order.
            Some(c) if !c.matching.is_empty() => c
                .matching
                .iter()
                .find_map(|f| {
                    let sub: Vec<usize> =
                        cands.iter().copied().filter(|&i| self.nodes[i].features.contains(f)).collect();
                    self.place_among(job, &sub, k_min, k_max, free, max_leaves).ok()
                })
                .ok_or(PendingReason::Resources),
            _ => self.place_among(job, &cands, k_min, k_max, free, max_leaves),
        }
    }

    /// Places a job on some of `cands` (in preference order).
    pub(super) fn place_among(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let counts = job.more().constraint.as_ref().map_or(&[][..], |c| c.counts.as_slice());
        if !counts.is_empty() {
            return self.place_counted(job, cands, k_min, k_max, free, counts);
        }
        if job.more().contiguous {
            return self.place_contiguous(job, cands, k_min, k_max, free);
        }
        if job.more().nodelist.is_empty() {
            if let Some(r) = self.place_topo(job, cands, k_min, k_max, free, max_leaves) {
                return r.map_err(|_| PendingReason::Resources);
            }
            if k_min == 1 && job.wanted_nodes() <= 1 {
                if let Some(i) = self.best_fit(job, cands, free) {
                    return Ok(vec![(i, job.ntasks)]);
                }
            }
        }
        match self.pick(job, cands, k_min, k_max, free) {
            Err(true) if (k_max as usize) < cands.len() => {
                // First fit ran out of nodes before tasks: with a node limit, the nodes with
                // the most room go first (required ones still before all, ties in preference
                // order). Only the first k_max can be taken, so only they are ordered.
                let mut by_room: Vec<(bool, std::cmp::Reverse<u32>, usize)> = cands
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| {
                        let required = job.more().nodelist.contains(&self.nodes[i].name);
                        (!required, std::cmp::Reverse(self.capacity(job, &self.nodes[i], free(i))), k)
                    })
                    .collect();
                let keep = (k_max as usize).min(by_room.len());
                if keep < by_room.len() {
                    by_room.select_nth_unstable(keep);
                    by_room.truncate(keep);
                }
                by_room.sort_unstable();
                let cands: Vec<usize> = by_room.into_iter().map(|(.., k)| cands[k]).collect();
                self.pick(job, &cands, k_min, k_max, free).map_err(|_| PendingReason::Resources)
            }
            r => r.map_err(|_| PendingReason::Resources),
        }
    }

    /// `--contiguous`: a run of nodes consecutive in the configuration's order, each with
    /// room, the first run (in that order) that holds the job.
    pub(super) fn place_contiguous(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let mut ordered: Vec<usize> =
            cands.iter().copied().filter(|&i| self.capacity(job, &self.nodes[i], free(i)) > 0).collect();
        ordered.sort_unstable();
        let mut start = 0;
        while start < ordered.len() {
            let mut end = start + 1;
            while end < ordered.len() && ordered[end] == ordered[end - 1] + 1 {
                end += 1;
            }
            if let Ok(p) = self.pick(job, &ordered[start..end], k_min, k_max, free) {
                return Ok(p);
            }
            start = end;
        }
        Err(PendingReason::Resources)
    }

    /// Node counts (`-C gpu*2&ib`): nodes with each counted feature set first, at least as
    /// many nodes as the counts add up to, and the counts checked on what was picked.
    pub(super) fn place_counted(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        counts: &[(Vec<String>, u32)],
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let has = |i: usize, fs: &[String]| fs.iter().all(|f| self.nodes[i].features.contains(f));
        let rank = |i: usize| counts.iter().position(|(fs, _)| has(i, fs)).unwrap_or(counts.len());
        let mut ordered: Vec<usize> = cands.to_vec();
        ordered.sort_by_key(|&i| rank(i));
        let need: u32 = counts.iter().map(|c| c.1).sum();
        let k_min = k_min.max(need);
        let picked = self.pick(job, &ordered, k_min, k_max.max(k_min), free).map_err(|_| PendingReason::Resources)?;
        let ok = counts.iter().all(|(fs, n)| picked.iter().filter(|&&(i, _)| has(i, fs)).count() as u32 >= *n);
        if ok {
            Ok(picked)
        } else {
            Err(PendingReason::Resources)
        }
    }

    /// Topology-aware placement (`topology/tree`): the job goes under the lowest switch
    /// that can hold it all, the one with the fewest usable nodes among those of that level
    /// (best fit), and within it fills the leaf switches with the most usable nodes first
    /// (fewest leaves). With `--switches=N` in force, no more than N leaves. `None` when there
    /// is no tree (or nothing under one switch fits and no leaf limit applies): plain placement.
    pub(super) fn place_topo(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Option<Result<Vec<(usize, u32)>, bool>> {
        if self.without_topology.get() {
            return None;
        }
        if self.topology.as_ref().is_some_and(|t| !t.blocks.is_empty()) {
            return self.place_blocks(job, cands, k_min, free);
        }
        let t = self.topo.as_ref()?;
        let usable: Vec<bool> = {
            let mut u = vec![false; self.nodes.len()];
            for &i in cands {
                u[i] = self.capacity(job, &self.nodes[i], free(i)) > 0;
            }
            u
        };
        let count = |mask: &[bool]| cands.iter().filter(|&&i| mask[i] && usable[i]).count();
        let mut order: Vec<usize> =
            (0..t.switches.len()).filter(|&s| count(&t.switches[s].2) >= k_min as usize).collect();
        order.sort_by_key(|&s| (t.switches[s].0, count(&t.switches[s].2), s));
        for s in order {
            let (_, leaf, mask) = &t.switches[s];
            let mut sub: Vec<usize> = cands.iter().copied().filter(|&i| mask[i]).collect();
            if !leaf {
                // Leaves with the most usable nodes first; the partition's order within each.
                let per_leaf = |l: Option<usize>| sub.iter().filter(|&&i| t.leaf[i] == l && usable[i]).count();
                let mut keyed: Vec<(std::cmp::Reverse<usize>, Option<usize>, usize, usize)> = sub
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| (std::cmp::Reverse(per_leaf(t.leaf[i])), t.leaf[i], k, i))
                    .collect();
                keyed.sort();
                sub = keyed.into_iter().map(|x| x.3).collect();
            }
            if let Ok(p) = self.pick(job, &sub, k_min, k_max, free) {
                let mut leaves: Vec<Option<usize>> = p.iter().map(|&(i, _)| t.leaf[i]).collect();
                leaves.sort();
                leaves.dedup();
                if max_leaves.is_none_or(|m| leaves.len() as u32 <= m) {
                    return Some(Ok(p));
                }
            }
        }
        // Nothing under one switch: the job waits for its leaf limit, or goes where it fits.
        max_leaves.map(|_| Err(false))
    }

    /// Block placement (`topology/block`): the job's nodes (its least count, as Slurm uses)
    /// within one block of the smallest level that holds them — a base block, or an aggregate
    /// of 2, 4, ... consecutive ones as `BlockSizes` allows — the block with the fewest usable
    /// nodes that suffices (larger ones stay whole for larger jobs); within it, base blocks
    /// that hold the rest best (the fewest usable nodes that suffice, else the most). With
    /// `--segment=N`, each group of N nodes is placed so in turn. `None` when none of the
    /// candidates is in a block (plain placement).
    pub(super) fn place_blocks(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Option<Result<Vec<(usize, u32)>, bool>> {
        let t = self.topology.as_ref()?;
        let ti = self.topo.as_ref()?;
        let in_blocks: Vec<usize> = cands.iter().copied().filter(|&i| ti.block[i].is_some()).collect();
        if in_blocks.is_empty() {
            return None;
        }
        let k = k_min.max(1);
        if k == 1 && job.wanted_nodes() <= 1 {
            return Some(self.best_fit(job, &in_blocks, free).map(|i| vec![(i, job.ntasks)]).ok_or(false));
        }
        // A node is usable when it holds its share of the tasks.
        let share = job.more().ntasks_per_node.unwrap_or(job.ntasks.div_ceil(k)).max(1);
        let mut usable: Vec<Vec<usize>> = vec![Vec::new(); t.blocks.len()];
        for &i in &in_blocks {
            if let Some(b) = ti.block[i] {
                if self.capacity(job, &self.nodes[i], free(i)) >= share {
                    usable[b].push(i);
                }
            }
        }
        // A segment larger than the job is ignored, as Slurm does; one that does not divide
        // it was refused at submit.
        let seg = job.more().segment.filter(|&s| s > 0 && s <= k).unwrap_or(k);
        if !k.is_multiple_of(seg) {
            return Some(Err(false));
        }
        let groups = match t.level_for(seg) {
            Some(l) => t.groups(l),
            None => vec![drover_model::topology::BlockGroup { blocks: 0..t.blocks.len(), level: 0 }],
        };
        let mut chosen: Vec<usize> = Vec::with_capacity(k as usize);
        for _ in 0..k / seg {
            let room = |g: &drover_model::topology::BlockGroup| -> usize {
                usable[g.blocks.clone()].iter().map(Vec::len).sum()
            };
            let Some(g) = groups.iter().filter(|g| room(g) >= seg as usize).min_by_key(|g| (room(g), g.blocks.start))
            else {
                return Some(Err(false));
            };
            let mut rest = seg as usize;
            while rest > 0 {
                let blocks = g.blocks.clone().filter(|&b| !usable[b].is_empty());
                let best = blocks
                    .map(|b| (usable[b].len() >= rest, usable[b].len(), b))
                    .min_by_key(|&(fits, n, b)| (!fits, if fits { n } else { usize::MAX - n }, b));
                let Some((_, n, b)) = best else { return Some(Err(false)) };
                let take = n.min(rest);
                chosen.extend(usable[b].drain(..take));
                rest -= take;
            }
        }
        Some(self.pick(job, &chosen, k, k, free))
    }

    /// Best fit for a job one node can hold: of the lowest weight's nodes that can take all
    /// of it, the one with the least left free (GPUs first, then cores, then memory), so
    /// small jobs pack onto partly used nodes and whole nodes stay whole for large jobs —
    /// single-GPU jobs fill one GPU node instead of one GPU on each. `None` when no node
    /// holds it all (it spans nodes, first fit).
    pub(super) fn best_fit(&self, job: &SchedJob, cands: &[usize], free: &dyn Fn(usize) -> Free) -> Option<usize> {
        // (weight, GPUs, cores and memory left, order) of the best so far, and its node.
        type Key = (u32, u32, u32, u64, usize);
        let mut best: Option<(Key, usize)> = None;
        let need = job.ntasks * job.cpus_per_task.max(1);
        let gpus = gpu_need(job, job.ntasks);
        for (k, &i) in cands.iter().enumerate() {
            let n = &self.nodes[i];
            if best.as_ref().is_some_and(|b| n.weight > b.0 .0) {
                // Candidates come by weight: nothing lighter follows.
                break;
            }
            let f = free(i);
            if self.capacity(job, n, f) < job.ntasks {
                continue;
            }
            let key = (n.weight, f.gpus, f.cpus, f.mem, k);
            if best.as_ref().is_none_or(|b| key < b.0) {
                best = Some((key, i));
                if !job.exclusive && f.cpus == need && f.gpus == gpus {
                    // Nothing fits tighter: its cores and GPUs exactly.
                    break;
                }
            }
        }
        best.map(|b| b.1)
    }

    /// Takes nodes in `cands` order until the job's tasks and node count are met.
    pub(super) fn pick(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Result<Vec<(usize, u32)>, bool> {
        // Err(true): the node limit ran out before the tasks did (another choice of nodes may
        // fit); Err(false): not enough room whatever the choice.
        let mut picked: Vec<(usize, u32)> = Vec::new();
        let mut sum: u64 = 0;
        let want = job.wanted_nodes().clamp(k_min, k_max);
        for &i in cands {
            let required = job.more().nodelist.contains(&self.nodes[i].name);
            if picked.len() as u32 >= want && sum >= job.ntasks as u64 && !required {
                break;
            }
            if picked.len() as u32 >= k_max {
                break;
            }
            let cap = self.capacity(job, &self.nodes[i], free(i));
            if cap == 0 {
                if required {
                    return Err(false);
                }
                continue;
            }
            // The last node the limit allows must take all the tasks still unplaced.
            let last = picked.len() as u32 + 1 == k_max;
            if last && !required && sum + u64::from(cap) < job.ntasks as u64 {
                continue;
            }
            picked.push((i, cap));
            sum += cap as u64;
        }
        if (picked.len() as u32) < k_min || sum < job.ntasks as u64 {
            return Err(picked.len() as u32 + 1 >= k_max);
        }
        // Tasks: one per node (or the per-node count), then fill in order.
        let mut tasks: Vec<u32> =
            picked.iter().map(|(_, cap)| job.more().ntasks_per_node.unwrap_or(1).min(*cap)).collect();
        let mut left = (job.ntasks as i64) - tasks.iter().map(|t| *t as i64).sum::<i64>();
        if job.more().ntasks_per_node.is_none() {
            for (k, (_, cap)) in picked.iter().enumerate() {
                if left <= 0 {
                    break;
                }
                let add = ((*cap - tasks[k]) as i64).min(left);
                tasks[k] += add as u32;
                left -= add;
            }
        }
        Ok(picked.iter().zip(tasks).map(|(&(i, _), t)| (i, t)).collect())
    }

    /// Concrete cores and memory for picks that fit now.
    pub(super) fn allocate(&self, job: &SchedJob, part: &PartitionRes, picks: &[(usize, u32)]) -> Allocation {
        let cpt = job.cpus_per_task.max(1);
        let nodes = picks
            .iter()
            .map(|&(i, t)| {
                let n = &self.nodes[i];
                let want = if job.exclusive { n.cpus } else { (t * cpt).max(job.more().min_cpus) };
                // GPUs first, those with the most free CPUs near them (gres.conf Cores=)
                // first; then CPUs, those near the chosen GPUs first.
                let near_free = |g: u32| -> i64 {
                    let cpus = n.gpu_cpus.get(g as usize).and_then(|c| c.as_ref());
                    -(cpus
                        .map_or(0, |c| c.iter().filter(|&&k| !n.used.get(k as usize).copied().unwrap_or(true)).count())
                        as i64)
                };
                let gres = if job.exclusive {
                    n.gres.all()
                } else {
                    let mut got: Vec<drover_model::gres::GresAlloc> = Vec::new();
                    for g in &job.more().gres {
                        // `place` checked there are enough: the pick cannot come up short.
                        let picked = if g.name == "gpu" && (!n.gpu_cpus.is_empty() || !n.gpu_links.is_empty()) {
                            // Greedy: the device nearest free CPUs first, then each next one
                            // with the most links to those chosen.
                            let links = |a: u32, b: u32| {
                                n.gpu_links.get(a as usize).and_then(|l| l.get(b as usize)).copied().unwrap_or(0)
                            };
                            n.gres.pick_by(g, g.for_tasks(t), |mut free, k| {
                                let mut chosen: Vec<u32> = Vec::new();
                                while chosen.len() < k && !free.is_empty() {
                                    let score = |d: u32| {
                                        let l: u32 = chosen.iter().map(|&c| links(c, d)).sum();
                                        (std::cmp::Reverse(l), near_free(d), d)
                                    };
                                    let best = (0..free.len()).min_by_key(|&i| score(free[i])).unwrap_or(0);
                                    chosen.push(free.swap_remove(best));
                                }
                                chosen
                            })
                        } else {
                            n.gres.pick(g, g.for_tasks(t))
                        };
                        got.extend(picked.unwrap_or_default());
                    }
                    got
                };
                let near: Vec<u32> = gres
                    .iter()
                    .filter(|g| g.name == "gpu")
                    .flat_map(|g| g.indices.iter())
                    .filter_map(|&d| n.gpu_cpus.get(d as usize).and_then(|c| c.clone()))
                    .flatten()
                    .collect();
                let mut free: Vec<u32> =
                    n.used.iter().enumerate().filter(|(_, u)| !**u).map(|(k, _)| k as u32).collect();
                free.sort_by_key(|k| (!near.contains(k), *k));
                let mut cpu_ids: Vec<u32> = free.into_iter().take(want as usize).collect();
                cpu_ids.sort_unstable();
                let mem_mb = match (job.mem_per_node_mb, job.mem_per_cpu_mb) {
                    (Some(m), _) => m,
                    (None, Some(m)) => m * cpu_ids.len() as u64,
                    (None, None) => 0,
                };
                // (An exclusive job holds every GRES of its nodes, as in Slurm: see above.)
                NodeAlloc { node: n.name.clone(), cpu_ids, mem_mb, tasks: t, gres }
            })
            .collect();
        Allocation { partition: part.name.clone(), nodes }
    }
}

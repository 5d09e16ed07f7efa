//! Each check of a pass on its own, for `explain` (which lists every constraint a waiting
//! job fails, not only the first).

use super::*;

impl Core {
    pub(crate) fn pending_job(&self, id: JobId) -> Option<&SchedJob> {
        self.pending.get(&id).map(|p| &p.0)
    }

    /// `Some(never)` where its dependencies hold it.
    pub(crate) fn dependency_blocks(&self, job: &SchedJob, now: i64) -> Option<bool> {
        match self.dep_state(job, now) {
            DepState::Never => Some(true),
            DepState::Waiting => Some(false),
            DepState::Satisfied => None,
        }
    }

    /// (running, limit) where its array's throttle holds it.
    pub(crate) fn throttled(&self, job: &SchedJob) -> Option<(u32, u32)> {
        let a = job.more().array.as_ref().filter(|a| a.throttle > 0)?;
        let running = self.array_running.get(&a.array_id).copied().unwrap_or(0);
        (running >= a.throttle).then_some((running, a.throttle))
    }

    /// The licenses it asks for that are not free: (name, wanted, free).
    pub(crate) fn short_licenses(&self, job: &SchedJob) -> Vec<(String, u32, u32)> {
        job.more()
            .licenses
            .iter()
            .filter_map(|(name, n)| {
                let total = self.licenses.get(name).copied().unwrap_or(0);
                let free = total.saturating_sub(self.licenses_used.get(name).copied().unwrap_or(0));
                (free < *n).then(|| (name.clone(), *n, free))
            })
            .collect()
    }

    pub(crate) fn limit_blocks(&self, job: &SchedJob) -> Option<PendingReason> {
        self.limits.blocked(&job.more().limits, &job.need())
    }

    /// A member's reservation, or (its name, its start if it has not started) where it may
    /// not run now.
    pub(crate) fn within_for_explain(&self, job: &SchedJob, now: i64) -> Result<Option<(usize, Within)>, ResvBlock> {
        self.within(job, now).map_err(|_| {
            let name = job.more().reservation.as_deref().unwrap_or("").to_string();
            let start = self.resvs.iter().find(|(r, _)| *r.name == *name && r.end > now).map(|(r, _)| r.start);
            (name, start)
        })
    }

    /// The last pass's plan as seen by job `id`: running jobs, advance reservations and every
    /// other job's planned start.
    pub(crate) fn planning_timeline(&self, id: JobId, now: i64) -> Timeline {
        let mut tl = self.timeline(now);
        let mut kept: Vec<&Reservation> = self.planned.values().filter(|r| r.job != id).collect();
        kept.sort_unstable_by_key(|r| r.job);
        for r in kept {
            tl.add(r.clone());
        }
        tl
    }

    /// With predictions on: what the plan expects `job` to run, from which recent runs of
    /// its user, and how many running jobs it expects to end before their limits.
    pub(crate) fn prediction_for_explain(&self, job: &SchedJob, now: i64) -> Option<crate::explain::Prediction> {
        if !self.config.predict {
            return None;
        }
        let l = limit_secs(self.first_partition_limit(job));
        Some(crate::explain::Prediction {
            secs: self.history.predict(job.uid, l).filter(|p| *p < l),
            recent: self.history.recent(job.uid),
            running_early: self.early_ends(now).count() as u32,
            by_limits: self.by_limits,
        })
    }

    pub(crate) fn partition(&self, name: &str) -> Option<&PartitionRes> {
        self.partitions.iter().find(|p| *p.name == *name)
    }

    pub(crate) fn partition_blocks(&self, job: &SchedJob, part: &PartitionRes) -> Option<PendingReason> {
        part.down.or_else(|| partition_limit(job, part))
    }

    /// What node `i` has free now for `job`.
    pub(crate) fn free_now_on(&self, job: &SchedJob, i: usize) -> Free {
        let n = &self.nodes[i];
        Free {
            cpus: n.cpus - n.alloc_cpus(),
            mem: n.mem_mb.saturating_sub(n.used_mem),
            gpus: self.gpus_free_for(job, n),
            idle: n.jobs == 0,
        }
    }

    /// What node `i` has for `job` over `[from, to)`: what the timeline allows there, and
    /// never more than the node has free now (GPUs exactly: those of the type it asks for).
    pub(crate) fn free_within(&self, job: &SchedJob, tl: &Timeline, i: usize, from: i64, to: i64) -> Free {
        let f = tl.free_over(i, from, to);
        let n = self.free_now_on(job, i);
        Free { cpus: f.cpus.min(n.cpus), mem: f.mem.min(n.mem), gpus: f.gpus.min(n.gpus), idle: f.idle && n.idle }
    }

    /// Whether `job` would fit in `part` by `free` were it not for the network topology (a
    /// block, or a `--switches` leaf limit, that has no room): what the topology blocker
    /// says. False without a topology.
    pub(crate) fn fits_but_for_topology(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
    ) -> bool {
        if self.topology.is_none() {
            return false;
        }
        self.without_topology.set(true);
        let fits = self.place(job, part, free, None).is_ok();
        self.without_topology.set(false);
        fits
    }

    /// What the topology asks of `job`: (nodes in one block, or leaf switches at most, and
    /// the segment size with blocks).
    pub(crate) fn topology_ask(&self, job: &SchedJob, now: i64) -> Option<crate::explain::Blocker> {
        let t = self.topology.as_ref()?;
        let k = job.min_nodes.max(1);
        if !t.blocks.is_empty() {
            let seg = job.more().segment.filter(|&s| s > 0 && s <= k);
            return Some(crate::explain::Blocker::Topology {
                nodes: seg.unwrap_or(k),
                segments: seg.map_or(1, |s| k / s),
                switches: None,
            });
        }
        let (n, until) = job.more().switches.filter(|s| now < s.1)?;
        Some(crate::explain::Blocker::Topology { nodes: k, segments: 1, switches: Some((n, until)) })
    }

    /// Placement as the pass tries it at `now`, inside a member's reservation where there is
    /// one, within its leaf-switch limit while that lasts.
    pub(crate) fn place_for_explain(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
        within: Option<&Within>,
        now: i64,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let f = |i: usize| {
            if within.is_some_and(|w| !w.nodes[i]) {
                Free { cpus: 0, mem: 0, gpus: 0, idle: false }
            } else {
                free(i)
            }
        };
        self.place(job, part, &f, job.switch_limit(now))
    }

    /// How short a partition is of what the job needs now.
    pub(crate) fn resource_shortfall(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
    ) -> crate::explain::Blocker {
        let m = job.more();
        let usable: Vec<usize> = part
            .nodes
            .iter()
            .filter_map(|n| self.node_idx.get(n).copied())
            .filter(|&i| {
                let n = &self.nodes[i];
                n.schedulable
                    && !m.exclude.contains(&n.name)
                    && m.constraint.as_ref().is_none_or(|c| c.matches(&n.features))
            })
            .collect();
        let cpus_free = usable.iter().map(|&i| u64::from(free(i).cpus)).sum();
        let gpus_free = usable.iter().map(|&i| u64::from(free(i).gpus)).sum();
        let nodes_with_room =
            usable.iter().filter(|&&i| self.capacity(job, &self.nodes[i], free(i)) > 0).count() as u32;
        let cpus_needed = u64::from(job.ntasks) * u64::from(job.cpus_per_task.max(1));
        let gpus_needed = u64::from(gpu_need(job, job.ntasks))
            .max(m.gres.iter().filter(|g| g.name == "gpu").map(|g| g.per_node * u64::from(job.min_nodes)).sum());
        crate::explain::Blocker::Resources {
            partition: part.name.clone(),
            cpus_free,
            cpus_needed,
            gpus_free,
            gpus_needed,
            nodes_with_room,
            nodes_needed: job.wanted_nodes().max(1),
        }
    }

    /// How many of a partition's nodes advance reservations keep over `[now, end)` from a
    /// job outside them; `None` for none.
    pub(crate) fn reserved_nodes(&self, job: &SchedJob, part: &PartitionRes, now: i64, end: i64) -> Option<u32> {
        if job.more().reservation.is_some() {
            return None;
        }
        let n = part
            .nodes
            .iter()
            .filter(|n| self.resvs.iter().any(|(r, _)| r.start < end && r.end > now && r.nodes.contains(n)))
            .count() as u32;
        (n > 0).then_some(n)
    }

    /// Waiting jobs ahead of `job` in the queue for partition `pname`.
    pub(crate) fn ahead_in(&self, job: &SchedJob, pname: &str) -> u32 {
        self.queue
            .iter()
            .take_while(|(_, id)| *id != job.id)
            .filter(|(_, id)| {
                self.pending
                    .get(id)
                    .is_some_and(|(j, _)| j.hold.is_none() && j.partitions.iter().any(|p| **p == *pname))
            })
            .count() as u32
    }
}

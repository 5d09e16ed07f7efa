//! QoS preemption: which running jobs make room for a waiting one, and when a job suspended
//! for it may resume.

use super::*;

impl Core {
    /// QoS preemption: each waiting job (in priority order) that may preempt and is first in
    /// line for resources in its partition gets the fewest running jobs of the QoS it may preempt (youngest first,
    /// those that ran less than `PreemptExemptTime` spared) whose resources would let it
    /// start, unless jobs already being preempted for it free enough.
    pub(super) fn preempt(&mut self, now: i64, out: &mut Vec<Decision>) {
        if self.running_qos.is_empty() {
            return;
        }
        let order: Vec<JobId> = self.queue.iter().map(|(_, id)| *id).collect();
        let mut tried = 0;
        for id in order {
            let Some((job, reason)) = self.pending.get(&id) else { continue };
            let Some(p) = job.more().preempt.as_ref().filter(|p| !p.can_preempt.is_empty()) else { continue };
            // Only the first waiting job of its partition (the others wait for priority):
            // room freed for a job further back would go to those before it.
            if *reason != PendingReason::Resources {
                continue;
            }
            tried += 1;
            if tried > 16 {
                break;
            }
            let may = |v: &JobId| self.running_qos.get(v).is_some_and(|q| p.can_preempt.contains(q));
            let mut going: Vec<JobId> = self.preempting.keys().copied().filter(|v| may(v)).collect();
            going.sort_unstable();
            if self.fits_without(job, &going) {
                continue;
            }
            let exempt = self.config.preempt_exempt;
            let mut cands: Vec<JobId> = Vec::new();
            for v in self.running_qos.keys().copied().filter(|v| may(v) && !self.preempting.contains_key(v)) {
                match self.started_at.get(&v) {
                    // Still exempt: the pass when it no longer is may choose it.
                    Some(s) if now - s < exempt => {
                        let due = s + exempt;
                        self.wake_at = Some(self.wake_at.map_or(due, |w| w.min(due)));
                    }
                    _ => cands.push(v),
                }
            }
            cands.sort_unstable_by_key(|v| (std::cmp::Reverse(self.started_at.get(v).copied().unwrap_or(0)), *v));
            let mut chosen: Vec<JobId> = Vec::new();
            let with =
                |going: &[JobId], chosen: &[JobId]| -> Vec<JobId> { going.iter().chain(chosen).copied().collect() };
            let mut found = false;
            for v in cands {
                chosen.push(v);
                if self.fits_without(job, &with(&going, &chosen)) {
                    found = true;
                    break;
                }
            }
            if !found {
                continue;
            }
            // The fewest: drop any chosen job the others make unnecessary.
            let mut k = 0;
            while k < chosen.len() {
                let mut fewer = chosen.clone();
                fewer.remove(k);
                if self.fits_without(job, &with(&going, &fewer)) {
                    chosen = fewer;
                } else {
                    k += 1;
                }
            }
            for v in chosen {
                self.preempting.insert(v, now);
                self.preempt_for.insert(v, id);
                out.push(Decision::Preempt { job: v, by: id });
            }
        }
    }

    /// Whether `job` is suspended by preemption (its resources lent to others).
    pub fn suspended_by_preemption(&self, job: JobId) -> bool {
        self.suspended.contains_key(&job)
    }

    /// Whether exactly these CPUs, memory and GRES are free now.
    pub(super) fn free_exactly(&self, alloc: &Allocation) -> bool {
        alloc.nodes.iter().all(|na| {
            self.node_idx.get(&na.node).is_some_and(|&i| {
                let n = &self.nodes[i];
                na.cpu_ids.iter().all(|&c| n.used.get(c as usize) == Some(&false))
                    && n.mem_mb.saturating_sub(n.used_mem) >= na.mem_mb
                    && n.gres.can_take(&na.gres)
            })
        })
    }

    /// Whether `job` would fit now if `victims` were gone.
    pub(super) fn fits_without(&self, job: &SchedJob, victims: &[JobId]) -> bool {
        let mut freed: HashMap<usize, (Res, u32)> = HashMap::default();
        for v in victims {
            for na in self.running.get(v).map(|a| a.nodes.as_slice()).unwrap_or_default() {
                if let Some(&i) = self.node_idx.get(&na.node) {
                    let e = freed.entry(i).or_default();
                    let h = held(na);
                    e.0.cpus += h.cpus;
                    e.0.mem += h.mem;
                    e.0.gpus += h.gpus;
                    e.1 += 1;
                }
            }
        }
        let free = |i: usize| {
            let n = &self.nodes[i];
            let (r, jobs) = freed.get(&i).copied().unwrap_or_default();
            Free {
                cpus: (n.cpus - n.alloc_cpus()) + r.cpus,
                mem: n.mem_mb.saturating_sub(n.used_mem) + r.mem,
                gpus: self.gpus_free_for(job, n) + r.gpus,
                idle: n.jobs <= jobs,
            }
        };
        job.partitions.iter().any(|pname| {
            self.partitions
                .iter()
                .find(|p| *p.name == **pname)
                .filter(|p| p.down.is_none() && partition_limit(job, p).is_none())
                .is_some_and(|part| self.place(job, part, &free, None).is_ok())
        })
    }
}

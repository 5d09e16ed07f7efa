//! Dependencies: what each target job (or array) is doing, and whether a waiting job's
//! `--dependency` list is satisfied, waiting, or never will be.

use super::*;

impl Core {
    pub(super) fn job_state(&self, id: JobId, st: &mut TargetState) {
        if self.pending.contains_key(&id) {
            st.known = true;
            st.pending = true;
        } else if self.running.contains_key(&id) {
            st.known = true;
            st.running = true;
        } else if let Some(o) = self.ended.get(&id) {
            st.known = true;
            st.failed |= *o == Outcome::Failed;
        } else {
            return;
        }
        if let Some(&t) = self.started_at.get(&id) {
            st.started = Some(st.started.map_or(t, |s| s.max(t)));
        }
    }

    /// A target: job `id`, task `task` of array `id`, or every task of array `id`.
    pub(super) fn target_state(&self, id: JobId, task: Option<u32>) -> TargetState {
        let mut st = TargetState::default();
        match task {
            Some(t) => match self.task_job.get(&(id, t)) {
                Some(&j) => self.job_state(j, &mut st),
                None if self.remainder(id).is_some_and(|r| r.contains(t)) => {
                    st.known = true;
                    st.pending = true;
                }
                None => {}
            },
            None if self.is_array(id) => {
                if self.remainder(id).is_some() {
                    st.known = true;
                    st.pending = true;
                }
                for &j in self.members.get(&id).into_iter().flatten() {
                    self.job_state(j, &mut st);
                }
            }
            None => self.job_state(id, &mut st),
        }
        st
    }

    pub(super) fn dep_one(&self, d: &Dependency, job: &SchedJob, now: i64) -> DepState {
        let (kind, task) = match d.kind {
            DependencyKind::AfterBurstBuffer | DependencyKind::Singleton => return DepState::Satisfied,
            // Task N waits for task N of the other array (the whole job when it is not one);
            // an array's remainder is judged by the task it would start next.
            DependencyKind::AfterCorr => {
                let mine = job.more().array.as_ref().and_then(|a| a.task.or_else(|| a.pending.min()));
                (DependencyKind::AfterOk, mine.filter(|_| self.is_array(d.job)))
            }
            k => (k, d.task),
        };
        let st = self.target_state(d.job, task);
        if !st.known {
            // Ended and forgotten (MinJobAge): Slurm counts it as satisfied too.
            return DepState::Satisfied;
        }
        let ended = !st.pending && !st.running;
        match kind {
            DependencyKind::After => {
                if st.pending {
                    return DepState::Waiting;
                }
                match st.started {
                    Some(t0) if d.delay_min > 0 && now < t0 + i64::from(d.delay_min) * 60 => {
                        let due = t0 + i64::from(d.delay_min) * 60;
                        self.dep_wake.set(Some(self.dep_wake.get().map_or(due, |w| w.min(due))));
                        DepState::Waiting
                    }
                    _ => DepState::Satisfied,
                }
            }
            DependencyKind::AfterAny if ended => DepState::Satisfied,
            DependencyKind::AfterOk if st.failed => DepState::Never,
            DependencyKind::AfterOk if ended => DepState::Satisfied,
            DependencyKind::AfterNotOk if ended && st.failed => DepState::Satisfied,
            DependencyKind::AfterNotOk if ended => DepState::Never,
            _ => DepState::Waiting,
        }
    }

    pub(super) fn dep_state(&self, job: &SchedJob, now: i64) -> DepState {
        let more = job.more();
        if more.singleton_after.iter().any(|b| self.pending.contains_key(b) || self.running.contains_key(b)) {
            return DepState::Waiting;
        }
        let deps = &more.dependency;
        let mut states =
            deps.list.iter().filter(|d| d.kind != DependencyKind::Singleton).map(|d| self.dep_one(d, job, now));
        if deps.any {
            let all: Vec<DepState> = states.collect();
            if all.is_empty() || all.iter().any(|s| matches!(s, DepState::Satisfied)) {
                DepState::Satisfied
            } else if all.iter().all(|s| matches!(s, DepState::Never)) {
                DepState::Never
            } else {
                DepState::Waiting
            }
        } else {
            let mut waiting = false;
            for st in states.by_ref() {
                match st {
                    DepState::Never => return DepState::Never,
                    DepState::Waiting => waiting = true,
                    DepState::Satisfied => {}
                }
            }
            if waiting {
                DepState::Waiting
            } else {
                DepState::Satisfied
            }
        }
    }
}

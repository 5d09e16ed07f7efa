//! What run-time predictions learn from (see `drover_sched::predict`): each job's run as it
//! ends, and at start the cluster's recent jobs from accounting, in the order they ended.

use super::*;

impl Owner {
    /// A job of `uid` ran `secs`.
    pub(super) fn ran(&mut self, uid: u32, secs: i64) {
        if let Some(v) = self.runs_since_start.as_mut() {
            v.push((uid, secs));
            if v.len() > 10_000 {
                // Accounting has been away for long: what ran since is history enough.
                self.runs_since_start = None;
            }
        }
        self.core.handle(Event::Ran { uid, seconds: secs });
    }

    /// Accounting's history of the jobs that ended before this controller started, oldest
    /// first: learned first, then again what ended since (so the newest runs count last).
    pub(super) fn learn_runs(&mut self, runs: Vec<(u32, i64)>) {
        let Some(since) = self.runs_since_start.take() else { return };
        let (users, n) = (runs.iter().map(|r| r.0).collect::<std::collections::HashSet<_>>().len(), runs.len());
        for (uid, seconds) in runs.into_iter().chain(since) {
            self.core.handle(Event::Ran { uid, seconds });
        }
        if n > 0 {
            crate::log(&format!("run-time predictions learned from {n} recent jobs of {users} users in accounting"));
        }
    }
}

/// Where there is no accounting, what the state still holds is the history: the ended jobs
/// not yet purged, in the order they ended.
pub(super) fn runs_in_state(jobs: &[Arc<Job>]) -> Vec<(u32, i64)> {
    drover_sched::predict::in_end_order(
        jobs.iter()
            .filter(|j| !matches!(j.status.state, JobState::Pending | JobState::Running | JobState::Suspended))
            .filter_map(|j| {
                let s = &j.status;
                let secs = drover_sched::predict::run_time(s.start_time, s.end_time, s.suspended_secs)?;
                Some((s.end_time, j.id, j.uid, secs))
            })
            .collect(),
    )
}

//! The backfill planner's timeline: what each node has free at a future time, from the
//! expected ends of what runs there (start + time limit) and the reservations this pass has
//! made for waiting jobs. Counts only (cores, memory, whether the node is empty); the core
//! picks concrete cores when a job starts now.
//!
//! ```text
//!  running jobs ──(end, cpus, mem) per node──► Timeline ◄── reservations (start..end, claims)
//!  free_over(node, from, to) = the least a node has free at any moment of [from, to)
//! ```

use drover_model::job::JobId;

/// A time limit that is UNLIMITED plans as this long (Slurm plans INFINITE as a year).
pub const FAR: i64 = 365 * 86400;

/// What a node has free at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Free {
    pub cpus: u32,
    pub mem: u64,
    /// Nothing runs or is reserved there (what `--exclusive` needs).
    pub idle: bool,
}

/// Resources held from `start` to `end` for a waiting job, node by node: (node, cpus, mem).
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub job: JobId,
    pub start: i64,
    pub end: i64,
    pub claims: Vec<(usize, u32, u64)>,
}

/// Backfill policies (`drover sim --policy`, and the controller's scheduler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Strict priority order: nothing passes a job that waits for resources.
    Fcfs,
    /// EASY: the first job that waits gets a reservation; later jobs start now only if they
    /// do not delay it.
    Easy,
    /// Conservative: every waiting job (up to the test depth) gets a reservation, and a job
    /// starts now only if it delays none of them.
    #[default]
    Conservative,
}

impl Policy {
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "fcfs" => Some(Policy::Fcfs),
            "easy" => Some(Policy::Easy),
            "conservative" | "default" => Some(Policy::Conservative),
            _ => None,
        }
    }
}

/// How the scheduler plans (Slurm's `SchedulerType` and the `bf_*` parameters it honours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedConfig {
    pub policy: Policy,
    /// `bf_max_job_test`: how many waiting jobs get a reservation in one pass.
    pub max_job_test: usize,
    /// `bf_window` (seconds): expected starts further ahead are not reported (Slurm's
    /// `N/A`), though the reservation still protects the job from being passed forever.
    pub window: i64,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig { policy: Policy::Conservative, max_job_test: 500, window: 86400 }
    }
}

/// One pass's view of the future.
pub struct Timeline {
    /// Per node (by index): total cpus and memory.
    total: Vec<(u32, u64)>,
    /// Per node: (expected end, cpus, mem) of each job running there.
    releases: Vec<Vec<(i64, u32, u64)>>,
    pub resv: Vec<Reservation>,
}

impl Timeline {
    pub fn new(total: Vec<(u32, u64)>) -> Timeline {
        let releases = vec![Vec::new(); total.len()];
        Timeline { total, releases, resv: Vec::new() }
    }

    /// A job holds `cpus` and `mem` on node `i` until `end`.
    pub fn hold(&mut self, i: usize, end: i64, cpus: u32, mem: u64) {
        if let Some(r) = self.releases.get_mut(i) {
            r.push((end, cpus, mem));
        }
    }

    /// Free on node `i` at moment `t`.
    pub fn free_at(&self, i: usize, t: i64) -> Free {
        let (mut cpus, mut mem) = self.total[i];
        let mut idle = true;
        for &(end, c, m) in &self.releases[i] {
            if end > t {
                cpus = cpus.saturating_sub(c);
                mem = mem.saturating_sub(m);
                idle = false;
            }
        }
        for r in self.resv.iter().filter(|r| r.start <= t && t < r.end) {
            for &(_, c, m) in r.claims.iter().filter(|c| c.0 == i) {
                cpus = cpus.saturating_sub(c);
                mem = mem.saturating_sub(m);
                idle = false;
            }
        }
        Free { cpus, mem, idle }
    }

    /// The least node `i` has free at any moment of `[from, to)`: running jobs only end, so
    /// only `from` and the starts of reservations inside the window can bind.
    pub fn free_over(&self, i: usize, from: i64, to: i64) -> Free {
        let mut f = self.free_at(i, from);
        for r in &self.resv {
            if r.start > from && r.start < to && r.claims.iter().any(|c| c.0 == i) {
                let g = self.free_at(i, r.start);
                f = Free { cpus: f.cpus.min(g.cpus), mem: f.mem.min(g.mem), idle: f.idle && g.idle };
            }
        }
        f
    }

    /// Moments after `now` when something frees up: candidate start times, in order.
    pub fn release_times(&self, now: i64) -> Vec<i64> {
        let mut t: Vec<i64> = self
            .releases
            .iter()
            .flatten()
            .map(|r| r.0)
            .chain(self.resv.iter().map(|r| r.end))
            .filter(|&e| e > now)
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_follows_ends_and_reservations() {
        let mut t = Timeline::new(vec![(4, 1000), (4, 1000)]);
        t.hold(0, 100, 3, 500);
        assert_eq!(t.free_at(0, 50), Free { cpus: 1, mem: 500, idle: false });
        assert_eq!(t.free_at(0, 100), Free { cpus: 4, mem: 1000, idle: true });
        t.resv.push(Reservation { job: 9, start: 100, end: 200, claims: vec![(0, 4, 0)] });
        assert_eq!(t.free_at(0, 150).cpus, 0);
        // From 50 to 150 the reservation's start binds; from 200 on, nothing.
        assert_eq!(t.free_over(0, 50, 150).cpus, 0);
        assert_eq!(t.free_over(0, 50, 100).cpus, 1);
        assert_eq!(t.free_over(0, 200, 300).cpus, 4);
        assert_eq!(t.free_over(1, 0, 1000), Free { cpus: 4, mem: 1000, idle: true });
        assert_eq!(t.release_times(0), [100, 200]);
    }
}

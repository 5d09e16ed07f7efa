//! The backfill planner's timeline: what each node has free at a future time, from the
//! expected ends of what runs there (start + time limit) and the reservations this pass has
//! made for waiting jobs. Counts only (cores, memory, GPUs, whether the node is empty); the
//! core picks concrete cores and devices when a job starts now.
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
    /// GPUs (consumable `gpu` GRES of any type).
    pub gpus: u32,
    /// Nothing runs or is reserved there (what `--exclusive` needs).
    pub idle: bool,
}

/// Countable resources held or claimed on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Res {
    pub cpus: u32,
    pub mem: u64,
    pub gpus: u32,
}

/// Resources held from `start` to `end` for a waiting job, node by node.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub job: JobId,
    pub start: i64,
    pub end: i64,
    pub claims: Vec<(usize, Res)>,
}

/// How many waiting jobs hold reservations that later jobs may not delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Strict priority order: nothing passes a job that waits for resources.
    Fcfs,
    /// EASY: the first job that waits gets a reservation; later jobs start now only if they
    /// do not delay it.
    #[default]
    Easy,
    /// Conservative: every waiting job (up to the test depth) gets a reservation, and a job
    /// starts now only if it delays none of them (Slurm's backfill).
    Conservative,
}

/// The order in which the jobs left once the reservations are made are tried for backfill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackfillOrder {
    /// Priority order (Slurm's).
    Priority,
    /// Highest [`crate::predict::slowdown_score`] first: jobs that have waited long for
    /// their (predicted) length.
    #[default]
    Slowdown,
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
    /// `bf_interval` (seconds): planning passes (backfill, new reservations) run at most
    /// this often; the passes between start what fits in order and honour reservations.
    pub interval: i64,
    /// `PreemptExemptTime` (seconds): a job that has run less is not preempted.
    pub preempt_exempt: i64,
    /// `bf_max_job_user`: at most this many reservations per user in a planning pass (0: no
    /// limit).
    pub max_job_user: usize,
    /// `bf_min_age_reserve` (seconds): a job eligible for less gets no reservation (and so
    /// holds nothing back from jobs behind it).
    pub min_age_reserve: i64,
    /// Plan with run times predicted from each user's recent jobs (see [`crate::predict`])
    /// instead of time limits.
    pub predict: bool,
    pub order: BackfillOrder,
    /// `bf_slip_limit` (seconds): with predictions, once a reserved job's expected start has
    /// slipped this far past the first one it was given (predictions that proved short), the
    /// passes plan by time limits until it starts, as EASY does; no job starves.
    pub slip_limit: i64,
    /// Under EASY, report expected starts (`squeue --start`) for the jobs after the reserved
    /// one too, up to `max_job_test`: where the plan would put them, promising nothing. (The
    /// simulator, which shows none, skips the work.)
    pub forecast: bool,
}

impl SchedConfig {
    /// Slurm's backfill: every waiting job tested gets a reservation, jobs are tried in
    /// priority order, and the plan is built on time limits (`bf_policy=conservative`).
    pub fn slurm() -> SchedConfig {
        SchedConfig {
            policy: Policy::Conservative,
            predict: false,
            order: BackfillOrder::Priority,
            ..SchedConfig::default()
        }
    }

    /// A named policy (`bf_policy=`, `drover sim --policy`): `predictive` (Drover's default),
    /// `conservative` (Slurm's), `easy`, `fcfs`.
    pub fn named(name: &str) -> Option<SchedConfig> {
        let d = SchedConfig::default();
        Some(match name {
            "predictive" | "default" => d,
            "conservative" | "slurm" => SchedConfig::slurm(),
            "easy" => SchedConfig { policy: Policy::Easy, ..SchedConfig::slurm() },
            "fcfs" => SchedConfig { policy: Policy::Fcfs, ..SchedConfig::slurm() },
            _ => return None,
        })
    }
}

/// Drover's default, `bf_policy=predictive`: EASY on predicted run times, backfill by
/// slowdown score, guarded by `bf_slip_limit` (chosen by measurement: docs/scheduler.md).
impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            policy: Policy::Easy,
            max_job_test: 100,
            window: 86400,
            interval: 5,
            preempt_exempt: 0,
            max_job_user: 0,
            min_age_reserve: 0,
            predict: true,
            order: BackfillOrder::Slowdown,
            slip_limit: 3600,
            forecast: true,
        }
    }
}

/// A reservation's claim on one node: (start, end, what, job).
type NodeClaim = (i64, i64, Res, JobId);

/// A node's free space as a step function: (from, what is free from then on).
type Profile = Vec<(i64, Free)>;

/// One pass's view of the future.
pub struct Timeline {
    /// Per node (by index): what it has.
    total: Vec<Res>,
    /// Per node: (expected end, what it holds) of each job running there.
    releases: Vec<Vec<(i64, Res)>>,
    /// Reservations, and per node the (start, end, what) of those that claim it.
    resv: Vec<Reservation>,
    node_resv: Vec<Vec<NodeClaim>>,
    /// Ends of running jobs, sorted (built on first use).
    ends: std::cell::OnceCell<Vec<i64>>,
    /// The jobs with a reservation, and how many each has (most jobs a pass looks at have none).
    resv_jobs: std::collections::BTreeMap<JobId, u32>,
    /// Ends of reservations, counted.
    resv_ends: std::collections::BTreeMap<i64, u32>,
    /// Per node, what it has free as a step function of time: (from, free), built on first
    /// use and dropped when the node's holds or reservations change.
    profiles: std::cell::RefCell<Vec<Option<Profile>>>,
}

impl Timeline {
    pub fn new(total: Vec<Res>) -> Timeline {
        let releases = vec![Vec::new(); total.len()];
        let node_resv = vec![Vec::new(); total.len()];
        let profiles = std::cell::RefCell::new(vec![None; total.len()]);
        Timeline {
            total,
            releases,
            resv: Vec::new(),
            resv_jobs: std::collections::BTreeMap::new(),
            node_resv,
            ends: std::cell::OnceCell::new(),
            resv_ends: std::collections::BTreeMap::new(),
            profiles,
        }
    }

    /// Adds a reservation.
    pub fn add(&mut self, r: Reservation) {
        for &(i, c) in &r.claims {
            if let Some(v) = self.node_resv.get_mut(i) {
                v.push((r.start, r.end, c, r.job));
            }
            self.dirty(i);
        }
        *self.resv_ends.entry(r.end).or_default() += 1;
        *self.resv_jobs.entry(r.job).or_default() += 1;
        self.resv.push(r);
    }

    /// Drops `job`'s reservation; whether it had one.
    pub fn remove(&mut self, job: JobId) -> bool {
        match self.resv_jobs.get_mut(&job) {
            None => return false,
            Some(1) => {
                self.resv_jobs.remove(&job);
            }
            Some(n) => *n -= 1,
        }
        let Some(k) = self.resv.iter().position(|r| r.job == job) else { return false };
        let r = self.resv.swap_remove(k);
        if let Some(n) = self.resv_ends.get_mut(&r.end) {
            *n -= 1;
            if *n == 0 {
                self.resv_ends.remove(&r.end);
            }
        }
        for &(i, ..) in &r.claims {
            if let Some(v) = self.node_resv.get_mut(i) {
                v.retain(|e| e.3 != job);
            }
            self.dirty(i);
        }
        true
    }

    pub fn reservations(&self) -> &[Reservation] {
        &self.resv
    }

    /// A job holds `what` on node `i` until `end`.
    pub fn hold(&mut self, i: usize, end: i64, what: Res) {
        if let Some(r) = self.releases.get_mut(i) {
            r.push((end, what));
        }
        self.ends.take();
        self.dirty(i);
    }

    fn dirty(&mut self, i: usize) {
        if let Some(p) = self.profiles.get_mut().get_mut(i) {
            *p = None;
        }
    }

    /// Node `i`'s free space over time: running jobs hold until their ends, reservations
    /// from their start to their end.
    fn profile(&self, i: usize) -> Profile {
        // (time, cpus delta, mem delta, gpus delta, active delta), applied in time order.
        let mut ev: Vec<(i64, i64, i64, i64, i32)> = Vec::new();
        let (mut used_c, mut used_m, mut used_g, mut active) = (0i64, 0i64, 0i64, 0i32);
        for &(end, r) in &self.releases[i] {
            used_c += i64::from(r.cpus);
            used_m += r.mem as i64;
            used_g += i64::from(r.gpus);
            active += 1;
            ev.push((end, -i64::from(r.cpus), -(r.mem as i64), -i64::from(r.gpus), -1));
        }
        for &(start, end, r, _) in &self.node_resv[i] {
            ev.push((start, i64::from(r.cpus), r.mem as i64, i64::from(r.gpus), 1));
            ev.push((end, -i64::from(r.cpus), -(r.mem as i64), -i64::from(r.gpus), -1));
        }
        ev.sort_unstable_by_key(|e| e.0);
        let t = self.total[i];
        let free = |c: i64, m: i64, g: i64, a: i32| Free {
            cpus: (i64::from(t.cpus) - c).clamp(0, i64::from(t.cpus)) as u32,
            mem: (t.mem as i64 - m).max(0) as u64,
            gpus: (i64::from(t.gpus) - g).clamp(0, i64::from(t.gpus)) as u32,
            idle: a <= 0,
        };
        let mut out = vec![(i64::MIN, free(used_c, used_m, used_g, active))];
        let mut k = 0;
        while k < ev.len() {
            let at = ev[k].0;
            while k < ev.len() && ev[k].0 == at {
                used_c += ev[k].1;
                used_m += ev[k].2;
                used_g += ev[k].3;
                active += ev[k].4;
                k += 1;
            }
            out.push((at, free(used_c, used_m, used_g, active)));
        }
        out
    }

    /// Runs `f` over node `i`'s profile.
    fn with_profile<R>(&self, i: usize, f: impl FnOnce(&[(i64, Free)]) -> R) -> R {
        let mut cache = self.profiles.borrow_mut();
        let p = cache[i].get_or_insert_with(|| self.profile(i));
        f(p)
    }

    /// Free on node `i` at moment `t`.
    pub fn free_at(&self, i: usize, t: i64) -> Free {
        self.with_profile(i, |p| {
            let k = p.partition_point(|s| s.0 <= t);
            p[k.saturating_sub(1)].1
        })
    }

    /// The least node `i` has free at any moment of `[from, to)`.
    pub fn free_over(&self, i: usize, from: i64, to: i64) -> Free {
        self.with_profile(i, |p| {
            let k = p.partition_point(|s| s.0 <= from).saturating_sub(1);
            let mut f = p[k].1;
            for s in p[k + 1..].iter().take_while(|s| s.0 < to) {
                f = Free {
                    cpus: f.cpus.min(s.1.cpus),
                    mem: f.mem.min(s.1.mem),
                    gpus: f.gpus.min(s.1.gpus),
                    idle: f.idle && s.1.idle,
                };
            }
            f
        })
    }

    /// The earliest moment at or after `from` from which node `i` has `need` free (cores,
    /// memory, and emptiness when `need.idle`) for `d` seconds; `None` if never.
    pub fn earliest(&self, i: usize, from: i64, need: Free, d: i64) -> Option<i64> {
        let fits = |f: &Free| f.cpus >= need.cpus && f.mem >= need.mem && f.gpus >= need.gpus && (!need.idle || f.idle);
        self.with_profile(i, |p| {
            let mut k = p.partition_point(|s| s.0 <= from).saturating_sub(1);
            'start: while k < p.len() {
                let start = p[k].0.max(from);
                let end = start.saturating_add(d);
                let mut j = k;
                while j < p.len() && (j == k || p[j].0 < end) {
                    if !fits(&p[j].1) {
                        k = j + 1;
                        continue 'start;
                    }
                    j += 1;
                }
                return Some(start);
            }
            None
        })
    }

    /// Moments after `now` when something frees up: candidate start times, in order.
    pub fn release_times(&self, now: i64) -> Vec<i64> {
        let ends = self.ends.get_or_init(|| {
            let mut e: Vec<i64> = self.releases.iter().flatten().map(|r| r.0).collect();
            e.sort_unstable();
            e.dedup();
            e
        });
        // Two sorted sequences merged.
        let a = &ends[ends.partition_point(|&e| e <= now)..];
        let mut b = self.resv_ends.range(now + 1..).map(|(t, _)| *t).peekable();
        let mut out = Vec::with_capacity(a.len() + self.resv_ends.len());
        let mut a = a.iter().copied().peekable();
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&x), Some(&y)) if x <= y => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            if let Some(t) = next {
                if out.last() != Some(&t) {
                    out.push(t);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_follows_ends_and_reservations() {
        let node = Res { cpus: 4, mem: 1000, gpus: 2 };
        let mut t = Timeline::new(vec![node, node]);
        t.hold(0, 100, Res { cpus: 3, mem: 500, gpus: 1 });
        assert_eq!(t.free_at(0, 50), Free { cpus: 1, mem: 500, gpus: 1, idle: false });
        assert_eq!(t.free_at(0, 100), Free { cpus: 4, mem: 1000, gpus: 2, idle: true });
        t.add(Reservation { job: 9, start: 100, end: 200, claims: vec![(0, Res { cpus: 4, mem: 0, gpus: 2 })] });
        assert_eq!(t.free_at(0, 150).gpus, 0);
        assert_eq!(t.free_at(0, 150).cpus, 0);
        // From 50 to 150 the reservation's start binds; from 200 on, nothing.
        assert_eq!(t.free_over(0, 50, 150).cpus, 0);
        assert_eq!(t.free_over(0, 50, 100).cpus, 1);
        assert_eq!(t.free_over(0, 200, 300).cpus, 4);
        assert_eq!(t.free_over(1, 0, 1000), Free { cpus: 4, mem: 1000, gpus: 2, idle: true });
        assert_eq!(t.release_times(0), [100, 200]);
        t.remove(9);
        assert_eq!(t.free_at(0, 150).cpus, 4);
        assert!(t.reservations().is_empty());
    }
}

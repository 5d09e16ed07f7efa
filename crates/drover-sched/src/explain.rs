//! Why a waiting job waits, in full: Slurm keeps one `Reason`; this lists every constraint the
//! job fails now (checked independently, not stopping at the first), with numbers, and what
//! would let it start sooner where that is so (a shorter time limit that would backfill now).

use crate::core::{Core, Hold};
use crate::plan::FAR;
use drover_model::job::JobId;
use drover_model::state::PendingReason;

/// One thing that keeps a waiting job from starting now.
#[derive(Debug, Clone, PartialEq)]
pub enum Blocker {
    Held {
        admin: bool,
    },
    /// Requeued after a node failed: waits until the nodes of its last run are known to have
    /// stopped it (the controller names them).
    Fenced,
    /// Dependencies not satisfied (`never`: they cannot be any more).
    Dependency {
        never: bool,
    },
    BeginTime {
        at: i64,
    },
    /// Its array's `%N` throttle: that many of its tasks run.
    ArrayThrottle {
        running: u32,
        limit: u32,
    },
    Licenses {
        name: String,
        want: u32,
        free: u32,
    },
    /// An accounting limit (the reason names which).
    Limit(PendingReason),
    /// Its advance reservation starts later, or is gone.
    Reservation {
        name: String,
        start: Option<i64>,
    },
    /// A partition that cannot take it (down, inactive, or a limit it exceeds).
    Partition {
        partition: String,
        reason: PendingReason,
    },
    /// Advance reservations keep nodes of the partition for others over the time it would run.
    Reserved {
        partition: String,
        nodes: u32,
    },
    /// Not enough free now in a partition: cores (and GPUs) free on the nodes it may use
    /// against what it needs, and nodes with room against the nodes it needs.
    Resources {
        partition: String,
        cpus_free: u64,
        cpus_needed: u64,
        gpus_free: u64,
        gpus_needed: u64,
        nodes_with_room: u32,
        nodes_needed: u32,
    },
    /// There would be room, but not as the network topology asks: no block holds `nodes`
    /// nodes with room (`segments` times over, with `--segment`), or (`switches`) no such
    /// number of leaf switches does before the wait ends.
    Topology {
        nodes: u32,
        segments: u32,
        switches: Option<(u32, i64)>,
    },
    /// Room exists now, but starting would delay jobs ahead of it (their planned starts).
    Backfill {
        partition: String,
    },
    /// Jobs of higher priority wait for the same partition.
    Priority {
        partition: String,
        ahead: u32,
    },
}

/// What would let it start sooner.
#[derive(Debug, Clone, PartialEq)]
pub enum Sooner {
    /// With a time limit of at most this many seconds it would start now.
    ShorterLimit { secs: u64 },
}

/// What the plan assumes about run times, where it plans on predictions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    /// What the job is expected to run (shorter than its limit), from `recent`.
    pub secs: Option<i64>,
    /// Its user's most recent run times, oldest first.
    pub recent: Vec<i64>,
    /// Running jobs the plan expects to end before their limits: the job's expected start
    /// relies on them doing so.
    pub running_early: u32,
    /// A reservation slipped past `bf_slip_limit`: the plan is on time limits for now.
    pub by_limits: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Explanation {
    pub blockers: Vec<Blocker>,
    pub sooner: Option<Sooner>,
    /// `None` where the plan is built on time limits (`bf_policy` without predictions).
    pub prediction: Option<Prediction>,
}

impl Core {
    /// Every blocker of waiting job `id` at `now`; `None` for a job that is not waiting.
    pub fn explain(&self, id: JobId, now: i64) -> Option<Explanation> {
        let job = self.pending_job(id)?;
        let m = job.more();
        let mut out = Explanation::default();
        let b = &mut out.blockers;
        match job.hold {
            Some(Hold::User) => b.push(Blocker::Held { admin: false }),
            Some(Hold::Admin) => b.push(Blocker::Held { admin: true }),
            Some(Hold::Fenced) => b.push(Blocker::Fenced),
            None => {}
        }
        if let Some(never) = self.dependency_blocks(job, now) {
            b.push(Blocker::Dependency { never });
        }
        if let Some(at) = m.begin_time.filter(|t| *t > now) {
            b.push(Blocker::BeginTime { at });
        }
        if let Some((running, limit)) = self.throttled(job) {
            b.push(Blocker::ArrayThrottle { running, limit });
        }
        for (name, want, free) in self.short_licenses(job) {
            b.push(Blocker::Licenses { name, want, free });
        }
        if let Some(r) = m.policy {
            b.push(Blocker::Limit(r));
        }
        if let Some(r) = self.limit_blocks(job) {
            b.push(Blocker::Limit(r));
        }
        let within = match self.within_for_explain(job, now) {
            Ok(w) => w,
            Err((name, start)) => {
                b.push(Blocker::Reservation { name, start });
                None
            }
        };
        let tl = self.planning_timeline(id, now);
        for pname in &job.partitions {
            let Some(part) = self.partition(pname) else { continue };
            if let Some(r) = self.partition_blocks(job, part) {
                b.push(Blocker::Partition { partition: pname.to_string(), reason: r });
                continue;
            }
            let limit = job.effective_limit(part);
            // As the planner sees it: its predicted run time where predictions are on.
            let end = now.saturating_add(self.plan_len(job.uid, limit));
            // Room now, ignoring everything planned: resources in the plain sense.
            let now_free = |i: usize| self.free_now_on(job, i);
            let inside = within.as_ref().map(|w| &w.1);
            let fits_now = self.place_for_explain(job, part, &now_free, inside, now).is_ok();
            if !fits_now {
                let topo = self.topology_ask(job, now).filter(|_| self.fits_but_for_topology(job, part, &now_free));
                b.push(topo.unwrap_or_else(|| self.resource_shortfall(job, part, &now_free)));
                continue;
            }
            if let Some(n) = self.reserved_nodes(job, part, now, end).filter(|_| within.is_none()) {
                b.push(Blocker::Reserved { partition: pname.to_string(), nodes: n });
            }
            let over = |i: usize| self.free_within(job, &tl, i, now, end);
            if self.place_for_explain(job, part, &over, inside, now).is_err() {
                b.push(Blocker::Backfill { partition: pname.to_string() });
                // The longest limit that would start now on the room there is.
                let top = limit.unwrap_or(FAR as u64);
                let fits = |secs: u64| {
                    let e = now.saturating_add(secs as i64);
                    let f = |i: usize| self.free_within(job, &tl, i, now, e);
                    self.place_for_explain(job, part, &f, inside, now).is_ok()
                };
                if fits(60) {
                    let (mut lo, mut hi) = (60u64, top);
                    while hi - lo > 60 {
                        let mid = lo + (hi - lo) / 2;
                        if fits(mid) {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    let secs = lo / 60 * 60;
                    if out.sooner.as_ref().is_none_or(|Sooner::ShorterLimit { secs: s }| secs > *s) {
                        out.sooner = Some(Sooner::ShorterLimit { secs });
                    }
                }
            }
            let ahead = self.ahead_in(job, pname);
            if ahead > 0 && within.is_none() {
                b.push(Blocker::Priority { partition: pname.to_string(), ahead });
            }
        }
        out.prediction = self.prediction_for_explain(job, now);
        Some(out)
    }
}

//! The controller's statistics, as `sdiag` shows them: RPCs by Slurm message type and by user
//! (counted by the handlers as they answer), jobs submitted, started, completed, cancelled and
//! failed, and how long the scheduling passes take (counted by the state owner).
//!
//! ```text
//!  handlers ──RpcTimer (on drop)──► RpcStats ─┐
//!  owner ──jobs, pass times──► Counters ──────┴─► DiagReply ──► sdiag
//! ```

use drover_proto::v1;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Slurm's message types for what Drover's RPCs do (names and numbers of Slurm 22.05's
/// `slurm_msg_type_t`).
pub mod msg {
    pub const NODE_REGISTRATION: (&str, u32) = ("MESSAGE_NODE_REGISTRATION_STATUS", 1002);
    pub const RECONFIGURE: (&str, u32) = ("REQUEST_RECONFIGURE", 1003);
    pub const SHUTDOWN: (&str, u32) = ("REQUEST_SHUTDOWN", 1005);
    pub const PING: (&str, u32) = ("REQUEST_PING", 1008);
    pub const BUILD_INFO: (&str, u32) = ("REQUEST_BUILD_INFO", 2001);
    pub const JOB_INFO: (&str, u32) = ("REQUEST_JOB_INFO", 2003);
    pub const NODE_INFO: (&str, u32) = ("REQUEST_NODE_INFO", 2007);
    pub const PARTITION_INFO: (&str, u32) = ("REQUEST_PARTITION_INFO", 2009);
    pub const CONFIG: (&str, u32) = ("REQUEST_CONFIG", 2015);
    pub const SHARE_INFO: (&str, u32) = ("REQUEST_SHARE_INFO", 2022);
    pub const RESERVATION_INFO: (&str, u32) = ("REQUEST_RESERVATION_INFO", 2024);
    pub const PRIORITY_FACTORS: (&str, u32) = ("REQUEST_PRIORITY_FACTORS", 2026);
    pub const STATS_INFO: (&str, u32) = ("REQUEST_STATS_INFO", 2035);
    pub const REQUEST_CRONTAB: (&str, u32) = ("REQUEST_CRONTAB", 2200);
    pub const UPDATE_CRONTAB: (&str, u32) = ("REQUEST_UPDATE_CRONTAB", 2202);
    pub const UPDATE_JOB: (&str, u32) = ("REQUEST_UPDATE_JOB", 3001);
    pub const UPDATE_NODE: (&str, u32) = ("REQUEST_UPDATE_NODE", 3002);
    pub const UPDATE_RESERVATION: (&str, u32) = ("REQUEST_UPDATE_RESERVATION", 3009);
    pub const RESOURCE_ALLOCATION: (&str, u32) = ("REQUEST_RESOURCE_ALLOCATION", 4001);
    pub const SUBMIT_BATCH_JOB: (&str, u32) = ("REQUEST_SUBMIT_BATCH_JOB", 4003);
    pub const JOB_READY: (&str, u32) = ("REQUEST_JOB_READY", 4019);
    pub const JOB_STEP_CREATE: (&str, u32) = ("REQUEST_JOB_STEP_CREATE", 5001);
    pub const STEP_COMPLETE: (&str, u32) = ("REQUEST_STEP_COMPLETE", 5016);
    pub const COMPLETE_JOB_ALLOCATION: (&str, u32) = ("REQUEST_COMPLETE_JOB_ALLOCATION", 5017);
    pub const COMPLETE_BATCH_SCRIPT: (&str, u32) = ("REQUEST_COMPLETE_BATCH_SCRIPT", 5018);
    pub const JOB_STEP_STAT: (&str, u32) = ("REQUEST_JOB_STEP_STAT", 5019);
    pub const STEP_LAYOUT: (&str, u32) = ("REQUEST_STEP_LAYOUT", 5021);
    pub const KILL_JOB: (&str, u32) = ("REQUEST_KILL_JOB", 5032);
}

#[derive(Default)]
struct Counts {
    by_type: HashMap<u32, (&'static str, u64, u64)>,
    by_user: HashMap<u32, (u64, u64)>,
}

/// RPCs answered, by message type and by user: count and total microseconds.
#[derive(Default)]
pub struct RpcStats(Mutex<Counts>);

impl RpcStats {
    pub fn record(&self, (name, id): (&'static str, u32), uid: u32, us: u64) {
        let Ok(mut c) = self.0.lock() else { return };
        let t = c.by_type.entry(id).or_insert((name, 0, 0));
        t.1 += 1;
        t.2 += us;
        let u = c.by_user.entry(uid).or_default();
        u.0 += 1;
        u.1 += us;
    }

    /// Times one RPC until dropped.
    pub fn time(&self, kind: (&'static str, u32), uid: u32) -> RpcTimer<'_> {
        RpcTimer { stats: self, kind, uid, start: Instant::now() }
    }

    pub fn reset(&self) {
        if let Ok(mut c) = self.0.lock() {
            *c = Counts::default();
        }
    }

    /// (by type, by user).
    pub fn snapshot(&self) -> (Vec<v1::RpcCount>, Vec<v1::RpcCount>) {
        let Ok(c) = self.0.lock() else { return Default::default() };
        let types = c
            .by_type
            .iter()
            .map(|(id, (name, count, us))| v1::RpcCount { name: (*name).into(), id: *id, count: *count, total_us: *us })
            .collect();
        let users = c
            .by_user
            .iter()
            .map(|(uid, (count, us))| v1::RpcCount { name: String::new(), id: *uid, count: *count, total_us: *us })
            .collect();
        (types, users)
    }
}

/// Records its RPC's time when dropped.
pub struct RpcTimer<'a> {
    stats: &'a RpcStats,
    kind: (&'static str, u32),
    uid: u32,
    start: Instant,
}

impl Drop for RpcTimer<'_> {
    fn drop(&mut self) {
        self.stats.record(self.kind, self.uid, self.start.elapsed().as_micros() as u64);
    }
}

/// The owner's side: jobs and scheduling passes since `since`.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub since: i64,
    pub submitted: u64,
    pub started: u64,
    pub completed: u64,
    pub canceled: u64,
    pub failed: u64,
    /// The scheduler core's pass counts when these counters began.
    pub base: drover_sched::PassStats,
    pub last_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
    pub bf_last_when: i64,
    pub bf_last_us: u64,
    pub bf_max_us: u64,
    pub bf_sum_us: u64,
    pub bf_queue_len_sum: u64,
    pub bf_table_size_sum: u64,
}

impl Counters {
    pub fn new(since: i64, base: drover_sched::PassStats) -> Counters {
        Counters { since, base, ..Default::default() }
    }

    /// A pass ran (`before` → `after` of the core's counts) and took `us`.
    pub fn pass(&mut self, before: drover_sched::PassStats, after: drover_sched::PassStats, us: u64, now: i64) {
        if after.passes == before.passes {
            return;
        }
        self.last_us = us;
        self.max_us = self.max_us.max(us);
        self.sum_us += us;
        if after.planning_passes != before.planning_passes {
            self.bf_last_when = now;
            self.bf_last_us = us;
            self.bf_max_us = self.bf_max_us.max(us);
            self.bf_sum_us += us;
            self.bf_queue_len_sum += u64::from(after.last_queue_len);
            self.bf_table_size_sum += u64::from(after.last_table_size);
        }
    }

    /// The owner's part of sdiag's reply, with the core's counts `now_stats`.
    pub fn reply(&self, now_stats: drover_sched::PassStats, now: i64) -> v1::DiagReply {
        let b = self.base;
        let s = now_stats;
        v1::DiagReply {
            now,
            since: self.since,
            jobs_submitted: self.submitted,
            jobs_started: self.started,
            jobs_completed: self.completed,
            jobs_canceled: self.canceled,
            jobs_failed: self.failed,
            sched_last_us: self.last_us,
            sched_max_us: self.max_us,
            sched_cycles: s.passes - b.passes,
            sched_sum_us: self.sum_us,
            sched_depth_sum: s.depth_sum - b.depth_sum,
            sched_queue_len: s.last_queue_len,
            bf_backfilled_total: s.backfilled,
            bf_backfilled: s.backfilled - b.backfilled,
            bf_cycles: s.planning_passes - b.planning_passes,
            bf_last_when: self.bf_last_when,
            bf_last_us: self.bf_last_us,
            bf_max_us: self.bf_max_us,
            bf_sum_us: self.bf_sum_us,
            bf_last_depth: s.last_depth,
            bf_depth_sum: s.depth_sum - b.depth_sum,
            bf_queue_len: s.last_queue_len,
            bf_queue_len_sum: self.bf_queue_len_sum,
            bf_table_size: s.last_table_size,
            bf_table_size_sum: self.bf_table_size_sum,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpcs_add_up_by_type_and_user() {
        let s = RpcStats::default();
        s.record(msg::SUBMIT_BATCH_JOB, 1000, 30);
        s.record(msg::SUBMIT_BATCH_JOB, 0, 10);
        s.record(msg::PING, 1000, 5);
        let (mut types, mut users) = s.snapshot();
        types.sort_by_key(|t| t.id);
        users.sort_by_key(|u| u.id);
        assert_eq!(
            types.iter().map(|t| (t.name.as_str(), t.id, t.count, t.total_us)).collect::<Vec<_>>(),
            [("REQUEST_PING", 1008, 1, 5), ("REQUEST_SUBMIT_BATCH_JOB", 4003, 2, 40)]
        );
        assert_eq!(users.iter().map(|u| (u.id, u.count, u.total_us)).collect::<Vec<_>>(), [(0, 1, 10), (1000, 2, 35)]);
        s.reset();
        assert_eq!(s.snapshot().0.len(), 0);
    }

    #[test]
    fn passes_are_timed_only_when_they_ran() {
        let mut c = Counters::new(100, drover_sched::PassStats::default());
        let zero = drover_sched::PassStats::default();
        c.pass(zero, zero, 999, 101);
        assert_eq!(c.sum_us, 0);
        let one = drover_sched::PassStats { passes: 1, planning_passes: 1, last_queue_len: 3, ..zero };
        c.pass(zero, one, 40, 102);
        let r = c.reply(one, 103);
        assert_eq!(
            (r.sched_cycles, r.sched_last_us, r.bf_cycles, r.bf_last_when, r.sched_queue_len),
            (1, 40, 1, 102, 3)
        );
    }
}

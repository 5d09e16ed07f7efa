//! Run-time predictions: how long a job will really run, from how long its user's recent jobs
//! ran. Users pad their time limits (most jobs use a fraction of what they ask for), so a plan
//! built on limits expects running jobs to end late and leaves holes nobody fills. A plan built
//! on predictions fits what will happen; the limit is still what the job may use and what ends it.
//!
//! ```text
//!  a job ends ──Event::Ran { uid, seconds }──► History (the user's last two run times)
//!  planning: predict(uid, limit) = min(limit, mean of the user's last two run times)
//!            (no history yet: the limit, as without predictions)
//!  a running job outlives its prediction ──extended()──► its limit
//!  backfill candidates, once the reservations are made: by slowdown_score(), highest first
//! ```
//!
//! The model is Tsafrir, Etsion and Feitelson's ("Backfilling using system-generated
//! predictions rather than user runtime estimates", IEEE TPDS 18(6), 2007). What was measured
//! against what it replaced is in `docs/scheduler.md`. Deterministic and pure: the same events
//! give the same predictions.

use std::collections::{HashMap, VecDeque};

/// How many of a user's most recent run times a prediction averages (the literature's 2).
pub const KEEP: usize = 2;

/// The recent run times of each user's jobs.
#[derive(Debug, Clone, Default)]
pub struct History {
    runs: HashMap<u32, VecDeque<i64>>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    /// One of `uid`'s jobs ran `seconds` (however it ended: a job ended at its limit ran it).
    pub fn record(&mut self, uid: u32, seconds: i64) {
        let v = self.runs.entry(uid).or_default();
        if v.len() == KEEP {
            v.pop_front();
        }
        v.push_back(seconds.max(0));
    }

    /// How long a job of `uid` with time limit `limit` (seconds; `i64::MAX` for none) is
    /// expected to run: the mean of the user's recent run times (rounded up), never more than
    /// the limit and never under a second; `None` while the user has no history (the plan
    /// then uses the limit, as without predictions).
    pub fn predict(&self, uid: u32, limit: i64) -> Option<i64> {
        let v = self.runs.get(&uid).filter(|v| !v.is_empty())?;
        let n = v.len() as i64;
        let sum = v.iter().fold(0i64, |a, &b| a.saturating_add(b));
        let mean = sum.div_euclid(n) + i64::from(sum.rem_euclid(n) != 0);
        Some(mean.max(1).min(limit))
    }

    /// `uid`'s recent run times, oldest first.
    pub fn recent(&self, uid: u32) -> Vec<i64> {
        self.runs.get(&uid).map(|v| v.iter().copied().collect()).unwrap_or_default()
    }
}

/// What a job that started at `start` and ended at `end` ran, less the `suspended` seconds
/// between; `None` for one that never started.
pub fn run_time(start: i64, end: i64, suspended: i64) -> Option<i64> {
    (start > 0 && end >= start).then(|| (end - start - suspended).max(0))
}

/// Ended jobs as (end, job id, uid, seconds run), in any order: the (uid, seconds) a
/// [`History`] learns, in the order they ended (ties by job id).
pub fn in_end_order(mut ended: Vec<(i64, u32, u32, i64)>) -> Vec<(u32, i64)> {
    ended.sort_unstable();
    ended.into_iter().map(|(_, _, uid, secs)| (uid, secs)).collect()
}

/// The expected end of a running job predicted to end at `predicted` that may run until
/// `limit_end`, seen at `now`: the prediction while it is ahead; once the job has outlived it,
/// its limit (what the user asked for is then the best guess there is), and always after
/// `now` (a job at its limit is about to be ended).
///
/// Extending in small steps instead was measured and starves wide jobs: each step opens a
/// short window that only small jobs fit, the machine idles around them, and on CTC-SP2 at
/// 338 processors utilisation fell from 0.841 to 0.825 (`docs/scheduler.md`).
pub fn extended(predicted: i64, limit_end: i64, now: i64) -> i64 {
    let end = if predicted > now { predicted.min(limit_end) } else { limit_end };
    end.max(now.saturating_add(1))
}

/// How strongly a waiting job claims a backfill hole: `(waited + length) / sqrt(length)`,
/// the geometric mean of two orders. The expansion factor `(waited + length) / length` (the
/// bounded slowdown the job would have if it started now) favours short jobs, which most
/// improves mean slowdown but leaves mid-sized long jobs starving at the tail; `waited +
/// length` favours those that have waited, as priority order does. Between them, a job that
/// has waited long for its length goes first, and a long job's claim still grows with its
/// wait. Measured against both on eight traces in docs/scheduler.md.
pub fn slowdown_score(waited: i64, length: i64) -> f64 {
    let l = length.clamp(1, crate::plan::FAR) as f64;
    (waited.max(0) as f64 + l) / l.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_mean_of_the_last_two_runs_capped_by_the_limit() {
        let mut h = History::new();
        assert_eq!(h.predict(7, 3600), None);
        h.record(7, 100);
        assert_eq!(h.predict(7, 3600), Some(100));
        h.record(7, 301);
        assert_eq!(h.predict(7, 3600), Some(201));
        h.record(7, 1000);
        // The oldest (100) is forgotten.
        assert_eq!(h.recent(7), [301, 1000]);
        assert_eq!(h.predict(7, 3600), Some(651));
        assert_eq!(h.predict(7, 500), Some(500));
        assert_eq!(h.predict(7, i64::MAX), Some(651));
        // Other users are not affected.
        assert_eq!(h.predict(8, 3600), None);
        h.record(8, 0);
        assert_eq!(h.predict(8, 3600), Some(1));
    }

    #[test]
    fn run_times_leave_out_suspensions_and_jobs_that_never_ran() {
        assert_eq!(run_time(100, 160, 0), Some(60));
        assert_eq!(run_time(100, 160, 20), Some(40));
        assert_eq!(run_time(0, 160, 0), None);
        assert_eq!(run_time(100, 90, 0), None);
        assert_eq!(in_end_order(vec![(50, 2, 7, 5), (40, 9, 8, 6), (50, 1, 9, 4)]), [(8, 6), (9, 4), (7, 5)]);
    }

    #[test]
    fn an_outlived_prediction_becomes_the_limit() {
        assert_eq!(extended(100, 3600, 50), 100);
        assert_eq!(extended(100, 3600, 100), 3600);
        assert_eq!(extended(100, 3600, 2000), 3600);
        // A prediction is never past the limit.
        assert_eq!(extended(5000, 3600, 50), 3600);
        // A job at or past its limit is about to be ended: a second from now.
        assert_eq!(extended(100, 500, 500), 501);
    }

    #[test]
    fn jobs_that_waited_long_for_their_length_claim_holes_first() {
        // Waited as long: the shorter goes first.
        assert!(slowdown_score(3600, 60) > slowdown_score(3600, 3600));
        // A 10-hour job that waited two days outranks a 1-hour job that waited 10 minutes.
        assert!(slowdown_score(2 * 86400, 36000) > slowdown_score(600, 3600));
        // Degenerate lengths stay finite.
        assert!(slowdown_score(0, 0).is_finite() && slowdown_score(-5, i64::MAX).is_finite());
    }

    proptest! {
        #[test]
        fn predictions_are_within_the_limit_and_between_the_recent_runs(
            runs in proptest::collection::vec(0i64..1_000_000, 0..8),
            limit in 1i64..2_000_000,
        ) {
            let mut h = History::new();
            for &r in &runs {
                h.record(1, r);
            }
            match h.predict(1, limit) {
                None => prop_assert!(runs.is_empty()),
                Some(p) => {
                    prop_assert!(p >= 1 && p <= limit);
                    let last = &runs[runs.len().saturating_sub(KEEP)..];
                    let lo = last.iter().copied().min().unwrap_or(0).max(1).min(limit);
                    let hi = last.iter().copied().max().unwrap_or(0).max(1).min(limit);
                    prop_assert!(p >= lo && p <= hi);
                }
            }
        }

        #[test]
        fn an_expected_end_is_after_now_and_never_past_the_limit(
            pred in 1i64..1_000_000,
            limit in 1i64..2_000_000,
            now in 0i64..3_000_000,
        ) {
            let e = extended(pred, limit, now);
            prop_assert!(e > now);
            prop_assert!(e <= limit.max(now + 1));
            // A later look never expects an earlier end.
            prop_assert!(extended(pred, limit, now + 1) >= e.min(limit));
        }

        #[test]
        fn waiting_longer_never_lowers_a_claim(w in 0i64..10_000_000, d in 1i64..1_000_000, l in 1i64..10_000_000) {
            prop_assert!(slowdown_score(w + d, l) > slowdown_score(w, l));
        }
    }
}

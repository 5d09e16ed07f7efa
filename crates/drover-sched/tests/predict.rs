//! Planning on predicted run times (Drover's default, `bf_policy=predictive`): what the plan
//! expects, how it adapts when a prediction proves short, the starvation guard, and the
//! backfill order.

use drover_sched::{BackfillOrder, Core, Decision, Event, Policy, SchedConfig};
use proptest::prelude::*;

mod common;
use common::*;

fn predictive(mut c: Core, slip_limit: i64) -> Core {
    c.handle(Event::Configure(SchedConfig { interval: 0, slip_limit, ..SchedConfig::default() }));
    c
}

fn of_user(mut j: drover_sched::SchedJob, uid: u32, queued: i64) -> drover_sched::SchedJob {
    j.uid = uid;
    j.queued = queued;
    j
}

fn limit_of(d: &[Decision], id: u32) -> Option<Option<u64>> {
    d.iter().find_map(|d| match d {
        Decision::Start { job, time_limit, .. } if *job == id => Some(*time_limit),
        _ => None,
    })
}

/// One node of 2 CPUs; user 5's jobs ran 50 s lately. Job 1 (user 5, limit 1000) runs from
/// 0, job 2 (another user, the whole node) waits.
fn busy(slip_limit: i64) -> Core {
    let mut c = predictive(cluster(1, 2, 1000), slip_limit);
    c.handle(Event::Ran { uid: 5, seconds: 40 });
    c.handle(Event::Ran { uid: 5, seconds: 60 });
    c.handle(Event::Submitted(of_user(limited(1, 2, 1000), 5, 0)));
    let d = c.schedule(0, &mut no_ids);
    // The limit is what the job runs with, whatever the prediction.
    assert_eq!(limit_of(&d, 1), Some(Some(1000)));
    c.handle(Event::Submitted(of_user(limited(2, 2, 100), 6, 1)));
    c
}

#[test]
fn the_plan_expects_what_the_users_recent_jobs_ran_not_the_limit() {
    let mut c = busy(3600);
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(planned(&d, 2).and_then(|p| p.0), Some(50));
    // Slurm's plan, on limits, expects the node at 1000.
    let mut s = cluster(1, 2, 1000);
    s.handle(Event::Configure(SchedConfig { interval: 0, ..SchedConfig::slurm() }));
    s.handle(Event::Ran { uid: 5, seconds: 50 });
    s.handle(Event::Submitted(of_user(limited(1, 2, 1000), 5, 0)));
    s.schedule(0, &mut no_ids);
    s.handle(Event::Submitted(of_user(limited(2, 2, 100), 6, 1)));
    assert_eq!(planned(&s.schedule(1, &mut no_ids), 2).and_then(|p| p.0), Some(1000));
}

#[test]
fn a_job_that_outlives_its_prediction_is_expected_at_its_limit_and_the_core_asks_to_look_again() {
    let mut c = busy(3600);
    c.schedule(1, &mut no_ids);
    // Nothing happens at 50: the core asks for a pass then (a driver with no clock of its
    // own, the simulator, schedules one).
    assert_eq!(c.wake_at(), Some(50));
    let d = c.schedule(50, &mut no_ids);
    assert_eq!(planned(&d, 2).and_then(|p| p.0), Some(1000));
    c.check_invariants().unwrap();
}

#[test]
fn a_reservation_that_slipped_too_far_is_planned_by_limits_until_it_starts() {
    // After job 2's expected start slipped from 50 to 1000, user 5's next job (predicted
    // 50 s, limit 2000) would pass it by its prediction but not by its limit.
    // Two CPUs free beside job 1 on a 4-CPU node; job 2 wants all four.
    let guarded = |slip_limit: i64| {
        let mut c = predictive(cluster(1, 4, 1000), slip_limit);
        c.handle(Event::Ran { uid: 5, seconds: 50 });
        c.handle(Event::Submitted(of_user(limited(1, 2, 1000), 5, 0)));
        c.schedule(0, &mut no_ids);
        c.handle(Event::Submitted(of_user(limited(2, 4, 100), 6, 1)));
        assert_eq!(planned(&c.schedule(1, &mut no_ids), 2).and_then(|p| p.0), Some(50));
        // Job 1 outlives its prediction: job 2's start slips to 1000.
        assert_eq!(planned(&c.schedule(50, &mut no_ids), 2).and_then(|p| p.0), Some(1000));
        c.handle(Event::Submitted(of_user(limited(3, 2, 2000), 5, 60)));
        let d = c.schedule(60, &mut no_ids);
        c.check_invariants().unwrap();
        started(&d)
    };
    // With the guard (slip limit 100 s), job 3 is planned by its limit (ends 2060, after job
    // 2's 1000): it waits. Without one, its prediction (ends 110) lets it pass.
    assert_eq!(guarded(100), Vec::<u32>::new());
    assert_eq!(guarded(i64::MAX / 4), [3]);
}

#[test]
fn a_job_that_lost_its_reservation_to_a_higher_priority_one_is_promised_afresh() {
    // One node of 6 CPUs. Job 2 (6 CPUs) is first promised a start at 50 (job 1's predicted
    // end); job 3, of higher priority, takes the reservation; job 1 ends at 60 and job 3 runs
    // until 560. Job 2's start is 560 from then on: that is its new promise, not a slip of
    // 510 s past the old one, so the guard stays off and user 5's next job (predicted 55 s,
    // limit 2000 s) still backfills on its prediction.
    let mut c = predictive(cluster(1, 6, 1000), 100);
    c.handle(Event::Ran { uid: 5, seconds: 50 });
    c.handle(Event::Submitted(of_user(limited(1, 3, 1000), 5, 0)));
    c.schedule(0, &mut no_ids);
    c.handle(Event::Submitted(of_user(limited(2, 6, 100), 6, 1)));
    assert_eq!(planned(&c.schedule(1, &mut no_ids), 2).and_then(|p| p.0), Some(50));
    let mut urgent = of_user(limited(3, 4, 500), 7, 2);
    urgent.priority = u64::MAX / 2;
    c.handle(Event::Submitted(urgent));
    // (After job 2's old reservation, which stands until the pass reaches job 2.)
    assert_eq!(planned(&c.schedule(2, &mut no_ids), 3).and_then(|p| p.0), Some(150));
    c.handle(Event::Ended { job: 1, outcome: drover_sched::Outcome::Succeeded });
    c.handle(Event::Ran { uid: 5, seconds: 60 });
    assert_eq!(started(&c.schedule(60, &mut no_ids)), [3]);
    c.handle(Event::Submitted(of_user(limited(4, 2, 2000), 5, 61)));
    assert_eq!(started(&c.schedule(61, &mut no_ids)), [4]);
    c.check_invariants().unwrap();
}

#[test]
fn holes_go_to_the_job_that_waited_longest_for_its_length_not_the_first_in_line() {
    // One node of 4 CPUs: job 1 holds 3 until 200, job 2 (all four) is reserved at 200. One
    // CPU is free until then: job 3 (first in line, queued at 99) or job 4 (queued at 0).
    let run = |order: BackfillOrder| {
        let mut c = cluster(1, 4, 1000);
        c.handle(Event::Configure(SchedConfig { interval: 0, order, ..SchedConfig::default() }));
        c.handle(Event::Submitted(limited(1, 3, 200)));
        c.schedule(0, &mut no_ids);
        c.handle(Event::Submitted(of_user(limited(2, 4, 100), 1, 0)));
        c.handle(Event::Submitted(of_user(limited(3, 1, 50), 2, 99)));
        c.handle(Event::Submitted(of_user(limited(4, 1, 50), 3, 0)));
        started(&c.schedule(100, &mut no_ids))
    };
    assert_eq!(run(BackfillOrder::Priority), [3]);
    assert_eq!(run(BackfillOrder::Slowdown), [4]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the history says, with predictions: nothing is oversubscribed, every job
    /// starts with the limit it asked for, every job eventually runs (no starvation: the
    /// guard falls back to limits), and the same events give the same decisions.
    #[test]
    fn predictions_never_oversubscribe_starve_or_change_a_limit(
        history in proptest::collection::vec((0u32..3, 0i64..200), 0..8),
        jobs in proptest::collection::vec((0i64..60, 1u32..5, 5u64..120, 0u32..3, 0u64..100), 1..20),
    ) {
        let mut jobs = jobs;
        jobs.sort_by_key(|j| j.0);
        let replay = || {
            let mut c = predictive(cluster(2, 4, 1000), 300);
            c.handle(Event::Configure(SchedConfig { policy: Policy::Easy, interval: 0, slip_limit: 300, ..SchedConfig::default() }));
            for &(uid, s) in &history {
                c.handle(Event::Ran { uid, seconds: s });
            }
            let mut log: Vec<(i64, u32)> = Vec::new();
            let mut ends: Vec<(i64, u32, u32, i64)> = Vec::new();
            for t in 0..4000i64 {
                for (k, &(at, tasks, limit, uid, _)) in jobs.iter().enumerate() {
                    if at == t {
                        let mut j = of_user(limited(k as u32 + 1, tasks, limit), uid, t);
                        j.priority = u64::from(u32::MAX - k as u32);
                        c.handle(Event::Submitted(j));
                    }
                }
                for &(end, id, uid, ran) in ends.iter().filter(|e| e.0 == t) {
                    c.handle(Event::Ended { job: id, outcome: drover_sched::Outcome::Succeeded });
                    c.handle(Event::Ran { uid, seconds: ran });
                    let _ = end;
                }
                ends.retain(|e| e.0 != t);
                for d in c.schedule(t, &mut no_ids) {
                    if let Decision::Start { job, time_limit, .. } = d {
                        let (_, _, limit, uid, pct) = jobs[job as usize - 1];
                        assert_eq!(time_limit, Some(limit));
                        // It runs a share of its limit (at least a second).
                        let ran = ((limit * pct) / 100).max(1) as i64;
                        ends.push((t + ran, job, uid, ran));
                        log.push((t, job));
                    }
                }
                c.check_invariants().unwrap();
            }
            log
        };
        let log = replay();
        prop_assert_eq!(log.len(), jobs.len());
        prop_assert_eq!(replay(), log);
    }
}

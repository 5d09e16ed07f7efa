//! Scheduler behaviour and invariants, asserted on decisions (no sockets, no clocks).

use drover_model::array::ArraySpec;
use drover_model::state::PendingReason;
use drover_sched::gres::GresNeed;
use drover_sched::{
    AdvanceResv, Core, Decision, Event, NodeRes, Outcome, PartitionRes, SchedArray, SchedJob, SchedMore,
};
use proptest::prelude::*;

mod common;
use common::*;

/// Ids for array tasks, from 1000 up.
fn ids() -> impl FnMut() -> u32 {
    let mut next = 1000;
    move || {
        next += 1;
        next
    }
}

fn array(id: u32, expr: &str) -> SchedJob {
    let spec = ArraySpec::parse(expr).unwrap();
    let mut j = job(id);
    j.more = SchedMore {
        array: Some(SchedArray { array_id: id, throttle: spec.throttle, task: None, pending: spec.tasks }),
        ..Default::default()
    }
    .boxed();
    j
}

fn splits(d: &[Decision]) -> Vec<(u32, Option<(u32, u32)>)> {
    d.iter()
        .filter_map(|d| if let Decision::Start { job, split, .. } = d { Some((*job, *split)) } else { None })
        .collect()
}

fn reason(d: &[Decision], id: u32) -> Option<PendingReason> {
    d.iter().find_map(|d| match d {
        Decision::Reason { job, reason } if *job == id => Some(*reason),
        _ => None,
    })
}

#[test]
fn small_jobs_share_a_node() {
    let mut c = cluster(1, 4, 1000);
    for i in 1..=4 {
        c.handle(Event::Submitted(job(i)));
    }
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(started(&d), [1, 2, 3, 4]);
    c.check_invariants().unwrap();
}

#[test]
fn a_two_node_job_waits_for_two_free_nodes_and_holds_nothing() {
    let mut c = cluster(2, 2, 1000);
    let mut a = job(1);
    a.ntasks = 2;
    c.handle(Event::Submitted(a));
    assert_eq!(started(&c.schedule(0, &mut no_ids)), [1]);
    // Two whole nodes: the small job after it would delay it on node2, so it may not pass.
    let mut big = job(2);
    big.min_nodes = 2;
    big.max_nodes = Some(2);
    big.ntasks = 4;
    c.handle(Event::Submitted(big));
    c.handle(Event::Submitted(job(3)));
    let d = c.schedule(1, &mut no_ids);
    assert!(started(&d).is_empty());
    assert_eq!(reason(&d, 2), Some(PendingReason::Resources));
    assert_eq!(reason(&d, 3), Some(PendingReason::Priority));
    // node2 is free, yet the pending 2-node job holds none of it.
    assert_eq!(c.node("node2").unwrap().alloc_cpus(), 0);
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let d = c.schedule(2, &mut no_ids);
    assert_eq!(started(&d)[0], 2);
    c.check_invariants().unwrap();
}

#[test]
fn exclusive_takes_whole_nodes() {
    let mut c = cluster(1, 4, 1000);
    let mut e = job(1);
    e.exclusive = true;
    c.handle(Event::Submitted(e));
    c.handle(Event::Submitted(job(2)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(started(&d), [1]);
    assert_eq!(c.allocation(1).unwrap().cpus(), 4);
}

#[test]
fn tasks_spread_one_per_node_then_fill() {
    let mut c = cluster(2, 2, 1000);
    let mut j = job(1);
    j.min_nodes = 2;
    j.max_nodes = Some(2);
    j.ntasks = 3;
    c.handle(Event::Submitted(j));
    c.schedule(0, &mut no_ids);
    let a = c.allocation(1).unwrap();
    assert_eq!(a.nodes.iter().map(|n| n.tasks).collect::<Vec<_>>(), [2, 1]);
}

#[test]
fn memory_is_consumable() {
    let mut c = cluster(1, 4, 1000);
    for i in 1..=3 {
        let mut j = job(i);
        j.mem_per_node_mb = Some(400);
        c.handle(Event::Submitted(j));
    }
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(started(&d), [1, 2]);
    assert_eq!(reason(&d, 3), Some(PendingReason::Resources));
}

#[test]
fn held_dependency_and_begin_reasons() {
    let mut c = cluster(1, 1, 1000);
    let mut h = job(1);
    h.hold = Some(drover_sched::Hold::User);
    c.handle(Event::Submitted(h));
    let mut b = job(2);
    b.more_mut().begin_time = Some(100);
    c.handle(Event::Submitted(b));
    let mut d = job(3);
    d.more_mut().dependency = drover_model::job::parse_dependency("afterok:4").unwrap();
    c.handle(Event::Submitted(d));
    c.handle(Event::Submitted(job(4)));
    let dec = c.schedule(0, &mut no_ids);
    assert_eq!(reason(&dec, 1), Some(PendingReason::JobHeldUser));
    assert_eq!(reason(&dec, 2), Some(PendingReason::BeginTime));
    assert_eq!(reason(&dec, 3), Some(PendingReason::Dependency));
    assert_eq!(started(&dec), [4]);
    c.handle(Event::Ended { job: 4, outcome: Outcome::Failed });
    let dec = c.schedule(1, &mut no_ids);
    assert_eq!(reason(&dec, 3), Some(PendingReason::DependencyNeverSatisfied));
    let dec = c.schedule(200, &mut no_ids);
    assert_eq!(started(&dec), [2]);
}

/// A job requeued after its node failed waits, with `NodeDown`, on an idle cluster until
/// the controller lifts the fence; then it starts.
#[test]
fn a_fenced_job_waits_until_its_fence_lifts() {
    let mut c = cluster(2, 2, 1000);
    let mut f = job(1);
    f.hold = Some(drover_sched::Hold::Fenced);
    c.handle(Event::Submitted(f.clone()));
    let dec = c.schedule(0, &mut no_ids);
    assert!(started(&dec).is_empty());
    assert_eq!(reason(&dec, 1), Some(PendingReason::NodeDown));
    let e = c.explain(1, 0).unwrap();
    assert!(e.blockers.contains(&drover_sched::explain::Blocker::Fenced), "{e:?}");
    f.hold = None;
    c.handle(Event::Updated(f));
    assert_eq!(started(&c.schedule(1, &mut no_ids)), [1]);
}

#[test]
fn partition_node_limit_pends() {
    let mut c = cluster(4, 2, 1000);
    let mut j = job(1);
    j.min_nodes = 5;
    j.ntasks = 5;
    c.handle(Event::Submitted(j));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(reason(&d, 1), Some(PendingReason::PartitionNodeLimit));
}

#[test]
fn drained_nodes_take_no_work() {
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::NodeSchedulable { node: "node1".into(), schedulable: false });
    c.handle(Event::Submitted(job(1)));
    // No node of the partition is up: Slurm's main scheduler says so in its own words.
    assert_eq!(reason(&c.schedule(0, &mut no_ids), 1), Some(PendingReason::NodesUnavailable));
}

#[test]
fn a_job_wider_than_the_nodes_up_says_so_and_a_narrower_one_runs() {
    let mut c = cluster(4, 2, 1000);
    c.handle(Event::NodeSchedulable { node: "node4".into(), schedulable: false });
    c.handle(Event::Submitted(nodes_job(1, 4)));
    c.handle(Event::Submitted(nodes_job(2, 3)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(reason(&d, 1), Some(PendingReason::NodesUnavailable));
    assert_eq!(started(&d), [2]);
    // Back in service: it starts beside the other (one core of each node each).
    c.handle(Event::NodeSchedulable { node: "node4".into(), schedulable: true });
    assert_eq!(started(&c.schedule(1, &mut no_ids)), [1]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random submits, ends and node flaps never oversubscribe a core or a byte, and every
    /// started job got exactly the tasks it asked for.
    #[test]
    fn never_oversubscribes(ops in proptest::collection::vec((0u8..4, 1u32..4, 1u32..4, 0u64..600, any::<bool>()), 1..80)) {
        let mut c = cluster(3, 4, 1000);
        // Two licenses: some jobs ask for one or both.
        c.handle(Event::LicensesDefined(vec![("lic".into(), 2)]));
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        let mut task_ids = ids();
        let mut lic_of: std::collections::HashMap<u32, u32> = Default::default();
        // Which array each running task belongs to, and each array's throttle.
        let mut array_of: std::collections::HashMap<u32, u32> = Default::default();
        let mut throttles: std::collections::HashMap<u32, u32> = Default::default();
        for (t, (op, nodes, tasks, mem, excl)) in ops.into_iter().enumerate() {
            match op {
                0 | 1 => {
                    let mut j = if op == 1 && nodes == 1 {
                        throttles.insert(next, tasks % 3);
                        array(next, &format!("0-{}%{}", tasks * 2, tasks % 3))
                    } else {
                        job(next)
                    };
                    j.min_nodes = nodes.min(tasks);
                    j.max_nodes = Some(nodes.min(tasks));
                    j.ntasks = tasks;
                    j.mem_per_node_mb = if mem > 0 { Some(mem) } else { None };
                    j.exclusive = excl;
                    if mem % 3 != 0 {
                        j.more_mut().licenses = vec![("lic".into(), (mem % 3) as u32)];
                        lic_of.insert(next, (mem % 3) as u32);
                    }
                    c.handle(Event::Submitted(j));
                    next += 1;
                }
                2 => {
                    if let Some(id) = running.pop() {
                        c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
                    }
                }
                _ => {
                    let name = format!("node{}", nodes);
                    c.handle(Event::NodeSchedulable { node: name, schedulable: excl });
                }
            }
            for d in c.schedule(t as i64, &mut task_ids) {
                if let Decision::Start { job, alloc, split, .. } = d {
                    let total: u32 = alloc.nodes.iter().map(|n| n.tasks).sum();
                    prop_assert!(total >= 1);
                    prop_assert!(!running.contains(&job), "job {} started twice", job);
                    running.insert(0, job);
                    if let Some((a, _)) = split {
                        array_of.insert(job, a);
                    }
                }
            }
            // Licenses held by running jobs (by what they asked for) never pass the total.
            let held: u32 = running
                .iter()
                .map(|j| lic_of.get(j).or_else(|| array_of.get(j).and_then(|a| lic_of.get(a))).copied().unwrap_or(0))
                .sum();
            prop_assert!(held <= 2, "{} licenses of 2 held", held);
            prop_assert_eq!(c.licenses(), vec![("lic".to_string(), 2, held)]);
            // No array runs more tasks than its %N allows.
            for (a, limit) in &throttles {
                let n = running.iter().filter(|j| array_of.get(j) == Some(a)).count() as u32;
                prop_assert!(*limit == 0 || n <= *limit, "array {} runs {} tasks, throttle {}", a, n, limit);
            }
            prop_assert_eq!(c.check_invariants(), Ok(()));
        }
    }
}

#[test]
fn a_job_that_can_never_fit_is_refused_at_submit() {
    let c = cluster(4, 1, 1000);
    let mut j = job(1);
    j.min_nodes = 2;
    j.max_nodes = Some(2);
    j.ntasks = 4;
    assert_eq!(c.check_submit(&j, false), drover_sched::SubmitCheck::NodeConfigUnavailable);
    let mut ok = job(2);
    ok.ntasks = 4;
    assert_eq!(c.check_submit(&ok, false), drover_sched::SubmitCheck::Ok);
    let mut big = job(3);
    big.mem_per_node_mb = Some(5000);
    assert_eq!(c.check_submit(&big, false), drover_sched::SubmitCheck::NodeConfigUnavailable);
}

#[test]
fn an_idle_pass_decides_nothing_until_an_event_or_a_begin_time() {
    let mut c = cluster(1, 1, 1000);
    let mut b = job(1);
    b.more_mut().begin_time = Some(100);
    c.handle(Event::Submitted(b));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(reason(&d, 1), Some(PendingReason::BeginTime));
    assert!(c.schedule(50, &mut no_ids).is_empty());
    assert_eq!(started(&c.schedule(100, &mut no_ids)), [1]);
    c.handle(Event::Submitted(job(2)));
    assert_eq!(reason(&c.schedule(101, &mut no_ids), 2), Some(PendingReason::Resources));
    assert!(c.schedule(102, &mut no_ids).is_empty());
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    assert_eq!(started(&c.schedule(103, &mut no_ids)), [2]);
}

#[test]
fn an_array_starts_its_tasks_under_new_ids_and_the_last_keeps_the_array_id() {
    let mut c = cluster(2, 1, 1000);
    c.handle(Event::Submitted(array(7, "0-2")));
    let d = c.schedule(0, &mut ids());
    assert_eq!(splits(&d), [(1001, Some((7, 0))), (1002, Some((7, 1)))]);
    assert_eq!(reason(&d, 7), Some(PendingReason::Resources));
    c.handle(Event::Ended { job: 1001, outcome: Outcome::Succeeded });
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(splits(&d), [(7, Some((7, 2)))]);
    assert_eq!(c.check_invariants(), Ok(()));
    assert!(c.allocation(7).is_some());
}

#[test]
fn an_array_throttle_bounds_its_running_tasks() {
    let mut c = cluster(4, 4, 1000);
    c.handle(Event::Submitted(array(1, "0-9%2")));
    c.handle(Event::Submitted(job(2)));
    let mut next = ids();
    let d = c.schedule(0, &mut next);
    assert_eq!(started(&d), [1001, 1002, 2]);
    assert_eq!(reason(&d, 1), Some(PendingReason::JobArrayTaskLimit));
    c.handle(Event::Ended { job: 1002, outcome: Outcome::Succeeded });
    let d = c.schedule(1, &mut next);
    assert_eq!(splits(&d), [(1003, Some((1, 2)))]);
    // A restarted controller reports the running tasks; the throttle still holds.
    let mut r = cluster(4, 4, 1000);
    let mut rest = array(1, "3-9%2");
    rest.id = 1;
    r.handle(Event::Submitted(rest));
    for (job, task) in [(1001, 0), (1003, 2)] {
        let alloc = c.allocation(job).unwrap().clone();
        r.handle(Event::Running {
            job,
            alloc,
            array: Some((1, task)),
            since: 0,
            limit: None,
            licenses: Vec::new(),
            limits: Vec::new(),
            qos: None,
            user: (0, false),
        });
    }
    assert_eq!(reason(&r.schedule(2, &mut no_ids), 1), Some(PendingReason::JobArrayTaskLimit));
    r.handle(Event::Ended { job: 1001, outcome: Outcome::Failed });
    assert_eq!(splits(&r.schedule(3, &mut || 5000)), [(5000, Some((1, 3)))]);
}

#[test]
fn a_million_task_array_is_one_queue_entry() {
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::Submitted(array(1, "0-999999")));
    let d = c.schedule(0, &mut ids());
    assert_eq!(started(&d).len(), 2);
    assert_eq!(c.check_invariants(), Ok(()));
}

fn depends(id: u32, dep: &str) -> SchedJob {
    let mut j = job(id);
    j.more_mut().dependency = drover_model::job::parse_dependency(dep).unwrap();
    j
}

fn end(c: &mut Core, job: u32, ok: bool) {
    c.handle(Event::Ended { job, outcome: if ok { Outcome::Succeeded } else { Outcome::Failed } });
}

#[test]
fn a_dependency_on_an_array_waits_for_every_task_and_fails_with_any() {
    let mut c = cluster(4, 1, 1000);
    c.handle(Event::Submitted(array(1, "0-2")));
    c.handle(Event::Submitted(depends(2, "afterok:1")));
    c.handle(Event::Submitted(depends(3, "afterany:1_1")));
    c.handle(Event::Submitted(depends(4, "afternotok:1")));
    let d = c.schedule(0, &mut ids());
    assert_eq!(splits(&d), [(1001, Some((1, 0))), (1002, Some((1, 1))), (1, Some((1, 2)))]);
    assert_eq!(reason(&d, 2), Some(PendingReason::Dependency));
    end(&mut c, 1002, true);
    assert_eq!(started(&c.schedule(1, &mut no_ids)), [3]);
    end(&mut c, 1001, true);
    assert!(started(&c.schedule(2, &mut no_ids)).is_empty());
    end(&mut c, 1, false);
    let d = c.schedule(3, &mut no_ids);
    assert_eq!(reason(&d, 2), Some(PendingReason::DependencyNeverSatisfied));
    assert_eq!(started(&d), [4]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random jobs depending on earlier ones (`after`, `afterany`, `afterok`, `afternotok`),
    /// random ends: a job never starts before its dependency allows, and one whose
    /// dependency can no longer be met never starts.
    #[test]
    fn a_job_never_starts_before_its_dependency_allows(
        ops in proptest::collection::vec((0u8..4, 0u8..5, 0u32..8, 1u32..3, any::<bool>()), 1..60),
    ) {
        let mut c = cluster(2, 2, 1000);
        let mut next = 1u32;
        // Per job: what it waits for (kind, target); whether it started; how it ended.
        let mut waits: std::collections::HashMap<u32, (u8, u32)> = Default::default();
        let mut began: std::collections::HashSet<u32> = Default::default();
        let mut ended: std::collections::HashMap<u32, bool> = Default::default();
        let mut running: Vec<u32> = Vec::new();
        for (t, (op, kind, back, tasks, ok)) in ops.into_iter().enumerate() {
            if op < 2 {
                let mut j = job(next);
                j.ntasks = tasks;
                if kind < 4 && next > 1 {
                    let target = next - 1 - back.min(next - 2);
                    let word = ["after", "afterany", "afterok", "afternotok"][kind as usize];
                    j.more_mut().dependency = drover_model::job::parse_dependency(&format!("{word}:{target}")).unwrap();
                    waits.insert(next, (kind, target));
                }
                c.handle(Event::Submitted(j));
                next += 1;
            } else if !running.is_empty() {
                let id = running.remove(t % running.len());
                end(&mut c, id, ok);
                ended.insert(id, ok);
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                if let Decision::Start { job, .. } = d {
                    if let Some(&(kind, target)) = waits.get(&job) {
                        let allowed = match kind {
                            0 => began.contains(&target),
                            1 => ended.contains_key(&target),
                            2 => ended.get(&target) == Some(&true),
                            _ => ended.get(&target) == Some(&false),
                        };
                        prop_assert!(allowed, "job {} started; it waits for {:?}", job, (kind, target));
                    }
                    began.insert(job);
                    running.push(job);
                }
            }
            c.check_invariants().map_err(TestCaseError::fail)?;
        }
    }

    /// The same events give the same decisions: two cores built apart (not cloned) from one
    /// random history of submits (arrays, dependencies, several nodes, two partitions), ends
    /// and node changes, under each policy, decide alike at every pass.
    #[test]
    fn the_pass_is_deterministic(
        ops in proptest::collection::vec((0u8..6, 1u32..6, 1u32..3, 0u64..500, 0u8..4), 1..60),
        policy in prop_oneof![Just(drover_sched::Policy::Conservative), Just(drover_sched::Policy::Easy), Just(drover_sched::Policy::Fcfs)],
    ) {
        let build = || {
            let mut c = with_policy(cluster(4, 2, 1000), policy);
            c.handle(Event::PartitionDefined(PartitionRes::open("half", vec!["node3".into(), "node4".into()])));
            c
        };
        let (mut a, mut b) = (build(), build());
        let (mut ids_a, mut ids_b) = (ids(), ids());
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        for (t, (op, tasks, nodes, limit, kind)) in ops.into_iter().enumerate() {
            let events: Vec<Event> = match op {
                0..=2 => {
                    let mut j = match kind {
                        0 => array(next, "0-3%2"),
                        _ => limited(next, tasks, 60 + limit),
                    };
                    j.min_nodes = nodes.min(j.ntasks);
                    j.max_nodes = Some(j.min_nodes);
                    if kind == 1 && next > 1 {
                        j.more_mut().dependency = drover_model::job::parse_dependency(&format!("afterany:{}", next - 1)).unwrap();
                    }
                    if kind == 2 {
                        j.partitions = vec!["half".into(), "cpu".into()];
                    }
                    next += 1;
                    vec![Event::Submitted(j)]
                }
                3 | 4 if !running.is_empty() => {
                    let id = running.remove(t % running.len());
                    vec![Event::Ended { job: id, outcome: if op == 3 { Outcome::Succeeded } else { Outcome::Failed } }]
                }
                5 => vec![Event::NodeSchedulable { node: format!("node{}", 1 + t % 4), schedulable: kind != 0 }],
                _ => Vec::new(),
            };
            for e in events {
                a.handle(e.clone());
                b.handle(e);
            }
            let now = t as i64 * 30;
            let da = a.schedule(now, &mut ids_a);
            prop_assert_eq!(&da, &b.schedule(now, &mut ids_b));
            running.extend(started(&da));
        }
    }
}

#[test]
fn aftercorr_pairs_tasks_and_any_of_needs_one() {
    let mut c = cluster(4, 1, 1000);
    c.handle(Event::Submitted(array(1, "0-1")));
    let mut b = array(2, "0-1");
    b.more_mut().dependency = drover_model::job::parse_dependency("aftercorr:1").unwrap();
    c.handle(Event::Submitted(b));
    c.handle(Event::Submitted(depends(3, "afterok:1001?afterok:1")));
    let d = c.schedule(0, &mut ids());
    assert_eq!(splits(&d), [(1001, Some((1, 0))), (1, Some((1, 1)))]);
    assert_eq!(reason(&d, 2), Some(PendingReason::Dependency));
    end(&mut c, 1001, true);
    let d = c.schedule(1, &mut || 2001);
    // Task 0 of array 2 follows task 0 of array 1; task 1 still waits for its partner.
    assert_eq!(splits(&d), [(2001, Some((2, 0))), (3, None)]);
    end(&mut c, 1, true);
    assert_eq!(splits(&c.schedule(2, &mut no_ids)), [(2, Some((2, 1)))]);
}

#[test]
fn after_with_minutes_waits_from_the_start_and_wakes_by_itself() {
    let mut c = cluster(2, 1, 1000);
    c.handle(Event::Submitted(job(1)));
    c.handle(Event::Submitted(depends(2, "after:1+2")));
    assert_eq!(started(&c.schedule(100, &mut no_ids)), [1]);
    assert!(c.schedule(150, &mut no_ids).is_empty());
    assert!(started(&c.schedule(219, &mut no_ids)).is_empty());
    assert_eq!(started(&c.schedule(220, &mut no_ids)), [2]);
}

#[test]
fn singleton_waits_for_the_earlier_jobs_it_names() {
    let mut c = cluster(2, 1, 1000);
    c.handle(Event::Submitted(job(1)));
    let mut s = job(2);
    s.more_mut().singleton_after = vec![1];
    c.handle(Event::Submitted(s));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!((started(&d), reason(&d, 2)), (vec![1], Some(PendingReason::Dependency)));
    end(&mut c, 1, false);
    assert_eq!(started(&c.schedule(1, &mut no_ids)), [2]);
}

/// Slurm's backfill (on time limits, priority order) with `policy`'s reservations; planning
/// on predictions is tested in tests/predict.rs.
fn with_policy(mut c: Core, policy: drover_sched::Policy) -> Core {
    c.handle(Event::Configure(drover_sched::SchedConfig {
        policy,
        max_job_test: 100,
        window: 86400,
        interval: 0,
        ..drover_sched::SchedConfig::slurm()
    }));
    c
}

#[test]
fn easy_backfills_what_ends_before_the_reservation_and_nothing_else() {
    for policy in [drover_sched::Policy::Easy, drover_sched::Policy::Conservative] {
        let mut c = with_policy(cluster(1, 4, 1000), policy);
        c.handle(Event::Submitted(limited(1, 3, 100)));
        assert_eq!(started(&c.schedule(0, &mut no_ids)), [1]);
        c.handle(Event::Submitted(limited(2, 4, 100))); // waits for job 1: reserved at 100
        c.handle(Event::Submitted(limited(3, 1, 200))); // would delay job 2
        c.handle(Event::Submitted(limited(4, 1, 50))); // ends before 100: backfills
        let before = c.pass_stats();
        let d = c.schedule(10, &mut no_ids);
        assert_eq!(started(&d), [4], "{policy:?}");
        assert_eq!(planned(&d, 2), Some((Some(100), vec!["node1".to_string()])));
        assert_eq!(reason(&d, 3), Some(PendingReason::Priority));
        c.check_invariants().unwrap();
        // sdiag's counts: one more pass, over the three waiting jobs, one of them backfilled.
        let s = c.pass_stats();
        assert_eq!((s.passes - before.passes, s.backfilled - before.backfilled), (1, 1), "{policy:?}");
        assert_eq!((s.last_queue_len, s.last_depth), (3, 3), "{policy:?}");
        // Nothing changed: no pass, nothing counted.
        c.schedule(11, &mut no_ids);
        assert_eq!(c.pass_stats().passes, s.passes);
    }
    // FCFS starts nothing past the waiting job.
    let mut c = with_policy(cluster(1, 4, 1000), drover_sched::Policy::Fcfs);
    c.handle(Event::Submitted(limited(1, 3, 100)));
    c.schedule(0, &mut no_ids);
    c.handle(Event::Submitted(limited(2, 4, 100)));
    c.handle(Event::Submitted(limited(4, 1, 50)));
    assert!(started(&c.schedule(10, &mut no_ids)).is_empty());
}

#[test]
fn conservative_protects_every_reservation_easy_only_the_first() {
    // Two nodes of 2 cpus. Job 1 fills node1 until 100; job 2 wants node1 whole for 100 s
    // (reserved 100..200); job 3 wants both nodes whole for 100 s (reserved at 200 under
    // conservative, nothing under EASY); job 4 would take a cpu of node2 from 10 to 310.
    let run = |policy| {
        let mut c = with_policy(cluster(2, 2, 1000), policy);
        let mut one = limited(1, 2, 100);
        one.more_mut().nodelist = vec!["node1".into()];
        c.handle(Event::Submitted(one));
        c.schedule(0, &mut no_ids);
        let mut two = limited(2, 2, 100);
        two.more_mut().nodelist = vec!["node1".into()];
        c.handle(Event::Submitted(two));
        let mut three = limited(3, 4, 100);
        three.min_nodes = 2;
        three.max_nodes = Some(2);
        c.handle(Event::Submitted(three));
        c.handle(Event::Submitted(limited(4, 1, 300)));
        let d = c.schedule(10, &mut no_ids);
        c.check_invariants().unwrap();
        (started(&d), planned(&d, 2).and_then(|p| p.0), planned(&d, 3).and_then(|p| p.0))
    };
    // Under EASY job 3 is only forecast: where the plan puts it once job 4 has taken node2
    // until 310, promising nothing.
    assert_eq!(run(drover_sched::Policy::Easy), (vec![4], Some(100), Some(310)));
    assert_eq!(run(drover_sched::Policy::Conservative), (vec![], Some(100), Some(200)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Jobs that end no later than their limits never start later than the planner promised:
    /// a backfilled job never pushes a reservation back (the top job's under EASY, every
    /// one under conservative), and nothing is ever oversubscribed.
    #[test]
    fn backfill_never_delays_a_reservation(
        conservative in any::<bool>(),
        jobs in proptest::collection::vec((0i64..60, 1u32..7, 1u32..3, 5u64..80, 0u64..100), 1..25),
    ) {
        // Ids (and so priorities) in submit order: no later job outranks an earlier one.
        let mut jobs = jobs;
        jobs.sort_by_key(|j| j.0);
        let policy = if conservative { drover_sched::Policy::Conservative } else { drover_sched::Policy::Easy };
        let mut c = with_policy(cluster(3, 4, 1000), policy);
        let mut promised: std::collections::HashMap<u32, i64> = Default::default();
        let mut first_plan: std::collections::HashMap<u32, i64> = Default::default();
        let mut ends: Vec<(i64, u32)> = Vec::new();
        for t in 0..2000i64 {
            for (k, &(at, tasks, nodes, limit, pct)) in jobs.iter().enumerate() {
                if at == t {
                    let mut j = limited(k as u32 + 1, tasks, limit);
                    j.min_nodes = nodes.min(tasks);
                    j.max_nodes = Some(nodes.min(tasks));
                    c.handle(Event::Submitted(j));
                    let _ = pct;
                }
            }
            for &(_, id) in ends.iter().filter(|(e, _)| *e == t) {
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
            }
            for d in c.schedule(t, &mut no_ids) {
                if std::env::var_os("DBG").is_some() { eprintln!("t={t} {d:?}"); }
                match d {
                    Decision::Planned { job, start: Some(s), .. } => {
                        let top = first_plan.is_empty() || conservative;
                        if let Some(&p) = promised.get(&job) {
                            prop_assert!(!top || s <= p, "job {} moved from {} to {} at {}", job, p, s, t);
                        }
                        first_plan.entry(job).or_insert(s);
                        promised.insert(job, s);
                    }
                    Decision::Start { job, .. } => {
                        if let (Some(&p), true) = (promised.get(&job), conservative) {
                            prop_assert!(t <= p, "job {} promised {} started {}", job, p, t);
                        }
                        let (_, _, _, limit, pct) = jobs[job as usize - 1];
                        ends.push((t + (limit * pct / 100).max(1) as i64, job));
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(c.check_invariants(), Ok(()));
        }
    }
}

#[test]
fn an_unlimited_job_never_passes_a_reservation_behind_an_unlimited_one() {
    let mut c = cluster(2, 1, 1000);
    let mut blocker = job(1);
    blocker.more_mut().nodelist = vec!["node1".into()];
    c.handle(Event::Submitted(blocker));
    assert_eq!(started(&c.schedule(100, &mut no_ids)), [1]);
    let mut big = job(2);
    big.min_nodes = 2;
    big.max_nodes = Some(2);
    big.ntasks = 2;
    c.handle(Event::Submitted(big));
    let d = c.schedule(101, &mut no_ids);
    assert_eq!(reason(&d, 2), Some(PendingReason::Resources));
    c.handle(Event::Submitted(job(3)));
    let d = c.schedule(101, &mut no_ids);
    assert!(started(&d).is_empty(), "{d:?}");
    assert_eq!(reason(&d, 3), Some(PendingReason::Priority));
}

fn gpu_cluster(nodes: u32, cpus: u32, gres: &str) -> Core {
    let mut c = Core::new();
    let mut names = Vec::new();
    let list = drover_model::gres::parse_node_gres(gres).unwrap();
    for i in 1..=nodes {
        let name = format!("node{i}");
        c.handle(Event::NodeDefined(NodeRes::new(&name, cpus, 1000, vec![], 1).with_gres(&list)));
        c.handle(Event::NodeSchedulable { node: name.clone(), schedulable: true });
        names.push(name);
    }
    c.handle(Event::PartitionDefined(PartitionRes::open("cpu", names)));
    c
}

fn gpu_job(id: u32, kind: Option<&str>, per_node: u64, per_task: u64) -> SchedJob {
    let mut j = job(id);
    j.more = SchedMore {
        gres: vec![GresNeed { name: "gpu".into(), kind: kind.map(String::from), per_node, per_task }],
        ..Default::default()
    }
    .boxed();
    j
}

fn gpus_of(d: &[Decision], id: u32) -> Vec<(String, Vec<u32>)> {
    d.iter()
        .find_map(|d| match d {
            Decision::Start { job, alloc, .. } if *job == id => {
                Some(alloc.nodes.iter().map(|n| (n.node.clone(), n.gpus())).collect())
            }
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn gpu_jobs_get_distinct_devices_and_wait_for_them() {
    let mut c = gpu_cluster(1, 8, "gpu:fake:2");
    c.handle(Event::Submitted(gpu_job(1, None, 1, 0)));
    c.handle(Event::Submitted(gpu_job(2, None, 1, 0)));
    c.handle(Event::Submitted(gpu_job(3, None, 1, 0)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(gpus_of(&d, 1), [("node1".to_string(), vec![0])]);
    assert_eq!(gpus_of(&d, 2), [("node1".to_string(), vec![1])]);
    // CPUs are free but both GPUs are held: the third waits for resources.
    assert_eq!(started(&d), [1, 2]);
    assert_eq!(reason(&d, 3), Some(PendingReason::Resources));
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(gpus_of(&d, 3), [("node1".to_string(), vec![0])]);
    assert_eq!(c.check_invariants(), Ok(()));
}

#[test]
fn typed_and_per_task_gpu_requests() {
    let mut c = gpu_cluster(2, 8, "gpu:a100:2,gpu:v100:2");
    // Two v100s on one node: indices 2-3, as Slurm numbers a node's GPUs across types.
    c.handle(Event::Submitted(gpu_job(1, Some("v100"), 2, 0)));
    // Three tasks with a GPU each on one node at most: needs more than one node's a100s.
    let mut j = gpu_job(2, Some("a100"), 0, 1);
    j.ntasks = 3;
    c.handle(Event::Submitted(j));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(gpus_of(&d, 1), [("node1".to_string(), vec![2, 3])]);
    let got = gpus_of(&d, 2);
    assert_eq!(got.iter().map(|(_, g)| g.len()).sum::<usize>(), 3, "{got:?}");
    assert!(got.iter().all(|(_, g)| g.iter().all(|i| *i < 2)), "{got:?}");
    // Nobody could ever give five a100s to one node: refused at submit.
    let mut j = gpu_job(3, Some("a100"), 5, 0);
    j.max_nodes = Some(1);
    assert_eq!(c.check_submit(&j, false), drover_sched::SubmitCheck::NodeConfigUnavailable);
    assert_eq!(c.check_invariants(), Ok(()));
}

#[test]
fn an_exclusive_job_holds_every_gpu_of_its_nodes() {
    let mut c = gpu_cluster(1, 4, "gpu:fake:2");
    let mut j = job(1);
    j.exclusive = true;
    c.handle(Event::Submitted(j));
    c.handle(Event::Submitted(gpu_job(2, None, 1, 0)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(gpus_of(&d, 1), [("node1".to_string(), vec![0, 1])]);
    assert_eq!(started(&d), [1]);
}

#[test]
fn a_gpu_job_gets_a_reservation_where_gpus_free_up() {
    let mut c = with_policy(gpu_cluster(2, 8, "gpu:fake:1"), drover_sched::Policy::Conservative);
    let mut a = gpu_job(1, None, 1, 0);
    a.time_limit = Some(Some(100));
    let mut b = gpu_job(2, None, 1, 0);
    b.time_limit = Some(Some(300));
    c.handle(Event::Submitted(a));
    c.handle(Event::Submitted(b));
    c.schedule(0, &mut no_ids);
    // Both GPUs held: the next GPU job is planned for when the shorter job ends, while a
    // CPU-only job starts at once beside them.
    let mut w = gpu_job(3, None, 1, 0);
    w.time_limit = Some(Some(50));
    c.handle(Event::Submitted(w));
    let mut cpu = job(4);
    cpu.time_limit = Some(Some(1000));
    c.handle(Event::Submitted(cpu));
    let d = c.schedule(10, &mut no_ids);
    assert_eq!(started(&d), [4]);
    assert_eq!(planned(&d, 3), Some((Some(100), vec!["node1".to_string()])));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random GPU jobs never share a device and never hold more than a node has.
    #[test]
    fn gpus_are_never_oversubscribed(ops in proptest::collection::vec((0u8..3, 1u32..3, 0u64..3, 0u64..2), 1..60)) {
        let mut c = gpu_cluster(3, 8, "gpu:a:2,gpu:b:1");
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        for (t, (op, tasks, per_node, per_task)) in ops.into_iter().enumerate() {
            if op < 2 {
                let mut j = gpu_job(next, if op == 1 { Some("a") } else { None }, per_node, per_task);
                j.ntasks = tasks;
                c.handle(Event::Submitted(j));
                next += 1;
            } else if let Some(id) = running.pop() {
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                if let Decision::Start { job, alloc, .. } = d {
                    for n in &alloc.nodes {
                        prop_assert!(n.gpus().len() <= 3);
                    }
                    running.insert(0, job);
                }
            }
            prop_assert_eq!(c.check_invariants(), Ok(()));
        }
    }
}

#[test]
fn licenses_bound_how_many_jobs_run_and_others_pass_them() {
    let mut c = cluster(2, 4, 1000);
    c.handle(Event::LicensesDefined(vec![("matlab".into(), 2)]));
    for i in 1..=3 {
        let mut j = job(i);
        j.more_mut().licenses = vec![("matlab".into(), 1)];
        c.handle(Event::Submitted(j));
    }
    // A job without licenses is not held back by one that waits for them.
    c.handle(Event::Submitted(job(4)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(started(&d), [1, 2, 4]);
    assert_eq!(reason(&d, 3), Some(PendingReason::Licenses));
    assert_eq!(c.licenses(), [("matlab".to_string(), 2, 2)]);
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(started(&d), [3]);
    assert_eq!(c.licenses(), [("matlab".to_string(), 2, 2)]);
}

#[test]
fn gpus_and_cpus_are_placed_near_each_other() {
    // One node: GPU 0 near CPUs 0-1, GPU 1 near CPUs 2-3 (gres.conf Cores=).
    let mut c = Core::new();
    let list = drover_model::gres::parse_node_gres("gpu:2").unwrap();
    let near = vec![Some(vec![0, 1]), Some(vec![2, 3])];
    c.handle(Event::NodeDefined(NodeRes::new("node1", 4, 1000, vec![], 1).with_gres(&list).with_gpu_cpus(near)));
    c.handle(Event::NodeSchedulable { node: "node1".into(), schedulable: true });
    c.handle(Event::PartitionDefined(PartitionRes::open("cpu", vec!["node1".into()])));
    // A CPU job takes CPUs 0-1; a GPU job then gets GPU 1 and the CPUs beside it.
    let mut cpu_job = job(1);
    cpu_job.ntasks = 2;
    c.handle(Event::Submitted(cpu_job));
    let mut g = gpu_job(2, None, 1, 0);
    g.ntasks = 2;
    c.handle(Event::Submitted(g));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(gpus_of(&d, 2), [("node1".to_string(), vec![1])]);
    let cpus: Vec<u32> = d
        .iter()
        .find_map(|d| match d {
            Decision::Start { job: 2, alloc, .. } => Some(alloc.nodes[0].cpu_ids.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(cpus, [2, 3]);
    // A GPU job on an empty node takes a GPU and its own CPUs.
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    c.handle(Event::Submitted(gpu_job(3, None, 1, 0)));
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(gpus_of(&d, 3), [("node1".to_string(), vec![0])]);
    assert_eq!(c.check_invariants(), Ok(()));
}

#[test]
fn a_multi_gpu_job_gets_linked_gpus() {
    // Four GPUs linked in pairs 0-2 and 1-3 (gres.conf Links=).
    let mut c = Core::new();
    let list = drover_model::gres::parse_node_gres("gpu:4").unwrap();
    let links = vec![vec![0, 0, 2, 0], vec![0, 0, 0, 2], vec![2, 0, 0, 0], vec![0, 2, 0, 0]];
    c.handle(Event::NodeDefined(NodeRes::new("node1", 8, 1000, vec![], 1).with_gres(&list).with_gpu_links(links)));
    c.handle(Event::NodeSchedulable { node: "node1".into(), schedulable: true });
    c.handle(Event::PartitionDefined(PartitionRes::open("cpu", vec!["node1".into()])));
    c.handle(Event::Submitted(gpu_job(1, None, 2, 0)));
    c.handle(Event::Submitted(gpu_job(2, None, 2, 0)));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!(gpus_of(&d, 1), [("node1".to_string(), vec![0, 2])]);
    assert_eq!(gpus_of(&d, 2), [("node1".to_string(), vec![1, 3])]);
    assert_eq!(c.check_invariants(), Ok(()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Accounting limits: whatever is submitted and ends, the running jobs of a group never
    /// hold more jobs or CPUs together than its caps, and a job held by a group's cap never
    /// keeps another group's job from starting on free CPUs.
    #[test]
    fn limit_groups_are_never_exceeded(ops in proptest::collection::vec((0u8..3, 0usize..3, 1u32..4), 1..80)) {
        use drover_sched::limits::Caps;
        use std::sync::Arc;
        let mut c = cluster(3, 4, 1000);
        let groups: Vec<Arc<str>> = vec![Arc::from("a:physics"), Arc::from("qu:normal/alice"), Arc::from("a:chem")];
        c.handle(Event::LimitsDefined(vec![
            (groups[0].clone(), Caps { cpus: Some((5, PendingReason::AssocGrpCpuLimit)), ..Default::default() }),
            (groups[1].clone(), Caps { jobs: Some((2, PendingReason::QOSMaxJobsPerUserLimit)), ..Default::default() }),
        ]));
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        let mut of: std::collections::HashMap<u32, (usize, u32)> = Default::default();
        for (t, (op, g, cpus)) in ops.into_iter().enumerate() {
            match op {
                0 | 1 => {
                    let mut j = job(next);
                    j.ntasks = cpus;
                    // Group 0 jobs are also alice's in QoS normal, half the time.
                    j.more_mut().limits = if g == 0 && cpus.is_multiple_of(2) {
                        vec![groups[0].clone(), groups[1].clone()]
                    } else {
                        vec![groups[g].clone()]
                    };
                    of.insert(next, (g, cpus));
                    c.handle(Event::Submitted(j));
                    next += 1;
                }
                _ => {
                    if let Some(id) = running.pop() {
                        c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
                    }
                }
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                if let Decision::Start { job, .. } = d {
                    running.insert(0, job);
                }
            }
            let physics_cpus: u32 = running.iter().filter(|j| of[j].0 == 0).map(|j| of[j].1).sum();
            prop_assert!(physics_cpus <= 5, "physics holds {} CPUs of 5", physics_cpus);
            let alice = running.iter().filter(|j| of[j].0 == 0 && of[j].1.is_multiple_of(2) || of[j].0 == 1).count();
            prop_assert!(alice <= 2, "alice runs {} jobs of 2 in QoS normal", alice);
            prop_assert_eq!(c.check_invariants(), Ok(()));
        }
    }
}

#[test]
fn a_job_held_by_a_limit_does_not_hold_back_others() {
    use drover_sched::limits::Caps;
    use std::sync::Arc;
    let mut c = cluster(1, 4, 1000);
    let g: Arc<str> = Arc::from("a:physics");
    c.handle(Event::LimitsDefined(vec![(
        g.clone(),
        Caps { jobs: Some((1, PendingReason::AssocGrpJobsLimit)), ..Default::default() },
    )]));
    for id in 1..=2 {
        let mut j = job(id);
        j.more_mut().limits = vec![g.clone()];
        c.handle(Event::Submitted(j));
    }
    c.handle(Event::Submitted(job(3)));
    let d = c.schedule(0, &mut no_ids);
    let started: Vec<u32> =
        d.iter().filter_map(|d| if let Decision::Start { job, .. } = d { Some(*job) } else { None }).collect();
    assert_eq!(started, [1, 3]);
    assert_eq!(reason(&d, 2), Some(PendingReason::AssocGrpJobsLimit));
    // The first ends: the second starts.
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let d = c.schedule(1, &mut no_ids);
    assert!(d.iter().any(|d| matches!(d, Decision::Start { job: 2, .. })));
    // A per-job limit holds a job whatever its groups hold.
    let mut big = job(4);
    big.more_mut().policy = Some(PendingReason::AssocMaxCpuPerJobLimit);
    c.handle(Event::Submitted(big));
    assert_eq!(reason(&c.schedule(2, &mut no_ids), 4), Some(PendingReason::AssocMaxCpuPerJobLimit));
}

fn qos_job(id: u32, cpus: u32, qos: &str, can_preempt: &[&str]) -> SchedJob {
    let mut j = job(id);
    j.ntasks = cpus;
    j.more = SchedMore {
        preempt: Some(drover_sched::Preempt {
            qos: qos.into(),
            can_preempt: can_preempt.iter().map(|q| (*q).into()).collect(),
        }),
        ..Default::default()
    }
    .boxed();
    j
}

fn preempted(d: &[Decision]) -> Vec<(u32, u32)> {
    d.iter().filter_map(|d| if let Decision::Preempt { job, by } = d { Some((*job, *by)) } else { None }).collect()
}

#[test]
fn a_high_qos_job_preempts_the_youngest_low_qos_jobs_it_needs_and_no_more() {
    let mut c = cluster(1, 4, 1000);
    // Three low jobs (1, 1 and 2 CPUs) fill the node, started at 0, 10 and 20.
    for (t, (id, cpus)) in [(1, 1), (2, 1), (3, 2)].into_iter().enumerate() {
        c.handle(Event::Submitted(qos_job(id, cpus, "low", &[])));
        assert_eq!(started(&c.schedule(t as i64 * 10, &mut no_ids)), [id]);
    }
    // A normal job first in line may preempt nothing, and a high one behind it does not
    // either (the room would go to the job before it).
    c.handle(Event::Submitted(qos_job(10, 2, "normal", &[])));
    c.handle(Event::Submitted(qos_job(11, 2, "high", &["low"])));
    assert_eq!(preempted(&c.schedule(30, &mut no_ids)), []);
    // First in line, the high job needs 2 CPUs: the youngest low job (3) suffices.
    c.handle(Event::Withdrawn(10));
    let d = c.schedule(30, &mut no_ids);
    assert_eq!(preempted(&d), [(3, 11)]);
    // Chosen once: while job 3 goes (its grace time), no more are taken.
    c.handle(Event::Preempting { job: 3, end: 40 });
    assert_eq!(preempted(&c.schedule(31, &mut no_ids)), []);
    c.handle(Event::Ended { job: 3, outcome: Outcome::Failed });
    assert_eq!(started(&c.schedule(41, &mut no_ids)), [11]);
    assert_eq!(c.check_invariants(), Ok(()));
}

#[test]
fn preemption_spares_other_qos_and_young_jobs_within_the_exempt_time() {
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::Configure(drover_sched::SchedConfig { preempt_exempt: 60, ..Default::default() }));
    c.handle(Event::Submitted(qos_job(1, 2, "standby", &[])));
    assert_eq!(started(&c.schedule(0, &mut no_ids)), [1]);
    c.handle(Event::Submitted(qos_job(2, 2, "high", &["low"])));
    assert_eq!(preempted(&c.schedule(100, &mut no_ids)), [], "standby is not low");
    c.handle(Event::Withdrawn(2));
    c.handle(Event::Submitted(qos_job(3, 2, "high", &["standby"])));
    assert_eq!(preempted(&c.schedule(30, &mut no_ids)), [], "it has run 30 s of its 60 exempt");
    assert_eq!(preempted(&c.schedule(61, &mut no_ids)), [(1, 3)]);
}

#[test]
fn a_job_suspended_by_preemption_resumes_first_on_its_own_resources() {
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::Submitted(qos_job(1, 2, "low", &[])));
    assert_eq!(started(&c.schedule(0, &mut no_ids)), [1]);
    c.handle(Event::Submitted(qos_job(2, 2, "high", &["low"])));
    assert_eq!(preempted(&c.schedule(10, &mut no_ids)), [(1, 2)]);
    c.handle(Event::Suspended { job: 1, alloc: None });
    let d = c.schedule(11, &mut no_ids);
    assert_eq!(started(&d), [2], "on the suspended job's CPUs: {d:?}");
    assert_eq!(c.check_invariants(), Ok(()));
    // Another job waits; when the preempting job ends, the suspended one comes back first.
    c.handle(Event::Submitted(qos_job(3, 2, "normal", &[])));
    let d12 = c.schedule(12, &mut no_ids);
    assert_eq!(started(&d12), [], "{d12:?}");
    assert!(c.suspended_by_preemption(1), "{d12:?}");
    c.handle(Event::Ended { job: 2, outcome: Outcome::Succeeded });
    assert!(c.suspended_by_preemption(1));
    let d = c.schedule(20, &mut no_ids);
    assert!(d.iter().any(|d| matches!(d, Decision::Resume { job: 1 })), "{d:?}");
    assert_eq!(started(&d), []);
    assert_eq!(c.check_invariants(), Ok(()));
    assert!(!c.suspended_by_preemption(1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// QoS preemption under random load: only running low-QoS jobs are chosen, each for a
    /// waiting high-QoS job; whether they are then requeued (ended) or suspended, nothing is
    /// ever oversubscribed, and a suspended job resumes only on its own free resources.
    #[test]
    fn preemption_never_oversubscribes(ops in proptest::collection::vec((0u8..4, 1u32..5, any::<bool>()), 1..80)) {
        let mut c = cluster(2, 4, 1000);
        let mut next = 1u32;
        let mut qos: std::collections::HashMap<u32, bool> = Default::default(); // id → high
        let mut running: Vec<u32> = Vec::new();
        let mut suspended: Vec<u32> = Vec::new();
        for (t, (op, cpus, flag)) in ops.into_iter().enumerate() {
            match op {
                0 | 1 => {
                    let high = op == 1;
                    let j = if high { qos_job(next, cpus, "high", &["low"]) } else { qos_job(next, cpus, "low", &[]) };
                    qos.insert(next, high);
                    c.handle(Event::Submitted(j));
                    next += 1;
                }
                2 => {
                    if let Some(id) = running.pop() {
                        c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
                    }
                }
                _ => {}
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                match d {
                    Decision::Start { job, .. } => running.push(job),
                    Decision::Preempt { job, by } => {
                        prop_assert!(running.contains(&job), "victim {} is not running", job);
                        prop_assert_eq!(qos.get(&job), Some(&false));
                        prop_assert_eq!(qos.get(&by), Some(&true));
                        running.retain(|j| *j != job);
                        if flag {
                            c.handle(Event::Suspended { job, alloc: None });
                            suspended.push(job);
                        } else {
                            c.handle(Event::Ended { job, outcome: Outcome::Failed });
                        }
                    }
                    Decision::Resume { job } => {
                        prop_assert!(suspended.contains(&job), "job {} resumed without being suspended", job);
                        suspended.retain(|j| *j != job);
                        running.push(job);
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(c.check_invariants(), Ok(()));
        }
    }
}

// ---- advance reservations ----

fn resv(name: &str, start: i64, end: i64, nodes: &[&str], maint: bool) -> AdvanceResv {
    AdvanceResv { name: name.into(), start, end, nodes: nodes.iter().map(|n| n.to_string()).collect(), maint }
}

fn member(id: u32, name: &str, secs: u64) -> SchedJob {
    let mut j = limited(id, 1, secs);
    j.more_mut().reservation = Some(name.into());
    j
}

fn nodes_of(d: &[Decision], id: u32) -> Vec<String> {
    d.iter()
        .find_map(|d| match d {
            Decision::Start { job, alloc, .. } if *job == id => Some(alloc.node_names()),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn reserved_nodes_are_for_members_only_over_the_window() {
    let mut c = with_policy(cluster(2, 2, 1000), drover_sched::Policy::Conservative);
    c.handle(Event::ReservationsDefined(vec![resv("root_1", 0, 1000, &["node1"], false)]));
    // Outsiders land on node2; with node2 full, they wait, named as Slurm names it.
    let mut wide = limited(1, 2, 100);
    wide.min_nodes = 2;
    wide.max_nodes = Some(2);
    c.handle(Event::Submitted(wide));
    for id in 2..=4 {
        c.handle(Event::Submitted(limited(id, 1, 100)));
    }
    c.handle(Event::Submitted(member(5, "root_1", 100)));
    c.handle(Event::Submitted(member(6, "root_1", 100)));
    c.handle(Event::Submitted(member(7, "root_1", 100)));
    let d = c.schedule(10, &mut no_ids);
    assert_eq!(reason(&d, 1), Some(PendingReason::ReqNodeNotAvailReserved));
    assert_eq!(nodes_of(&d, 2), ["node2"]);
    assert_eq!(nodes_of(&d, 3), ["node2"]);
    assert!(nodes_of(&d, 4).is_empty(), "{d:?}");
    assert_eq!(nodes_of(&d, 5), ["node1"]);
    assert_eq!(nodes_of(&d, 6), ["node1"]);
    // The third member waits for its fellows, not for the outsiders before it.
    assert_eq!(reason(&d, 7), Some(PendingReason::Resources));
    c.check_invariants().unwrap();
    // An outsider short enough to end before the window... there is none here: node1 is
    // reserved until 1000, so the waiting outsider plans on node2 after 2 and 3 end.
    assert_eq!(planned(&d, 4).map(|p| p.1), Some(vec!["node2".to_string()]));
}

#[test]
fn a_member_waits_for_the_window_and_an_outsider_must_end_before_it() {
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::ReservationsDefined(vec![resv("maint_1", 100, 200, &["node1"], true)]));
    c.handle(Event::Submitted(member(1, "maint_1", 50)));
    // Ends at 60 + 50 = 110, inside the window: may not start.
    c.handle(Event::Submitted(limited(2, 1, 50)));
    // Ends at 60 + 30 = 90, before it: starts.
    c.handle(Event::Submitted(limited(3, 1, 30)));
    let d = c.schedule(60, &mut no_ids);
    assert_eq!(reason(&d, 1), Some(PendingReason::Reservation));
    assert_eq!(reason(&d, 2), Some(PendingReason::ReqNodeNotAvailMaint));
    assert_eq!(started(&d), [3]);
    c.handle(Event::Ended { job: 3, outcome: Outcome::Succeeded });
    // The window opens: the member starts (the core wakes for it), the outsider waits.
    let d = c.schedule(100, &mut no_ids);
    assert_eq!(started(&d), [1]);
    // The reservation gone, a member of it waits (the controller holds it).
    c.handle(Event::Submitted(member(4, "gone_9", 10)));
    let d = c.schedule(101, &mut no_ids);
    assert_eq!(reason(&d, 4), Some(PendingReason::ReservationDeleted));
    c.handle(Event::ReservationsDefined(vec![]));
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let d = c.schedule(102, &mut no_ids);
    assert_eq!(started(&d), [2]);
    c.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Over random queues, no job outside a reservation ever runs on its nodes during its
    /// window, members run only on its nodes and only inside it, and nothing is oversubscribed.
    #[test]
    fn reservations_are_never_trespassed(
        jobs in proptest::collection::vec((0i64..80, 1u32..4, 5u64..60, any::<bool>()), 1..30),
        start in 10i64..60,
        len in 10i64..80,
    ) {
        let mut c = with_policy(cluster(3, 2, 1000), drover_sched::Policy::Conservative);
        let end = start + len;
        c.handle(Event::ReservationsDefined(vec![resv("r_1", start, end, &["node1", "node2"], false)]));
        let mut runs: std::collections::HashMap<u32, (i64, i64, Vec<String>, bool)> = Default::default();
        let mut ends: Vec<(i64, u32)> = Vec::new();
        let members: std::collections::HashSet<u32> =
            jobs.iter().enumerate().filter(|(_, j)| j.3).map(|(k, _)| k as u32 + 1).collect();
        for t in 0..400i64 {
            for (k, &(at, tasks, limit, is_member)) in jobs.iter().enumerate() {
                if at == t {
                    let id = k as u32 + 1;
                    let mut j = if is_member { member(id, "r_1", limit) } else { limited(id, tasks, limit) };
                    j.ntasks = tasks;
                    c.handle(Event::Submitted(j));
                }
            }
            for &(_, id) in ends.iter().filter(|(e, _)| *e == t) {
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
            }
            for d in c.schedule(t, &mut no_ids) {
                if let Decision::Start { job, alloc, time_limit, .. } = d {
                    let mut stop = t + time_limit.unwrap_or(0) as i64;
                    if members.contains(&job) {
                        stop = stop.min(end);
                    }
                    ends.push((stop.max(t + 1), job));
                    runs.insert(job, (t, stop, alloc.node_names(), members.contains(&job)));
                }
            }
            c.check_invariants().map_err(TestCaseError::fail)?;
        }
        for (job, (s, e, nodes, m)) in runs {
            let on_reserved = nodes.iter().any(|n| n == "node1" || n == "node2");
            if m {
                prop_assert!(s >= start && s < end, "member {} started at {} outside [{}, {})", job, s, start, end);
                prop_assert!(nodes.iter().all(|n| n == "node1" || n == "node2"), "member {} on {:?}", job, nodes);
            } else if on_reserved {
                prop_assert!(e <= start || s >= end, "job {} ran {}..{} on {:?} inside [{}, {})", job, s, e, nodes, start, end);
            }
        }
    }
}

// ---- topology ----

fn lab_tree(c: &mut Core) {
    let t = drover_model::topology::Topology::parse(
        "SwitchName=s0 Nodes=node[1-2]\nSwitchName=s1 Nodes=node[3-4]\nSwitchName=top Switches=s[0-1]\n",
    )
    .unwrap();
    c.handle(Event::TopologyDefined(Some(t)));
}

fn busy(c: &mut Core, id: u32, node: &str, t: i64) {
    let mut j = limited(id, 2, 1000);
    j.more_mut().nodelist = vec![node.to_string()];
    c.handle(Event::Submitted(j));
    assert_eq!(started(&c.schedule(t, &mut no_ids)), [id]);
}

fn nodes_job(id: u32, n: u32) -> SchedJob {
    let mut j = limited(id, n, 100);
    j.min_nodes = n;
    j.max_nodes = Some(n);
    j
}

/// Four base blocks of four nodes (node1-4 in b1, ... node13-16 in b4), jobs of two-core nodes.
fn blocks(c: &mut Core) {
    let t = drover_model::topology::Topology::parse_blocks(
        "BlockName=b1 Nodes=node[1-4]\nBlockName=b2 Nodes=node[5-8]\nBlockName=b3 Nodes=node[9-12]\n\
         BlockName=b4 Nodes=node[13-16]\nBlockSizes=4,8,16\n",
    )
    .unwrap();
    c.handle(Event::TopologyDefined(Some(t)));
}

#[test]
fn jobs_stay_within_one_block_of_the_smallest_size_that_holds_them() {
    let mut c = cluster(16, 2, 1000);
    blocks(&mut c);
    busy(&mut c, 1, "node1", 0);
    // Three nodes: the block with the least room that holds them (b1, three left), so the
    // whole blocks stay whole.
    c.handle(Event::Submitted(nodes_job(2, 3)));
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node2", "node3", "node4"]);
    // Four nodes: a whole base block (b2), never parts of two.
    busy(&mut c, 3, "node9", 2);
    c.handle(Event::Submitted(nodes_job(4, 4)));
    assert_eq!(nodes_of(&c.schedule(3, &mut no_ids), 4), ["node5", "node6", "node7", "node8"]);
    // Six whole nodes need a pair of blocks (b1-b2 or b3-b4, never b2-b3): b1-b2 has no
    // whole node left, b3-b4 seven.
    let mut six = nodes_job(5, 6);
    six.ntasks = 12;
    c.handle(Event::Submitted(six));
    let d = c.schedule(4, &mut no_ids);
    let got = nodes_of(&d, 5);
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|n| n.trim_start_matches("node").parse::<u32>().unwrap() >= 10), "{got:?}");
    c.check_invariants().unwrap();
}

#[test]
fn a_job_waits_for_room_in_one_block_even_with_enough_nodes_free_across_them() {
    let mut c = cluster(16, 2, 1000);
    blocks(&mut c);
    // Two nodes busy in each block: eight free nodes, but no block with four.
    for (k, n) in ["node1", "node2", "node5", "node6", "node9", "node10", "node13", "node14"].iter().enumerate() {
        busy(&mut c, k as u32 + 1, n, k as i64);
    }
    let segmented = c.clone();
    c.handle(Event::Submitted(nodes_job(20, 4)));
    let d = c.schedule(10, &mut no_ids);
    assert_eq!(nodes_of(&d, 20), Vec::<String>::new());
    assert_eq!(reason(&d, 20), Some(PendingReason::Resources));
    c.check_invariants().unwrap();
    // With --segment=2 the same job runs at once as two pairs, each pair within a block.
    let mut c = segmented;
    let mut j = nodes_job(21, 4);
    j.more_mut().segment = Some(2);
    c.handle(Event::Submitted(j));
    let got = nodes_of(&c.schedule(11, &mut no_ids), 21);
    assert_eq!(got.len(), 4, "{got:?}");
    let block = |n: &String| (n.trim_start_matches("node").parse::<u32>().unwrap() - 1) / 4;
    assert_eq!(block(&got[0]), block(&got[1]));
    assert_eq!(block(&got[2]), block(&got[3]));
    c.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random jobs on four blocks of four nodes: nothing is oversubscribed, and a job without
    /// segments lies within one block of the smallest size that holds it.
    #[test]
    fn block_jobs_never_straddle_blocks_of_their_size(
        ops in proptest::collection::vec((0u8..4, 1u32..9, 1u32..3, any::<bool>()), 1..40),
    ) {
        let mut c = cluster(16, 2, 1000);
        blocks(&mut c);
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        let mut asked: std::collections::HashMap<u32, (u32, bool)> = Default::default();
        for (t, (op, nodes, per_node, segmented)) in ops.into_iter().enumerate() {
            if op < 3 {
                let mut j = nodes_job(next, nodes);
                j.ntasks = nodes * per_node;
                if segmented && nodes % 2 == 0 {
                    j.more_mut().segment = Some(2);
                }
                asked.insert(next, (nodes, j.more().segment.is_some()));
                c.handle(Event::Submitted(j));
                next += 1;
            } else if !running.is_empty() {
                let id = running.remove(t % running.len());
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                if let Decision::Start { job, alloc, .. } = d {
                    running.push(job);
                    let (n, seg) = asked[&job];
                    let names = alloc.node_names();
                    prop_assert_eq!(names.len() as u32, n);
                    if !seg {
                        // Levels 1, 2 and 4 blocks of four nodes; aligned from the first.
                        let level = [1u32, 2, 4].into_iter().find(|l| l * 4 >= n).unwrap();
                        let group = |s: &String| (s.trim_start_matches("node").parse::<u32>().unwrap() - 1) / (4 * level);
                        prop_assert!(names.iter().all(|s| group(s) == group(&names[0])), "{} nodes on {:?}", n, names);
                    }
                }
            }
            c.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn jobs_land_under_the_lowest_switch_that_holds_them() {
    // As real Slurm 22.05 placed them on the lab with the same tree: node2 busy, a 2-node
    // job goes to node[3-4] (one leaf), not node[1,3]; a 3-node job spans node1 and the
    // whole other leaf.
    let mut c = cluster(4, 2, 1000);
    lab_tree(&mut c);
    busy(&mut c, 1, "node2", 0);
    c.handle(Event::Submitted(nodes_job(2, 2)));
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node3", "node4"]);
    c.handle(Event::Ended { job: 2, outcome: Outcome::Succeeded });
    c.handle(Event::Submitted(nodes_job(3, 3)));
    let mut got = nodes_of(&c.schedule(2, &mut no_ids), 3);
    got.sort();
    assert_eq!(got, ["node1", "node3", "node4"]);
    c.check_invariants().unwrap();
    // Without the tree the same 2-node job takes the first nodes in order.
    let mut plain = cluster(4, 2, 1000);
    busy(&mut plain, 1, "node2", 0);
    plain.handle(Event::Submitted(nodes_job(2, 2)));
    assert_eq!(nodes_of(&plain.schedule(1, &mut no_ids), 2), ["node1", "node3"]);
}

#[test]
fn a_switch_limit_waits_until_its_deadline_then_takes_what_there_is() {
    let mut c = cluster(4, 2, 1000);
    lab_tree(&mut c);
    busy(&mut c, 1, "node2", 0);
    busy(&mut c, 2, "node3", 0);
    let mut j = nodes_job(3, 2);
    j.more_mut().switches = Some((1, 30));
    c.handle(Event::Submitted(j));
    let d = c.schedule(1, &mut no_ids);
    assert!(started(&d).is_empty());
    assert_eq!(reason(&d, 3), Some(PendingReason::Resources));
    // The core wakes for the deadline by itself.
    assert!(started(&c.schedule(29, &mut no_ids)).is_empty());
    let d = c.schedule(30, &mut no_ids);
    assert_eq!(nodes_of(&d, 3), ["node1", "node4"]);
    c.check_invariants().unwrap();
}

// ---- best fit ----

#[test]
fn small_jobs_pack_onto_a_used_node_and_leave_whole_nodes_whole() {
    // node2 is half used; a one-core job goes there, not to the empty node1 (first fit
    // would), so node1 stays whole for the 4-core job that follows.
    let mut c = cluster(2, 4, 1000);
    busy_cores(&mut c, 1, "node2", 2);
    c.handle(Event::Submitted(job(2)));
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node2"]);
    let mut big = job(3);
    big.ntasks = 4;
    c.handle(Event::Submitted(big));
    assert_eq!(nodes_of(&c.schedule(2, &mut no_ids), 3), ["node1"]);
    c.check_invariants().unwrap();
}

#[test]
fn single_gpu_jobs_fill_one_gpu_node_before_the_next() {
    let mut c = gpu_cluster(2, 8, "gpu:fake:4");
    // One GPU of node2 in use: the next single-GPU jobs fill node2, not node1.
    let mut first = gpu_job(1, None, 1, 0);
    first.more_mut().nodelist = vec!["node2".into()];
    c.handle(Event::Submitted(first));
    c.schedule(0, &mut no_ids);
    let mut placed = Vec::new();
    for id in 2..=5 {
        c.handle(Event::Submitted(gpu_job(id, None, 1, 0)));
        placed.push(nodes_of(&c.schedule(i64::from(id), &mut no_ids), id)[0].clone());
    }
    assert_eq!(placed, ["node2", "node2", "node2", "node1"]);
    c.check_invariants().unwrap();
}

/// Holds `cores` cores of `node` with a running job.
fn busy_cores(c: &mut Core, id: u32, node: &str, cores: u32) {
    let mut j = job(id);
    j.ntasks = cores;
    j.more_mut().nodelist = vec![node.to_string()];
    c.handle(Event::Submitted(j));
    assert_eq!(started(&c.schedule(0, &mut no_ids)), [id]);
}

// ---- constraints ----

fn featured(features: &[&[&str]]) -> Core {
    let mut c = Core::new();
    let mut names = Vec::new();
    for (k, fs) in features.iter().enumerate() {
        let name = format!("node{}", k + 1);
        let fs = fs.iter().map(|f| f.to_string()).collect();
        c.handle(Event::NodeDefined(NodeRes::new(&name, 2, 1000, fs, 1)));
        c.handle(Event::NodeSchedulable { node: name.clone(), schedulable: true });
        names.push(name);
    }
    c.handle(Event::PartitionDefined(PartitionRes::open("cpu", names)));
    c
}

/// A job of `nodes` whole nodes (both cores of each) under constraint `expr`.
fn constrained(id: u32, nodes: u32, expr: &str) -> SchedJob {
    let mut j = nodes_job(id, nodes);
    j.ntasks = 2 * nodes;
    j.more_mut().constraint = Some(drover_model::job::Constraint::parse(expr).unwrap());
    j
}

#[test]
fn matching_or_keeps_a_job_within_one_of_the_features() {
    // rack1: node1, node3; rack2: node2, node4, node5. Two nodes: both rack1 (tried first).
    let racks: &[&[&str]] = &[&["rack1"], &["rack2"], &["rack1"], &["rack2"], &["rack2"]];
    let mut c = featured(racks);
    c.handle(Event::Submitted(constrained(1, 2, "[rack1|rack2]")));
    assert_eq!(nodes_of(&c.schedule(0, &mut no_ids), 1), ["node1", "node3"]);
    // rack1 is full now: three nodes of rack2, never a mix.
    c.handle(Event::Submitted(constrained(2, 3, "[rack1|rack2]")));
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node2", "node4", "node5"]);
    // A plain OR would mix them; nothing mixed is left to take, so this one waits.
    c.handle(Event::Submitted(constrained(3, 2, "[rack1|rack2]")));
    let d = c.schedule(2, &mut no_ids);
    assert!(started(&d).is_empty());
    c.check_invariants().unwrap();
}

#[test]
fn node_counts_take_enough_nodes_with_the_feature() {
    let nodes: &[&[&str]] = &[&["ib"], &["ib"], &["ib", "gpu"], &["ib", "gpu"], &["gpu"]];
    let mut c = featured(nodes);
    // Three nodes, all with ib, at least two of them with gpu: node3, node4 and one more ib node.
    c.handle(Event::Submitted(constrained(1, 3, "gpu*2&ib")));
    let mut got = nodes_of(&c.schedule(0, &mut no_ids), 1);
    got.sort();
    assert_eq!(got, ["node1", "node3", "node4"]);
    // Two more gpu nodes with ib are not there: it waits.
    c.handle(Event::Submitted(constrained(2, 2, "gpu*2&ib")));
    assert!(started(&c.schedule(1, &mut no_ids)).is_empty());
    c.check_invariants().unwrap();
}

// ---- node ranges, spreading, contiguity ----

#[test]
fn node_ranges_spread_and_contiguity_as_slurm_places_them() {
    // As real Slurm 22.05 placed them on four idle 2-core nodes: -N2-4 -n4 on four nodes,
    // with --use-min-nodes on two, -n4 --spread-job on four, -n3 on node1 twice and node2.
    let shape = |f: &dyn Fn(&mut SchedJob)| {
        let mut c = cluster(4, 2, 1000);
        let mut j = job(1);
        f(&mut j);
        c.handle(Event::Submitted(j));
        let d = c.schedule(0, &mut no_ids);
        let alloc =
            d.iter().find_map(|d| if let Decision::Start { alloc, .. } = d { Some(alloc.clone()) } else { None });
        alloc.map(|a| a.nodes.iter().map(|n| (n.node.clone(), n.tasks)).collect::<Vec<_>>()).unwrap_or_default()
    };
    let one = |n: &str, t: u32| (n.to_string(), t);
    let range = |j: &mut SchedJob| {
        j.ntasks = 4;
        j.min_nodes = 2;
        j.max_nodes = Some(4);
    };
    assert_eq!(shape(&range), [one("node1", 1), one("node2", 1), one("node3", 1), one("node4", 1)]);
    assert_eq!(
        shape(&|j: &mut SchedJob| {
            range(j);
            j.more_mut().use_min_nodes = true;
        }),
        [one("node1", 2), one("node2", 2)]
    );
    assert_eq!(
        shape(&|j: &mut SchedJob| {
            j.ntasks = 4;
            j.more_mut().spread = true;
        }),
        [one("node1", 1), one("node2", 1), one("node3", 1), one("node4", 1)]
    );
    assert_eq!(shape(&|j: &mut SchedJob| j.ntasks = 3), [one("node1", 2), one("node2", 1)]);
}

#[test]
fn contiguous_jobs_take_consecutive_nodes() {
    let mut c = cluster(5, 2, 1000);
    busy_cores(&mut c, 1, "node2", 2);
    let mut j = nodes_job(2, 3);
    j.ntasks = 6;
    j.more_mut().contiguous = true;
    c.handle(Event::Submitted(j));
    // node1 alone is no run of three; node3..node5 is.
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node3", "node4", "node5"]);
    let mut k = nodes_job(3, 2);
    k.more_mut().contiguous = true;
    c.handle(Event::Submitted(k));
    // Only node1 is left: no two consecutive nodes; it waits.
    assert!(started(&c.schedule(2, &mut no_ids)).is_empty());
    c.check_invariants().unwrap();
}

// ---- explain ----

#[test]
fn explain_lists_every_blocker_and_what_would_start_it_sooner() {
    use drover_sched::explain::{Blocker, Sooner};
    let mut c = with_policy(cluster(2, 2, 1000), drover_sched::Policy::Conservative);
    // node1 busy until 1000, node2 until 100.
    c.handle(Event::Submitted(limited(1, 2, 1000)));
    c.handle(Event::Submitted(limited(2, 2, 100)));
    c.schedule(0, &mut no_ids);
    // A two-node job waits (planned at 1000); a one-node job of 600 s would delay it on node2...
    let mut wide = limited(3, 4, 100);
    wide.min_nodes = 2;
    wide.max_nodes = Some(2);
    c.handle(Event::Submitted(wide));
    c.handle(Event::Ended { job: 2, outcome: Outcome::Succeeded });
    let mut long = limited(4, 2, 2000);
    long.more_mut().begin_time = Some(50);
    long.hold = Some(drover_sched::Hold::User);
    c.handle(Event::Submitted(long));
    let short = limited(5, 2, 2000);
    c.handle(Event::Submitted(short));
    c.schedule(10, &mut no_ids);
    let e = c.explain(3, 10).unwrap();
    assert_eq!(
        e.blockers,
        [Blocker::Resources {
            partition: "cpu".into(),
            cpus_free: 2,
            cpus_needed: 4,
            gpus_free: 0,
            gpus_needed: 0,
            nodes_with_room: 1,
            nodes_needed: 2
        }]
    );
    // Held, not yet eligible: both said, not just the first.
    let e = c.explain(4, 10).unwrap();
    assert!(e.blockers.contains(&Blocker::Held { admin: false }), "{e:?}");
    assert!(e.blockers.contains(&Blocker::BeginTime { at: 50 }), "{e:?}");
    // The 2000 s job fits on node2 now but would delay the wide job's start at 1000; with a
    // limit of at most 990 s it would start now.
    let e = c.explain(5, 10).unwrap();
    assert!(e.blockers.contains(&Blocker::Backfill { partition: "cpu".into() }), "{e:?}");
    assert_eq!(e.sooner, Some(Sooner::ShorterLimit { secs: 960 }));
    assert!(e.blockers.contains(&Blocker::Priority { partition: "cpu".into(), ahead: 1 }), "{e:?}");
    assert!(c.explain(1, 10).is_none(), "a running job is not explained");
}

#[test]
fn young_jobs_and_a_users_surplus_get_no_reservation() {
    // node1 busy until 100. A waiting 2-core job reserves node1 from 100 and keeps a long
    // 1-core job from starting — unless it is younger than bf_min_age_reserve, or its user
    // already has bf_max_job_user reservations.
    let run = |cfg: drover_sched::SchedConfig, queued: i64, uid_other: u32| {
        let mut c = cluster(1, 2, 1000);
        c.handle(Event::Configure(cfg));
        c.handle(Event::Submitted(limited(1, 1, 100)));
        c.schedule(0, &mut no_ids);
        let mut first = limited(2, 2, 100);
        first.uid = 7;
        c.handle(Event::Submitted(first));
        let mut wide = limited(3, 2, 100);
        wide.uid = uid_other;
        wide.queued = queued;
        c.handle(Event::Submitted(wide));
        let mut long = limited(4, 1, 1000);
        long.uid = 9;
        c.handle(Event::Submitted(long));
        started(&c.schedule(10, &mut no_ids))
    };
    // Slurm's backfill (every job tested reserves), where these parameters bite.
    let base = drover_sched::SchedConfig { interval: 0, ..drover_sched::SchedConfig::slurm() };
    // Job 2 reserves at 100 whatever: job 4 (ends at 1010) may not start.
    assert_eq!(run(base, 0, 8), Vec::<u32>::new());
    // Both waiting jobs younger than the minimum age: no reservation, job 4 starts.
    let young = drover_sched::SchedConfig { min_age_reserve: 60, ..base };
    let mut c = cluster(1, 2, 1000);
    c.handle(Event::Configure(young));
    c.handle(Event::Submitted(limited(1, 1, 100)));
    c.schedule(0, &mut no_ids);
    let mut w = limited(2, 2, 100);
    w.queued = 5;
    c.handle(Event::Submitted(w));
    c.handle(Event::Submitted(limited(3, 1, 1000)));
    assert_eq!(started(&c.schedule(10, &mut no_ids)), [3]);
    // Once it is old enough it reserves again (and nothing else passes it).
    c.handle(Event::Submitted(limited(4, 1, 1000)));
    assert!(started(&c.schedule(70, &mut no_ids)).is_empty());
    // bf_max_job_user=1: user 7's first waiting job gets a reservation, its second none.
    let plans = |cfg: drover_sched::SchedConfig| {
        let mut c = cluster(1, 2, 1000);
        c.handle(Event::Configure(cfg));
        c.handle(Event::Submitted(limited(1, 1, 100)));
        c.schedule(0, &mut no_ids);
        for id in [2, 3] {
            let mut j = limited(id, 2, 100);
            j.uid = 7;
            c.handle(Event::Submitted(j));
        }
        let d = c.schedule(10, &mut no_ids);
        (planned(&d, 2).is_some(), planned(&d, 3).is_some())
    };
    assert_eq!(plans(base), (true, true));
    assert_eq!(plans(drover_sched::SchedConfig { max_job_user: 1, ..base }), (true, false));
}

#[test]
fn exclusive_user_nodes_take_only_their_users_jobs() {
    let mut c = cluster(2, 4, 1000);
    // Alice's --exclusive=user job on node1 takes one core, not the node.
    let mut a = job(1);
    a.uid = 1001;
    a.more_mut().exclusive_user = true;
    a.more_mut().nodelist = vec!["node1".into()];
    c.handle(Event::Submitted(a));
    assert_eq!(nodes_of(&c.schedule(0, &mut no_ids), 1), ["node1"]);
    // Bob's job keeps off node1 (best fit would have packed it there) ...
    let mut b = job(2);
    b.uid = 1002;
    c.handle(Event::Submitted(b));
    assert_eq!(nodes_of(&c.schedule(1, &mut no_ids), 2), ["node2"]);
    // ... Alice's next job packs beside her first.
    let mut a2 = job(3);
    a2.uid = 1001;
    c.handle(Event::Submitted(a2));
    assert_eq!(nodes_of(&c.schedule(2, &mut no_ids), 3), ["node1"]);
    // An --exclusive=user job of Carol finds no node without other users: it waits.
    let mut k = job(4);
    k.uid = 1003;
    k.more_mut().exclusive_user = true;
    c.handle(Event::Submitted(k));
    assert!(started(&c.schedule(3, &mut no_ids)).is_empty());
    // Bob's job ends: node2 is free of other users, Carol's job goes there.
    c.handle(Event::Ended { job: 2, outcome: Outcome::Succeeded });
    assert_eq!(nodes_of(&c.schedule(4, &mut no_ids), 4), ["node2"]);
    // Alice's exclusive job ends; her other job still runs, and Bob may come back to node1
    // only once no exclusive job of another user is there.
    c.handle(Event::Ended { job: 1, outcome: Outcome::Succeeded });
    let mut b2 = job(5);
    b2.uid = 1002;
    c.handle(Event::Submitted(b2));
    assert_eq!(nodes_of(&c.schedule(5, &mut no_ids), 5), ["node1"]);
    c.check_invariants().unwrap();
}

#[test]
fn a_job_that_found_no_room_speaks_only_for_its_own_user_beside_an_exclusive_user_job() {
    let mut c = with_policy(cluster(2, 4, 1000), drover_sched::Policy::Conservative);
    // Alice's --exclusive=user job holds one core of node1; Bob's job fills node2.
    let mut a = limited(1, 1, 1000);
    a.uid = 1001;
    a.more_mut().exclusive_user = true;
    a.more_mut().nodelist = vec!["node1".into()];
    c.handle(Event::Submitted(a));
    let mut b = limited(2, 4, 100);
    b.uid = 1002;
    c.handle(Event::Submitted(b));
    let d = c.schedule(0, &mut no_ids);
    assert_eq!((nodes_of(&d, 1), nodes_of(&d, 2)), (vec!["node1".to_string()], vec!["node2".to_string()]));
    // Bob's one-core job finds no room now; Alice's larger one still fits beside her first:
    // Bob's failure says nothing of where Alice may go.
    let mut b2 = limited(3, 1, 100);
    b2.uid = 1002;
    b2.max_nodes = Some(1);
    let mut a2 = limited(4, 2, 100);
    a2.uid = 1001;
    a2.max_nodes = Some(1);
    c.handle(Event::Submitted(b2));
    c.handle(Event::Submitted(a2));
    let d = c.schedule(1, &mut no_ids);
    assert_eq!(reason(&d, 3), Some(PendingReason::Resources));
    assert_eq!(nodes_of(&d, 4), ["node1"]);
    c.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The pass's memo of shapes that found no room never changes a decision: random plain
    /// jobs of several sizes, lengths and users (beside `--exclusive=user` ones), scheduled
    /// with and without it, decide the same.
    #[test]
    fn the_no_room_memo_never_changes_a_decision(
        ops in proptest::collection::vec((0u8..4, 1u32..3, 1u32..6, 1u64..4, 0u32..2, 0u8..5), 1..50),
        policy in prop_oneof![Just(drover_sched::Policy::Conservative), Just(drover_sched::Policy::Easy), Just(drover_sched::Policy::Fcfs)],
    ) {
        let mut c = with_policy(cluster(3, 4, 1000), policy);
        let mut plain = c.clone();
        plain.without_memo();
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        for (t, (op, nodes, tasks, hours, uid, kind)) in ops.into_iter().enumerate() {
            if op < 3 {
                let mut j = limited(next, tasks.max(nodes), hours * 3600);
                j.min_nodes = nodes;
                j.max_nodes = Some(nodes);
                j.uid = 1000 + uid;
                match kind {
                    0 => j.more_mut().exclusive_user = true,
                    1 => j.mem_per_cpu_mb = Some(200),
                    2 => j.cpus_per_task = 2,
                    _ => {}
                }
                c.handle(Event::Submitted(j.clone()));
                plain.handle(Event::Submitted(j));
                next += 1;
            } else if !running.is_empty() {
                let id = running.remove(t % running.len());
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
                plain.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
            }
            let now = t as i64 * 600;
            let d = c.schedule(now, &mut no_ids);
            prop_assert_eq!(&d, &plain.schedule(now, &mut no_ids));
            running.extend(started(&d));
            c.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random jobs of three users, some `--exclusive=user`: a node never runs another user's
    /// job beside an exclusive-user job, and nothing is oversubscribed.
    #[test]
    fn exclusive_user_jobs_never_share_a_node_with_another_user(
        ops in proptest::collection::vec((0u8..3, 1u32..4, 0u32..3, any::<bool>()), 1..60),
    ) {
        let mut c = cluster(3, 4, 1000);
        let mut next = 1u32;
        let mut running: Vec<u32> = Vec::new();
        let mut owner: std::collections::HashMap<u32, (u32, bool)> = Default::default();
        let mut on: std::collections::HashMap<u32, Vec<String>> = Default::default();
        for (t, (op, tasks, uid, excl)) in ops.into_iter().enumerate() {
            if op < 2 {
                let mut j = job(next);
                j.ntasks = tasks;
                j.uid = 1000 + uid;
                j.more_mut().exclusive_user = excl;
                owner.insert(next, (1000 + uid, excl));
                c.handle(Event::Submitted(j));
                next += 1;
            } else if let Some(id) = running.pop() {
                c.handle(Event::Ended { job: id, outcome: Outcome::Succeeded });
                on.remove(&id);
            }
            for d in c.schedule(t as i64, &mut no_ids) {
                if let Decision::Start { job, alloc, .. } = d {
                    running.push(job);
                    on.insert(job, alloc.node_names());
                }
            }
            c.check_invariants().map_err(TestCaseError::fail)?;
            for node in ["node1", "node2", "node3"] {
                let here: Vec<(u32, bool)> =
                    on.iter().filter(|(_, ns)| ns.iter().any(|n| n == node)).map(|(j, _)| owner[j]).collect();
                if let Some(&(u, _)) = here.iter().find(|(_, e)| *e) {
                    prop_assert!(here.iter().all(|(v, _)| *v == u), "{} runs {:?}", node, here);
                }
            }
        }
    }
}

/// `--deadline`: a job that starts runs with a limit that ends by then (whole minutes); one
/// that waits until its time needed no longer fits gets `DeadLine` at that moment (a pass is
/// due then, with nothing else changed), and a held one is left alone until released.
#[test]
fn a_deadline_bounds_the_limit_and_marks_a_job_that_cannot_make_it() {
    let with_deadline = |mut j: SchedJob, at: i64, need: u64| {
        j.more = SchedMore { deadline: Some((at, need)), ..Default::default() }.boxed();
        j
    };
    let mut c = cluster(1, 1, 1000);
    c.handle(Event::Submitted(with_deadline(limited(1, 1, 3600), 1000 + 150, 60)));
    let d = c.schedule(1000, &mut no_ids);
    let limit = d.iter().find_map(|d| match d {
        Decision::Start { job: 1, time_limit, .. } => Some(*time_limit),
        _ => None,
    });
    assert_eq!(limit, Some(Some(120)), "150 s left: two whole minutes");
    // Behind it on the one CPU: needs a minute, must end by 1100.
    c.handle(Event::Submitted(with_deadline(limited(2, 1, 3600), 1100, 60)));
    let mut held = with_deadline(limited(3, 1, 3600), 1100, 60);
    held.hold = Some(drover_sched::Hold::User);
    c.handle(Event::Submitted(held));
    assert_eq!(reason(&c.schedule(1010, &mut no_ids), 2), Some(PendingReason::Resources));
    assert!(c.schedule(1040, &mut no_ids).is_empty(), "nothing changed and no deadline came");
    let d = c.schedule(1041, &mut no_ids);
    assert_eq!(reason(&d, 2), Some(PendingReason::DeadLine), "{d:?}");
    assert_eq!(reason(&d, 3), None, "a held job waits to be released");
    c.check_invariants().unwrap();
}

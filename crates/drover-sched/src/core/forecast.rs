//! A forecast of the live queue (`drover sim --now`): a copy of the core run forward in
//! virtual time, with no new submissions, every running job ending when the plan expects
//! (its predicted end, or its limit's) and every job it starts running what the plan expects
//! (what its user's recent jobs ran, or its limit). The passes are the live ones, so the
//! forecast is what this scheduler would do were that to happen.
//!
//! ```text
//!  Core (clone) ──► at t: ends due ──Event::Ended──► schedule(t) ──Start──► end at t + plan_len
//!        ▲                                                                     │
//!        └──── t = the next end, or a time the core asked to look again ◄──────┘
//! ```

use super::*;

/// A run or an end this far off is none: no time limit, no prediction.
const NEVER: i64 = i64::MAX / 4;

/// A waiting job's expected start in a forecast.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The waiting job (for an array task, the array's).
    pub job: JobId,
    /// The array task it is, for a task of an array.
    pub task: Option<u32>,
    pub start: i64,
    /// When it is expected to end (`None`: no time limit and no prediction).
    pub end: Option<i64>,
    /// The nodes it would get.
    pub nodes: Vec<String>,
    /// Its expected run is a prediction from its user's recent jobs (else its time limit).
    pub predicted: bool,
}

/// What a forecast found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Forecast {
    /// Expected starts, in the order the forecast starts them.
    pub starts: Vec<Expected>,
    /// Jobs still waiting at the end of the forecast, in priority order, with their reason
    /// then.
    pub waiting: Vec<(JobId, PendingReason)>,
    /// Up to when it looked (the horizon, or earlier where the queue emptied or nothing
    /// more can happen).
    pub until: i64,
    /// Scheduling passes it ran.
    pub passes: u32,
    /// It stopped at `max_passes` before the horizon.
    pub cut: bool,
}

impl Core {
    /// The queue run forward from `now` for `horizon` seconds (at most `max_passes`
    /// scheduling passes), as the module says. The core itself is not changed.
    pub fn forecast(&self, now: i64, horizon: i64, max_passes: u32) -> Forecast {
        let mut sim = self.clone();
        // Every pass plans, as the simulator's do: in virtual time there is no pass rate to bound.
        sim.config.interval = 0;
        sim.next_plan = i64::MIN;
        sim.changed = true;
        let until = now.saturating_add(horizon.max(0));
        let uids: HashMap<JobId, u32> = sim.pending.iter().map(|(id, (j, _))| (*id, j.uid)).collect();
        let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<(i64, JobId)>> = sim
            .running
            .keys()
            .map(|&j| (sim.planned_end(j, now), j))
            .filter(|&(e, _)| e < NEVER)
            .map(|(e, j)| std::cmp::Reverse((e.max(now), j)))
            .collect();
        // Ids for array tasks the forecast starts apart from their arrays: from below the
        // advance reservations' claims down, where no live job id reaches.
        let mut next_task_id = ADVANCE_RESV_BASE - (1 << 20);
        let mut task_ids = || {
            next_task_id -= 1;
            next_task_id
        };
        let mut out = Forecast { until, ..Default::default() };
        let mut t = now;
        loop {
            while let Some(&std::cmp::Reverse((e, j))) = ends.peek() {
                if e > t {
                    break;
                }
                ends.pop();
                sim.handle(Event::Ended { job: j, outcome: Outcome::Succeeded });
            }
            if out.passes >= max_passes {
                out.cut = true;
                out.until = t;
                break;
            }
            out.passes += 1;
            for d in sim.schedule(t, &mut task_ids) {
                let Decision::Start { job, alloc, time_limit, split } = d else { continue };
                let (waiting, task) = match split {
                    Some((array, task)) => (array, Some(task)),
                    None => (job, None),
                };
                let uid = uids.get(&waiting).copied().unwrap_or(0);
                let len = sim.plan_len(uid, time_limit);
                let end = (len < NEVER).then(|| t.saturating_add(len.max(1)));
                if let Some(e) = end {
                    ends.push(std::cmp::Reverse((e, job)));
                }
                out.starts.push(Expected {
                    job: waiting,
                    task,
                    start: t,
                    end,
                    nodes: alloc.nodes.iter().map(|n| n.node.clone()).collect(),
                    predicted: len < limit_secs(time_limit),
                });
            }
            if sim.pending.is_empty() {
                out.until = t;
                break;
            }
            let next = [ends.peek().map(|r| r.0 .0), sim.wake_at().filter(|&w| w > t)].into_iter().flatten().min();
            match next {
                Some(n) if n <= until => t = n,
                Some(_) => break,
                None => {
                    // Nothing ends and nothing is due: what waits now waits for good.
                    out.until = t;
                    break;
                }
            }
        }
        let mut waiting: Vec<(u64, JobId, PendingReason)> =
            sim.pending.iter().map(|(id, (j, r))| (j.priority, *id, *r)).collect();
        waiting.sort_by_key(|&(p, id, _)| (std::cmp::Reverse(p), id));
        out.waiting = waiting.into_iter().map(|(_, id, r)| (id, r)).collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::SchedConfig;

    fn node(name: &str, cpus: u32) -> NodeRes {
        NodeRes::new(name, cpus, 1000, Vec::new(), 1)
    }

    fn job(id: JobId, uid: u32, ntasks: u32, limit: u64) -> SchedJob {
        SchedJob {
            id,
            priority: u64::from(1000 - id),
            partitions: vec!["p".into()],
            min_nodes: 1,
            max_nodes: None,
            ntasks,
            cpus_per_task: 1,
            mem_per_node_mb: None,
            mem_per_cpu_mb: None,
            time_limit: Some(Some(limit)),
            exclusive: false,
            hold: None,
            uid,
            queued: 0,
            more: None,
        }
    }

    fn cluster(policy: &str) -> Core {
        let mut c = Core::new();
        c.handle(Event::NodeDefined(node("n1", 4)));
        c.handle(Event::NodeSchedulable { node: "n1".into(), schedulable: true });
        c.handle(Event::PartitionDefined(PartitionRes::open("p", vec!["n1".into()])));
        c.handle(Event::Configure(SchedConfig::named(policy).expect("a policy")));
        c
    }

    fn start_all(c: &mut Core, now: i64) -> Vec<JobId> {
        c.schedule(now, &mut || JobId::MAX)
            .into_iter()
            .filter_map(|d| match d {
                Decision::Start { job, .. } => Some(job),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn waiting_jobs_start_as_running_ones_end_on_limits() {
        // At a real time of day (the forecast's times are absolute).
        const T: i64 = 1_796_500_000;
        let mut c = cluster("conservative");
        c.handle(Event::Submitted(job(1, 7, 4, 600)));
        assert_eq!(start_all(&mut c, T), [1]);
        c.handle(Event::Submitted(job(2, 7, 2, 300)));
        c.handle(Event::Submitted(job(3, 7, 4, 100)));
        c.handle(Event::Submitted(job(4, 7, 2, 900)));
        let mut unlimited = job(5, 7, 1, 0);
        unlimited.time_limit = Some(None);
        c.handle(Event::Submitted(unlimited));
        start_all(&mut c, T + 10);
        let f = c.forecast(T + 10, 86_400, 1000);
        let got: Vec<(JobId, i64, Option<i64>)> =
            f.starts.iter().map(|e| (e.job, e.start - T, e.end.map(|e| e - T))).collect();
        // 1 ends at 600 and 2 starts; 3 needs all 4 CPUs when 2 ends; 4 (900 s) would delay
        // it, so it follows, and the UNLIMITED job (which never ends) with it.
        assert_eq!(got, [(2, 600, Some(900)), (3, 900, Some(1000)), (4, 1000, Some(1900)), (5, 1000, None)]);
        assert!(f.starts.iter().all(|e| !e.predicted && e.nodes == ["n1"]));
        assert!(f.waiting.is_empty());
        assert_eq!(f.until - T, 1000);
        assert!(!f.cut);
    }

    #[test]
    fn predictions_bring_ends_forward_and_the_horizon_cuts() {
        let mut c = cluster("predictive");
        // User 7's jobs run 100 s whatever they ask.
        c.handle(Event::Ran { uid: 7, seconds: 100 });
        c.handle(Event::Ran { uid: 7, seconds: 100 });
        c.handle(Event::Submitted(job(1, 7, 4, 3600)));
        assert_eq!(start_all(&mut c, 0), [1]);
        c.handle(Event::Submitted(job(2, 7, 4, 3600)));
        c.handle(Event::Submitted(job(3, 8, 4, 3600)));
        start_all(&mut c, 1);
        let f = c.forecast(1, 86_400, 1000);
        let got: Vec<(JobId, i64, Option<i64>, bool)> =
            f.starts.iter().map(|e| (e.job, e.start, e.end, e.predicted)).collect();
        // 1 is expected at 100, 2 then runs a predicted 100 s; user 8 has no history: its limit.
        assert_eq!(got, [(2, 100, Some(200), true), (3, 200, Some(3800), false)]);
        // A horizon before 3's start leaves it waiting.
        let f = c.forecast(1, 150, 1000);
        assert_eq!(f.starts.len(), 1);
        assert_eq!(f.waiting.iter().map(|w| w.0).collect::<Vec<_>>(), [3]);
        // So does a pass budget, which says so.
        let f = c.forecast(1, 86_400, 1);
        assert!(f.cut);
        assert_eq!(f.waiting.len(), 2);
    }

    #[test]
    fn a_dependency_waits_for_its_job_and_held_jobs_wait_for_good() {
        let mut c = cluster("conservative");
        c.handle(Event::Submitted(job(1, 7, 2, 600)));
        assert_eq!(start_all(&mut c, 0), [1]);
        let mut dep = job(2, 7, 1, 60);
        dep.more_mut().dependency = drover_model::job::parse_dependency("afterok:1").expect("a dependency");
        c.handle(Event::Submitted(dep));
        let mut held = job(3, 7, 1, 60);
        held.hold = Some(Hold::User);
        c.handle(Event::Submitted(held));
        start_all(&mut c, 1);
        let f = c.forecast(1, 86_400, 1000);
        assert_eq!(f.starts.iter().map(|e| (e.job, e.start)).collect::<Vec<_>>(), [(2, 600)]);
        // The core itself is as it was: the forecast ran on a copy.
        assert_eq!(start_all(&mut c, 2), Vec::<JobId>::new());
        assert!(c.pending.contains_key(&2) && c.running.contains_key(&1));
        assert_eq!(f.waiting.iter().map(|w| w.0).collect::<Vec<_>>(), [3]);
        assert_eq!(f.until, 660);
    }
}

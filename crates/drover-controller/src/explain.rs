//! The scheduler core's explanation of a waiting job, on the wire.

use drover_proto::v1;
use drover_sched::explain::{Blocker, Explanation, Sooner};

pub fn reply(e: Option<Explanation>) -> v1::ExplainReply {
    let Some(e) = e else { return v1::ExplainReply::default() };
    let p = e.prediction.clone().unwrap_or_default();
    v1::ExplainReply {
        waiting: true,
        blockers: e.blockers.iter().map(blocker).collect(),
        sooner_limit_secs: e.sooner.map(|Sooner::ShorterLimit { secs }| secs),
        predictive: e.prediction.is_some(),
        predicted_secs: p.secs,
        recent_runs: p.recent,
        running_early: p.running_early,
        by_limits: p.by_limits,
    }
}

fn blocker(b: &Blocker) -> v1::Blocker {
    let kind = |k: &str| v1::Blocker { kind: k.into(), ..Default::default() };
    match b {
        Blocker::Held { admin } => v1::Blocker { flag: *admin, ..kind("held") },
        Blocker::Fenced => kind("fenced"),
        Blocker::Dependency { never } => v1::Blocker { flag: *never, ..kind("dependency") },
        Blocker::BeginTime { at } => v1::Blocker { at: *at, ..kind("begin_time") },
        Blocker::ArrayThrottle { running, limit } => {
            v1::Blocker { have: u64::from(*running), need: u64::from(*limit), ..kind("array_throttle") }
        }
        Blocker::Licenses { name, want, free } => {
            v1::Blocker { name: name.clone(), have: u64::from(*free), need: u64::from(*want), ..kind("licenses") }
        }
        Blocker::Limit(r) => v1::Blocker { reason: r.name().into(), ..kind("limit") },
        Blocker::Reservation { name, start } => {
            v1::Blocker { name: name.clone(), at: start.unwrap_or(0), ..kind("reservation") }
        }
        Blocker::Partition { partition, reason } => {
            v1::Blocker { partition: partition.clone(), reason: reason.name().into(), ..kind("partition") }
        }
        Blocker::Reserved { partition, nodes } => {
            v1::Blocker { partition: partition.clone(), nodes_have: *nodes, ..kind("reserved") }
        }
        Blocker::Resources {
            partition,
            cpus_free,
            cpus_needed,
            gpus_free,
            gpus_needed,
            nodes_with_room,
            nodes_needed,
        } => v1::Blocker {
            partition: partition.clone(),
            have: *cpus_free,
            need: *cpus_needed,
            gpus_have: *gpus_free,
            gpus_need: *gpus_needed,
            nodes_have: *nodes_with_room,
            nodes_need: *nodes_needed,
            ..kind("resources")
        },
        Blocker::Backfill { partition } => v1::Blocker { partition: partition.clone(), ..kind("backfill") },
        Blocker::Topology { nodes, segments, switches } => match switches {
            Some((n, until)) => v1::Blocker {
                name: "switches".into(),
                need: u64::from(*n),
                nodes_need: *nodes,
                at: *until,
                ..kind("topology")
            },
            None => {
                v1::Blocker { name: "block".into(), have: u64::from(*segments), nodes_need: *nodes, ..kind("topology") }
            }
        },
        Blocker::Priority { partition, ahead } => {
            v1::Blocker { partition: partition.clone(), have: u64::from(*ahead), ..kind("priority") }
        }
    }
}

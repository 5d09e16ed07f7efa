//! `drover explain JOBID`: why a waiting job waits and why its priority is what it is, in
//! words — its reason and expected start, each priority factor times its weight, and its
//! user's fairshare standing at every level of the association tree, with how it recovers.

use crate::common;
use drover_proto::v1;

pub fn main(args: Vec<String>) -> i32 {
    let json = args.iter().any(|a| a == "--json");
    let Some(id) = args.iter().find(|a| *a != "--json").and_then(|a| a.parse::<u32>().ok()) else {
        eprintln!("usage: drover explain [--json] JOBID");
        return 2;
    };
    let cfg = match common::load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("drover explain: error: {e}");
            return 1;
        }
    };
    let req = v1::StateRequest { job_ids: vec![id], jobs: true, shares: true, prio: true, ..Default::default() };
    let reply = match common::fetch_state(&cfg, req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("drover explain: error: {e}");
            return 1;
        }
    };
    let Some(job) = common::jobs_in(reply.clone()).into_iter().find(|j| j.job_id == id) else {
        eprintln!("drover explain: error: Invalid job id specified");
        return 1;
    };
    let blockers = match fetch_blockers(&cfg, id) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("drover explain: error: {e}");
            return 1;
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&json_of(&job, &blockers)).unwrap_or_default());
        return 0;
    }
    let mut text = explain(&cfg, &job, &reply, reply.now);
    if blockers.waiting {
        // After the reason line: everything that holds it, then the priority story.
        let at = text.find('\n').map_or(text.len(), |i| i + 1);
        text.insert_str(at, &blockers_text(&blockers));
    }
    print!("{text}");
    0
}

fn fetch_blockers(cfg: &drover_model::conf::Config, id: u32) -> Result<v1::ExplainReply, String> {
    common::runtime().block_on(async {
        let mut c = common::connect(cfg).await?;
        c.explain(v1::ExplainRequest { job_id: id }).await.map(|r| r.into_inner()).map_err(|s| common::status_msg(&s))
    })
}

/// With `scontrol -d show job`: a waiting job's blockers, a `Blocker=` line each, and the
/// time limit that would start it now (`SoonerTimeLimit=`). Nothing where it does not wait
/// or the controller cannot say.
pub fn detail_lines(cfg: &drover_model::conf::Config, id: u32) -> Vec<String> {
    let Ok(e) = fetch_blockers(cfg, id) else { return Vec::new() };
    if !e.waiting {
        return Vec::new();
    }
    let mut lines: Vec<String> = e.blockers.iter().map(|b| format!("Blocker={}", blocker_text(b))).collect();
    if let Some(secs) = e.sooner_limit_secs {
        lines.push(format!("SoonerTimeLimit={}", drover_model::duration::fmt_long(secs)));
    }
    if let Some(secs) = e.predicted_secs {
        lines.push(format!("PredictedRunTime={}", drover_model::duration::fmt_long(secs.max(0) as u64)));
    }
    lines
}

/// One blocker in words.
pub fn blocker_text(b: &v1::Blocker) -> String {
    let part = if b.partition.is_empty() { String::new() } else { format!(" in partition {}", b.partition) };
    match b.kind.as_str() {
        "held" if b.flag => "held by an administrator (scontrol release)".into(),
        "held" => "held by its user (scontrol release)".into(),
        "fenced" => format!(
            "requeued after node {} failed: it starts again once that node is known to have stopped its last run \
             (the node's agent reports back, or an operator sets the node DOWN)",
            b.name
        ),
        "dependency" if b.flag => "its dependency can never be satisfied (DependencyNeverSatisfied)".into(),
        "dependency" => "its dependency is not satisfied yet".into(),
        "begin_time" => format!("not eligible before {} (--begin)", common::fmt_time(b.at)),
        "array_throttle" => format!("{} of its array's tasks run, its %{} throttle", b.have, b.need),
        "licenses" => format!("license {}: {} free, {} wanted", b.name, b.have, b.need),
        "limit" => format!("accounting limit {}", b.reason),
        "reservation" if b.at > 0 => {
            format!("its reservation {} starts {}", b.name, common::fmt_time(b.at))
        }
        "reservation" => format!("its reservation {} is gone", b.name),
        "partition" => format!("partition {}: {}", b.partition, b.reason),
        "reserved" => format!("{} nodes{part} are in advance reservations over the time it would run", b.nodes_have),
        "topology" if b.name == "switches" => format!(
            "no {} leaf switch(es) hold its {} nodes now (--switches; it waits until {}, then takes what there is)",
            b.need,
            b.nodes_need,
            common::fmt_time(b.at)
        ),
        "topology" if b.have > 1 => format!(
            "no room for {} groups of {} nodes, each within one block (topology/block, --segment)",
            b.have, b.nodes_need
        ),
        "topology" => format!("no block has {} nodes with room (topology/block)", b.nodes_need),
        "resources" => {
            let mut t = format!("not enough free{part}: {} of {} cores", b.have, b.need);
            if b.gpus_need > 0 {
                t.push_str(&format!(", {} of {} GPUs", b.gpus_have, b.gpus_need));
            }
            t.push_str(&format!(", {} of {} nodes with room", b.nodes_have, b.nodes_need));
            t
        }
        "backfill" => format!("room is free now{part}, but starting would delay jobs ahead of it"),
        "priority" => format!("{} waiting jobs of higher priority{part}", b.have),
        other => other.to_string(),
    }
}

fn blockers_text(e: &v1::ExplainReply) -> String {
    let mut out = String::new();
    if e.blockers.is_empty() {
        out.push_str("Nothing holds it now: it starts at the next scheduling pass.\n");
    } else {
        out.push_str("What holds it:\n");
        for b in &e.blockers {
            out.push_str(&format!("  - {}\n", blocker_text(b)));
        }
    }
    if let Some(secs) = e.sooner_limit_secs {
        out.push_str(&format!(
            "With --time={} (or less) it would start now (scontrol update JobId=... TimeLimit=).\n",
            drover_model::duration::fmt_long(secs)
        ));
    }
    out.push_str(&prediction_text(e));
    out
}

/// What the plan assumes about run times (bf_policy=predictive), in words.
fn prediction_text(e: &v1::ExplainReply) -> String {
    if !e.predictive {
        return String::new();
    }
    let dur = |s: i64| drover_model::duration::fmt_long(s.max(0) as u64);
    let mut out = String::new();
    let runs = e.recent_runs.iter().map(|&s| dur(s)).collect::<Vec<_>>().join(" and ");
    match e.predicted_secs {
        Some(p) => out.push_str(&format!(
            "The plan expects it to run {} (its user's last jobs ran {runs}); its time limit still ends it.\n",
            dur(p)
        )),
        None if e.recent_runs.is_empty() => {
            out.push_str("The plan expects it to run its time limit (its user has no recent jobs to predict from).\n")
        }
        None => out.push_str(&format!(
            "The plan expects it to run its time limit (its user's last jobs ran {runs}, no shorter).\n"
        )),
    }
    if e.by_limits {
        out.push_str(
            "A reserved job's expected start slipped past bf_slip_limit: the plan is on time limits until it starts.\n",
        );
    } else if e.running_early > 0 {
        out.push_str(&format!(
            "Expected starts assume {} running job(s) end as predicted, before their time limits; \
             if they run longer, starts move later.\n",
            e.running_early
        ));
    }
    out
}

/// The explanation for machines (`drover explain --json`).
fn json_of(job: &v1::JobInfo, e: &v1::ExplainReply) -> serde_json::Value {
    serde_json::json!({
        "job_id": job.job_id,
        "state": job.state,
        "reason": job.reason,
        "blockers": e.blockers.iter().map(|b| serde_json::json!({
            "kind": b.kind,
            "text": blocker_text(b),
            "reason": b.reason,
            "partition": b.partition,
            "name": b.name,
            "at": b.at,
            "have": b.have,
            "need": b.need,
            "gpus_have": b.gpus_have,
            "gpus_need": b.gpus_need,
            "nodes_have": b.nodes_have,
            "nodes_need": b.nodes_need,
        })).collect::<Vec<_>>(),
        "sooner_time_limit_secs": e.sooner_limit_secs,
        "prediction": e.predictive.then(|| serde_json::json!({
            "predicted_secs": e.predicted_secs,
            "recent_runs": e.recent_runs,
            "running_jobs_expected_early": e.running_early,
            "planned_by_limits": e.by_limits,
        })),
    })
}

/// The explanation of one job, as text.
pub fn explain(cfg: &drover_model::conf::Config, job: &v1::JobInfo, reply: &v1::StateReply, now: i64) -> String {
    let mut out = String::new();
    let spec = drover_proto::jobinfo::spec(job);
    let account = drover_proto::jobinfo::account(spec);
    let qos = drover_proto::jobinfo::qos(spec);
    let user = spec.user.as_str();
    out.push_str(&format!("Job {} ({user}, account {account}, QoS {qos}) is {}", job.job_id, job.state));
    if job.state != "PENDING" {
        out.push_str(".\n");
        return out;
    }
    let reason = if job.reason.is_empty() { "None" } else { job.reason.as_str() };
    out.push_str(&format!(": {reason}"));
    match reason {
        "Resources" => out.push_str(" — it is first in line and waits for resources to free up"),
        "Priority" => out.push_str(" — jobs of higher priority come first"),
        "JobHeldUser" | "JobHeldAdmin" => out.push_str(" — it is held (`scontrol release` lets it go)"),
        "Dependency" => out.push_str(" — its dependency is not satisfied yet"),
        _ => {}
    }
    if job.start_time > now {
        let nodes = if job.sched_nodes.is_empty() { String::new() } else { format!(" on {}", job.sched_nodes) };
        out.push_str(&format!("; expected to start {}{nodes}", common::fmt_time(job.start_time)));
    }
    out.push_str(".\n");
    let p = &cfg.priority;
    if !p.multifactor {
        out.push_str("Priority: submit order (PriorityType=priority/basic).\n");
        return out;
    }
    if let Some(f) = reply.prio.iter().find(|r| r.job_id == job.job_id) {
        let mut parts = Vec::new();
        let mut part = |name: &str, v: f64, w: u32, note: String| {
            if w > 0 {
                parts.push(format!("{name} {v:.0} ({w} × {:.6}{note})", v / f64::from(w)));
            }
        };
        part(
            "age",
            f.age,
            p.weight_age,
            format!(", full after {} waiting", drover_model::duration::fmt_long(p.max_age)),
        );
        part("fairshare", f.fairshare, p.weight_fairshare, String::new());
        part("job size", f.jobsize, p.weight_jobsize, String::new());
        part("partition", f.partition_factor, p.weight_partition, String::new());
        part("QoS", f.qos, p.weight_qos, String::new());
        part("association", f.assoc, p.weight_assoc, String::new());
        let sum = (f.age + f.assoc + f.fairshare + f.jobsize + f.partition_factor + f.qos - f.nice as f64).max(1.0);
        out.push_str(&format!(
            "Priority {} = {}",
            sum as i64,
            if parts.is_empty() { "1".into() } else { parts.join(" + ") }
        ));
        if f.nice != 0 {
            out.push_str(&format!(" - nice {}", f.nice));
        }
        out.push_str(".\n");
    } else if job.priority == 0 {
        out.push_str("Priority 0: held jobs have none until released.\n");
    }
    out.push_str(&fairshare(reply, account, user, p));
    out
}

/// The user's fairshare at each level from the root down, and how it recovers.
fn fairshare(
    reply: &v1::StateReply,
    account: &str,
    user: &str,
    p: &drover_model::priority_conf::PriorityConf,
) -> String {
    let rows = &reply.shares;
    let Some(k) = rows.iter().position(|r| r.account == account && r.user == user) else {
        return "Fairshare: no association of this user and account is known to the controller.\n".into();
    };
    // Its ancestors: the nearest row above with one less depth, up to the root.
    let mut chain = vec![k];
    let mut depth = rows[k].depth;
    for (i, r) in rows[..k].iter().enumerate().rev() {
        if r.depth + 1 == depth && r.user.is_empty() {
            chain.push(i);
            depth = r.depth;
        }
    }
    chain.reverse();
    let users = rows.iter().filter(|r| !r.user.is_empty()).count();
    let me = &rows[k];
    let factor = me.fairshare.unwrap_or(0.0);
    // Fair Tree gives the n-th user reached (n - 1) / users less than the first.
    let place = users + 1 - ((factor * users as f64).round() as usize).clamp(1, users.max(1));
    let mut out = format!(
        "Fairshare {factor:.6}: {user} in {account} ranks {} of {users} users (Fair Tree: the higher the \
         level fairshare, the earlier a user is reached).\n",
        ordinal(place)
    );
    out.push_str("  level                  share of siblings   share of parent's usage   level fairshare\n");
    for &i in chain.iter().skip(1) {
        let r = &rows[i];
        let name = if r.user.is_empty() { r.account.clone() } else { format!("{}/{}", r.account, r.user) };
        let lf = match r.level_fs {
            Some(v) if v.is_infinite() => "inf (used nothing)".to_string(),
            Some(v) if v < 1.0 => format!("{v:.6} (over-served)"),
            Some(v) => format!("{v:.6}"),
            None => String::new(),
        };
        out.push_str(&format!(
            "  {name:<22} {:>18.6}   {:>23.6}   {lf}\n",
            r.norm_shares.unwrap_or(0.0),
            r.effectv_usage
        ));
    }
    let used = me.raw_usage;
    if used > 0.0 {
        let hl = p.decay_half_life;
        if hl > 0 {
            out.push_str(&format!(
                "Usage {used:.0} (billed CPU-seconds) halves every {} (PriorityDecayHalfLife): without new \
                 jobs it is {:.0} in one half-life and {:.0} in two. Since everyone's usage decays alike, the \
                 standing recovers as the others use the cluster while this user does not.\n",
                drover_model::duration::fmt_long(hl),
                used / 2.0,
                used / 4.0
            ));
        } else {
            out.push_str(&format!("Usage {used:.0} does not decay (PriorityDecayHalfLife=0).\n"));
        }
    } else {
        out.push_str("This user has used nothing here yet: nobody in its account comes before it.\n");
    }
    out
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        depth: u32,
        account: &str,
        user: &str,
        norm: f64,
        eff: f64,
        lf: Option<f64>,
        fs: Option<f64>,
    ) -> v1::ShareRow {
        v1::ShareRow {
            account: account.into(),
            user: user.into(),
            depth,
            norm_shares: Some(norm),
            effectv_usage: eff,
            level_fs: lf,
            fairshare: fs,
            raw_usage: if user == "alice" { 387.0 } else { 0.0 },
            ..Default::default()
        }
    }

    #[test]
    fn the_chain_from_the_root_and_the_recovery() {
        let reply = v1::StateReply {
            shares: vec![
                row(0, "root", "", 0.0, 1.0, None, None),
                row(1, "root", "root", 0.25, 0.0, Some(f64::INFINITY), Some(1.0)),
                row(1, "physics", "", 0.25, 1.0, Some(0.25), None),
                row(2, "physics", "alice", 1.0 / 3.0, 1.0, Some(1.0 / 3.0), Some(1.0 / 3.0)),
                row(2, "physics", "root", 1.0 / 3.0, 0.0, Some(f64::INFINITY), Some(0.5)),
            ],
            ..Default::default()
        };
        let p = drover_model::priority_conf::PriorityConf { multifactor: true, ..Default::default() };
        let t = fairshare(&reply, "physics", "alice", &p);
        assert!(t.starts_with("Fairshare 0.333333: alice in physics ranks 3rd of 3 users"), "{t}");
        assert!(t.contains("physics ") && t.contains("0.250000 (over-served)") && t.contains("physics/alice"), "{t}");
        assert!(t.contains("halves every 7-00:00:00"), "{t}");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(22), "22nd");
    }
}

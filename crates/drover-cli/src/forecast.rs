//! `drover sim --now [--hours H] [--json]`: what the next hours look like on the live
//! cluster. The controller runs a copy of its scheduler forward in virtual time from now
//! (`drover_sched::Core::forecast`): no new submissions, every running job ending when the
//! plan expects it to (at the run time predicted from its user's recent jobs, or at its time
//! limit), every job it starts running what the plan expects. Printed: each waiting job's
//! expected start, end and nodes, in the order they would start, and what still waits at
//! the horizon, with its reason then.

use crate::common;
use drover_proto::v1;
use std::collections::HashMap;

pub struct Args {
    pub hours: f64,
    pub json: bool,
}

pub fn main(a: &Args) -> i32 {
    match run(a) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("drover sim: error: {e}");
            1
        }
    }
}

fn run(a: &Args) -> Result<String, String> {
    if !(a.hours.is_finite() && a.hours > 0.0 && a.hours <= 24.0 * 366.0) {
        return Err(format!("--hours {}: give a number of hours above 0, at most a year's", a.hours));
    }
    let horizon = (a.hours * 3600.0).round().max(1.0) as i64;
    let cfg = common::load_config()?;
    let f = common::runtime().block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.forecast(v1::ForecastRequest { horizon_secs: horizon })
            .await
            .map(|r| r.into_inner())
            .map_err(|s| common::status_msg(&s))
    })?;
    let req = v1::StateRequest { jobs: true, active_only: true, ..Default::default() };
    let jobs: HashMap<u32, v1::JobInfo> =
        common::jobs_in(common::fetch_state(&cfg, req)?).into_iter().map(|j| (j.job_id, j)).collect();
    Ok(if a.json { json(&f, &jobs) } else { text(&f, &jobs) })
}

/// A forecast row's job as squeue names it: `ID`, or `ARRAY_TASK` for a task of an array.
fn job_name(e: &v1::ExpectedStart, jobs: &HashMap<u32, v1::JobInfo>) -> String {
    let j = jobs.get(&e.job_id);
    let array = j.map(|j| j.array_job_id).filter(|&a| a != 0).unwrap_or(e.job_id);
    match (e.array_task_id, j) {
        (Some(t), _) => format!("{array}_{t}"),
        (None, Some(j)) if j.array_job_id != 0 => match j.array_task_id {
            Some(t) => format!("{array}_{t}"),
            None => format!("{array}_[{}]", j.array_pending),
        },
        _ => e.job_id.to_string(),
    }
}

fn span(secs: i64) -> String {
    let m = (secs.max(0) + 59) / 60;
    match (m / 1440, m / 60 % 24, m % 60) {
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h{m:02}m"),
        (d, h, m) => format!("{d}d{h:02}h{m:02}m"),
    }
}

fn text(f: &v1::ForecastReply, jobs: &HashMap<u32, v1::JobInfo>) -> String {
    let mut out = format!(
        "Forecast from {} to {} ({}), as the scheduler would run the queue with no new submissions \
         and every job ending when the plan expects (RUN: predicted from its user's recent jobs, or \
         its time limit): {} job{} start{}, {} still wait{}.{}\n",
        common::fmt_time(f.now),
        common::fmt_time(f.until),
        span(f.until - f.now),
        f.starts.len(),
        if f.starts.len() == 1 { "" } else { "s" },
        if f.starts.len() == 1 { "s" } else { "" },
        f.waiting.len(),
        if f.waiting.len() == 1 { "s" } else { "" },
        if f.cut { format!(" Cut after {} scheduling passes.", f.passes) } else { String::new() },
    );
    let rows: Vec<[String; 9]> = f
        .starts
        .iter()
        .map(|e| {
            let j = jobs.get(&e.job_id);
            [
                job_name(e, jobs),
                j.map_or(String::new(), |j| j.partition.clone()),
                j.and_then(|j| j.spec.as_ref()).map_or(String::new(), |s| s.name.clone()),
                j.and_then(|j| j.spec.as_ref()).map_or(String::new(), |s| s.user.clone()),
                common::fmt_time(e.start),
                format!("+{}", span(e.start - f.now)),
                if e.end > 0 { common::fmt_time(e.end) } else { "Unknown".into() },
                e.nodes.clone(),
                if e.predicted { "predicted" } else { "limit" }.into(),
            ]
        })
        .collect();
    let head = ["JOBID", "PARTITION", "NAME", "USER", "START_TIME", "IN", "END_TIME", "NODELIST", "RUN"];
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (k, (c, w)) in cells.iter().zip(&width).enumerate() {
            if k + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  "));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    if !rows.is_empty() {
        out.push_str(&line(&head));
        for r in &rows {
            out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
        }
    }
    if !f.waiting.is_empty() {
        let list: Vec<String> = f
            .waiting
            .iter()
            .map(|w| {
                let name = job_name(&v1::ExpectedStart { job_id: w.job_id, ..Default::default() }, jobs);
                format!("{name} ({})", w.reason)
            })
            .collect();
        out.push_str(&format!("Still waiting at {}: {}\n", common::fmt_time(f.until), list.join(", ")));
    }
    out
}

fn json(f: &v1::ForecastReply, jobs: &HashMap<u32, v1::JobInfo>) -> String {
    let starts: Vec<serde_json::Value> = f
        .starts
        .iter()
        .map(|e| {
            let j = jobs.get(&e.job_id);
            serde_json::json!({
                "job_id": e.job_id,
                "job": job_name(e, jobs),
                "array_task_id": e.array_task_id,
                "partition": j.map(|j| j.partition.clone()),
                "name": j.and_then(|j| j.spec.as_ref()).map(|s| s.name.clone()),
                "user": j.and_then(|j| j.spec.as_ref()).map(|s| s.user.clone()),
                "start": e.start,
                "end": (e.end > 0).then_some(e.end),
                "nodes": e.nodes,
                "run": if e.predicted { "predicted" } else { "limit" },
            })
        })
        .collect();
    let waiting: Vec<serde_json::Value> =
        f.waiting.iter().map(|w| serde_json::json!({"job_id": w.job_id, "reason": w.reason})).collect();
    let v = serde_json::json!({
        "now": f.now,
        "until": f.until,
        "passes": f.passes,
        "cut": f.cut,
        "starts": starts,
        "waiting": waiting,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_minutes_hours_and_days() {
        assert_eq!(span(0), "0m");
        assert_eq!(span(1), "1m");
        assert_eq!(span(3600), "1h00m");
        assert_eq!(span(3 * 86400 + 3660), "3d01h01m");
    }

    #[test]
    fn array_tasks_are_named_as_squeue_names_them() {
        let mut jobs = HashMap::new();
        jobs.insert(
            10,
            v1::JobInfo { job_id: 10, array_job_id: 10, array_pending: "3-5".into(), ..Default::default() },
        );
        let e = |task| v1::ExpectedStart { job_id: 10, array_task_id: task, ..Default::default() };
        assert_eq!(job_name(&e(Some(3)), &jobs), "10_3");
        assert_eq!(job_name(&e(None), &jobs), "10_[3-5]");
        assert_eq!(job_name(&v1::ExpectedStart { job_id: 7, ..Default::default() }, &jobs), "7");
    }
}

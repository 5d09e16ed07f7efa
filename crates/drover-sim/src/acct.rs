//! `drover sim --from-accounting URL`: a site's own recent jobs, read from its accounting
//! store (the database `drover accounting` writes: a SQLite file, `mysql://...` or
//! `postgres://...`), to replay on its `slurm.conf`. Each job that ran is replayed with its
//! recorded submit time and run time and its whole request (partition, tasks, CPUs, nodes,
//! memory, GRES, constraints, limit, dependencies), as the controller hands it to the
//! scheduler; the latest run of each, one entry per array task.

use crate::swf::TraceJob;
use drover_proto::v1;

/// The store at `url` (a path is taken as a SQLite file, which must exist).
fn store_url(url: &str) -> Result<String, String> {
    if url.contains("://") {
        return Ok(url.to_string());
    }
    if !std::path::Path::new(url).is_file() {
        return Err(format!(
            "{url}: no such accounting database (give a SQLite file or a mysql:// or postgres:// URL)"
        ));
    }
    Ok(format!("sqlite://{url}?mode=ro"))
}

/// The jobs of `cluster` (any, where `None`) submitted in the `days` before `now` that ran,
/// in submit order (then id), and the site's accounts, users and QoS.
pub fn read(url: &str, cluster: Option<&str>, days: f64, now: i64) -> Result<(Vec<TraceJob>, v1::AdminState), String> {
    let url = store_url(url)?;
    let since = now - (days * 86_400.0).round() as i64;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let (rows, admin) = rt.block_on(async {
        let store = drover_accounting::store::Store::open(&url)
            .await
            .map_err(|e| format!("{}: {e}", drover_accounting::store::redact(&url)))?;
        let q = v1::AcctQuery {
            clusters: cluster.map(|c| vec![c.to_string()]).unwrap_or_default(),
            start: since,
            end: now,
            no_steps: true,
            ..Default::default()
        };
        let rows = store.jobs(&q).await.map_err(|e| e.to_string())?;
        let admin = store.admin_state().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((rows, admin))
    })?;
    let mut jobs: Vec<TraceJob> = rows.jobs.into_iter().filter_map(|r| job(r, since)).collect();
    jobs.sort_by_key(|j| (j.submit, j.id));
    Ok((jobs, admin))
}

/// A job that ran, submitted at or after `since`, as the simulator replays it.
fn job(r: v1::AcctJob, since: i64) -> Option<TraceJob> {
    let info = r.info?;
    if info.start_time <= 0 || info.end_time < info.start_time || info.submit_time < since {
        return None;
    }
    let mut spec = drover_proto::spec_from_wire(info.spec?).ok()?;
    let run = (info.end_time - info.start_time - info.suspended_secs).max(0);
    let cpus: usize = info.alloc.iter().map(|n| n.cpu_ids.len()).sum();
    let procs = if cpus > 0 { cpus as u32 } else { spec.task_count().max(1) * spec.cpus_per_task().max(1) };
    // Each task on its own: the array's remainder is gone from the record.
    spec.array = None;
    // Advance reservations are not replayed.
    spec.reservation = None;
    // The partition it ran in, where it asked for several.
    if !info.partition.is_empty() {
        spec.partitions = vec![info.partition.clone()];
    }
    if spec.account.is_none() && !r.account.is_empty() {
        spec.account = Some(r.account);
    }
    let limit = info.time_limit_secs.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
    Some(TraceJob {
        id: info.job_id,
        submit: info.submit_time,
        run,
        procs,
        estimate: limit.max(run),
        user: spec.uid,
        request: Some(Box::new(spec)),
    })
}

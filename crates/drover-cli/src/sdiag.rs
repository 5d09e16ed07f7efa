//! `sdiag`: the controller's statistics as Slurm 22.05 prints them: jobs submitted, started,
//! completed, cancelled and failed, the scheduling passes' times (Drover's backfill runs in
//! its main pass: the passes that planned ahead are backfill's cycles), and the RPCs by Slurm
//! message type and by user. `-r` (operators) starts the counts over.

use crate::common;
use clap::Parser;
use drover_proto::v1;

#[derive(Parser, Debug)]
#[command(
    name = "sdiag",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct Args {
    #[arg(short = 'a', long = "all")]
    all: bool,
    #[arg(short = 'r', long = "reset")]
    reset: bool,
    #[arg(short = 'M', long = "cluster", alias = "clusters")]
    cluster: Option<String>,
    #[arg(short = 'i', long = "sort-by-id")]
    by_id: bool,
    #[arg(short = 't', long = "sort-by-time")]
    by_time: bool,
    #[arg(short = 'T', long = "sort-by-time2")]
    by_average: bool,
    #[command(flatten)]
    std: common::StdFlags,
}

#[derive(Clone, Copy)]
enum Sort {
    Count,
    Id,
    Time,
    Average,
}

fn average(r: &v1::RpcCount) -> u64 {
    r.total_us.checked_div(r.count).unwrap_or(0)
}

fn sorted(mut rows: Vec<v1::RpcCount>, sort: Sort) -> Vec<v1::RpcCount> {
    rows.sort_by(|a, b| {
        let key = match sort {
            Sort::Count => b.count.cmp(&a.count),
            Sort::Id => a.id.cmp(&b.id),
            Sort::Time => b.total_us.cmp(&a.total_us),
            Sort::Average => average(b).cmp(&average(a)),
        };
        key.then(a.id.cmp(&b.id))
    });
    rows
}

/// The report, as Slurm's sdiag prints it.
fn render(r: &v1::DiagReply, sort: Sort, user_name: &dyn Fn(u32) -> String) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let stars = "*******************************************************";
    let _ = writeln!(o, "{stars}");
    let _ = writeln!(o, "sdiag output at {} ({})", common::fmt_header_date(r.now), r.now);
    let _ = writeln!(o, "Data since      {} ({})", common::fmt_header_date(r.since), r.since);
    let _ = writeln!(o, "{stars}");
    let _ = writeln!(o, "Server thread count:  {}", r.server_threads);
    let _ = writeln!(o, "Agent queue size:     {}", r.agent_queue);
    let _ = writeln!(o, "Agent count:          0");
    let _ = writeln!(o, "Agent thread count:   0");
    let _ = writeln!(o, "DBD Agent queue size: {}\n", r.dbd_queue);
    let _ = writeln!(o, "Jobs submitted: {}", r.jobs_submitted);
    let _ = writeln!(o, "Jobs started:   {}", r.jobs_started);
    let _ = writeln!(o, "Jobs completed: {}", r.jobs_completed);
    let _ = writeln!(o, "Jobs canceled:  {}", r.jobs_canceled);
    let _ = writeln!(o, "Jobs failed:    {}\n", r.jobs_failed);
    let _ = writeln!(o, "Job states ts:  {} ({})", common::fmt_header_date(r.now), r.now);
    let _ = writeln!(o, "Jobs pending:   {}", r.jobs_pending);
    let _ = writeln!(o, "Jobs running:   {}", r.jobs_running);
    let _ = writeln!(o, "\nMain schedule statistics (microseconds):");
    let _ = writeln!(o, "\tLast cycle:   {}", r.sched_last_us);
    let _ = writeln!(o, "\tMax cycle:    {}", r.sched_max_us);
    let _ = writeln!(o, "\tTotal cycles: {}", r.sched_cycles);
    if let (Some(mean), Some(depth)) =
        (r.sched_sum_us.checked_div(r.sched_cycles), r.sched_depth_sum.checked_div(r.sched_cycles))
    {
        let _ = writeln!(o, "\tMean cycle:   {mean}");
        let _ = writeln!(o, "\tMean depth cycle:  {depth}");
    }
    let span = r.now - r.since;
    if span > 60 {
        let _ = writeln!(o, "\tCycles per minute: {}", r.sched_cycles / (span / 60) as u64);
    }
    let _ = writeln!(o, "\tLast queue length: {}", r.sched_queue_len);
    let _ = writeln!(o, "\nBackfilling stats");
    let _ = writeln!(o, "\tTotal backfilled jobs (since last slurm start): {}", r.bf_backfilled_total);
    let _ = writeln!(o, "\tTotal backfilled jobs (since last stats cycle start): {}", r.bf_backfilled);
    let _ = writeln!(o, "\tTotal backfilled heterogeneous job components: 0");
    let _ = writeln!(o, "\tTotal cycles: {}", r.bf_cycles);
    if r.bf_last_when > 0 {
        let _ = writeln!(o, "\tLast cycle when: {} ({})", common::fmt_header_date(r.bf_last_when), r.bf_last_when);
    } else {
        let _ = writeln!(o, "\tLast cycle when: N/A");
    }
    let _ = writeln!(o, "\tLast cycle: {}", r.bf_last_us);
    let _ = writeln!(o, "\tMax cycle:  {}", r.bf_max_us);
    if let Some(mean) = r.bf_sum_us.checked_div(r.bf_cycles) {
        let _ = writeln!(o, "\tMean cycle: {mean}");
    }
    let _ = writeln!(o, "\tLast depth cycle: {}", r.bf_last_depth);
    let _ = writeln!(o, "\tLast depth cycle (try sched): {}", r.bf_last_depth);
    if let Some(depth) = r.bf_depth_sum.checked_div(r.bf_cycles) {
        let _ = writeln!(o, "\tDepth Mean: {depth}");
        let _ = writeln!(o, "\tDepth Mean (try depth): {depth}");
    }
    let _ = writeln!(o, "\tLast queue length: {}", r.bf_queue_len);
    if let Some(mean) = r.bf_queue_len_sum.checked_div(r.bf_cycles) {
        let _ = writeln!(o, "\tQueue length mean: {mean}");
    }
    let _ = writeln!(o, "\tLast table size: {}", r.bf_table_size);
    if let Some(mean) = r.bf_table_size_sum.checked_div(r.bf_cycles) {
        let _ = writeln!(o, "\tMean table size: {mean}");
    }
    let _ = writeln!(o, "\nLatency for 1000 calls to gettimeofday(): {} microseconds", r.clock_latency_us);
    let _ = writeln!(o, "\nRemote Procedure Call statistics by message type");
    for t in sorted(r.rpc_types.clone(), sort) {
        let _ = writeln!(
            o,
            "\t{:<40}({:>5}) count:{:<6} ave_time:{:<6} total_time:{}",
            t.name,
            t.id,
            t.count,
            average(&t),
            t.total_us
        );
    }
    let _ = writeln!(o, "\nRemote Procedure Call statistics by user");
    for u in sorted(r.rpc_users.clone(), sort) {
        let _ = writeln!(
            o,
            "\t{:<16}({:>8}) count:{:<6} ave_time:{:<6} total_time:{}",
            user_name(u.id),
            u.id,
            u.count,
            average(&u),
            u.total_us
        );
    }
    let _ = writeln!(o, "\nPending RPC statistics");
    let _ = writeln!(o, "\tNo pending RPCs");
    o
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("sdiag", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let _ = (a.all, &a.cluster);
    let cfg = match common::config_for("sdiag") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let reply = common::runtime().block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.diag(v1::DiagRequest { reset: a.reset }).await.map(|r| r.into_inner()).map_err(|s| common::status_msg(&s))
    });
    match reply {
        Ok(_) if a.reset => {
            println!("Reset scheduling statistics");
            0
        }
        Ok(r) => {
            let sort = if a.by_id {
                Sort::Id
            } else if a.by_time {
                Sort::Time
            } else if a.by_average {
                Sort::Average
            } else {
                Sort::Count
            };
            common::print_raw(&render(&r, sort, &common::user_name));
            0
        }
        Err(e) => {
            let what = if a.reset { "slurm_reset_statistics" } else { "slurm_get_statistics" };
            eprintln!("{what}: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_rows_sort_as_sdiag_sorts_them() {
        let row = |id, count, total_us| v1::RpcCount { name: format!("R{id}"), id, count, total_us };
        let rows = vec![row(3, 5, 100), row(1, 9, 90), row(2, 5, 500)];
        let ids = |s| sorted(rows.clone(), s).iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(Sort::Count), [1, 2, 3]);
        assert_eq!(ids(Sort::Id), [1, 2, 3]);
        assert_eq!(ids(Sort::Time), [2, 3, 1]);
        assert_eq!(ids(Sort::Average), [2, 3, 1]);
    }
}

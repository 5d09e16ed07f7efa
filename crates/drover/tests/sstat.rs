//! `sstat` on a real cluster: usage of running steps sampled on their nodes when asked, in
//! Slurm 22.05's layout (the header below is real sstat's).

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

const SLURM_HEADER: &str = "JobID         MaxVMSize  MaxVMSizeNode  MaxVMSizeTask  AveVMSize     MaxRSS MaxRSSNode MaxRSSTask     AveRSS MaxPages MaxPagesNode   MaxPagesTask   AvePages     MinCPU MinCPUNode MinCPUTask     AveCPU   NTasks AveCPUFreq ReqCPUFreqMin ReqCPUFreqMax ReqCPUFreqGov ConsumedEnergy  MaxDiskRead MaxDiskReadNode MaxDiskReadTask  AveDiskRead MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask AveDiskWrite TRESUsageInAve TRESUsageInMax TRESUsageInMaxNode TRESUsageInMaxTask TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot TRESUsageOutAve TRESUsageOutMax TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode TRESUsageOutMinTask TRESUsageOutTot ";

#[test]
fn sstat_shows_what_running_tasks_use() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() });
    let id = c.submit(&[
        "-N2",
        "-n2",
        "--wrap",
        "srun -n2 python3 -c 'import time; x = bytearray(60 * 1024 * 1024); t = time.time()\nwhile time.time() - t < 30: pass'",
    ]);
    c.wait_until("the step", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-s", "-o", "%i"]).contains(&format!("{id}.0"))
    });
    // Let the tasks touch their memory and burn a little CPU.
    std::thread::sleep(Duration::from_millis(1500));
    let out = c.ok("sstat", &["-j", &id.to_string()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], SLURM_HEADER);
    assert!(lines[2].starts_with(&format!("{:<12} ", format!("{id}.0"))), "{out}");
    let o = c.ok("sstat", &["-P", "-j", &format!("{id}.0"), "-o", "JobID,MaxRSS,NTasks,Nodelist,Pids,AveCPU"]);
    let row: Vec<&str> = o.lines().nth(1).unwrap().split('|').collect();
    assert_eq!(row[0], format!("{id}.0"));
    // In K unless Slurm's exact conversion made it M (`61440K` prints `60M`).
    let rss: u64 = match row[1].strip_suffix('M') {
        Some(m) => (m.parse::<f64>().unwrap() * 1024.0) as u64,
        None => row[1].trim_end_matches('K').parse().unwrap(),
    };
    assert!(rss > 60 * 1024, "MaxRSS {rss}K for 60 MiB each");
    assert_eq!((row[2], row[3]), ("2", "node[1-2]"));
    assert_eq!(row[4].split(',').count(), 2);
    assert!(row[5] >= "00:00:01", "{o}");
    // Every step, the batch script's first.
    let o = c.ok("sstat", &["-a", "-n", "-p", "-j", &id.to_string(), "-o", "jobid,ntasks"]);
    assert_eq!(o, format!("{id}.batch|1|\n{id}.0|2|\n"));
    // Slurm's messages.
    let o = c.run("sstat", &["-j", "99999", "-n"]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "sstat: error: couldn't get steps for job 99999\n");
    let o = c.run("sstat", &["-j", &format!("{id}.7"), "-n"]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("sstat: error: StepId={id}.7 not found running.\n"));
    let o = c.run("sstat", &[]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "sstat: error: You didn't give me any jobs to stat.\n");
    let o = c.run("sstat", &["-j", "1", "-o", "foo"]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "sstat: error: Invalid field requested: \"foo\"\n");
    c.ok("scancel", &[&id.to_string()]);
}

//! What a step's tasks use, sampled from `/proc` as Slurm's `jobacct_gather/linux` does:
//! every process is counted for the task whose process tree it is in.

use std::collections::{BTreeMap, HashMap};

/// One task's usage at one moment (sizes in KiB, CPU in seconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub rss_kb: u64,
    pub vmsize_kb: u64,
    pub pages: u64,
    pub cpu_secs: f64,
    pub user_secs: f64,
    pub sys_secs: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub pids: Vec<u32>,
}

struct Proc {
    ppid: i32,
    /// User and system time, its waited-for children's included.
    user_ticks: u64,
    sys_ticks: u64,
    majflt: u64,
    vsize: u64,
    rss_pages: u64,
}

/// Fields of `/proc/PID/stat` after the command name (which may hold spaces).
fn parse_stat(text: &str) -> Option<Proc> {
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is the state (field 3); field n is f[n - 3].
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Some(Proc {
        ppid: f.get(1)?.parse().ok()?,
        majflt: n(12),
        user_ticks: n(14) + n(16),
        sys_ticks: n(15) + n(17),
        vsize: n(23),
        rss_pages: n(24),
    })
}

fn io_bytes(pid: i32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let get =
        |k: &str| text.lines().find_map(|l| l.strip_prefix(k)).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0);
    (get("rchar:"), get("wchar:"))
}

/// Samples every process under the tasks' root processes (`roots`: pid → task id).
pub fn sample(roots: &HashMap<i32, u32>) -> BTreeMap<u32, Sample> {
    let mut procs: HashMap<i32, Proc> = HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if let Some(p) = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().as_deref().and_then(parse_stat) {
                procs.insert(pid, p);
            }
        }
    }
    // SAFETY: sysconf only reads a constant.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let page_kb = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) / 1024) as u64;
    let mut out: BTreeMap<u32, Sample> = BTreeMap::new();
    for (&pid, p) in &procs {
        // Which task's tree is it in?
        let mut at = pid;
        let mut task = None;
        for _ in 0..64 {
            if let Some(t) = roots.get(&at) {
                task = Some(*t);
                break;
            }
            match procs.get(&at) {
                Some(q) if q.ppid > 1 => at = q.ppid,
                _ => break,
            }
        }
        let Some(task) = task else { continue };
        let s = out.entry(task).or_default();
        s.rss_kb += p.rss_pages * page_kb;
        s.vmsize_kb += p.vsize / 1024;
        s.pages += p.majflt;
        s.user_secs += p.user_ticks as f64 / tick;
        s.sys_secs += p.sys_ticks as f64 / tick;
        s.cpu_secs = s.user_secs + s.sys_secs;
        let (r, w) = io_bytes(pid);
        s.read_bytes += r;
        s.write_bytes += w;
        if roots.contains_key(&pid) {
            s.pids.push(pid as u32);
        }
    }
    out
}

/// Folds what a task's process reported as it was reaped (`wait4`'s rusage: the task and
/// every descendant it waited for) into its usage: exact CPU times and its peak RSS.
pub fn fold_rusage(acc: &mut Sample, ru: &libc::rusage) {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    acc.user_secs = acc.user_secs.max(secs(ru.ru_utime));
    acc.sys_secs = acc.sys_secs.max(secs(ru.ru_stime));
    acc.cpu_secs = acc.cpu_secs.max(acc.user_secs + acc.sys_secs);
    // ru_maxrss is in KiB on Linux.
    acc.rss_kb = acc.rss_kb.max(ru.ru_maxrss.max(0) as u64);
}

/// Folds a new sample into what a task has used so far: peaks for sizes, latest totals
/// for counters (never going back when a process that counted has gone).
pub fn fold(acc: &mut Sample, now: &Sample) {
    acc.rss_kb = acc.rss_kb.max(now.rss_kb);
    acc.vmsize_kb = acc.vmsize_kb.max(now.vmsize_kb);
    acc.pages = acc.pages.max(now.pages);
    acc.cpu_secs = acc.cpu_secs.max(now.cpu_secs);
    acc.user_secs = acc.user_secs.max(now.user_secs);
    acc.sys_secs = acc.sys_secs.max(now.sys_secs);
    acc.read_bytes = acc.read_bytes.max(now.read_bytes);
    acc.write_bytes = acc.write_bytes.max(now.write_bytes);
    if !now.pids.is_empty() {
        acc.pids = now.pids.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_name_with_spaces() {
        let line = "42 (my (odd) prog) S 7 42 42 0 -1 4194304 100 0 3 0 250 50 10 5 20 0 1 0 1000 104857600 2560 \
                    18446744073709551615";
        let p = parse_stat(line).unwrap();
        assert_eq!((p.ppid, p.majflt, p.vsize, p.rss_pages), (7, 3, 104_857_600, 2560));
        assert_eq!((p.user_ticks, p.sys_ticks), (260, 55));
    }

    #[test]
    fn this_process_is_sampled_as_its_own_task() {
        let me = std::process::id() as i32;
        let s = sample(&HashMap::from([(me, 0)]));
        let t = &s[&0];
        assert!(t.rss_kb > 0 && t.vmsize_kb >= t.rss_kb, "{t:?}");
        assert_eq!(t.pids, vec![me as u32]);
    }
}

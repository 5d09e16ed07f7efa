//! The Standard Workload Format (Parallel Workloads Archive): one job per line, 18
//! whitespace-separated fields, `;` comment lines. Fields used here: 1 job number, 2 submit
//! time, 4 run time, 5 allocated processors, 8 requested processors, 9 requested time, 12 user.

use std::io::Read;

/// A trace job as the simulator runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJob {
    pub id: u32,
    pub submit: i64,
    /// Actual run time (seconds); negative means unknown.
    pub run: i64,
    /// Allocated processors, else requested.
    pub procs: u32,
    /// What the scheduler is told: max(requested time, run time).
    pub estimate: i64,
    /// Field 12, the user id (`u32::MAX` where the trace has none): predictions learn per user.
    pub user: u32,
    /// The whole request, for a job read from accounting (`None` for a trace's: it asks for
    /// `procs` CPUs in the machine's default partition).
    pub request: Option<Box<drover_model::job::JobSpec>>,
}

/// Parses SWF text. A line that is not a comment and does not have at least 9 numeric
/// fields is an error naming the line.
pub fn parse(text: &str) -> Result<Vec<TraceJob>, String> {
    let mut jobs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<i64, String> {
            let v = f.get(i).ok_or_else(|| format!("line {}: expected 18 fields, found {}", n + 1, f.len()))?;
            v.parse::<f64>()
                .map(|x| x as i64)
                .map_err(|_| format!("line {}: field {} is not a number: `{v}`", n + 1, i + 1))
        };
        let (id, submit, run, alloc, req, req_time) = (num(0)?, num(1)?, num(3)?, num(4)?, num(7)?, num(8)?);
        let procs = if alloc > 0 { alloc } else { req };
        // Older or trimmed lines may stop before the user field.
        let user =
            f.get(11).and_then(|v| v.parse::<i64>().ok()).and_then(|u| u32::try_from(u).ok()).unwrap_or(u32::MAX);
        jobs.push(TraceJob {
            id: u32::try_from(id).unwrap_or(0),
            submit,
            run,
            procs: u32::try_from(procs.max(0)).unwrap_or(u32::MAX),
            estimate: req_time.max(run),
            user,
            request: None,
        });
    }
    Ok(jobs)
}

/// Reads a trace file, gunzipping it when its name ends in `.gz`.
pub fn read(path: &std::path::Path) -> Result<Vec<TraceJob>, String> {
    let raw = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut s)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        s
    } else {
        String::from_utf8(raw).map_err(|e| format!("{}: {e}", path.display()))?
    };
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_jobs_by_the_archive_rules() {
        let text = "; Version: 2.2\n; MaxProcs: 128\n\
            11 566129 5 28826 1 27758 -1 1 28800 -1 5 153 75 18180 3 -1 -1 -1\n\
            13 567314 15757 8071 -1 7334 -1 8 64800 -1 1 150 6 13592 4 -1 -1 -1\n\
            14 567400 0 -1 4 0 -1 4 -1 -1 0 1 1 1 1 -1 -1 -1\n";
        let jobs = parse(text).unwrap();
        assert_eq!(jobs.len(), 3);
        assert_eq!(
            jobs[0],
            TraceJob { id: 11, submit: 566129, run: 28826, procs: 1, estimate: 28826, user: 153, request: None }
        );
        assert_eq!(jobs[1].procs, 8);
        assert_eq!(jobs[1].estimate, 64800);
        assert_eq!(jobs[2].run, -1);
        assert_eq!(jobs[1].user, 150);
        assert_eq!(parse("1 2 3 4 5 6 7 8 9\n").unwrap()[0].user, u32::MAX);
        assert!(parse("1 2 3\n").unwrap_err().contains("line 1"));
    }
}

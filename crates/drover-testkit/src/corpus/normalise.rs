//! What the corpus's comparison leaves out, and nothing more (each rule is listed in
//! `testdata/corpus/README.md`):
//! - the cluster's directory, the directory the command lines ran in, the host's name and its
//!   kernel (`uname -srv`): `<DIR>`, `<WORK>`, `<HOST>`, `<OS>`;
//! - dates (`2026-12-05T20:09:03`, `Sat Dec 05 20:10:27 2026`): `<DATE>`; seconds since
//!   1970 of this era (ten digits from 1600000000 to 2099999999): `<EPOCH>`;
//! - durations that are clock readings, not settings: under an hour, or with seconds (a time
//!   limit is whole minutes and every limit the corpus sets is an hour or more): `<ELAPSED>`.
//!   `M:SS` is a duration only in squeue (elsewhere it is an exit code, `0:15`);
//! - a node's load and free memory (`CPULoad=`, `FreeMem=`), the process ids of the
//!   submitting process and of a step's srun (`AllocNode:Sid=host:PID`, `SrunHost:Pid=`),
//!   and the name `AllocNode` gives the submitting host: its address named back by the
//!   resolver, which depends on the machine's `/etc/hosts` (`localhost` on the lab's).

use regex::Regex;

pub struct Normaliser {
    literals: Vec<(String, &'static str)>,
    host: Regex,
    date: Regex,
    ctime: Regex,
    long: Regex,
    short: Regex,
    keyed: Regex,
    epoch: Regex,
}

impl Normaliser {
    /// For a cluster in `dir` whose command lines ran in `work`, on this host.
    pub fn new(dir: &str, work: &str) -> Normaliser {
        let kernel =
            |k: &str| std::fs::read_to_string(format!("/proc/sys/kernel/{k}")).unwrap_or_default().trim().to_string();
        let host = kernel("hostname");
        let os = format!("{} {} {}", kernel("ostype"), kernel("osrelease"), kernel("version"));
        let mut literals = vec![(dir.to_string(), "<DIR>"), (work.to_string(), "<WORK>")];
        if !os.trim().is_empty() {
            literals.push((os, "<OS>"));
        }
        literals.retain(|(l, _)| !l.is_empty());
        // The longer first: a work directory inside the cluster's is the work directory.
        literals.sort_by_key(|(l, _)| std::cmp::Reverse(l.len()));
        let re = |s: &str| Regex::new(s).expect("a normaliser pattern");
        Normaliser {
            literals,
            host: re(&format!(r"\b{}\b", regex::escape(if host.is_empty() { "\u{0}" } else { &host }))),
            date: re(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\b"),
            ctime: re(
                r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d \d{4}\b",
            ),
            long: re(r"\b(?:(\d+)-)?(\d\d):(\d\d):(\d\d)\b"),
            short: re(r"\b(?:(\d+)-)?(?:(\d+):)?(\d+):(\d\d)\b"),
            epoch: re(r"\b(1[6-9]|20)\d{8}\b"),
            keyed: re(r"(CPULoad|FreeMem)=[0-9.]+|(SrunHost:Pid=\S+?):\d+|(AllocNode:Sid)=\S+?:\d+"),
        }
    }

    /// `text`, printed by `command`, normalised.
    pub fn apply(&self, command: &str, text: &str) -> String {
        let mut s = text.to_string();
        for (lit, with) in &self.literals {
            s = s.replace(lit.as_str(), with);
        }
        let s = self.host.replace_all(&s, "<HOST>");
        let s = self.date.replace_all(&s, "<DATE>");
        let s = self.ctime.replace_all(&s, "<DATE>");
        let s = self.epoch.replace_all(&s, "<EPOCH>");
        let s = self.keyed.replace_all(&s, |c: &regex::Captures| match (c.get(1), c.get(2), c.get(3)) {
            (Some(k), _, _) => format!("{}=<VOLATILE>", k.as_str()),
            (_, Some(k), _) => format!("{}:<PID>", k.as_str()),
            (_, _, Some(k)) => format!("{}=<ALLOCNODE>:<PID>", k.as_str()),
            _ => c[0].to_string(),
        });
        let durations = if command == "squeue" { &self.short } else { &self.long };
        durations
            .replace_all(&s, |c: &regex::Captures| {
                let n = |i: usize| c.get(i).map_or(0u64, |m| m.as_str().parse().unwrap_or(0));
                let secs = n(1) * 86_400 + n(2) * 3600 + n(3) * 60 + n(4);
                if secs < 3600 || n(4) != 0 {
                    "<ELAPSED>".to_string()
                } else {
                    c[0].to_string()
                }
            })
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_out_and_what_is_kept() {
        let n = Normaliser::new("/srv/slurm-lab", "/tmp/w");
        // Clock readings go, settings stay.
        assert_eq!(
            n.apply("squeue", " R       0:46  TIME_LIMIT 2:00:00 1-00:00:00"),
            " R       <ELAPSED>  TIME_LIMIT 2:00:00 1-00:00:00"
        );
        assert_eq!(n.apply("squeue", "1:58:13"), "<ELAPSED>");
        assert_eq!(n.apply("sacct", "00:00:05 02:00:00 0:15 3:0"), "<ELAPSED> 02:00:00 0:15 3:0");
        assert_eq!(
            n.apply("scontrol", "RunTime=00:01:02 TimeLimit=02:00:00 ExitCode=0:15"),
            "RunTime=<ELAPSED> TimeLimit=02:00:00 ExitCode=0:15"
        );
        assert_eq!(n.apply("sacct", "2026-12-05T20:09:03 Unknown"), "<DATE> Unknown");
        assert_eq!(
            n.apply("sdiag", "sdiag output at Sat Dec 05 20:10:27 2026 (1796501427)"),
            "sdiag output at <DATE> (<EPOCH>)"
        );
        assert_eq!(
            n.apply("squeue", "records=15 last_update_time=1796502602 4294901759"),
            "records=15 last_update_time=<EPOCH> 4294901759"
        );
        assert_eq!(n.apply("scontrol", "WorkDir=/tmp/w StdOut=/srv/slurm-lab/x"), "WorkDir=<WORK> StdOut=<DIR>/x");
        assert_eq!(
            n.apply("scontrol", "CPULoad=0.42 FreeMem=1234 RealMemory=4000"),
            "CPULoad=<VOLATILE> FreeMem=<VOLATILE> RealMemory=4000"
        );
        assert_eq!(n.apply("scontrol", "AllocNode:Sid=localhost:4242 X"), "AllocNode:Sid=<ALLOCNODE>:<PID> X");
        assert_eq!(n.apply("scontrol", "SrunHost:Pid=node1:77 "), "SrunHost:Pid=node1:<PID> ");
        // Job ids, counts and names are never touched.
        assert_eq!(n.apply("squeue", "8_[2-5%2] node[1-2] 12 3.0"), "8_[2-5%2] node[1-2] 12 3.0");
    }
}

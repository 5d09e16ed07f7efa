//! Advance reservations (`scontrol create|update|delete reservation`): nodes set aside for
//! some users or accounts over a window of time, and Slurm's words for them.

use serde::{Deserialize, Serialize};

/// The flags Drover honours, in the order Slurm prints them (`reservation_flags_string`).
/// `SPEC_NODES` is not asked for: it says the nodes were named rather than counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResvFlag {
    /// Maintenance: accounted as down time; the nodes show `maint`; may overlap others and
    /// be made over running jobs.
    Maint,
    /// May share nodes and time with other reservations.
    Overlap,
    /// Made even where jobs are running on its nodes at its start.
    IgnoreJobs,
    Hourly,
    Daily,
    Weekday,
    Weekend,
    Weekly,
    SpecNodes,
    /// Held pending jobs are not held when the reservation ends: they may run elsewhere.
    NoHoldJobsAfterEnd,
}

impl ResvFlag {
    pub const ALL: [ResvFlag; 10] = [
        ResvFlag::Maint,
        ResvFlag::Overlap,
        ResvFlag::IgnoreJobs,
        ResvFlag::Hourly,
        ResvFlag::Daily,
        ResvFlag::Weekday,
        ResvFlag::Weekend,
        ResvFlag::Weekly,
        ResvFlag::SpecNodes,
        ResvFlag::NoHoldJobsAfterEnd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ResvFlag::Maint => "MAINT",
            ResvFlag::Overlap => "OVERLAP",
            ResvFlag::IgnoreJobs => "IGNORE_JOBS",
            ResvFlag::Hourly => "HOURLY",
            ResvFlag::Daily => "DAILY",
            ResvFlag::Weekday => "WEEKDAY",
            ResvFlag::Weekend => "WEEKEND",
            ResvFlag::Weekly => "WEEKLY",
            ResvFlag::SpecNodes => "SPEC_NODES",
            ResvFlag::NoHoldJobsAfterEnd => "NO_HOLD_JOBS_AFTER_END",
        }
    }

    /// The flags that make a reservation repeat.
    fn repeats(self) -> bool {
        matches!(self, ResvFlag::Hourly | ResvFlag::Daily | ResvFlag::Weekday | ResvFlag::Weekend | ResvFlag::Weekly)
    }
}

/// A change to a reservation's flags as `Flags=` writes it: `MAINT,DAILY`, `+DAILY`, `-MAINT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagChange {
    pub add: Vec<ResvFlag>,
    pub remove: Vec<ResvFlag>,
}

/// Parses `Flags=` as Slurm's `parse_resv_flags` does for the flags Drover honours: names
/// case-insensitive and abbreviable (`MAINT`, `Maintenance`), a leading `+`/`-` adds or
/// removes that flag and those after it. Flags Drover does not honour are refused by name.
pub fn parse_flags(s: &str) -> Result<FlagChange, String> {
    let mut out = FlagChange::default();
    let mut remove = false;
    for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let mut t = tok;
        if let Some(r) = t.strip_prefix('+') {
            remove = false;
            t = r;
        } else if let Some(r) = t.strip_prefix('-') {
            remove = true;
            t = r;
        }
        let up = t.to_ascii_uppercase();
        // Slurm's spellings and shortest prefixes.
        let abbrev = |full: &str, min: usize| up.len() >= min && full.starts_with(&up);
        let f = if abbrev("MAINTENANCE", 3) {
            ResvFlag::Maint
        } else if abbrev("OVERLAP", 1) {
            ResvFlag::Overlap
        } else if abbrev("IGNORE_JOBS", 1) {
            ResvFlag::IgnoreJobs
        } else if abbrev("HOURLY", 1) {
            ResvFlag::Hourly
        } else if abbrev("DAILY", 2) {
            ResvFlag::Daily
        } else if abbrev("WEEKDAY", 5) {
            ResvFlag::Weekday
        } else if abbrev("WEEKEND", 5) {
            ResvFlag::Weekend
        } else if abbrev("WEEKLY", 5) {
            ResvFlag::Weekly
        } else if up == "SPEC_NODES" {
            ResvFlag::SpecNodes
        } else if up == "NO_HOLD_JOBS_AFTER_END" {
            ResvFlag::NoHoldJobsAfterEnd
        } else {
            return Err(format!("Flag {t} is not supported by Drover yet"));
        };
        if remove {
            out.remove.push(f);
        } else {
            out.add.push(f);
        }
    }
    Ok(out)
}

/// An advance reservation as the controller keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub name: String,
    pub start: i64,
    /// The end; a reservation with an UNLIMITED duration ends a year after it starts, as
    /// Slurm plans it.
    pub end: i64,
    pub nodes: Vec<String>,
    /// `PartitionName=`: where counted nodes were chosen, or what it is for.
    pub partition: Option<String>,
    /// `Users=`: who may use it; names beginning with `-` are the only ones who may not.
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub flags: Vec<ResvFlag>,
    /// Cores on its nodes (for `CoreCnt=` and `TRES=cpu=`).
    pub cores: u32,
}

/// A year: what an UNLIMITED reservation lasts.
pub const UNLIMITED_SECS: i64 = 365 * 86400;

impl Reservation {
    pub fn has(&self, f: ResvFlag) -> bool {
        self.flags.contains(&f)
    }

    /// Flags in Slurm's order, comma separated (empty when none).
    pub fn flags_text(&self) -> String {
        ResvFlag::ALL.iter().filter(|f| self.has(**f)).map(|f| f.name()).collect::<Vec<_>>().join(",")
    }

    /// `ACTIVE` from its start until its end, `INACTIVE` otherwise.
    pub fn active(&self, now: i64) -> bool {
        self.start <= now && now < self.end
    }

    /// Whether a job of this user and account may run in it: named among `Users=` (or not
    /// excluded where the list excludes), or its account among `Accounts=`.
    pub fn admits(&self, user: &str, account: Option<&str>) -> bool {
        let denies = self.users.iter().any(|u| u.starts_with('-'));
        let user_ok = if denies {
            !self.users.iter().any(|u| u.strip_prefix('-') == Some(user))
        } else {
            self.users.iter().any(|u| u == user)
        };
        let acct_ok = account.is_some_and(|a| self.accounts.iter().any(|x| x == a));
        user_ok || acct_ok
    }

    /// The window after this one for a repeating reservation (`HOURLY`, `DAILY`,
    /// `WEEKDAY`, `WEEKEND`, `WEEKLY`), as (start, end); `None` when it does not repeat.
    /// `weekday(t)` gives the local day of the week of `t` (0 = Sunday).
    pub fn next_window(&self, weekday: impl Fn(i64) -> u32) -> Option<(i64, i64)> {
        let f = *self.flags.iter().find(|f| f.repeats())?;
        let len = self.end - self.start;
        let mut start = self.start;
        loop {
            start += match f {
                ResvFlag::Hourly => 3600,
                ResvFlag::Weekly => 7 * 86400,
                _ => 86400,
            };
            let ok = match f {
                ResvFlag::Weekday => (1..=5).contains(&weekday(start)),
                ResvFlag::Weekend => matches!(weekday(start), 0 | 6),
                _ => true,
            };
            if ok {
                return Some((start, start + len));
            }
        }
    }
}

/// `Users=` and `Accounts=` values: a comma list, or a change to one (`+=` adds, `-=` removes).
pub fn apply_list(current: &[String], op: Option<char>, value: &str) -> Vec<String> {
    let items = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from);
    match op {
        Some('+') => {
            let mut out = current.to_vec();
            for i in items {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
            out
        }
        Some('-') => {
            let gone: Vec<String> = items.collect();
            current.iter().filter(|c| !gone.contains(c)).cloned().collect()
        }
        _ => items.collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resv(flags: &[ResvFlag]) -> Reservation {
        Reservation {
            name: "root_1".into(),
            start: 1_000_000,
            end: 1_003_600,
            nodes: vec!["node1".into()],
            partition: None,
            users: vec!["root".into()],
            accounts: vec![],
            flags: flags.to_vec(),
            cores: 2,
        }
    }

    #[test]
    fn flags_parse_as_slurm_spells_them_and_print_in_its_order() {
        let f = parse_flags("daily,Maintenance,ignore_jobs").unwrap();
        assert_eq!(f.add, vec![ResvFlag::Daily, ResvFlag::Maint, ResvFlag::IgnoreJobs]);
        let r = resv(&f.add);
        assert_eq!(r.flags_text(), "MAINT,IGNORE_JOBS,DAILY");
        let f = parse_flags("-MAINT,DAILY").unwrap();
        assert_eq!((f.add, f.remove), (vec![], vec![ResvFlag::Maint, ResvFlag::Daily]));
        assert_eq!(parse_flags("WEEKEND").unwrap().add, vec![ResvFlag::Weekend]);
        assert_eq!(parse_flags("weekday").unwrap().add, vec![ResvFlag::Weekday]);
        assert_eq!(parse_flags("FLEX"), Err("Flag FLEX is not supported by Drover yet".into()));
    }

    #[test]
    fn repeating_windows_move_by_their_period() {
        // 1_000_000 s after the epoch was a Monday (day 11, 1970-01-12).
        let weekday = |t: i64| ((t.div_euclid(86400) + 4) % 7) as u32;
        assert_eq!(weekday(1_000_000), 1);
        assert_eq!(resv(&[]).next_window(weekday), None);
        assert_eq!(resv(&[ResvFlag::Daily]).next_window(weekday), Some((1_086_400, 1_090_000)));
        assert_eq!(resv(&[ResvFlag::Hourly]).next_window(weekday), Some((1_003_600, 1_007_200)));
        assert_eq!(resv(&[ResvFlag::Weekly]).next_window(weekday), Some((1_604_800, 1_608_400)));
        // Monday → Saturday for WEEKEND; Friday → Monday for WEEKDAY.
        assert_eq!(resv(&[ResvFlag::Weekend]).next_window(weekday).map(|w| weekday(w.0)), Some(6));
        let mut fri = resv(&[ResvFlag::Weekday]);
        fri.start += 4 * 86400;
        fri.end += 4 * 86400;
        assert_eq!(fri.next_window(weekday).map(|w| (weekday(w.0), w.0 - fri.start)), Some((1, 3 * 86400)));
    }

    #[test]
    fn access_by_user_account_or_exclusion() {
        let mut r = resv(&[]);
        assert!(r.admits("root", None));
        assert!(!r.admits("alice", Some("physics")));
        r.accounts = vec!["physics".into()];
        assert!(r.admits("alice", Some("physics")));
        r.users = vec!["-bob".into()];
        r.accounts.clear();
        assert!(r.admits("alice", None));
        assert!(!r.admits("bob", None));
        assert_eq!(apply_list(&["a".into(), "b".into()], Some('-'), "a"), vec!["b".to_string()]);
        assert_eq!(apply_list(&["a".into()], Some('+'), "b,a"), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(apply_list(&["a".into()], None, "c"), vec!["c".to_string()]);
    }
}

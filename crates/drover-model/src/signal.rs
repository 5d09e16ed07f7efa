//! Signals by Slurm's names and numbers (Linux numbering), and `--signal=[{R|B}:]SIG[@secs]`.

/// Linux signal names without their `SIG` prefix, by number.
const NAMES: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// A signal's name with its `SIG` prefix (`SIGTERM`), by number.
pub fn signal_name(n: i32) -> Option<String> {
    NAMES.iter().find(|(_, k)| *k == n).map(|(name, _)| format!("SIG{name}"))
}

/// A signal by name (`TERM`, `SIGUSR1`, case-insensitive) or number (1 to 64).
pub fn signal_number(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    NAMES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// `--signal`: what to send, how long before the time limit, and to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalSpec {
    pub signal: i32,
    /// Seconds before the end of the time limit (default 60).
    pub secs: u32,
    /// `B:`: only the batch shell; otherwise every step of the job but not the batch shell.
    pub batch_only: bool,
}

impl SignalSpec {
    /// Parses `[{R|B|RB}:]SIG[@secs]` as sbatch and srun take it.
    pub fn parse(s: &str) -> Result<SignalSpec, String> {
        let bad = || format!("Invalid signal specification: {s}");
        let (flags, rest) = match s.split_once(':') {
            Some((f, r)) if !f.is_empty() && f.chars().all(|c| c == 'R' || c == 'B') => (f, r),
            Some(_) => return Err(bad()),
            None => ("", s),
        };
        let (sig, secs) = match rest.split_once('@') {
            Some((sig, t)) => (sig, t.parse::<u32>().ok().filter(|t| *t <= 65535).ok_or_else(bad)?),
            None => (rest, 60),
        };
        let signal = signal_number(sig).ok_or_else(bad)?;
        Ok(SignalSpec { signal, secs, batch_only: flags.contains('B') })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(signal_number("USR1"), Some(10));
        assert_eq!(signal_number("SIGUSR2"), Some(12));
        assert_eq!(signal_number("term"), Some(15));
        assert_eq!(signal_number("9"), Some(9));
        assert_eq!(signal_number("0"), None);
        assert_eq!(signal_number("NOPE"), None);
    }

    #[test]
    fn signal_specs_parse_like_sbatch() {
        assert_eq!(SignalSpec::parse("USR2@90").unwrap(), SignalSpec { signal: 12, secs: 90, batch_only: false });
        assert_eq!(SignalSpec::parse("SIGUSR1@90").unwrap().signal, 10);
        assert_eq!(SignalSpec::parse("B:USR2@30").unwrap(), SignalSpec { signal: 12, secs: 30, batch_only: true });
        assert_eq!(SignalSpec::parse("10").unwrap(), SignalSpec { signal: 10, secs: 60, batch_only: false });
        assert!(SignalSpec::parse("RB:TERM@5").unwrap().batch_only);
        for bad in ["USR1@x", "X:USR1", "FOO@5", "USR1@70000", ""] {
            assert!(SignalSpec::parse(bad).is_err(), "{bad}");
        }
    }
}

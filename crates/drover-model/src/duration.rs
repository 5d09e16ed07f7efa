//! Slurm time limits and elapsed times: parsing `30`, `30:00`, `1:02:03`, `1-02`, `1-02:03`,
//! `1-02:03:04`, `UNLIMITED`/`INFINITE`, and the printed forms each command uses.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid time limit specification")]
pub struct DurationError;

/// A time limit: `None` is unlimited. Seconds otherwise.
pub type TimeLimit = Option<u64>;

/// Parses a Slurm time specification (see `sbatch --time`). Returns seconds, or `None` for
/// `UNLIMITED`/`INFINITE`/`-1`.
pub fn parse_time_limit(s: &str) -> Result<TimeLimit, DurationError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") || t == "-1" {
        return Ok(None);
    }
    if t.is_empty() {
        return Err(DurationError);
    }
    let num = |x: &str| -> Result<u64, DurationError> {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DurationError);
        }
        // 32-bit components, as Slurm keeps them: no sum below can overflow.
        x.parse::<u32>().map(u64::from).map_err(|_| DurationError)
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => num(m)? * 60,
        (None, [m, s]) => num(m)? * 60 + num(s)?,
        (None, [h, m, s]) => num(h)? * 3600 + num(m)? * 60 + num(s)?,
        (Some(d), [h]) => d * 86400 + num(h)? * 3600,
        (Some(d), [h, m]) => d * 86400 + num(h)? * 3600 + num(m)? * 60,
        (Some(d), [h, m, s]) => d * 86400 + num(h)? * 3600 + num(m)? * 60 + num(s)?,
        _ => return Err(DurationError),
    };
    Ok(Some(secs))
}

/// `squeue`'s TIME and TIME_LIMIT style: `0:04`, `1:02:03`, `1-02:03:04`.
pub fn fmt_short(secs: u64) -> String {
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `scontrol`'s RunTime/TimeLimit style: `00:00:04`, `1-02:03:04`.
pub fn fmt_long(secs: u64) -> String {
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// A limit in `scontrol` style (`UNLIMITED` or `fmt_long`).
pub fn fmt_limit_long(limit: TimeLimit) -> String {
    limit.map(fmt_long).unwrap_or_else(|| "UNLIMITED".into())
}

/// A limit in `squeue` style (`UNLIMITED` or `fmt_short`).
pub fn fmt_limit_short(limit: TimeLimit) -> String {
    limit.map(fmt_short).unwrap_or_else(|| "UNLIMITED".into())
}

/// A limit in `sinfo` style (`infinite` or `fmt_short`).
pub fn fmt_limit_sinfo(limit: TimeLimit) -> String {
    limit.map(fmt_short).unwrap_or_else(|| "infinite".into())
}

fn split(secs: u64) -> (u64, u64, u64, u64) {
    (secs / 86400, (secs % 86400) / 3600, (secs % 3600) / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_slurm_form() {
        assert_eq!(parse_time_limit("30"), Ok(Some(1800)));
        assert_eq!(parse_time_limit("30:00"), Ok(Some(1800)));
        assert_eq!(parse_time_limit("1:02:03"), Ok(Some(3723)));
        assert_eq!(parse_time_limit("1-02"), Ok(Some(93600)));
        assert_eq!(parse_time_limit("1-02:03"), Ok(Some(93780)));
        assert_eq!(parse_time_limit("1-02:03:04"), Ok(Some(93784)));
        assert_eq!(parse_time_limit("UNLIMITED"), Ok(None));
        assert_eq!(parse_time_limit("infinite"), Ok(None));
        assert!(parse_time_limit("abc").is_err());
        assert!(parse_time_limit("1:2:3:4").is_err());
        assert!(parse_time_limit("").is_err());
        // Regression: a huge day count overflowed instead of being refused.
        assert!(parse_time_limit("214000000000000-").is_err());
        assert!(parse_time_limit("99999999999999999999").is_err());
    }

    #[test]
    fn formats_like_squeue_and_scontrol() {
        assert_eq!(fmt_short(4), "0:04");
        assert_eq!(fmt_short(3723), "1:02:03");
        assert_eq!(fmt_short(93784), "1-02:03:04");
        assert_eq!(fmt_long(4), "00:00:04");
        assert_eq!(fmt_long(93784), "1-02:03:04");
        assert_eq!(fmt_limit_sinfo(None), "infinite");
    }

    proptest::proptest! {
        #[test]
        fn long_form_round_trips(secs in 0u64..10_000_000) {
            proptest::prop_assert_eq!(parse_time_limit(&fmt_long(secs)), Ok(Some(secs)));
        }
    }
}

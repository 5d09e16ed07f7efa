//! Memory sizes as Slurm reads them (`--mem=4G`, `RealMemory=4000`): a number with an optional
//! `K`, `M`, `G` or `T` suffix, megabytes when bare. Values are carried in megabytes.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid memory specification: {0}")]
pub struct MemError(pub String);

/// Parses a size into megabytes (rounded up for `K`).
pub fn parse_mb(s: &str) -> Result<u64, MemError> {
    let t = s.trim();
    let err = || MemError(s.to_string());
    // `1GB` as well as `1G`, as Slurm reads them.
    let t = match t.strip_suffix(['B', 'b']) {
        Some(x) if x.ends_with(|c: char| "KkMmGgTt".contains(c)) => x,
        _ => t,
    };
    let (num, mult_kb): (&str, u64) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1),
        Some('M' | 'm') => (&t[..t.len() - 1], 1024),
        Some('G' | 'g') => (&t[..t.len() - 1], 1024 * 1024),
        Some('T' | 't') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1024),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    let n: u64 = num.parse().map_err(|_| err())?;
    let kb = n.checked_mul(mult_kb).ok_or_else(err)?;
    Ok(kb.div_ceil(1024))
}

/// Slurm's compact memory form used in TRES strings: `4000M`, `16G` when a whole number of GiB.
pub fn fmt_tres_mb(mb: u64) -> String {
    if mb >= 1024 * 1024 && mb.is_multiple_of(1024 * 1024) {
        format!("{}T", mb / (1024 * 1024))
    } else if mb >= 1024 && mb.is_multiple_of(1024) {
        format!("{}G", mb / 1024)
    } else {
        format!("{mb}M")
    }
}

/// A TRES list's counts (`cpu=2,mem=4000M,node=1,gres/gpu=1`), names lower-cased, memory
/// in MB as Slurm keeps it; entries that are not counts are left out.
pub fn tres_counts(list: &str) -> Vec<(String, u64)> {
    list.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let k = k.trim().to_ascii_lowercase();
            let n = if k == "mem" { parse_mb(v).ok()? } else { v.trim().parse().ok()? };
            Some((k, n))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_lists_count_memory_in_mb() {
        assert_eq!(
            tres_counts("CPU=2,mem=4G,node=1,gres/gpu=1,bad=x"),
            [("cpu".to_string(), 2), ("mem".into(), 4096), ("node".into(), 1), ("gres/gpu".into(), 1)]
        );
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_mb("4000"), Ok(4000));
        assert_eq!(parse_mb("4G"), Ok(4096));
        assert_eq!(parse_mb("512M"), Ok(512));
        assert_eq!(parse_mb("1T"), Ok(1024 * 1024));
        assert_eq!(parse_mb("1K"), Ok(1));
        assert_eq!(parse_mb("1GB"), Ok(1024));
        assert!(parse_mb("1B").is_err());
        assert!(parse_mb("4X").is_err());
        assert!(parse_mb("").is_err());
    }

    #[test]
    fn formats_tres() {
        assert_eq!(fmt_tres_mb(16000), "16000M");
        assert_eq!(fmt_tres_mb(4096), "4G");
    }
}

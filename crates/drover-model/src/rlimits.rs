//! `PropagateResourceLimits` and `PropagateResourceLimitsExcept`: which of the submitter's
//! resource limits a job's processes get (Slurm's default: all of them). Commands send theirs
//! as `SLURM_RLIMIT_<NAME>`; the node applies those its configuration propagates.

/// The limits Slurm propagates, by the names `slurm.conf` uses (`RLIMIT_` dropped).
pub const NAMES: [&str; 10] = ["AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK"];

/// The keys this module reads, lower-cased.
pub const KEYS: &[&str] = &["propagateresourcelimits", "propagateresourcelimitsexcept"];

/// The limits propagated after `key` (lower-cased) = `v`, from those propagated before.
pub fn set(current: &[String], key: &str, v: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for n in v.split(',').map(|n| n.trim().to_ascii_uppercase()).filter(|n| !n.is_empty()) {
        match n.as_str() {
            "ALL" => names.extend(NAMES.iter().map(|s| s.to_string())),
            "NONE" => {}
            n if NAMES.contains(&n) => names.push(n.to_string()),
            _ => return Err(format!("expected ALL, NONE or some of {}, found `{n}`", NAMES.join(", "))),
        }
    }
    Ok(if key == "propagateresourcelimitsexcept" {
        let _ = current;
        NAMES.iter().map(|s| s.to_string()).filter(|n| !names.contains(n)).collect()
    } else {
        names
    })
}

/// Every limit (the default).
pub fn all() -> Vec<String> {
    NAMES.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_all_none_and_except() {
        assert_eq!(set(&all(), "propagateresourcelimits", "NONE").unwrap(), Vec::<String>::new());
        assert_eq!(set(&[], "propagateresourcelimits", "nofile, core").unwrap(), ["NOFILE", "CORE"]);
        assert_eq!(set(&[], "propagateresourcelimits", "ALL").unwrap().len(), 10);
        let except = set(&all(), "propagateresourcelimitsexcept", "MEMLOCK,STACK").unwrap();
        assert_eq!(except.len(), 8);
        assert!(!except.contains(&"MEMLOCK".to_string()));
        assert!(set(&[], "propagateresourcelimits", "FILES").unwrap_err().contains("NOFILE"));
    }
}

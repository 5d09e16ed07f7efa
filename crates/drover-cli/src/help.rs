//! `--help` and `--usage` of every command: Slurm 22.05.8's own texts, captured from Debian's
//! `slurm-client` (`testdata/compat/slurm-22.05/help/` keeps the captures the golden test
//! compares with), since tools and Slurm's test suite read them. Where Slurm prints the same
//! for both (scontrol, sacctmgr, sreport, sshare), one text serves both.

/// The text `prog --help` (or `--usage`) prints.
pub fn text(prog: &str, usage: bool) -> Option<&'static str> {
    let (help, short): (&str, Option<&str>) = match prog {
        "sbatch" => (include_str!("../help/sbatch.help"), Some(include_str!("../help/sbatch.usage"))),
        "srun" => (include_str!("../help/srun.help"), Some(include_str!("../help/srun.usage"))),
        "salloc" => (include_str!("../help/salloc.help"), Some(include_str!("../help/salloc.usage"))),
        "squeue" => (include_str!("../help/squeue.help"), Some(include_str!("../help/squeue.usage"))),
        "sinfo" => (include_str!("../help/sinfo.help"), Some(include_str!("../help/sinfo.usage"))),
        "scancel" => (include_str!("../help/scancel.help"), Some(include_str!("../help/scancel.usage"))),
        "sstat" => (include_str!("../help/sstat.help"), Some(include_str!("../help/sstat.usage"))),
        "sattach" => (include_str!("../help/sattach.help"), Some(include_str!("../help/sattach.usage"))),
        "sacct" => (include_str!("../help/sacct.help"), Some(include_str!("../help/sacct.usage"))),
        "sprio" => (include_str!("../help/sprio.help"), Some(include_str!("../help/sprio.usage"))),
        "sdiag" => (include_str!("../help/sdiag.help"), Some(include_str!("../help/sdiag.usage"))),
        "scontrol" => (include_str!("../help/scontrol.help"), None),
        "sacctmgr" => (include_str!("../help/sacctmgr.help"), None),
        "sreport" => (include_str!("../help/sreport.help"), None),
        "sshare" => (include_str!("../help/sshare.help"), None),
        _ => return None,
    };
    Some(if usage { short.unwrap_or(help) } else { help })
}

/// Prints `prog`'s help (or usage) as Slurm does, to stdout; exit status 0.
pub fn print(prog: &str, usage: bool) -> i32 {
    if let Some(t) = text(prog, usage) {
        crate::common::write_stdout(t.as_bytes());
    }
    0
}

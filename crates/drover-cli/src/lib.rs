//! The Slurm-compatible commands. Each module is one command: raw arguments (clap) are turned
//! into a validated request, sent to the controller over its local Unix socket, and the reply
//! printed in Slurm's exact format.
//!
//! ```text
//!  argv ──clap──► JobArgs/Args ──validate──► JobSpec / request ──gRPC──► controller
//!  reply ──format (%-codes, scontrol key=value, --json)──► stdout/stderr, exit code
//! ```
// squeue --json builds one large json! literal per job.
#![recursion_limit = "256"]

pub mod bench;
pub mod common;
pub mod explain;
pub mod forecast;
pub mod format;
pub mod help;
pub mod jobopts;
pub mod jobview;
pub mod json;
pub mod resv;
pub mod sacct;
pub mod sacctmgr;
pub mod salloc;
pub mod sattach;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod scrontab;
pub mod sdiag;
pub mod sinfo;
pub mod sprio;
pub mod squeue;
pub mod sreport;
pub mod srun;
pub mod sshare;
pub mod sstat;
pub mod stepio;
pub mod steps;
pub mod up;

/// A command's entry point: its arguments (without argv[0]) to its exit status.
pub type CommandMain = fn(Vec<String>) -> i32;

/// The commands this crate implements, by the name they are invoked under: one table for
/// dispatch and for the links `drover up` makes, so no command can be missing from either.
pub const COMMANDS: &[(&str, CommandMain)] = &[
    ("sbatch", sbatch::main),
    ("srun", srun::main),
    ("salloc", salloc::main),
    ("squeue", squeue::main),
    ("sinfo", sinfo::main),
    ("scancel", scancel::main),
    ("scontrol", scontrol::main),
    ("sstat", sstat::main),
    ("sattach", sattach::main),
    ("sacct", sacct::main),
    ("sacctmgr", sacctmgr::main),
    ("sreport", sreport::main),
    ("sshare", sshare::main),
    ("sprio", sprio::main),
    ("sdiag", sdiag::main),
    ("scrontab", scrontab::main),
];

/// Runs command `prog` with its arguments (without argv[0]); returns the exit status.
pub fn run(prog: &str, args: Vec<String>) -> Option<i32> {
    COMMANDS.iter().find(|(name, _)| *name == prog).map(|(_, main)| main(args))
}

/// Entry points for the fuzz targets (`fuzz/`): parsers of what users type that are
/// otherwise private to their command.
#[doc(hidden)]
pub mod fuzzing {
    /// `sacct --format` / `-o` (`JobID,State%20,...`).
    pub fn sacct_format(s: &str) {
        let _ = crate::sacct::columns(s);
    }
    /// `squeue -O` / `--Format` and `-S` sort keys.
    pub fn squeue_format(s: &str) {
        let _ = crate::squeue::parse_long_format(s);
        let _ = crate::squeue::parse_sort(s);
    }
}

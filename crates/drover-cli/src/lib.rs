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
pub mod format;
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

/// The commands this crate implements, by the name they are invoked under.
pub const COMMANDS: &[&str] = &[
    "sbatch", "srun", "salloc", "squeue", "sinfo", "scancel", "scontrol", "sstat", "sattach", "sacct", "sacctmgr",
    "sreport",
];

/// Runs command `prog` with its arguments (without argv[0]); returns the exit status.
pub fn run(prog: &str, args: Vec<String>) -> Option<i32> {
    Some(match prog {
        "sbatch" => sbatch::main(args),
        "srun" => srun::main(args),
        "salloc" => salloc::main(args),
        "squeue" => squeue::main(args),
        "sinfo" => sinfo::main(args),
        "scancel" => scancel::main(args),
        "scontrol" => scontrol::main(args),
        "sstat" => sstat::main(args),
        "sattach" => sattach::main(args),
        "sacct" => sacct::main(args),
        "sacctmgr" => sacctmgr::main(args),
        "sreport" => sreport::main(args),
        "sshare" => sshare::main(args),
        "sprio" => sprio::main(args),
        _ => return None,
    })
}

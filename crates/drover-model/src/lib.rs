//! Drover's vocabulary, shared by every other crate.
//!
//! ```text
//! slurm.conf ──► conf::parse ──► Config { nodes, partitions, limits }
//! user input ──► hostlist / duration / memory parsers ──► typed values ──► job::JobSpec
//! ```
//!
//! Nothing here performs I/O except [`conf::parse_file`], which reads the file it is handed (and
//! its `Include`s). Times are plain Unix seconds handed in by the caller; no clock is read.

pub mod alloc;
pub mod array;
pub mod auth_conf;
pub mod bytes;
pub mod cgroup_conf;
pub mod conf;
pub mod cpubind;
pub mod cron;
pub mod dbd_conf;
pub mod duration;
pub mod gres;
pub mod hostlist;
pub mod job;
pub mod memsize;
pub mod multiprog;
pub mod priority_conf;
pub mod resv;
pub mod rlimits;
pub mod showconfig;
pub mod signal;
pub mod state;
pub mod step;
pub mod topology;

/// The Slurm release whose commands and formats Drover follows.
pub const SLURM_COMPAT_VERSION: &str = "22.05.8";
/// Slurm 22.05's protocol version (`SLURM_22_05_PROTOCOL_VERSION`, 38 << 8), which slurmdbd
/// shows as a cluster's RPC.
pub const SLURM_PROTOCOL_VERSION: u32 = 38 << 8;

//! The scheduler core. Pure and deterministic: it is told what happens ([`Event`]) and asked
//! what to do now ([`Core::schedule`]); it never reads a clock, touches a file or a socket.
//!
//! ```text
//!   controller ──Event──► Core::handle ──► (nodes, queue, allocations)
//!   controller ──now────► Core::schedule ──► Vec<Decision> ──► controller journals + launches
//! ```
//!
//! First version (the foundation issue): jobs are taken in priority order (submit order for
//! now; [`SchedJob::priority`] is the seam for the multifactor priority), consumable cores and
//! memory per node (like `select/cons_tres` with `CR_Core_Memory`: a job that asks for no
//! memory consumes none, as with `CR_Core`), whole nodes for `--exclusive`, and atomic
//! allocation: a job starts only when every node, core and byte it needs is free at once, and a
//! pending job holds nothing. Once a job in a partition waits for resources, later jobs of that
//! partition wait behind it with reason `Priority` (no backfill yet).

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod core;
pub mod explain;
pub mod fairshare;
pub mod gres;
pub mod limits;
pub mod plan;
pub mod predict;
pub mod priority;
pub mod step;

pub use crate::core::{
    AdvanceResv, Core, Decision, Event, Hold, NodeRes, Outcome, PartitionRes, PassStats, Preempt, SchedArray, SchedJob,
    SchedMore, SubmitCheck,
};
pub use crate::plan::{BackfillOrder, Policy, SchedConfig};
pub use drover_model::alloc::{Allocation, NodeAlloc};

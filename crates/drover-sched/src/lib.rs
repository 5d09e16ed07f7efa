//! The scheduler core. Pure and deterministic: it is told what happens ([`Event`]) and asked
//! what to do now ([`Core::schedule`]); it never reads a clock, touches a file or a socket.
//!
//! ```text
//!   controller ──Event──► Core::handle ──► (nodes, queue, allocations)
//!   controller ──now────► Core::schedule ──► Vec<Decision> ──► controller journals + launches
//! ```
//!
//! Jobs are taken in priority order ([`SchedJob::priority`], which the controller computes),
//! on consumable cores, memory and GRES per node (like `select/cons_tres` with
//! `CR_Core_Memory`), whole nodes for `--exclusive`, and atomic allocation: a job starts only
//! when everything it needs is free at once, and a pending job holds nothing. Backfill
//! ([`plan`]) plans on a timeline of when nodes free up: Drover's default policy on run times
//! predicted from each user's recent jobs ([`predict`], fed by [`Event::Ran`]), Slurm's on time
//! limits ([`SchedConfig::slurm`]). `explain` lists every reason a job waits; `fairshare`,
//! `priority` and `limits` are the pure parts of the multifactor priority and accounting limits.
//!
//! ```text
//!   Event::Ran ──► predict::History ──► plan lengths ──► Timeline (plan.rs) ──► reservations,
//!                                                         backfill, forecasts ──► Decision
//! ```

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod conf;
mod core;
pub mod explain;
pub mod fairshare;
pub mod gres;
pub mod limits;
pub mod plan;
pub mod predict;
pub mod priority;
pub mod request;
pub mod step;

pub use crate::core::{
    AdvanceResv, Core, Decision, Event, Expected, Forecast, Hold, NodeRes, Outcome, PartitionRes, PassStats, Preempt,
    SchedArray, SchedJob, SchedMore, SubmitCheck,
};
pub use crate::plan::{BackfillOrder, Policy, SchedConfig};
pub use drover_model::alloc::{Allocation, NodeAlloc};

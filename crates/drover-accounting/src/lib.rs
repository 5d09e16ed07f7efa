//! The Drover accounting service (the `slurmdbd` analogue): stores the job and step records
//! the controller sends, in SQL (SQLite, PostgreSQL or MariaDB through sqlx), and answers
//! `sacct`.
//!
//! ```text
//!  controller outbox ──Accounting.Record──► Store (upsert, one transaction per batch)
//!  sacct ───────────────Accounting.Jobs───► Store (indexed query) ──► rows in batches
//! ```

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod store;

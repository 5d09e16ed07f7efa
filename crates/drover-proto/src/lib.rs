//! The wire. Generated gRPC code (`cargo xtask codegen`, committed under `src/gen/`), the
//! transports (Unix socket for local commands with the caller's identity from `SO_PEERCRED`;
//! TCP on loopback or the cluster network for node agents), and the one place where wire types
//! and model types are converted.
//!
//! ```text
//!  CLI ──unix socket (peer uid/gid)──► Controller service
//!  drover node ──TCP──► NodeLink.Session (bidirectional stream)
//! ```

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("gen/drover.v1.rs");
}

mod convert;
pub mod io;
mod transport;

pub use bytes;
pub use convert::*;
pub use transport::*;

/// Decodes one encoded job into `j`, reusing the capacity of its strings: a reader walking a
/// large queue one record at a time then allocates almost nothing per job.
pub fn decode_job_into(j: &mut v1::JobInfo, record: &[u8]) -> Result<(), prost::DecodeError> {
    use prost::Message;
    let mut spec = j.spec.take().unwrap_or_default();
    spec.clear();
    j.clear();
    j.spec = Some(spec);
    j.merge(record)
}

/// Every job of a state reply: those sent as messages and those sent pre-encoded.
pub fn reply_jobs(r: &mut v1::StateReply) -> Vec<v1::JobInfo> {
    use prost::Message;
    let mut jobs = std::mem::take(&mut r.jobs);
    jobs.reserve(r.job_records.len());
    for b in r.job_records.drain(..) {
        if let Ok(j) = v1::JobInfo::decode(b) {
            jobs.push(j);
        }
    }
    jobs
}

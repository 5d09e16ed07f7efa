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

pub mod acct;
pub mod auth;
mod convert;
pub mod io;
pub mod jobinfo;
pub mod rlimit;
mod transport;

pub use bytes;
pub use convert::*;
pub use prost;
pub use transport::*;

/// Decodes one encoded job into `j`, reusing the capacity of its strings: a reader walking a
/// large queue one record at a time then allocates almost nothing per job.
pub fn decode_job_into(j: &mut v1::JobInfo, record: &[u8]) -> Result<(), prost::DecodeError> {
    decode_job_partial(j, record, &[])
}

/// As [`decode_job_into`], leaving out the request's fields whose tags are in `skip_spec`
/// (a reader that prints none of them need not copy and check them: a job list's records are
/// mostly request text such as paths and submit lines).
pub fn decode_job_partial(j: &mut v1::JobInfo, record: &[u8], skip_spec: &[u32]) -> Result<(), prost::DecodeError> {
    use prost::bytes::Buf;
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    use prost::Message;
    let mut spec = j.spec.take().unwrap_or_default();
    spec.clear();
    j.clear();
    let mut buf = record;
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(&mut buf)?;
        if tag != 2 || wire_type != WireType::LengthDelimited {
            j.merge_field(tag, wire_type, &mut buf, DecodeContext::default())?;
            continue;
        }
        let len = usize::try_from(decode_varint(&mut buf)?).unwrap_or(usize::MAX);
        if len > buf.remaining() {
            // Truncated: let the full decoder report it.
            return v1::JobInfo::decode(record).map(|full| *j = full);
        }
        let mut sub = &buf[..len];
        while sub.has_remaining() {
            let (t, w) = decode_key(&mut sub)?;
            if skip_spec.contains(&t) {
                skip_field(w, t, &mut sub, DecodeContext::default())?;
            } else {
                spec.merge_field(t, w, &mut sub, DecodeContext::default())?;
            }
        }
        buf.advance(len);
    }
    j.spec = Some(spec);
    Ok(())
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

//! Readers of records as older state versions wrote them, frozen: nothing here may change
//! when today's types do. Versions 1 to 3 wrote a job's request (`Record::Submit`,
//! `Record::Update`) field by field with postcard, so every field added to `JobSpec` changed
//! the record's shape; version 4 writes it as its protobuf message, where a new field is
//! read as absent by older messages and skipped by older readers.
//!
//! A version-3 record is told from a later one by its first byte (its variant's index, 0 to
//! 12; later records start with [`super::RECORD_TAG`]), so a job's script read back from a
//! journal file of any version decodes without knowing which version wrote the file.

use super::{JobStatus, Record};
use drover_model::duration::TimeLimit;
use drover_model::gres::GresReq;
use drover_model::job::{Dependencies, JobId, JobSpec};
use serde::Deserialize;

/// The variants of version 3 whose shape differs from today's: the two that carry a
/// request. Their indices are those of `Record`'s first two variants, which is why those
/// stay first. Every other variant of version 3 is read as today's `Record` (the same shape):
/// a change to one of them must freeze its old shape here as well.
#[derive(Deserialize)]
enum RecordV3 {
    Submit { id: JobId, spec: JobSpecV3, status: JobStatus },
    Update { id: JobId, spec: JobSpecV3, status: JobStatus },
}

/// The variants of version 3 (the index of its last, `ArrayDrop`, is 12).
pub(super) const V3_VARIANTS: u8 = 13;

/// Reads a record of version 1 to 3 (its first byte below [`V3_VARIANTS`]).
pub(super) fn decode_v3(b: &[u8]) -> Result<Record, postcard::Error> {
    match b.first() {
        Some(0 | 1) => Ok(match postcard::from_bytes::<RecordV3>(b)? {
            RecordV3::Submit { id, spec, status } => Record::Submit { id, spec: spec.into(), status },
            RecordV3::Update { id, spec, status } => Record::Update { id, spec: spec.into(), status },
        }),
        _ => super::decode_current(b),
    }
}

/// `JobSpec` as version 3 stored it. (`tmp_mb` was added to version 2 without a version of
/// its own: requests journalled by builds before it cannot be read, by this reader or by the
/// builds that came with it.)
#[derive(Deserialize)]
struct JobSpecV3 {
    name: String,
    uid: u32,
    gid: u32,
    user: String,
    group: String,
    partitions: Vec<String>,
    min_nodes: Option<u32>,
    max_nodes: Option<u32>,
    ntasks: Option<u32>,
    ntasks_per_node: Option<u32>,
    cpus_per_task: Option<u32>,
    mem_per_node_mb: Option<u64>,
    mem_per_cpu_mb: Option<u64>,
    time_limit: Option<TimeLimit>,
    nodelist: Vec<String>,
    exclude: Vec<String>,
    constraint: Option<String>,
    exclusive: bool,
    hold: bool,
    begin_time: Option<i64>,
    dependency: Dependencies,
    script: String,
    argv: Vec<String>,
    work_dir: String,
    stdout: Option<String>,
    stderr: Option<String>,
    stdin: Option<String>,
    environment: Vec<(String, String)>,
    comment: Option<String>,
    mail_type: Option<String>,
    mail_user: Option<String>,
    signal: Option<String>,
    requeue: Option<bool>,
    open_mode_append: bool,
    submit_host: String,
    submit_line: String,
    batch: bool,
    immediate: Option<u32>,
    io_addr: Option<String>,
    array: Option<String>,
    gres: Vec<GresReq>,
    gpus_per_node: Option<GresReq>,
    gpus: Option<GresReq>,
    gpus_per_task: Option<GresReq>,
    cpus_per_gpu: Option<u32>,
    mem_per_gpu_mb: Option<u64>,
    ntasks_per_gpu: Option<u32>,
    licenses: Option<String>,
    gpus_per_socket: Option<GresReq>,
    sockets_per_node: Option<u32>,
    account: Option<String>,
    qos: Option<String>,
    nice: i32,
    priority: Option<u32>,
    reservation: Option<String>,
    switches: Option<u32>,
    switch_wait: Option<u32>,
    contiguous: bool,
    spread_job: bool,
    use_min_nodes: bool,
    exclusive_user: bool,
    segment: Option<u32>,
    overcommit: bool,
    tmp_mb: Option<u64>,
}

impl From<JobSpecV3> for JobSpec {
    // Fields added to the request since version 3 take their defaults.
    fn from(v: JobSpecV3) -> JobSpec {
        JobSpec {
            name: v.name,
            uid: v.uid,
            gid: v.gid,
            user: v.user,
            group: v.group,
            partitions: v.partitions,
            min_nodes: v.min_nodes,
            max_nodes: v.max_nodes,
            ntasks: v.ntasks,
            ntasks_per_node: v.ntasks_per_node,
            cpus_per_task: v.cpus_per_task,
            mem_per_node_mb: v.mem_per_node_mb,
            mem_per_cpu_mb: v.mem_per_cpu_mb,
            time_limit: v.time_limit,
            nodelist: v.nodelist,
            exclude: v.exclude,
            constraint: v.constraint,
            exclusive: v.exclusive,
            hold: v.hold,
            begin_time: v.begin_time,
            dependency: v.dependency,
            script: v.script,
            argv: v.argv,
            work_dir: v.work_dir,
            stdout: v.stdout,
            stderr: v.stderr,
            stdin: v.stdin,
            environment: v.environment,
            comment: v.comment,
            mail_type: v.mail_type,
            mail_user: v.mail_user,
            signal: v.signal,
            requeue: v.requeue,
            open_mode_append: v.open_mode_append,
            submit_host: v.submit_host,
            submit_line: v.submit_line,
            batch: v.batch,
            immediate: v.immediate,
            io_addr: v.io_addr,
            array: v.array,
            gres: v.gres,
            gpus_per_node: v.gpus_per_node,
            gpus: v.gpus,
            gpus_per_task: v.gpus_per_task,
            cpus_per_gpu: v.cpus_per_gpu,
            mem_per_gpu_mb: v.mem_per_gpu_mb,
            ntasks_per_gpu: v.ntasks_per_gpu,
            licenses: v.licenses,
            gpus_per_socket: v.gpus_per_socket,
            sockets_per_node: v.sockets_per_node,
            account: v.account,
            qos: v.qos,
            nice: v.nice,
            priority: v.priority,
            reservation: v.reservation,
            switches: v.switches,
            switch_wait: v.switch_wait,
            contiguous: v.contiguous,
            spread_job: v.spread_job,
            use_min_nodes: v.use_min_nodes,
            exclusive_user: v.exclusive_user,
            segment: v.segment,
            overcommit: v.overcommit,
            tmp_mb: v.tmp_mb,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::HoldKind;

    /// An `Update` record as the version-3 build (cb39e54) wrote it, with every field of the
    /// request set: read back whole by this version.
    #[test]
    fn a_version_3_record_with_every_field_reads_back() {
        let hex = concat!(
            "012a05747261696ee807e90705616c696365036c616202036770750363707501020104010801040102018008000101901c",
            "01026e3101026e3901036126620101012200020204010100000500031223212f62696e2f73680a6563686f2068690a0206",
            "6a6f622e73680178022f7701066f75742d256a01036572720102696e020141013101420374776f0101630103454e440103",
            "614062010755535231403630010001056c6f67696e0d736261746368206a6f622e73680101050109312e322e332e343a35",
            "0105312d332532010367707501046131303002000103677075000400010301f4030001086d61746c61623a320001020104",
            "61636374010468696768050109010272310101013c01010101010201016400000204000003677075000000000003000100",
            "000000000000000000",
        );
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let spec = JobSpec {
            name: "train".into(),
            uid: 1000,
            gid: 1001,
            user: "alice".into(),
            group: "lab".into(),
            partitions: vec!["gpu".into(), "cpu".into()],
            min_nodes: Some(2),
            max_nodes: Some(4),
            ntasks: Some(8),
            ntasks_per_node: Some(4),
            cpus_per_task: Some(2),
            mem_per_node_mb: Some(1024),
            time_limit: Some(Some(3600)),
            nodelist: vec!["n1".into()],
            exclude: vec!["n9".into()],
            constraint: Some("a&b".into()),
            exclusive: true,
            hold: true,
            begin_time: Some(17),
            dependency: drover_model::job::parse_dependency("afterok:4_1,after:5+3").unwrap(),
            script: "#!/bin/sh\necho hi\n".into(),
            argv: vec!["job.sh".into(), "x".into()],
            work_dir: "/w".into(),
            stdout: Some("out-%j".into()),
            stderr: Some("err".into()),
            stdin: Some("in".into()),
            environment: vec![("A".into(), "1".into()), ("B".into(), "two".into())],
            comment: Some("c".into()),
            mail_type: Some("END".into()),
            mail_user: Some("a@b".into()),
            signal: Some("USR1@60".into()),
            requeue: Some(false),
            open_mode_append: true,
            submit_host: "login".into(),
            submit_line: "sbatch job.sh".into(),
            batch: true,
            immediate: Some(5),
            io_addr: Some("1.2.3.4:5".into()),
            array: Some("1-3%2".into()),
            gres: drover_model::gres::parse_gres_request("gpu:a100:2").unwrap(),
            gpus: Some(GresReq { name: "gpu".into(), kind: None, count: 4 }),
            cpus_per_gpu: Some(3),
            mem_per_gpu_mb: Some(500),
            licenses: Some("matlab:2".into()),
            sockets_per_node: Some(2),
            account: Some("acct".into()),
            qos: Some("high".into()),
            nice: -3,
            priority: Some(9),
            reservation: Some("r1".into()),
            switches: Some(1),
            switch_wait: Some(60),
            contiguous: true,
            spread_job: true,
            use_min_nodes: true,
            exclusive_user: true,
            segment: Some(2),
            overcommit: true,
            tmp_mb: Some(100),
            ..Default::default()
        };
        let want = Record::Update { id: 42, spec, status: JobStatus::pending(1, 2, "gpu", 3, Some(HoldKind::User)) };
        let got = crate::state::decode_record(&bytes).unwrap();
        assert_eq!(got, want);
        // Written again, it is of this version, and reads back the same.
        let again = crate::state::encode_record(&got);
        assert_eq!(again[0], crate::state::RECORD_TAG);
        assert_eq!(crate::state::decode_record(&again).unwrap(), want);
    }
}

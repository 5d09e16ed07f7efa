//! The published, immutable view readers are served from, and its conversion to the wire.
//! Conversion runs in the reader's task, never on the state owner.

use crate::state::{HoldKind, Job, Step};
use drover_model::conf::{Config, NodeConf};
use drover_model::hostlist::Hostlist;
use drover_model::state::{JobState, NodeState, PendingReason};
use drover_proto::v1;
use std::sync::Arc;

pub struct NodeLiveView {
    pub conf: NodeConf,
    pub state: NodeState,
    pub alloc_cpus: u32,
    pub alloc_mem_mb: u64,
    pub reason: String,
    pub reason_uid: u32,
    pub reason_time: i64,
    pub boot_time: i64,
    pub start_time: i64,
    pub last_busy: i64,
    pub cpu_load: f64,
    pub free_mem_mb: u64,
    pub version: String,
    pub os: String,
    pub arch: String,
    pub confinement: String,
    pub gres_used: String,
}

pub struct View {
    pub written: i64,
    pub cfg: Arc<Config>,
    pub jobs: crate::jobtable::JobList,
    pub nodes: Vec<NodeLiveView>,
    /// Cluster licenses: (name, total, in use).
    pub licenses: Vec<(String, u32, u32)>,
    /// Running jobs whose PrologSlurmctld runs (shown `CONFIGURING`).
    pub configuring: std::collections::HashSet<drover_model::job::JobId>,
    /// Fairshare of the associations (sshare), from the last calculation.
    pub shares: Arc<Vec<v1::ShareRow>>,
    /// Waiting jobs' weighted priority factors (sprio), as last computed.
    pub prio: crate::fairshare::PrioTable,
    /// Advance reservations, as `scontrol show reservation` shows them.
    pub reservations: Arc<Vec<v1::ResvInfo>>,
    /// When the controller started, and the id the next job gets (scontrol show config).
    pub boot_time: i64,
    pub next_job_id: u32,
}

impl Default for View {
    fn default() -> Self {
        View {
            written: 0,
            cfg: Arc::new(Config::default()),
            jobs: Default::default(),
            nodes: Vec::new(),
            licenses: Vec::new(),
            configuring: Default::default(),
            shares: Default::default(),
            prio: Default::default(),
            reservations: Default::default(),
            boot_time: 0,
            next_job_id: 0,
        }
    }
}

/// A job on the wire, its request decoded (with the script and environment where `j` holds
/// them, as the launch copy does).
pub fn job_info(j: &Job) -> v1::JobInfo {
    v1::JobInfo { spec: Some(j.spec.wire()), ..status_info(j) }
}

/// Everything of a job's record but its request.
fn status_info(j: &Job) -> v1::JobInfo {
    let st = &j.status;
    // A job that ended without ever starting (cancelled while it waited) keeps what it
    // waited for, as Slurm's record does.
    let waited = st.state == JobState::Pending || (st.state.is_finished() && st.alloc.is_none());
    let reason = match st.hold {
        Some(HoldKind::User) if waited => PendingReason::JobHeldUser,
        Some(HoldKind::Admin) if waited => PendingReason::JobHeldAdmin,
        Some(HoldKind::LaunchFailed) if waited => PendingReason::LaunchFailedRequeuedHeld,
        Some(HoldKind::ResvDeleted) if waited => PendingReason::ReservationDeleted,
        _ => st.reason,
    };
    let nodes = st.alloc.as_ref().map(|a| Hostlist::from_iter(a.node_names()).ranged()).unwrap_or_default();
    v1::JobInfo {
        job_id: j.id,
        spec: None,
        state: st.state.name().to_string(),
        reason: reason.name().to_string(),
        submit_time: st.submit_time,
        eligible_time: st.eligible_time,
        start_time: st.start_time,
        end_time: st.end_time,
        partition: st.partition.to_string(),
        alloc: st.alloc.as_deref().map(drover_proto::alloc_to_wire).unwrap_or_default(),
        time_limit_secs: if st.state == JobState::Pending { j.req_limit.flatten() } else { st.time_limit },
        exit_status: st.exit_status,
        batch_host: st.batch_host().to_string(),
        restarts: st.restarts,
        cancelled_by: st.cancelled_by,
        priority: if st.hold.is_some() && waited { 0 } else { st.priority },
        held_admin: matches!(st.hold, Some(HoldKind::Admin | HoldKind::LaunchFailed)),
        state_desc: st.state_desc.clone(),
        last_sched_eval: st.last_sched_eval,
        suspend_time: st.suspend_time,
        pre_suspend_secs: st.pre_suspend_secs,
        suspended_secs: st.suspended_secs,
        nodes,
        planned_start: st.planned.as_ref().map_or(0, |p| p.0),
        sched_nodes: st.planned.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
        steps: j.running_steps().iter().map(|s| step_info(j, s)).collect(),
        ..array_info(j)
    }
}

/// A step on the wire, `RUNNING` (its final state is sent when it ends).
pub fn step_info(j: &Job, s: &Step) -> v1::StepInfo {
    v1::StepInfo {
        job_id: j.id,
        step_id: s.id,
        name: s.name.clone(),
        state: "RUNNING".into(),
        start_time: s.start_time,
        time_limit_secs: s.time_limit.or(j.status.time_limit),
        nodes: drover_proto::step_nodes_to_wire(&s.layout),
        distribution: s.layout.distribution.spec(),
        overlap: s.layout.overlap,
        srun_host: s.srun_host.clone(),
        srun_pid: s.srun_pid,
        exit_status: s.exit_status,
        end_time: 0,
        cancelled: s.cancelled,
        message: String::new(),
    }
}

/// The array fields of a job's record (all zero for a job that is not an array's).
fn array_info(j: &Job) -> v1::JobInfo {
    let Some(a) = j.array.as_deref() else { return v1::JobInfo::default() };
    v1::JobInfo {
        array_job_id: a.array_job_id,
        array_task_id: a.task_id,
        array_pending: if a.task_id.is_none() { a.pending.canonical() } else { String::new() },
        array_max_tasks: a.throttle,
        array_task_count: a.count,
        array_task_min: a.min,
        array_task_max: a.max,
        array_task_step: a.step,
        ..Default::default()
    }
}

/// Appends a job's encoded `JobInfo`: its status fields, then its stored request verbatim
/// as field 2 (protobuf readers take fields in any order).
pub fn encode_record(j: &Job, configuring: bool, out: &mut drover_proto::bytes::BytesMut) {
    use prost::encoding::{encode_key, encode_varint, WireType};
    use prost::Message;
    let mut info = status_info(j);
    if configuring {
        info.state = JobState::Configuring.name().to_string();
    }
    info.encode_raw(out);
    let spec = j.spec.bytes();
    encode_key(2, WireType::LengthDelimited, out);
    encode_varint(spec.len() as u64, out);
    out.extend_from_slice(spec);
}

/// The encoded records of the jobs a request selects among `chunks` (of `view.jobs`).
pub fn job_records(view: &View, req: &v1::StateRequest, chunks: &[Arc<[Arc<Job>]>]) -> Vec<drover_proto::bytes::Bytes> {
    let wanted = |j: &Job| {
        if req.job_ids.is_empty() {
            !req.active_only || !j.status.state.is_finished()
        } else {
            req.job_ids.contains(&j.id) || j.array.as_ref().is_some_and(|a| req.job_ids.contains(&a.array_job_id))
        }
    };
    let n: usize = chunks.iter().map(|c| c.len()).sum();
    let mut buf = drover_proto::bytes::BytesMut::with_capacity(n * 192);
    chunks
        .iter()
        .flat_map(|c| c.iter())
        .filter(|j| wanted(j))
        .map(|j| {
            encode_record(j, !view.configuring.is_empty() && view.configuring.contains(&j.id), &mut buf);
            buf.split().freeze()
        })
        .collect()
}

/// Jobs per message of a `ListJobs` stream.
pub const LIST_BATCH: usize = 2048;

/// The replies of a `ListJobs` stream, built one batch at a time as the stream is polled.
pub fn job_batches(
    view: std::sync::Arc<View>,
    req: v1::StateRequest,
    now: i64,
) -> impl Iterator<Item = v1::StateReply> + Send {
    view.jobs.parts(LIST_BATCH).into_iter().map(move |p| v1::StateReply {
        now,
        cluster_name: view.cfg.cluster_name.clone(),
        last_update: view.written,
        job_records: job_records(&view, &req, &view.jobs.chunks()[p]),
        ..Default::default()
    })
}

pub fn state_reply(view: &View, req: &v1::StateRequest, now: i64) -> v1::StateReply {
    let everything =
        !req.jobs && !req.nodes && !req.partitions && !req.config && !req.shares && !req.prio && !req.reservations;
    let mut reply = v1::StateReply {
        now,
        cluster_name: view.cfg.cluster_name.clone(),
        last_update: view.written,
        ..Default::default()
    };
    if everything || req.jobs {
        reply.job_records = job_records(view, req, view.jobs.chunks());
    }
    if everything || req.config {
        reply.licenses = view
            .licenses
            .iter()
            .map(|(name, total, used)| v1::LicenseInfo { name: name.clone(), total: *total, used: *used })
            .collect();
    }
    if everything || req.nodes || req.partitions {
        reply.nodes = view
            .nodes
            .iter()
            .map(|n| {
                let c = &n.conf;
                v1::NodeInfo {
                    name: c.name.clone(),
                    addr: c.addr.clone(),
                    hostname: c.hostname.clone(),
                    port: u32::from(c.port),
                    cpus: c.cpus,
                    boards: c.boards,
                    sockets: c.sockets,
                    cores_per_socket: c.cores_per_socket,
                    threads_per_core: c.threads_per_core,
                    real_memory_mb: c.real_memory_mb,
                    tmp_disk_mb: c.tmp_disk_mb,
                    features: c.features.clone(),
                    gres: c.gres.clone(),
                    weight: c.weight,
                    state_short: n.state.short(),
                    state_long: n.state.long(),
                    state_scontrol: n.state.scontrol(),
                    alloc_cpus: n.alloc_cpus,
                    alloc_mem_mb: n.alloc_mem_mb,
                    reason: n.reason.clone(),
                    reason_time: n.reason_time,
                    reason_uid: n.reason_uid,
                    partitions: view
                        .cfg
                        .partitions
                        .iter()
                        .filter(|p| p.nodes.contains(&c.name))
                        .map(|p| p.name.clone())
                        .collect(),
                    boot_time: n.boot_time,
                    slurmd_start_time: n.start_time,
                    last_busy_time: n.last_busy,
                    version: n.version.clone(),
                    os: n.os.clone(),
                    arch: n.arch.clone(),
                    free_mem_mb: n.free_mem_mb,
                    cpu_load: n.cpu_load,
                    confinement: n.confinement.clone(),
                    gres_used: n.gres_used.clone(),
                }
            })
            .collect();
    }
    if everything || req.partitions {
        reply.partitions = view
            .cfg
            .partitions
            .iter()
            .map(|p| {
                let nodes: Vec<&NodeConf> = view.cfg.nodes.iter().filter(|n| p.nodes.contains(&n.name)).collect();
                v1::PartitionInfo {
                    name: p.name.clone(),
                    nodes: p.nodes_expr.clone(),
                    node_names: p.nodes.clone(),
                    default: p.default,
                    max_time_secs: p.max_time,
                    default_time_set: p.default_time.is_some(),
                    default_time_secs: p.default_time.flatten(),
                    max_nodes: p.max_nodes,
                    min_nodes: p.min_nodes,
                    state: p.state.name().to_string(),
                    hidden: p.hidden,
                    allow_groups: p.allow_groups.as_ref().map(|g| g.join(",")).unwrap_or_else(|| "ALL".into()),
                    priority_tier: p.priority_tier,
                    total_cpus: nodes.iter().map(|n| n.cpus).sum(),
                    total_mem_mb: nodes.iter().map(|n| n.real_memory_mb).sum(),
                }
            })
            .collect();
    }
    if everything || req.config {
        reply.config = config_entries(view);
    }
    if req.shares {
        reply.shares = view.shares.as_ref().clone();
    }
    if everything || req.reservations {
        reply.reservations = view.reservations.as_ref().clone();
    }
    if req.prio {
        // Waiting jobs that may run (a held job's priority is 0, and sprio leaves it out).
        for j in view.jobs.iter().filter(|j| j.status.state == JobState::Pending && j.status.hold.is_none()) {
            let Some(f) = view.prio.get(&j.id) else { continue };
            let w = j.spec.wire();
            reply.prio.push(v1::JobPrio {
                job_id: j.id,
                user: w.user.clone(),
                partition: j.status.partition.to_string(),
                priority: j.status.priority.min(u64::from(u32::MAX)) as u32,
                age: f.age,
                assoc: f.assoc,
                fairshare: f.fairshare,
                jobsize: f.jobsize,
                partition_factor: f.partition,
                qos: f.qos,
                nice: f.nice,
            });
        }
    }
    reply
}

/// `scontrol show config`: every key of Slurm 22.05's, in its order (see
/// [`drover_model::showconfig`]).
fn config_entries(view: &View) -> Vec<v1::ConfigEntry> {
    let boot = jiff::Timestamp::from_second(view.boot_time)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default();
    let uid_of = |name: &str| nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw());
    let cx = drover_model::showconfig::Context { boot_time: &boot, next_job_id: view.next_job_id, uid_of: &uid_of };
    drover_model::showconfig::entries(&view.cfg, &cx)
        .into_iter()
        .map(|(key, value)| v1::ConfigEntry { key, value })
        .collect()
}

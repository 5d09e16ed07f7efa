//! The environment a job's processes see: the submitter's exported variables plus Slurm's
//! output variables, named and formatted as Slurm 22.05 does.

use drover_model::hostlist::Hostlist;
use drover_model::job::fmt_counts;
use drover_proto::v1;

pub struct EnvCtx<'a> {
    pub launch: &'a v1::Launch,
    pub node: &'a str,
    pub submit_host: &'a str,
    /// Only the job's GPUs can be opened (`ConstrainDevices`): CUDA numbers them from 0.
    pub gpus_isolated: bool,
}

fn exported(spec: &v1::JobSpec) -> Vec<(String, String)> {
    spec.environment.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect()
}

fn set_in(env: &mut Vec<(String, String)>, k: &str, v: String) {
    env.retain(|(ek, _)| ek != k);
    env.push((k.to_string(), v));
}

/// The batch script's variables describing its job (a step's tasks inherit them through
/// srun's environment).
/// The node's place in the switch tree, as its agent found it in topology.conf (just the
/// node where there is no tree).
fn topology(c: &EnvCtx<'_>) -> (String, String) {
    if c.launch.topology_addr.is_empty() {
        (c.node.to_string(), "node".into())
    } else {
        (c.launch.topology_addr.clone(), c.launch.topology_pattern.clone())
    }
}

pub fn job_env(c: &EnvCtx<'_>) -> Vec<(String, String)> {
    let job = c.launch.job.as_ref().expect("invariant: launch carries its job");
    let spec = job.spec.as_ref().expect("invariant: job carries its spec");
    let mut env = exported(spec);
    add_job_vars(c, &mut env);
    env
}

/// Sets the variables that describe the job as a whole.
fn add_job_vars(c: &EnvCtx<'_>, env: &mut Vec<(String, String)>) {
    let l = c.launch;
    let job = l.job.as_ref().expect("invariant: launch carries its job");
    let spec = job.spec.as_ref().expect("invariant: job carries its spec");
    let mut set = |k: &str, v: String| set_in(env, k, v);
    let nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let nodelist = Hostlist::from_iter(&nodes).ranged();
    let cpus: Vec<u32> = job.alloc.iter().map(|a| a.cpu_ids.len() as u32).collect();
    let tasks: Vec<u32> = job.alloc.iter().map(|a| a.tasks).collect();
    let ntasks: u32 = tasks.iter().sum();
    let here = job.alloc.iter().find(|a| a.node == c.node);
    let jid = job.job_id.to_string();
    set("SLURM_CLUSTER_NAME", l.cluster_name.clone());
    set("SLURM_CONF", l.conf_path.clone());
    set("SLURM_CPUS_ON_NODE", here.map(|a| a.cpu_ids.len()).unwrap_or(0).to_string());
    set("SLURM_JOBID", jid.clone());
    set("SLURM_JOB_ID", jid);
    set("SLURM_JOB_ACCOUNT", drover_proto::jobinfo::account(spec).to_string());
    set("SLURM_JOB_CPUS_PER_NODE", fmt_counts(&cpus));
    set("SLURM_JOB_GID", spec.gid.to_string());
    set("SLURM_JOB_NAME", spec.name.clone());
    set("SLURM_JOB_NODELIST", nodelist.clone());
    set("SLURM_JOB_NUM_NODES", nodes.len().to_string());
    set("SLURM_JOB_PARTITION", job.partition.clone());
    set("SLURM_JOB_QOS", drover_proto::jobinfo::qos(spec).to_string());
    set("SLURM_JOB_UID", spec.uid.to_string());
    set("SLURM_JOB_USER", spec.user.clone());
    set("SLURM_NNODES", nodes.len().to_string());
    set("SLURM_NODELIST", nodelist);
    set("SLURM_NODE_ALIASES", "(null)".into());
    // Only where the request fixed a task count, as Slurm 22.05 (checked on its lab): -n,
    // --ntasks-per-node over a fixed node count, --ntasks-per-gpu, or a node list (-w).
    let fixed_nodes = spec.max_nodes.is_none_or(|m| Some(m) == spec.min_nodes);
    if spec.ntasks.is_some()
        || (spec.ntasks_per_node.is_some() && fixed_nodes)
        || spec.ntasks_per_gpu.is_some()
        || !spec.nodelist.is_empty()
    {
        set("SLURM_NPROCS", ntasks.to_string());
        set("SLURM_NTASKS", ntasks.to_string());
    }
    set("SLURM_PRIO_PROCESS", "0".into());
    set("SLURM_SUBMIT_DIR", spec.work_dir.clone());
    set("SLURM_SUBMIT_HOST", c.submit_host.to_string());
    set("SLURM_TASKS_PER_NODE", fmt_counts(&tasks));
    set("SLURM_TOPOLOGY_ADDR", topology(c).0);
    set("SLURM_TOPOLOGY_ADDR_PATTERN", topology(c).1);
    set("SLURM_WORKING_CLUSTER", format!("{}:{}:9728:109", l.cluster_name, l.controller_host));
    set("SLURMD_NODENAME", c.node.to_string());
    // Only a job that was requeued has it, as in Slurm.
    if job.restarts > 0 {
        set("SLURM_RESTART_COUNT", job.restarts.to_string());
    }
    if let Some(task) = job.array_task_id {
        set("SLURM_ARRAY_JOB_ID", job.array_job_id.to_string());
        set("SLURM_ARRAY_TASK_COUNT", job.array_task_count.to_string());
        set("SLURM_ARRAY_TASK_ID", task.to_string());
        set("SLURM_ARRAY_TASK_MAX", job.array_task_max.to_string());
        set("SLURM_ARRAY_TASK_MIN", job.array_task_min.to_string());
        set("SLURM_ARRAY_TASK_STEP", job.array_task_step.to_string());
    }
    if let Some(n) = spec.ntasks_per_node {
        set("SLURM_NTASKS_PER_NODE", n.to_string());
    }
    if let Some(c) = spec.cpus_per_task {
        set("SLURM_CPUS_PER_TASK", c.to_string());
    }
    if let Some(m) = spec.mem_per_node_mb {
        set("SLURM_MEM_PER_NODE", m.to_string());
    }
    if let Some(m) = spec.mem_per_cpu_mb {
        set("SLURM_MEM_PER_CPU", m.to_string());
    }
    if let Some(c) = spec.cpus_per_gpu {
        set("SLURM_CPUS_PER_GPU", c.to_string());
    }
    if let Some(m) = spec.mem_per_gpu_mb {
        set("SLURM_MEM_PER_GPU", m.to_string());
    }
    if let Some(n) = spec.ntasks_per_gpu {
        set("SLURM_NTASKS_PER_GPU", n.to_string());
    }
    // GPUs: what the job holds here, and what it asked for.
    set_gpus(&mut set, here.map(|a| gpu_indices(&a.gres)).unwrap_or_default(), "SLURM_JOB_GPUS", c.gpus_isolated);
    for (k, g) in [
        ("SLURM_GPUS", &spec.gpus),
        ("SLURM_GPUS_PER_NODE", &spec.gpus_per_node),
        ("SLURM_GPUS_PER_TASK", &spec.gpus_per_task),
        ("SLURM_GPUS_PER_SOCKET", &spec.gpus_per_socket),
    ] {
        if let Some(g) = g {
            set(k, gpu_request_text(g));
        }
    }
}

/// The GPU variables of a job's (`SLURM_JOB_GPUS`) or a step's (`SLURM_STEP_GPUS`) devices.
/// Where only its GPUs can be opened, CUDA sees them numbered from 0, as under Slurm.
fn set_gpus(set: &mut impl FnMut(&str, String), gpus: Vec<u32>, which: &str, isolated: bool) {
    if gpus.is_empty() {
        return;
    }
    let list = join(&gpus);
    let visible = if isolated { join(&(0..gpus.len() as u32).collect::<Vec<_>>()) } else { list.clone() };
    set("CUDA_VISIBLE_DEVICES", visible.clone());
    set("GPU_DEVICE_ORDINAL", visible);
    set(which, list);
    set("SLURM_GPUS_ON_NODE", gpus.len().to_string());
}

/// GPU device indices among held GRES.
fn gpu_indices(gres: &[v1::GresAlloc]) -> Vec<u32> {
    gres.iter().filter(|g| g.name == "gpu").flat_map(|g| g.indices.iter().copied()).collect()
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

/// `--gpus`-style values as Slurm exports them: `2` or `a100:2`.
fn gpu_request_text(g: &str) -> String {
    g.strip_prefix("gpu:").unwrap_or(g).to_string()
}

/// The batch script's environment.
pub fn batch_env(c: &EnvCtx<'_>) -> Vec<(String, String)> {
    let mut env = job_env(c);
    for (k, v) in [
        ("SLURM_GTIDS", "0".to_string()),
        ("SLURM_LOCALID", "0".into()),
        ("SLURM_NODEID", "0".into()),
        ("SLURM_PROCID", "0".into()),
        ("ENVIRONMENT", "BATCH".into()),
    ] {
        env.retain(|(ek, _)| ek != k);
        env.push((k.to_string(), v));
    }
    // The submitter's umask and limits are the script's own (the supervisor set them), not
    // variables of its environment, as in Slurm.
    env.retain(|(k, _)| k != "SLURM_UMASK" && !k.starts_with("SLURM_RLIMIT_"));
    env
}

/// One task's environment in a step, built as Slurm builds it: srun's environment (what
/// `--export` passes, which inside a batch job already holds the job's variables), the
/// variables srun sets for the step, then those the step daemon sets for each task. A
/// standalone srun (no enclosing job) also gets the job's variables, as real srun sets them
/// from its fresh allocation.
pub fn step_task_env(c: &EnvCtx<'_>, sl: &v1::StepLaunch, task: u32, local: u32) -> Vec<(String, String)> {
    let l = c.launch;
    let job = l.job.as_ref().expect("invariant: launch carries its job");
    let jspec = job.spec.as_ref().expect("invariant: job carries its spec");
    let step = sl.step.as_ref().expect("invariant: a step launch carries its step");
    let spec = sl.spec.as_ref().expect("invariant: a step launch carries its request");
    let mut env: Vec<(String, String)> = spec.environment.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
    if spec.standalone {
        add_job_vars(c, &mut env);
        env.retain(|(k, _)| k != "SLURM_NODE_ALIASES");
    }
    let (host, port) = spec.io_addr.rsplit_once(':').unwrap_or(("", ""));
    let step_nodes: Vec<String> = step.nodes.iter().map(|n| n.node.clone()).collect();
    let step_list = Hostlist::from_iter(&step_nodes).ranged();
    let counts: Vec<u32> = step.nodes.iter().map(|n| n.task_ids.len() as u32).collect();
    let ntasks: u32 = counts.iter().sum();
    let job_nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let job_cpus: Vec<u32> = job.alloc.iter().map(|a| a.cpu_ids.len() as u32).collect();
    let here = step.nodes.iter().find(|n| n.node == c.node);
    let gtids: Vec<String> = l.task_ids.iter().map(|t| t.to_string()).collect();
    let id = step.step_id.to_string();
    let jid = job.job_id.to_string();
    let mut set = |k: &str, v: String| set_in(&mut env, k, v);
    // What srun sets for the step.
    set("SLURM_JOB_ID", jid.clone());
    set("SLURM_JOBID", jid);
    set("SLURM_NNODES", step_nodes.len().to_string());
    set("SLURM_NTASKS", ntasks.to_string());
    set("SLURM_NPROCS", ntasks.to_string());
    set("SLURM_TASKS_PER_NODE", fmt_counts(&counts));
    set("SLURM_NODELIST", Hostlist::from_iter(&job_nodes).ranged());
    if !spec.standalone {
        let dist = drover_model::step::Distribution::parse(&step.distribution).ok().flatten().unwrap_or_default();
        set("SLURM_DISTRIBUTION", dist.env_name().to_string());
        set("SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0", fmt_counts(&job_cpus));
    }
    if spec.cpus_per_task > 0 {
        set("SLURM_CPUS_PER_TASK", spec.cpus_per_task.to_string());
    }
    if spec.overcommit {
        // slurmstepd's setup_env for a step of `srun -O`.
        set("SLURM_OVERCOMMIT", "1".into());
    }
    set("SLURM_STEP_ID", id.clone());
    set("SLURM_STEPID", id);
    set("SLURM_STEP_NODELIST", step_list.clone());
    set("SLURM_STEP_NUM_NODES", step_nodes.len().to_string());
    set("SLURM_STEP_NUM_TASKS", ntasks.to_string());
    set("SLURM_STEP_TASKS_PER_NODE", fmt_counts(&counts));
    set("SLURM_LAUNCH_NODE_IPADDR", host.to_string());
    set("SLURM_SRUN_COMM_HOST", host.to_string());
    set("SLURM_SRUN_COMM_PORT", port.to_string());
    set("SLURM_STEP_LAUNCHER_PORT", port.to_string());
    // What srun sets only where its environment has none (its umask, SLURM_UMASK, it sends
    // with the step's environment; an older srun did not).
    if !env.iter().any(|(k, _)| k == "SLURM_UMASK") {
        env.push(("SLURM_UMASK".into(), "0022".into()));
    }
    // The submitter's limits are the tasks' own (the supervisor set them), as in Slurm.
    env.retain(|(k, _)| !k.starts_with("SLURM_RLIMIT_"));
    if !env.iter().any(|(k, _)| k == "SLURM_JOB_NODELIST") {
        env.push(("SLURM_JOB_NODELIST".into(), step_list));
    }
    if !env.iter().any(|(k, _)| k == "SLURM_JOB_NAME") {
        env.push(("SLURM_JOB_NAME".into(), step.name.clone()));
    }
    // What the step daemon sets for each task.
    let mut set = |k: &str, v: String| set_in(&mut env, k, v);
    let gpus = here.map(|n| gpu_indices(&n.gres)).unwrap_or_default();
    set_gpus(&mut set, gpus.clone(), "SLURM_STEP_GPUS", c.gpus_isolated);
    // --gpu-bind: the task sees its own of the step's GPUs.
    if let Ok(Some(picks)) = drover_model::gres::gpu_bind(&spec.gpu_bind, &gpus, local as usize) {
        let visible: Vec<u32> = picks.iter().map(|&p| if c.gpus_isolated { p as u32 } else { gpus[p] }).collect();
        set("CUDA_VISIBLE_DEVICES", join(&visible));
        set("GPU_DEVICE_ORDINAL", join(&visible));
    }
    set("SLURMD_NODENAME", c.node.to_string());
    set("SLURM_CONF", l.conf_path.clone());
    set("SLURM_CPUS_ON_NODE", here.map_or(0, |n| n.cpu_ids.len()).to_string());
    set("SLURM_GTIDS", gtids.join(","));
    set("SLURM_JOB_GID", jspec.gid.to_string());
    set("SLURM_JOB_UID", jspec.uid.to_string());
    set("SLURM_JOB_USER", jspec.user.clone());
    set("SLURM_JOB_PARTITION", job.partition.clone());
    set("SLURM_LOCALID", local.to_string());
    set("SLURM_NODEID", l.node_index.to_string());
    set("SLURM_PROCID", task.to_string());
    set("SLURM_PRIO_PROCESS", "0".into());
    set("SLURM_TOPOLOGY_ADDR", topology(c).0);
    set("SLURM_TOPOLOGY_ADDR_PATTERN", topology(c).1);
    set("SLURM_WORKING_CLUSTER", format!("{}:{}:9728:109", l.cluster_name, l.controller_host));
    env
}

//! The environment a job's processes see: the submitter's exported variables plus Slurm's
//! output variables, named and formatted as Slurm 22.05 does.

use drover_model::hostlist::Hostlist;
use drover_model::job::fmt_counts;
use drover_proto::v1;

pub struct EnvCtx<'a> {
    pub launch: &'a v1::Launch,
    pub node: &'a str,
    pub submit_host: &'a str,
}

fn exported(spec: &v1::JobSpec) -> Vec<(String, String)> {
    spec.environment.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect()
}

/// Variables common to the batch script and to every task.
pub fn job_env(c: &EnvCtx<'_>) -> Vec<(String, String)> {
    let l = c.launch;
    let job = l.job.as_ref().expect("invariant: launch carries its job");
    let spec = job.spec.as_ref().expect("invariant: job carries its spec");
    let mut env = exported(spec);
    let mut set = |k: &str, v: String| {
        env.retain(|(ek, _)| ek != k);
        env.push((k.to_string(), v));
    };
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
    set("SLURM_JOB_ACCOUNT", spec.user.clone());
    set("SLURM_JOB_CPUS_PER_NODE", fmt_counts(&cpus));
    set("SLURM_JOB_GID", spec.gid.to_string());
    set("SLURM_JOB_NAME", spec.name.clone());
    set("SLURM_JOB_NODELIST", nodelist.clone());
    set("SLURM_JOB_NUM_NODES", nodes.len().to_string());
    set("SLURM_JOB_PARTITION", job.partition.clone());
    set("SLURM_JOB_QOS", "normal".into());
    set("SLURM_JOB_UID", spec.uid.to_string());
    set("SLURM_JOB_USER", spec.user.clone());
    set("SLURM_NNODES", nodes.len().to_string());
    set("SLURM_NODELIST", nodelist);
    set("SLURM_NODE_ALIASES", "(null)".into());
    set("SLURM_NPROCS", ntasks.to_string());
    set("SLURM_NTASKS", ntasks.to_string());
    set("SLURM_PRIO_PROCESS", "0".into());
    set("SLURM_SUBMIT_DIR", spec.work_dir.clone());
    set("SLURM_SUBMIT_HOST", c.submit_host.to_string());
    set("SLURM_TASKS_PER_NODE", fmt_counts(&tasks));
    set("SLURM_TOPOLOGY_ADDR", c.node.to_string());
    set("SLURM_TOPOLOGY_ADDR_PATTERN", "node".into());
    set("SLURM_WORKING_CLUSTER", format!("{}:{}:9728:109", l.cluster_name, l.controller_host));
    set("SLURMD_NODENAME", c.node.to_string());
    set("SLURM_JOB_START_TIME", job.start_time.to_string());
    set(
        "SLURM_JOB_END_TIME",
        job.time_limit_secs.map(|t| job.start_time + t as i64).unwrap_or(job.start_time + 365 * 86400).to_string(),
    );
    set("SLURM_RESTART_COUNT", job.restarts.to_string());
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
    if let Some(n) = &spec.comment {
        let _ = n;
    }
    env
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
    env
}

/// One task's environment in an srun step.
pub fn task_env(c: &EnvCtx<'_>, task: u32, local: u32, srun_host: &str, srun_port: &str) -> Vec<(String, String)> {
    let l = c.launch;
    let job = l.job.as_ref().expect("invariant: launch carries its job");
    let mut env = job_env(c);
    let nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let tasks: Vec<u32> = job.alloc.iter().map(|a| a.tasks).collect();
    let ntasks: u32 = tasks.iter().sum();
    let gtids: Vec<String> = l.task_ids.iter().map(|t| t.to_string()).collect();
    for (k, v) in [
        ("SLURM_GTIDS", gtids.join(",")),
        ("SLURM_LOCALID", local.to_string()),
        ("SLURM_NODEID", l.node_index.to_string()),
        ("SLURM_PROCID", task.to_string()),
        ("SLURM_STEPID", "0".into()),
        ("SLURM_STEP_ID", "0".into()),
        ("SLURM_STEP_NODELIST", Hostlist::from_iter(&nodes).ranged()),
        ("SLURM_STEP_NUM_NODES", nodes.len().to_string()),
        ("SLURM_STEP_NUM_TASKS", ntasks.to_string()),
        ("SLURM_STEP_TASKS_PER_NODE", fmt_counts(&tasks)),
        ("SLURM_LAUNCH_NODE_IPADDR", srun_host.to_string()),
        ("SLURM_SRUN_COMM_HOST", srun_host.to_string()),
        ("SLURM_SRUN_COMM_PORT", srun_port.to_string()),
        ("SLURM_STEP_LAUNCHER_PORT", srun_port.to_string()),
        ("SLURM_UMASK", "0022".into()),
    ] {
        env.retain(|(ek, _)| ek != k);
        env.push((k.to_string(), v));
    }
    env
}

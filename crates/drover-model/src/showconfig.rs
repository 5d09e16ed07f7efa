//! `scontrol show config`: every key Slurm 22.05 shows, in its order. A key Drover models
//! shows the value Drover runs with; any other shows what `slurm.conf` says (in Slurm's form:
//! `30 sec`, `300 nodes/min`) or, where the file says nothing, Slurm's default. Pure: what
//! needs the system (user ids, the boot time) comes from the caller.

use crate::conf::Config;

/// How a value prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// Seconds: `30 sec`.
    Sec,
    Usec,
    Min,
    /// `300 nodes/min`.
    PerMin,
    Percent,
}

impl Kind {
    fn show(self, v: &str) -> String {
        let unit = match self {
            Kind::Text => return v.to_string(),
            Kind::Sec => "sec",
            Kind::Usec => "usec",
            Kind::Min => "min",
            Kind::PerMin => "nodes/min",
            Kind::Percent => "percent",
        };
        format!("{v} {unit}")
    }
}

/// What the caller knows that the configuration does not say.
pub struct Context<'a> {
    /// When the controller started, in Slurm's timestamp form.
    pub boot_time: &'a str,
    pub next_job_id: u32,
    /// A user's uid (SlurmUser shows as `name(uid)`).
    pub uid_of: &'a dyn Fn(&str) -> Option<u32>,
}

/// `(key, value)` in Slurm's order.
pub fn entries(cfg: &Config, cx: &Context<'_>) -> Vec<(String, String)> {
    let raw = |k: &str| cfg.raw.iter().rev().find(|(rk, _)| rk.eq_ignore_ascii_case(k)).map(|(_, v)| v.clone());
    let user = |k: &str| {
        let name = raw(k).unwrap_or_else(|| "root".into());
        match (cx.uid_of)(&name) {
            Some(uid) => format!("{name}({uid})"),
            None => name,
        }
    };
    let mut out = Vec::with_capacity(KEYS.len() + 1);
    for &(key, kind, default) in KEYS {
        let value = match key {
            "SlurmctldHost[0]" => {
                for (i, h) in cfg.controller_hosts.iter().enumerate() {
                    out.push((format!("SlurmctldHost[{i}]"), format!("{}({})", h.name, h.addr)));
                }
                continue;
            }
            "ClusterName" => cfg.cluster_name.clone(),
            "BOOT_TIME" => cx.boot_time.to_string(),
            "NEXT_JOB_ID" => cx.next_job_id.to_string(),
            "SLURM_CONF" => cfg.path.clone(),
            "SLURM_VERSION" => crate::SLURM_COMPAT_VERSION.to_string(),
            "MaxNodeCount" => cfg.nodes.len().to_string(),
            "MaxDBDMsgs" => (2 * u64::from(cfg.max_job_count) + 4 * cfg.nodes.len() as u64).max(10000).to_string(),
            "SlurmUser" => user("SlurmUser"),
            "SlurmdUser" => user("SlurmdUser"),
            // What Drover runs with, whatever the file said (or its default).
            "SlurmctldPort" => cfg.slurmctld_port.to_string(),
            // With standbys, the lease they wait out (Drover's default is 3 s, not 120).
            "SlurmctldTimeout" if cfg.controller_failover() => kind.show(&cfg.controller_lease().as_secs().to_string()),
            "SlurmdPort" => cfg.slurmd_port.to_string(),
            "StateSaveLocation" => cfg.state_save_location.clone(),
            "SlurmdSpoolDir" => cfg.slurmd_spool_dir.clone(),
            "SlurmctldLogFile" => cfg.slurmctld_log_file.clone().unwrap_or_else(|| "(null)".into()),
            "SlurmdLogFile" => cfg.slurmd_log_file.clone().unwrap_or_else(|| "(null)".into()),
            "MaxJobCount" => cfg.max_job_count.to_string(),
            "MaxArraySize" => cfg.max_array_size.to_string(),
            "FirstJobId" => cfg.first_job_id.to_string(),
            "KillWait" => kind.show(&cfg.kill_wait.to_string()),
            "SlurmdTimeout" => kind.show(&cfg.slurmd_timeout.to_string()),
            "MinJobAge" => kind.show(&cfg.min_job_age.to_string()),
            "ReturnToService" => cfg.return_to_service.to_string(),
            "EnforcePartLimits" => match cfg.enforce_part_limits {
                crate::conf::EnforcePartLimits::No => "NO",
                crate::conf::EnforcePartLimits::Any => "ANY",
                crate::conf::EnforcePartLimits::All => "ALL",
            }
            .into(),
            "SchedulerType" => if cfg.backfill { "sched/backfill" } else { "sched/builtin" }.into(),
            "SelectTypeParameters" => raw(key).map(|v| v.to_ascii_uppercase()).unwrap_or_else(|| default.into()),
            _ => match raw(key) {
                Some(v) if v.is_empty() => "(null)".into(),
                Some(v) => kind.show(&v),
                None if default.is_empty() || default == "(null)" || kind == Kind::Text => default.to_string(),
                None => kind.show(default),
            },
        };
        out.push((key.to_string(), value));
    }
    out
}

/// Slurm 22.05's `scontrol show config` keys, in its order, with how a value prints and its
/// default (`(null)` where Slurm has none).
pub const KEYS: &[(&str, Kind, &str)] = &[
    ("AccountingStorageBackupHost", Kind::Text, "(null)"),
    ("AccountingStorageEnforce", Kind::Text, "none"),
    ("AccountingStorageHost", Kind::Text, "(null)"),
    ("AccountingStorageExternalHost", Kind::Text, "(null)"),
    ("AccountingStorageParameters", Kind::Text, "(null)"),
    ("AccountingStoragePort", Kind::Text, "0"),
    ("AccountingStorageTRES", Kind::Text, "cpu,mem,energy,node,billing,fs/disk,vmem,pages"),
    ("AccountingStorageType", Kind::Text, "accounting_storage/none"),
    ("AccountingStorageUser", Kind::Text, "N/A"),
    ("AccountingStoreFlags", Kind::Text, "(null)"),
    ("AcctGatherEnergyType", Kind::Text, "acct_gather_energy/none"),
    ("AcctGatherFilesystemType", Kind::Text, "acct_gather_filesystem/none"),
    ("AcctGatherInterconnectType", Kind::Text, "acct_gather_interconnect/none"),
    ("AcctGatherNodeFreq", Kind::Sec, "0"),
    ("AcctGatherProfileType", Kind::Text, "acct_gather_profile/none"),
    ("AllowSpecResourcesUsage", Kind::Text, "No"),
    ("AuthAltTypes", Kind::Text, "(null)"),
    ("AuthAltParameters", Kind::Text, "(null)"),
    ("AuthInfo", Kind::Text, "(null)"),
    ("AuthType", Kind::Text, "auth/munge"),
    ("BatchStartTimeout", Kind::Sec, "10"),
    ("BcastExclude", Kind::Text, "/lib,/usr/lib,/lib64,/usr/lib64"),
    ("BcastParameters", Kind::Text, "(null)"),
    ("BOOT_TIME", Kind::Text, ""),
    ("BurstBufferType", Kind::Text, "(null)"),
    ("CliFilterPlugins", Kind::Text, "(null)"),
    ("ClusterName", Kind::Text, "(null)"),
    ("CommunicationParameters", Kind::Text, "(null)"),
    ("CompleteWait", Kind::Sec, "0"),
    ("CoreSpecPlugin", Kind::Text, "core_spec/none"),
    ("CpuFreqDef", Kind::Text, "Unknown"),
    ("CpuFreqGovernors", Kind::Text, "OnDemand,Performance,UserSpace"),
    ("CredType", Kind::Text, "cred/munge"),
    ("DebugFlags", Kind::Text, "(null)"),
    ("DefMemPerNode", Kind::Text, "UNLIMITED"),
    ("DependencyParameters", Kind::Text, "(null)"),
    ("DisableRootJobs", Kind::Text, "No"),
    ("EioTimeout", Kind::Text, "60"),
    ("EnforcePartLimits", Kind::Text, "NO"),
    ("Epilog", Kind::Text, "(null)"),
    ("EpilogMsgTime", Kind::Usec, "2000"),
    ("EpilogSlurmctld", Kind::Text, "(null)"),
    ("ExtSensorsType", Kind::Text, "ext_sensors/none"),
    ("ExtSensorsFreq", Kind::Sec, "0"),
    ("FederationParameters", Kind::Text, "(null)"),
    ("FirstJobId", Kind::Text, "1"),
    ("GetEnvTimeout", Kind::Sec, "2"),
    ("GresTypes", Kind::Text, "(null)"),
    ("GpuFreqDef", Kind::Text, "high,memory=high"),
    ("GroupUpdateForce", Kind::Text, "1"),
    ("GroupUpdateTime", Kind::Sec, "600"),
    ("HASH_VAL", Kind::Text, "Match"),
    ("HealthCheckInterval", Kind::Sec, "0"),
    ("HealthCheckNodeState", Kind::Text, "ANY"),
    ("HealthCheckProgram", Kind::Text, "(null)"),
    ("InactiveLimit", Kind::Sec, "0"),
    ("InteractiveStepOptions", Kind::Text, "--interactive --preserve-env --pty $SHELL"),
    ("JobAcctGatherFrequency", Kind::Text, "30"),
    ("JobAcctGatherType", Kind::Text, "jobacct_gather/none"),
    ("JobAcctGatherParams", Kind::Text, "(null)"),
    ("JobCompHost", Kind::Text, "localhost"),
    ("JobCompLoc", Kind::Text, "/var/log/slurm_jobcomp.log"),
    ("JobCompPort", Kind::Text, "0"),
    ("JobCompType", Kind::Text, "jobcomp/none"),
    ("JobCompUser", Kind::Text, "root"),
    ("JobContainerType", Kind::Text, "job_container/none"),
    ("JobCredentialPrivateKey", Kind::Text, "(null)"),
    ("JobCredentialPublicCertificate", Kind::Text, "(null)"),
    ("JobDefaults", Kind::Text, "(null)"),
    ("JobFileAppend", Kind::Text, "0"),
    ("JobRequeue", Kind::Text, "1"),
    ("JobSubmitPlugins", Kind::Text, "(null)"),
    ("KillOnBadExit", Kind::Text, "0"),
    ("KillWait", Kind::Sec, "30"),
    ("LaunchParameters", Kind::Text, "(null)"),
    ("LaunchType", Kind::Text, "launch/slurm"),
    ("Licenses", Kind::Text, "(null)"),
    ("LogTimeFormat", Kind::Text, "iso8601_ms"),
    ("MailDomain", Kind::Text, "(null)"),
    ("MailProg", Kind::Text, "/bin/mail"),
    ("MaxArraySize", Kind::Text, "1001"),
    ("MaxDBDMsgs", Kind::Text, "200016"),
    ("MaxJobCount", Kind::Text, "10000"),
    ("MaxJobId", Kind::Text, "67043328"),
    ("MaxMemPerNode", Kind::Text, "UNLIMITED"),
    ("MaxNodeCount", Kind::Text, "0"),
    ("MaxStepCount", Kind::Text, "40000"),
    ("MaxTasksPerNode", Kind::Text, "512"),
    ("MCSPlugin", Kind::Text, "mcs/none"),
    ("MCSParameters", Kind::Text, "(null)"),
    ("MessageTimeout", Kind::Sec, "10"),
    ("MinJobAge", Kind::Sec, "300"),
    ("MpiDefault", Kind::Text, "none"),
    ("MpiParams", Kind::Text, "(null)"),
    ("MULTIPLE_SLURMD", Kind::Text, "Yes"),
    ("NEXT_JOB_ID", Kind::Text, "1"),
    ("NodeFeaturesPlugins", Kind::Text, "(null)"),
    ("OverTimeLimit", Kind::Min, "0"),
    ("PluginDir", Kind::Text, "/usr/lib/x86_64-linux-gnu/slurm-wlm"),
    ("PlugStackConfig", Kind::Text, "(null)"),
    ("PowerParameters", Kind::Text, "(null)"),
    ("PowerPlugin", Kind::Text, ""),
    ("PreemptMode", Kind::Text, "OFF"),
    ("PreemptType", Kind::Text, "preempt/none"),
    ("PreemptExemptTime", Kind::Text, "00:00:00"),
    ("PrEpParameters", Kind::Text, "(null)"),
    ("PrEpPlugins", Kind::Text, "prep/script"),
    ("PriorityParameters", Kind::Text, "(null)"),
    ("PrioritySiteFactorParameters", Kind::Text, "(null)"),
    ("PrioritySiteFactorPlugin", Kind::Text, "(null)"),
    ("PriorityType", Kind::Text, "priority/basic"),
    ("PrivateData", Kind::Text, "none"),
    ("ProctrackType", Kind::Text, "proctrack/cgroup"),
    ("Prolog", Kind::Text, "(null)"),
    ("PrologEpilogTimeout", Kind::Text, "65534"),
    ("PrologSlurmctld", Kind::Text, "(null)"),
    ("PrologFlags", Kind::Text, "(null)"),
    ("PropagatePrioProcess", Kind::Text, "0"),
    ("PropagateResourceLimits", Kind::Text, "ALL"),
    ("PropagateResourceLimitsExcept", Kind::Text, "(null)"),
    ("RebootProgram", Kind::Text, "(null)"),
    ("ReconfigFlags", Kind::Text, "(null)"),
    ("RequeueExit", Kind::Text, "(null)"),
    ("RequeueExitHold", Kind::Text, "(null)"),
    ("ResumeFailProgram", Kind::Text, "(null)"),
    ("ResumeProgram", Kind::Text, "(null)"),
    ("ResumeRate", Kind::PerMin, "300"),
    ("ResumeTimeout", Kind::Sec, "60"),
    ("ResvEpilog", Kind::Text, "(null)"),
    ("ResvOverRun", Kind::Min, "0"),
    ("ResvProlog", Kind::Text, "(null)"),
    ("ReturnToService", Kind::Text, "0"),
    ("RoutePlugin", Kind::Text, "route/default"),
    ("SchedulerParameters", Kind::Text, "(null)"),
    ("SchedulerTimeSlice", Kind::Sec, "30"),
    ("SchedulerType", Kind::Text, "sched/backfill"),
    ("ScronParameters", Kind::Text, "(null)"),
    ("SelectType", Kind::Text, "select/cons_tres"),
    ("SelectTypeParameters", Kind::Text, "CR_CORE_MEMORY"),
    ("SlurmUser", Kind::Text, "root(0)"),
    ("SlurmctldAddr", Kind::Text, "(null)"),
    ("SlurmctldDebug", Kind::Text, "info"),
    ("SlurmctldHost[0]", Kind::Text, "(null)"),
    ("SlurmctldLogFile", Kind::Text, "(null)"),
    ("SlurmctldPort", Kind::Text, "6817"),
    ("SlurmctldSyslogDebug", Kind::Text, "(null)"),
    ("SlurmctldPrimaryOffProg", Kind::Text, "(null)"),
    ("SlurmctldPrimaryOnProg", Kind::Text, "(null)"),
    ("SlurmctldTimeout", Kind::Sec, "120"),
    ("SlurmctldParameters", Kind::Text, "(null)"),
    ("SlurmdDebug", Kind::Text, "info"),
    ("SlurmdLogFile", Kind::Text, "(null)"),
    ("SlurmdParameters", Kind::Text, "(null)"),
    ("SlurmdPidFile", Kind::Text, "/var/run/slurmd.pid"),
    ("SlurmdPort", Kind::Text, "6818"),
    ("SlurmdSpoolDir", Kind::Text, "/var/spool/slurmd"),
    ("SlurmdSyslogDebug", Kind::Text, "(null)"),
    ("SlurmdTimeout", Kind::Sec, "300"),
    ("SlurmdUser", Kind::Text, "root(0)"),
    ("SlurmSchedLogFile", Kind::Text, "(null)"),
    ("SlurmSchedLogLevel", Kind::Text, "0"),
    ("SlurmctldPidFile", Kind::Text, "/var/run/slurmctld.pid"),
    ("SlurmctldPlugstack", Kind::Text, "(null)"),
    ("SLURM_CONF", Kind::Text, ""),
    ("SLURM_VERSION", Kind::Text, "22.05.8"),
    ("SrunEpilog", Kind::Text, "(null)"),
    ("SrunPortRange", Kind::Text, "0-0"),
    ("SrunProlog", Kind::Text, "(null)"),
    ("StateSaveLocation", Kind::Text, "/var/spool/slurmctld"),
    ("SuspendExcNodes", Kind::Text, "(null)"),
    ("SuspendExcParts", Kind::Text, "(null)"),
    ("SuspendProgram", Kind::Text, "(null)"),
    ("SuspendRate", Kind::PerMin, "60"),
    ("SuspendTime", Kind::Text, "INFINITE"),
    ("SuspendTimeout", Kind::Sec, "30"),
    ("SwitchParameters", Kind::Text, "(null)"),
    ("SwitchType", Kind::Text, "switch/none"),
    ("TaskEpilog", Kind::Text, "(null)"),
    ("TaskPlugin", Kind::Text, "(null)"),
    ("TaskPluginParam", Kind::Text, "(null type)"),
    ("TaskProlog", Kind::Text, "(null)"),
    ("TCPTimeout", Kind::Sec, "2"),
    ("TmpFS", Kind::Text, "/tmp"),
    ("TopologyParam", Kind::Text, "(null)"),
    ("TopologyPlugin", Kind::Text, "topology/none"),
    ("TrackWCKey", Kind::Text, "No"),
    ("TreeWidth", Kind::Text, "50"),
    ("UsePam", Kind::Text, "No"),
    ("UnkillableStepProgram", Kind::Text, "(null)"),
    ("UnkillableStepTimeout", Kind::Sec, "60"),
    ("VSizeFactor", Kind::Percent, "0"),
    ("WaitTime", Kind::Sec, "0"),
    ("X11Parameters", Kind::Text, "(null)"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_then_slurms_defaults_in_slurms_forms() {
        let cfg = crate::conf::parse_str(
            "/etc/slurm/slurm.conf",
            "ClusterName=lab\nSlurmctldHost=ctl(10.0.0.1)\nTaskPlugin=task/affinity\nSelectTypeParameters=CR_Core\n\
             SlurmctldTimeout=60\nSuspendRate=100\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        let cx = Context { boot_time: "2026-12-05T00:00:00", next_job_id: 7, uid_of: &|u| (u == "root").then_some(0) };
        let e = entries(&cfg, &cx);
        let get = |k: &str| e.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str()).unwrap_or("<none>");
        assert_eq!(e.len(), KEYS.len());
        assert_eq!(e[0].0, "AccountingStorageBackupHost");
        assert_eq!(get("SlurmctldHost[0]"), "ctl(10.0.0.1)");
        assert_eq!(get("TaskPlugin"), "task/affinity");
        assert_eq!(get("SelectTypeParameters"), "CR_CORE");
        assert_eq!(get("SlurmctldTimeout"), "60 sec");
        assert_eq!(get("SuspendRate"), "100 nodes/min");
        assert_eq!(get("ResumeRate"), "300 nodes/min");
        assert_eq!(get("SlurmUser"), "root(0)");
        assert_eq!(get("NEXT_JOB_ID"), "7");
        assert_eq!(get("MaxNodeCount"), "2");
        assert_eq!(get("ProctrackType"), "proctrack/cgroup");
    }
}

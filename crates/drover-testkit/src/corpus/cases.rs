//! The corpus's command lines, generated: every format letter and field of every command,
//! crossed with the scenario's states, filters and sort keys, the refusals of bad values, and
//! then the lines that change state (hold, update, cancel, submit with each option, srun),
//! in an order that keeps each one's answer independent of timing. `$NAME`s are the job ids
//! `scenario.sh` names. Ids are stable: a new case gets a new id, and no id is reused.

use super::Case;

struct Corpus(Vec<Case>);

impl Corpus {
    fn add(&mut self, id: impl Into<String>, cmd: impl Into<String>) {
        let (id, cmd) = (id.into(), cmd.into());
        debug_assert!(!self.0.iter().any(|c| c.id == id), "two cases are {id}");
        self.0.push(Case { id, cmd });
    }
}

/// Every job the scenario names, finished ones first.
const JOBS: &[&str] =
    &["DONE", "FAIL", "STEPS", "CANRUN", "PHYS", "RUN1", "RUN2", "ARR", "HELD", "DEP", "BIG", "LATER", "CANPD"];

/// squeue's `-O` fields for jobs (squeue/opts.c of 22.05), less the ones that read the
/// clock or the submitting process (`AllocSID`, `LastSchedEval`, `PendingTime`), the
/// submitting host as the machine's resolver names it back (`AllocNodes`), and
/// `WorkDir` (cut to 20 characters, a path of the run: `%Z` asks for it whole).
const SQUEUE_FIELDS: &[&str] = &[
    "Account",
    "AccrueTime",
    "admin_comment",
    "ArrayJobID",
    "ArrayTaskID",
    "AssocID",
    "BatchFlag",
    "BatchHost",
    "BoardsPerNode",
    "BurstBuffer",
    "BurstBufferState",
    "Cluster",
    "ClusterFeature",
    "Command",
    "Comment",
    "Container",
    "Contiguous",
    "Cores",
    "CoreSpec",
    "cpus-per-task",
    "cpus-per-tres",
    "Deadline",
    "DelayBoot",
    "Dependency",
    "DerivedEC",
    "EligibleTime",
    "EndTime",
    "exit_code",
    "Feature",
    "GroupID",
    "GroupName",
    "HetJobID",
    "HetJobIDSet",
    "HetJobOffset",
    "JobArrayID",
    "JobID",
    "Licenses",
    "MaxCPUs",
    "MaxNodes",
    "MCSLabel",
    "mem-per-tres",
    "MinCpus",
    "MinMemory",
    "MinTime",
    "MinTmpDisk",
    "Name",
    "Network",
    "Nice",
    "NodeList",
    "NumCPUs",
    "NumNodes",
    "NumTasks",
    "NTPerBoard",
    "NTPerCore",
    "NTPerNode",
    "NTPerSocket",
    "Origin",
    "OriginRaw",
    "OverSubscribe",
    "Partition",
    "PreemptTime",
    "Prefer",
    "Priority",
    "PriorityLong",
    "Profile",
    "QOS",
    "Reason",
    "ReasonList",
    "Reboot",
    "ReqNodes",
    "ReqSwitch",
    "Requeue",
    "Reservation",
    "ResizeTime",
    "RestartCnt",
    "SchedNodes",
    "SCT",
    "SiblingsActive",
    "SiblingsActiveRaw",
    "SiblingsViable",
    "SiblingsViableRaw",
    "Sockets",
    "SPerBoard",
    "StartTime",
    "State",
    "StateCompact",
    "STDERR",
    "STDIN",
    "STDOUT",
    "SubmitTime",
    "system_comment",
    "Threads",
    "TimeLimit",
    "TimeUsed",
    "tres-alloc",
    "tres-bind",
    "tres-freq",
    "tres-per-job",
    "tres-per-node",
    "tres-per-socket",
    "tres-per-task",
    "UserID",
    "UserName",
    "Wait4Switch",
    "WCKey",
    "Shared",
    "Gres",
];

/// squeue's `-O` fields for steps (`-s`).
const SQUEUE_STEP_FIELDS: &[&str] = &[
    "Cluster",
    "Gres",
    "StepID",
    "StepName",
    "TimeLimit",
    "TimeUsed",
    "Nodes",
    "Partition",
    "StartTime",
    "UserID",
    "UserName",
    "ArrayJobID",
    "ArrayTaskID",
    "JobID",
    "Network",
    "NumCPUs",
    "CPUFreq",
    "ResvPorts",
    "StepState",
    "cpus-per-tres",
    "mem-per-tres",
    "tres-bind",
    "tres-freq",
    "tres-per-job",
    "tres-per-step",
    "tres-per-node",
    "tres-per-socket",
    "tres-per-task",
    "Container",
];

/// sinfo's `-O` fields, less the host's load and free memory (`CPUsLoad`, `FreeMem`).
const SINFO_FIELDS: &[&str] = &[
    "All",
    "AllocMem",
    "AllocNodes",
    "Available",
    "Cluster",
    "Comment",
    "Cores",
    "CPUs",
    "CPUsState",
    "DefaultTime",
    "Disk",
    "Extra",
    "Features",
    "features_act",
    "Groups",
    "Gres",
    "GresUsed",
    "MaxCPUsPerNode",
    "Memory",
    "Nodes",
    "NodeAddr",
    "NodeAI",
    "NodeAIOT",
    "NodeHost",
    "NodeList",
    "Partition",
    "PartitionName",
    "Port",
    "PreemptMode",
    "PriorityJobFactor",
    "PriorityTier",
    "Reason",
    "Root",
    "OverSubscribe",
    "Size",
    "StateCompact",
    "StateComplete",
    "StateLong",
    "Sockets",
    "SocketCoreThread",
    "Time",
    "Timestamp",
    "Threads",
    "User",
    "UserLong",
    "Version",
    "Weight",
];

/// sacct's fields (`sacct -e`).
const SACCT_FIELDS: &[&str] = &[
    "Account",
    "AdminComment",
    "AllocCPUS",
    "AllocNodes",
    "AllocTRES",
    "AssocID",
    "AveCPU",
    "AveCPUFreq",
    "AveDiskRead",
    "AveDiskWrite",
    "AvePages",
    "AveRSS",
    "AveVMSize",
    "BlockID",
    "Cluster",
    "Comment",
    "Constraints",
    "ConsumedEnergy",
    "ConsumedEnergyRaw",
    "Container",
    "CPUTime",
    "CPUTimeRAW",
    "DBIndex",
    "DerivedExitCode",
    "Elapsed",
    "ElapsedRaw",
    "Eligible",
    "End",
    "ExitCode",
    "Flags",
    "GID",
    "Group",
    "JobID",
    "JobIDRaw",
    "JobName",
    "Layout",
    "MaxDiskRead",
    "MaxDiskReadNode",
    "MaxDiskReadTask",
    "MaxDiskWrite",
    "MaxDiskWriteNode",
    "MaxDiskWriteTask",
    "MaxPages",
    "MaxPagesNode",
    "MaxPagesTask",
    "MaxRSS",
    "MaxRSSNode",
    "MaxRSSTask",
    "MaxVMSize",
    "MaxVMSizeNode",
    "MaxVMSizeTask",
    "McsLabel",
    "MinCPU",
    "MinCPUNode",
    "MinCPUTask",
    "NCPUS",
    "NNodes",
    "NodeList",
    "NTasks",
    "Partition",
    "Priority",
    "QOS",
    "QOSRAW",
    "Reason",
    "ReqCPUFreq",
    "ReqCPUFreqGov",
    "ReqCPUFreqMax",
    "ReqCPUFreqMin",
    "ReqCPUS",
    "ReqMem",
    "ReqNodes",
    "ReqTRES",
    "Reservation",
    "ReservationId",
    "Reserved",
    "ResvCPU",
    "ResvCPURAW",
    "Start",
    "State",
    "Submit",
    "SubmitLine",
    "Suspended",
    "SystemComment",
    "SystemCPU",
    "Timelimit",
    "TimelimitRaw",
    "TotalCPU",
    "TRESUsageInAve",
    "TRESUsageInMax",
    "TRESUsageInMaxNode",
    "TRESUsageInMaxTask",
    "TRESUsageInMin",
    "TRESUsageInMinNode",
    "TRESUsageInMinTask",
    "TRESUsageInTot",
    "TRESUsageOutAve",
    "TRESUsageOutMax",
    "TRESUsageOutMaxNode",
    "TRESUsageOutMaxTask",
    "TRESUsageOutMin",
    "TRESUsageOutMinNode",
    "TRESUsageOutMinTask",
    "TRESUsageOutTot",
    "UID",
    "User",
    "UserCPU",
    "WCKey",
    "WCKeyID",
    "WorkDir",
];

/// sacct's fields that are clock readings in seconds or measured CPU time: left out.
const SACCT_CLOCK: &[&str] = &["CPUTimeRAW", "ElapsedRaw", "ResvCPURAW", "TotalCPU", "UserCPU", "SystemCPU"];

/// sacct's fields (by prefix) measured in a step while it ran.
const SACCT_MEASURED: &[&str] = &["Ave", "Max", "Min", "ConsumedEnergy", "TRESUsage"];

/// The letters of squeue's and sinfo's `-o`, every one (invalid ones are answered too).
fn letters() -> impl Iterator<Item = char> {
    ('a'..='z').chain('A'..='Z')
}

/// `cmd` with the job ids it prints (`job 12`, `allocation 12`, `StepId=12.0`, `JobId=12`)
/// as `<ID>`, on stdout and stderr, its exit status kept: for the cases whose subject is not
/// which id was given (those are the `next-id` cases').
fn without_ids(cmd: &str) -> String {
    const SED: &str = r"s/\b([Jj]ob|allocation) [0-9]+/\1 <ID>/g; s/\b(StepId|JobId)=[0-9]+/\1=<ID>/g";
    format!(
        "{{ {cmd}; }} 2>.err | sed -E '{SED}'; rc=${{PIPESTATUS[0]}}; sed -E '{SED}' .err >&2; rm -f .err; exit $rc"
    )
}

/// `cmd` with the lines after its first `keep` sorted (`sort`, C locale).
fn sorted_rows(cmd: &str, keep: usize) -> String {
    format!("{cmd} | {{ for _ in $(seq {keep}); do IFS= read -r l && printf '%s\\n' \"$l\"; done; sort; }}")
}

/// The whole corpus, in the order it runs.
pub fn cases() -> Vec<Case> {
    let mut c = Corpus(Vec::new());
    squeue(&mut c);
    sinfo(&mut c);
    scontrol_show(&mut c);
    sacct(&mut c);
    sacctmgr(&mut c);
    others(&mut c);
    mutations(&mut c);
    submissions(&mut c);
    srun(&mut c);
    // Lines that may use up a job id where the other side does not come last, so that a
    // difference there moves no id of the cases before; the next id is shown between them.
    next_id(&mut c, "before-refusals");
    refusals(&mut c);
    next_id(&mut c, "after-refusals");
    srun_refusals(&mut c);
    next_id(&mut c, "after-srun");
    refused_submissions(&mut c);
    next_id(&mut c, "after-refused");
    c.0
}

/// A held submission, cancelled: the next job id (shows whether the lines before used any).
fn next_id(c: &mut Corpus, id: &str) {
    c.add(
        format!("sbatch/next-id-{id}"),
        "id=$(sbatch --parsable -H -o /dev/null --wrap true) && echo $id && scancel $id",
    );
}

fn squeue(c: &mut Corpus) {
    for (id, args) in [
        ("plain", ""),
        ("a", "-a"),
        ("l", "-l"),
        ("h", "-h"),
        ("r", "-r"),
        ("array", "--array"),
        ("r-l", "-r -l"),
        ("t-all", "-t all"),
        ("t-all-r", "-t all -r"),
        ("all", "--all"),
        ("noheader-r", "--noheader -r"),
        ("start", "--start"),
        ("s", "-s"),
        ("s-l", "-s -l"),
        ("s-h", "-s -h"),
        ("steps-job", "-s -j $RUN2"),
        ("steps-step", "-s -j $RUN2.0"),
        ("steps-batch", "-s -j $RUN1.batch"),
        ("steps-none", "-s -j $HELD"),
        ("steps-p", "-s -p gpu"),
        ("me", "--me"),
        ("u-root", "-u root"),
        ("u-0", "-u 0"),
        ("u-nosuch", "-u nosuchuser"),
        ("A-physics", "-A physics"),
        ("A-root", "-A root"),
        ("A-nosuch", "-A nosuch"),
        ("q-normal", "-q normal"),
        ("p-gpu", "-p gpu"),
        ("p-cpu", "-p cpu"),
        ("p-both", "-p cpu,gpu"),
        ("p-nosuch", "-p nosuch"),
        ("w-node1", "-w node1"),
        ("w-range", "-w node[1-2]"),
        ("w-node4", "-w node4"),
        ("w-nosuch", "-w nosuch"),
        ("n-run1", "-n run1"),
        ("n-two", "-n run1,held"),
        ("n-nosuch", "-n nosuch"),
        ("L-none", "-L foo"),
        ("R-none", "-R nosuch"),
        ("j-run1", "-j $RUN1"),
        ("j-two", "-j $RUN1,$HELD"),
        ("j-done", "-j $DONE"),
        ("j-arr", "-j $ARR"),
        ("j-arr-r", "-j $ARR -r"),
        ("j-arr-task", "-j ${ARR}_3"),
        ("j-arr-running-task", "-j ${ARR}_0"),
        ("j-nosuch", "-j 99999"),
        ("j-bad", "-j abc"),
        ("j-job", "--job=$BIG"),
        ("j-jobs", "--jobs $BIG,$DEP"),
        ("t-pd", "-t PD"),
        ("t-pending", "-t pending"),
        ("t-r", "-t R"),
        ("t-running", "--states=running"),
        ("t-cd", "-t CD"),
        ("t-ca", "-t CA"),
        ("t-f", "-t F"),
        ("t-pd-r", "-t PD,R"),
        ("t-bogus", "-t bogus"),
        ("t-lower", "-t pd"),
        ("S-i", "-S i"),
        ("S-neg-i", "-S -i"),
        ("S-P", "-S P,-i"),
        ("S-j", "-S j"),
        ("S-t", "-S t"),
        ("S-neg-t", "-S -t,i"),
        ("S-D", "-S D,i"),
        ("S-p", "-S p"),
        ("S-M", "-S M,i"),
        ("S-l", "-S l,i"),
        ("S-bad", "-S Q"),
        ("O-default-widths", "-O JobID,Name,State,NodeList"),
        ("O-width", "-O JobID:5,Name:3,State:20"),
        ("O-right", "-O JobID:.10,Name:.10"),
        ("O-bogus", "-O Bogus"),
        ("O-bogus-width", "-O JobID:x"),
        ("o-width", "-o '%5i %.3j %-10T|'"),
        ("o-pipe", "-o '%i|%j|%T|%r'"),
        ("o-literal", "-o 'job %i is %T%%'"),
        ("o-empty", "-o ''"),
        ("format-long", "--format='%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R'"),
        ("Format-long", "--Format=JobID,Partition,Name,UserName,StateCompact,TimeUsed,NumNodes,ReasonList"),
        ("h-o", "-h -o %i"),
        ("v", "-v -h -o %i"),
        ("version", "--version"),
        ("V", "-V"),
        ("usage", "--usage"),
        ("bogus-option", "--bogus"),
        ("extra-arg", "extra"),
        ("i-bad", "-i x"),
        ("M-nosuch", "-M nosuch"),
        ("json-bad", "--json --yaml"),
    ] {
        c.add(format!("squeue/{id}"), format!("squeue {args}").trim_end().to_string());
    }
    for l in letters() {
        c.add(format!("squeue/o-{l}"), format!("squeue -t all -r -o '%i|%{l}'"));
    }
    for l in letters() {
        c.add(format!("squeue/s-o-{l}"), format!("squeue -s -o '%i|%{l}'"));
    }
    for f in SQUEUE_FIELDS {
        c.add(format!("squeue/O-{f}"), format!("squeue -t all -r -O JobID,{f}"));
    }
    for f in SQUEUE_STEP_FIELDS {
        c.add(format!("squeue/s-O-{f}"), format!("squeue -s -O StepID,{f}"));
    }
    // A left time is a clock reading for a running job: asked of pending ones.
    c.add("squeue/o-L-pending", "squeue -t PD -r -o '%i|%L'");
    c.add("squeue/O-TimeLeft-pending", "squeue -t PD -r -O JobID,TimeLeft");
}

fn sinfo(c: &mut Corpus) {
    for (id, args) in [
        ("plain", ""),
        ("a", "-a"),
        ("l", "-l"),
        ("N", "-N"),
        ("Nl", "-N -l"),
        ("s", "-s"),
        ("R", "-R"),
        ("R-l", "-R -l"),
        ("e", "-e"),
        ("h", "-h"),
        ("r", "-r"),
        ("d", "-d"),
        ("noconvert", "--noconvert -N -l"),
        ("p-gpu", "-p gpu"),
        ("p-nosuch", "-p nosuch"),
        ("n-node1", "-n node1"),
        ("n-range", "-n node[1-2]"),
        ("n-N", "-N -n node[2-4]"),
        ("n-nosuch", "-n nosuch"),
        ("t-idle", "-t idle"),
        ("t-drain", "-t drain"),
        ("t-drained", "-t drained"),
        ("t-alloc", "-t alloc"),
        ("t-mix", "-t mix"),
        ("t-two", "-t alloc,drain"),
        ("t-bogus", "-t bogus"),
        ("S-P", "-S P"),
        ("S-neg-N", "-N -S -N"),
        ("S-t", "-S t"),
        ("O-width", "-O NodeList:20,StateLong:.12,CPUs:3"),
        ("O-bogus", "-O Bogus"),
        ("o-pipe", "-o '%P|%a|%l|%D|%t|%N'"),
        ("o-width", "-o '%10P %.5D %-8t|'"),
        ("o-literal", "-o 'x%%%Py'"),
        ("Format-N", "-N -O NodeList,Partition,StateLong,CPUs,Memory,Gres"),
        ("summarize-N", "-s -N"),
        ("version", "--version"),
        ("usage", "--usage"),
        ("bogus-option", "--bogus"),
        ("extra-arg", "extra"),
        ("i-bad", "-i x"),
        ("M-nosuch", "-M nosuch"),
        ("v", "-v -h -o %P"),
        ("dead", "--dead"),
        ("responding", "--responding -h"),
        ("reservation", "-T"),
    ] {
        let cmd = format!("sinfo {args}").trim_end().to_string();
        // Rows that tie on the sort keys (a node in two partitions with -N, two states'
        // rows with -S t) come in no order Slurm defines: the lines under the header sorted.
        let cmd = match id {
            "N" | "n-N" | "Format-N" | "summarize-N" | "S-neg-N" | "S-t" => sorted_rows(&cmd, 1),
            "Nl" | "noconvert" => sorted_rows(&cmd, 2),
            _ => cmd,
        };
        c.add(format!("sinfo/{id}"), cmd);
    }
    for l in letters().filter(|l| !matches!(l, 'O' | 'e')) {
        c.add(format!("sinfo/o-{l}"), format!("sinfo -o '%P|%{l}'"));
        c.add(format!("sinfo/N-o-{l}"), sorted_rows(&format!("sinfo -N -o '%N|%{l}'"), 1));
    }
    for f in SINFO_FIELDS {
        c.add(format!("sinfo/O-{f}"), format!("sinfo -O Partition,{f}"));
        c.add(format!("sinfo/N-O-{f}"), sorted_rows(&format!("sinfo -N -O NodeList,{f}"), 1));
    }
}

fn scontrol_show(c: &mut Corpus) {
    for j in JOBS {
        let l = j.to_lowercase();
        c.add(format!("scontrol/show-job-{l}"), format!("scontrol show job ${j}"));
        c.add(format!("scontrol/o-show-job-{l}"), format!("scontrol -o show job ${j}"));
        c.add(format!("scontrol/d-show-job-{l}"), format!("scontrol -d show job ${j}"));
    }
    for (id, args) in [
        ("show-job-arr-task", "show job ${ARR}_3"),
        ("show-job-arr-running", "show job ${ARR}_1"),
        ("show-jobid", "show jobid $RUN1"),
        ("show-jobs", "show jobs"),
        ("show-job-all", "show job"),
        ("o-show-job-all", "-o show job"),
        ("show-job-nosuch", "show job 99999"),
        ("show-job-bad", "show job abc"),
        ("show-step", "show step $RUN2.0"),
        ("show-steps", "show steps"),
        ("o-show-steps", "-o show steps"),
        ("show-step-batch", "show step $RUN1.batch"),
        ("show-step-nosuch", "show step $RUN1.7"),
        ("d-show-step", "-d show step $RUN2.0"),
        ("show-nodes", "show nodes"),
        ("show-node", "show node"),
        ("o-show-nodes", "-o show nodes"),
        ("d-show-node1", "-d show node node1"),
        ("show-node-range", "show node node[1-2]"),
        ("show-node-nosuch", "show node nosuch"),
        ("show-partition", "show partition"),
        ("show-partitions", "show partitions"),
        ("show-partition-gpu", "show partition gpu"),
        ("o-show-partition", "-o show partition"),
        ("show-partition-nosuch", "show partition nosuch"),
        ("show-reservation", "show reservation"),
        ("show-res-nosuch", "show res nosuch"),
        ("show-hostnames", "show hostnames node[1-3]"),
        ("show-hostnames-two", "show hostnames node[1-2],gpu[01-02]"),
        ("show-hostnames-pad", "show hostnames n[008-011]"),
        ("show-hostlist", "show hostlist node1,node2,node3"),
        ("show-hostlist-mixed", "show hostlist node3,node1,gpu2,node2"),
        ("show-hostlistsorted", "show hostlistsorted node3,node1,node2"),
        ("show-hostnames-env", "show hostnames"),
        ("show-licenses", "show licenses"),
        ("show-frontend", "show frontend"),
        ("show-assoc", "show assoc_mgr flags=qos"),
        ("show-burstbuffer", "show burstbuffer"),
        ("show-federation", "show federation"),
        ("show-bogus", "show bogus"),
        ("show-config-clustername", "show config | grep -E '^(ClusterName|SelectType|SelectTypeParameters|SchedulerType|PriorityType|MaxArraySize|MaxJobCount|ReturnToService|GresTypes|MpiDefault|ProctrackType|TaskPlugin|AccountingStorageType|JobAcctGatherType|SlurmUser|AuthType) '"),
        ("show-daemons", "show daemons"),
        ("bogus", "bogus"),
        ("version", "--version"),
        ("V", "-V"),
        ("version-cmd", "version"),
        ("ping", "ping | sed 's/ at [^ ]* / at X /'"),
        ("bogus-option", "--bogus"),
        ("show-no-entity", "show"),
        ("show-topology", "show topology"),
        ("getaddrs", "getaddrs node1"),
    ] {
        c.add(format!("scontrol/{}", id), format!("scontrol {args}"));
    }
}

fn sacct(c: &mut Corpus) {
    // The finished jobs (whose every field is settled) and then everything.
    let done = "$DONE,$FAIL,$STEPS,$CANRUN,$PHYS";
    for (id, args) in [
        ("done", format!("-j {done}")),
        ("done-X", format!("-X -j {done}")),
        ("done-P", format!("-P -j {done}")),
        ("done-p", format!("-p -j {done}")),
        ("done-n", format!("-n -j {done}")),
        ("done-b", format!("-b -j {done}")),
        ("done-l", format!("-l -j {done}")),
        ("done-delim", format!("-P --delimiter=, -j {done}")),
        ("done-noconvert", format!("--noconvert -o JobID,ReqMem,AllocTRES -j {done}")),
        ("done-units-K", format!("--units=K -o JobID,ReqMem,MaxRSS -j {done}")),
        ("done-units-bad", format!("--units=Q -j {done}")),
        ("done-D", format!("-D -j {done}")),
        ("done-parsable-X-n", format!("-X -n -P -o JobID,State,ExitCode -j {done}")),
        ("done-width", format!("-o JobID%20,JobName%-5,State%3,ExitCode -j {done}")),
        ("done-width-P", format!("-P -o JobID%20,JobName%-5 -j {done}")),
        ("done-brief-P", format!("-b -P -j {done}")),
        ("done-o-bogus", format!("-o Bogus -j {done}")),
        ("steps", "-j $STEPS".into()),
        ("step-0", "-j $STEPS.0".into()),
        ("step-batch", "-j $STEPS.batch".into()),
        ("step-X", "-X -j $STEPS".into()),
        ("fail", "-j $FAIL -o JobID,State,ExitCode,DerivedExitCode".into()),
        ("canceled", "-j $CANRUN -o JobID,State%20,ExitCode".into()),
        ("canpd", "-j $CANPD".into()),
        ("held", "-j $HELD".into()),
        ("running", "-j $RUN1,$RUN2 -o JobID,JobName,State,AllocCPUS,NodeList,ReqTRES%40".into()),
        ("arr", "-j $ARR -o JobID,JobName,State,NodeList".into()),
        ("arr-task", "-j ${ARR}_1 -o JobID,JobName,State".into()),
        ("arr-pending-task", "-j ${ARR}_4 -o JobID,JobName,State".into()),
        ("all-X", "-a -X -o JobID,JobName,State,ExitCode".into()),
        ("all", "-a -o JobID,JobName,State,ExitCode".into()),
        ("plain", "-o JobID,JobName,State".into()),
        ("s-CD", "-a -X -s CD -o JobID,JobName,State".into()),
        ("s-F", "-a -X -s F -o JobID,JobName,State".into()),
        ("s-CA", "-a -X -s CA -o JobID,JobName,State".into()),
        ("s-R", "-a -X -s R -o JobID,JobName,State".into()),
        ("s-PD", "-a -X -s PD -o JobID,JobName,State".into()),
        ("s-two", "-a -X -s CD,F -o JobID,JobName,State".into()),
        ("s-bogus", "-a -X -s bogus".into()),
        ("name", "-a -X --name=done,fail -o JobID,JobName".into()),
        ("r-gpu", "-a -X -r gpu -o JobID,JobName,Partition".into()),
        ("A-physics", "-a -X -A physics -o JobID,JobName,Account".into()),
        ("u-root", "-X -u root -o JobID,JobName,User".into()),
        ("u-nosuch", "-X -u nosuchuser".into()),
        ("N-node1", "-a -X -N node1 -o JobID,JobName,NodeList".into()),
        ("x", "-a -X -x $DONE,$FAIL -o JobID,JobName".into()),
        ("E-before", "-a -X -S 2020-01-01 -E 2020-01-02".into()),
        ("S-bad", "-S notadate".into()),
        ("j-bad", "-j abc".into()),
        ("j-nosuch", "-j 99999".into()),
        ("e", "-e".into()),
        ("helpformat", "--helpformat".into()),
        ("version", "--version".into()),
        ("V", "-V".into()),
        ("usage", "--usage".into()),
        ("bogus-option", "--bogus".into()),
        ("M-nosuch", "-M nosuch -X".into()),
        ("extra-arg", "extra".into()),
        ("array-X", "-X -j $ARR --array -o JobID,State".into()),
    ] {
        c.add(format!("sacct/{id}"), format!("sacct {args}"));
    }
    for f in SACCT_FIELDS.iter().filter(|f| !SACCT_CLOCK.contains(f)) {
        // What was measured of a step differs from run to run: asked of allocations, where
        // Slurm leaves it empty.
        let x = if SACCT_MEASURED.iter().any(|m| f.starts_with(m)) { "-X " } else { "" };
        c.add(format!("sacct/o-{f}"), format!("sacct {x}-j {done} -o JobID,{f}"));
    }
}

fn sacctmgr(c: &mut Corpus) {
    for (id, args) in [
        ("show-account", "show account"),
        ("list-accounts", "list accounts"),
        ("show-account-P", "-P show account"),
        ("show-account-n", "-n show account"),
        ("show-account-s", "show account -s"),
        ("show-account-withassoc", "show account withassoc"),
        ("show-account-physics", "show account physics"),
        ("show-account-where", "show account where name=theory"),
        ("show-account-format", "show account format=account,parent,desc%20"),
        ("show-account-nosuch", "show account nosuch"),
        ("show-user", "show user"),
        ("show-user-s", "show user -s"),
        ("show-user-withassoc", "show user withassoc"),
        ("show-user-root", "show user root"),
        ("show-user-format", "show user format=user,defaultaccount,admin"),
        ("show-assoc", "show assoc"),
        ("show-assoc-P", "-P show assoc"),
        ("show-assoc-tree", "show assoc tree"),
        ("show-assoc-format", "show assoc format=cluster,account,user,fairshare,qos"),
        ("show-assoc-where", "show assoc where account=physics"),
        ("show-assoc-user", "show assoc user=root"),
        ("show-cluster", "show cluster"),
        ("show-cluster-format", "show cluster format=cluster,controlhost,rpc"),
        ("show-qos", "show qos"),
        ("show-qos-P", "-P show qos"),
        ("show-qos-format", "show qos format=name,priority,maxwall,flags"),
        ("show-tres", "show tres"),
        ("show-tres-P", "-P show tres"),
        ("show-configuration", "show configuration | head -3"),
        ("show-stats", "show stats | head -2"),
        ("show-event", "show event format=cluster,nodes,state,reason"),
        ("show-problem", "show problem"),
        ("show-wckey", "show wckey"),
        ("show-resource", "show resource"),
        ("show-reservation", "show reservation"),
        ("show-transaction-format", "show transaction format=action,actor,where | head -5"),
        ("show-runaway", "show runawayjobs"),
        ("show-bogus", "show bogus"),
        ("show-user-bogus-format", "show user format=bogus"),
        ("bogus", "bogus"),
        ("version", "--version"),
        ("V", "-V"),
        ("bogus-option", "--bogus"),
        ("add-account-noname", "-i add account"),
        ("add-user-noaccount", "-i add user nosuchuser2"),
        ("add-account-bad-parent", "-i add account x1 parent=nosuch"),
        ("delete-nosuch", "-i delete account nosuch"),
        ("modify-nosuch", "-i modify account nosuch set fairshare=2"),
        ("add-account-dup", "-i add account physics"),
    ] {
        c.add(format!("sacctmgr/{}", id), format!("sacctmgr {args}"));
    }
}

fn others(c: &mut Corpus) {
    for (id, cmd) in [
        ("sshare/plain", "sshare"),
        ("sshare/a", "sshare -a"),
        ("sshare/l", "sshare -l"),
        ("sshare/P", "sshare -P"),
        ("sshare/n", "sshare -n"),
        ("sshare/A", "sshare -A physics"),
        ("sshare/u", "sshare -u root"),
        ("sshare/version", "sshare --version"),
        ("sshare/bogus-option", "sshare --bogus"),
        ("sprio/plain", "sprio"),
        ("sprio/l", "sprio -l"),
        ("sprio/j", "sprio -j $BIG"),
        ("sprio/w", "sprio -w"),
        ("sprio/version", "sprio --version"),
        ("sprio/bogus-option", "sprio --bogus"),
        ("sstat/running", "sstat -j $RUN2.0 -o JobID,NTasks"),
        ("sstat/done", "sstat -j $DONE"),
        ("sstat/nosuch", "sstat -j 99999"),
        ("sstat/noarg", "sstat"),
        ("sstat/version", "sstat --version"),
        ("sstat/bogus-option", "sstat --bogus"),
        ("sreport/version", "sreport --version"),
        ("sreport/bogus", "sreport bogus"),
        ("sreport/cluster-util-P", "sreport -P cluster utilization start=2020-01-01 end=2020-01-02"),
        ("sreport/user-top-P", "sreport -P user top start=2020-01-01 end=2020-01-02"),
        ("scancel/version", "scancel --version"),
        ("scancel/noarg", "scancel"),
        ("scancel/bogus-option", "scancel --bogus"),
        ("scancel/nosuch", "scancel 99999"),
        ("scancel/bad", "scancel abc"),
        ("scancel/done", "scancel $DONE"),
        ("scancel/n-nosuch", "scancel -n nosuch"),
        ("scancel/u-nosuch", "scancel -u nosuchuser"),
        ("scancel/s-bad", "scancel -s BOGUS $HELD"),
        ("scancel/t-bad", "scancel -t bogus"),
        ("scancel/p-nosuch", "scancel -p nosuch"),
        ("sbatch/version", "sbatch --version"),
        ("srun/version", "srun --version"),
        ("salloc/version", "salloc --version"),
    ] {
        c.add(id, cmd);
    }
}

/// Bad option values, for sbatch, srun and salloc alike (most are refused before the
/// controller is asked; sbatch's are held, and srun's run on the node freed for steps).
const BAD: &[(&str, &str)] = &[
    ("N-zero", "-N 0"),
    ("N-bad", "-N x"),
    ("N-range-bad", "-N 3-1"),
    ("n-zero", "-n 0"),
    ("n-bad", "-n x"),
    ("c-zero", "-c 0"),
    ("c-bad", "-c x"),
    ("t-bad", "-t bogus"),
    ("t-neg", "-t -5"),
    ("mem-bad", "--mem=foo"),
    ("mem-per-cpu-bad", "--mem-per-cpu=1X"),
    ("both-mem", "--mem=1G --mem-per-cpu=1G"),
    ("a-bad", "-a 0-x"),
    ("a-range", "-a 5-1"),
    ("begin-bad", "--begin=notatime"),
    ("d-bad", "-d bogus:1"),
    ("mail-type-bad", "--mail-type=garbage"),
    ("signal-bad", "--signal=BOGUS@10"),
    ("distribution-bad", "-m bogus"),
    ("gres-bad", "--gres=gpu:x"),
    ("nice-bad", "--nice=x"),
    ("ntasks-per-node-bad", "--ntasks-per-node=x"),
    ("cpus-per-gpu-bad", "--cpus-per-gpu=x"),
    ("exclusive-bad", "--exclusive=bogus"),
    ("open-mode-bad", "--open-mode=bogus"),
    ("export-file-missing", "--export-file=/nonexistent/x"),
    ("bogus-option", "--bogus"),
    ("J-missing", "-J"),
    ("time-min-bad", "--time-min=bogus"),
    ("deadline-bad", "--deadline=bogus"),
    ("hint-bad", "--hint=bogus"),
    ("propagate-bad", "--propagate=BOGUS"),
    ("acctg-freq-bad", "--acctg-freq=bogus=5"),
    ("cpu-freq-bad", "--cpu-freq=bogus"),
    ("tmp-bad", "--tmp=x"),
    ("threads-per-core-bad", "--threads-per-core=x"),
    ("B-bad", "-B x:y:z:w"),
    ("priority-bad", "--priority=x"),
    ("kill-on-invalid-dep-bad", "--kill-on-invalid-dep=maybe"),
    ("wckey-empty", "--wckey="),
];

fn refusals(c: &mut Corpus) {
    // Held, and cancelled where it was taken after all.
    for (id, opt) in BAD {
        c.add(
            format!("sbatch/bad-{id}"),
            format!("out=$(sbatch -H {opt} -o /dev/null --wrap true); rc=$?; echo \"$out\"; [ $rc = 0 ] && scancel ${{out##* }}; exit $rc"),
        );
    }
    for (id, cmd) in [
        ("sbatch/no-script", "sbatch < /dev/null"),
        ("sbatch/not-a-script", "printf 'echo hi\\n' > noshebang.sh && sbatch noshebang.sh"),
        ("sbatch/missing-file", "sbatch /nonexistent/job.sh"),
        ("sbatch/wrap-and-file", "sbatch --wrap true job.sh"),
        ("sbatch/empty-wrap", "sbatch --wrap ''"),
        ("salloc/usage", "salloc --usage"),
        ("sbatch/usage", "sbatch --usage"),
        ("srun/usage", "srun --usage"),
    ] {
        c.add(id, cmd);
    }
}

/// Lines that change state, each asked about right after. Nothing here makes a job start or
/// end (every node's CPU is taken and node4 is drained), so the answers do not race the
/// scheduler.
fn mutations(c: &mut Corpus) {
    for (id, cmd) in [
        ("scontrol/hold", "scontrol hold $DEP && squeue -j $DEP -o '%i %T %r'"),
        ("scontrol/hold-again", "scontrol hold $DEP"),
        ("scontrol/release", "scontrol release $DEP && squeue -j $DEP -o '%i %T %r'"),
        ("scontrol/uhold", "scontrol uhold $DEP && squeue -j $DEP -o '%i %T %r'"),
        ("scontrol/release-u", "scontrol release $DEP && squeue -j $DEP -o '%i %T %r'"),
        ("scontrol/hold-nosuch", "scontrol hold 99999"),
        ("scontrol/hold-done", "scontrol hold $DONE"),
        ("scontrol/release-running", "scontrol release $RUN1"),
        ("scontrol/update-timelimit", "scontrol update jobid=$BIG TimeLimit=5:00:00 && squeue -j $BIG -o '%i %l'"),
        ("scontrol/update-timelimit-minutes", "scontrol update jobid=$BIG TimeLimit=300 && squeue -j $BIG -o '%i %l'"),
        ("scontrol/update-name", "scontrol update jobid=$BIG Name=renamed && squeue -j $BIG -o '%i %j'"),
        ("scontrol/update-comment", "scontrol update jobid=$BIG Comment=hello && scontrol show job $BIG | grep -o 'Comment=[^ ]*'"),
        ("scontrol/update-nice", "scontrol update jobid=$BIG Nice=10 && squeue -j $BIG -o '%i %y'"),
        ("scontrol/update-partition", "scontrol update jobid=$BIG Partition=gpu && squeue -j $BIG -o '%i %P'"),
        ("scontrol/update-partition-nosuch", "scontrol update jobid=$BIG Partition=nosuch"),
        ("scontrol/update-numnodes", "scontrol update jobid=$BIG NumNodes=3 && squeue -j $BIG -o '%i %D'"),
        ("scontrol/update-bad-key", "scontrol update jobid=$BIG Bogus=1"),
        ("scontrol/update-nosuch", "scontrol update jobid=99999 Name=x"),
        ("scontrol/update-done", "scontrol update jobid=$DONE Name=x"),
        ("scontrol/update-running-timelimit", "scontrol update jobid=$RUN1 TimeLimit=3:00:00 && squeue -j $RUN1 -o '%i %l'"),
        ("scontrol/update-no-id", "scontrol update Name=x"),
        ("scontrol/update-arr-task", "scontrol update jobid=${ARR}_4 Name=arr4 && squeue -r -j $ARR -o '%i %j'"),
        ("scontrol/update-arr-throttle", "scontrol update jobid=$ARR ArrayTaskThrottle=1 && squeue -j $ARR -o '%i %T'"),
        ("scontrol/top", "scontrol top $LATER"),
        ("scontrol/node-drain-noreason", "scontrol update nodename=node2 state=drain"),
        ("scontrol/node-bad-state", "scontrol update nodename=node2 state=bogus"),
        ("scontrol/node-nosuch", "scontrol update nodename=nosuch state=resume"),
        ("scontrol/node-drain", "scontrol update nodename=node2 state=drain reason=later && sinfo -N -o '%N %T %E'"),
        ("scontrol/node-undrain", "scontrol update nodename=node2 state=undrain && sinfo -N -o '%N %T %E'"),
        ("scontrol/node-weight", "scontrol update nodename=node2 weight=5 && scontrol show node node2 | grep -o 'Weight=[0-9]*'"),
        ("scontrol/partition-down", "scontrol update partitionname=gpu state=down && sinfo -o '%P %a'"),
        ("scontrol/partition-up", "scontrol update partitionname=gpu state=up && sinfo -o '%P %a'"),
        ("scontrol/partition-nosuch", "scontrol update partitionname=nosuch state=up"),
        ("scontrol/suspend-pending", "scontrol suspend $BIG"),
        ("scontrol/requeue-pending", "scontrol requeue $BIG"),
        ("scontrol/requeue-nosuch", "scontrol requeue 99999"),
        ("scontrol/notify", "scontrol notify $RUN1 hello"),
        ("scontrol/create-res-bad", "scontrol create reservation starttime=now duration=60"),
        ("scontrol/create-res", "scontrol create reservation reservationname=maint starttime=2030-01-01T00:00:00 duration=120 nodes=node1 users=root"),
        ("scontrol/show-res-created", "scontrol show reservation maint"),
        ("scontrol/delete-res", "scontrol delete reservationname=maint"),
        ("scontrol/delete-res-nosuch", "scontrol delete reservationname=maint"),
        ("scancel/held", "scancel $HELD && squeue -t all -j $HELD -o '%i %T'"),
        ("scancel/arr-task", "scancel ${ARR}_5 && squeue -r -t all -j $ARR -o '%i %T'"),
        ("scancel/arr-again", "scancel ${ARR}_5"),
        ("scancel/n-name", "scancel -n later && squeue -t all -j $LATER -o '%i %T'"),
        ("scancel/v", "scancel -v $DEP"),
        ("scancel/i-no", "echo n | scancel -i $BIG; squeue -j $BIG -o '%i %T'"),
    ] {
        c.add(id, cmd);
    }
}

/// One held submission per option, shown as the controller stores it, then cancelled: each
/// takes one job id on either side.
fn submissions(c: &mut Corpus) {
    for (id, opt) in [
        ("plain", ""),
        ("J", "-J named"),
        ("N2", "-N 2"),
        ("N-range", "-N 1-3"),
        ("n4", "-n 4"),
        ("c2", "-c 2"),
        ("n-c", "-n 2 -c 2"),
        ("ntasks-per-node", "-N 2 --ntasks-per-node=2"),
        ("t-minutes", "-t 90"),
        ("t-hms", "-t 2:30:00"),
        ("t-days", "-t 1-12"),
        ("t-days-hours-min", "-t 2-03:04"),
        ("t-infinite", "-t infinite"),
        ("time-min", "-t 3:00:00 --time-min=2:00:00"),
        ("mem", "--mem=1G"),
        ("mem-mb", "--mem=1500"),
        ("mem-per-cpu", "--mem-per-cpu=500"),
        ("mem-0", "--mem=0"),
        ("p-gpu", "-p gpu"),
        ("p-both", "-p cpu,gpu"),
        ("gres", "--gres=gpu:2"),
        ("gres-type", "--gres=gpu:fake:1"),
        ("gpus", "--gpus=2"),
        ("gpus-per-node", "--gpus-per-node=1"),
        ("cpus-per-gpu", "--gpus=1 --cpus-per-gpu=2"),
        ("A", "-A physics"),
        ("comment", "--comment='two words'"),
        ("o", "-o out-%j.txt"),
        ("e", "-e err-%x.txt"),
        ("i", "-i /dev/null"),
        ("D", "-D /tmp"),
        ("exclusive", "--exclusive"),
        ("oversubscribe", "--oversubscribe"),
        ("nice", "--nice=100"),
        ("requeue", "--requeue"),
        ("no-requeue", "--no-requeue"),
        ("begin", "--begin=2030-01-01T10:00:00"),
        ("d-afterok", "-d afterok:$DONE"),
        ("d-afterany", "-d afterany:$RUN1:$DONE"),
        ("d-singleton", "-d singleton -J run1"),
        ("d-or", "-d 'afterok:$RUN1?afternotok:$DONE'"),
        ("w", "-w node1"),
        ("x", "-x node1"),
        ("C", "-C foo"),
        ("contiguous", "--contiguous"),
        ("mail", "--mail-type=END,FAIL --mail-user=a@b"),
        ("signal", "--signal=USR1@120"),
        ("signal-B", "--signal=B:TERM@60"),
        ("array", "-a 1-3"),
        ("array-step", "-a 0-10:5"),
        ("array-list", "-a 1,3,7%1"),
        ("wckey", "--wckey=w1"),
        ("qos", "-q normal"),
        ("priority", "--priority=50"),
        ("distribution", "-m cyclic"),
        ("open-mode", "--open-mode=append"),
        ("export-none", "--export=NONE"),
        ("export-vars", "--export=ALL,FOO=bar"),
        ("get-user-env", "--get-user-env"),
        ("no-kill", "--no-kill"),
        ("kill-on-invalid-dep", "--kill-on-invalid-dep=yes"),
        ("threads-per-core", "--threads-per-core=1"),
        ("sockets-per-node", "--sockets-per-node=1"),
        ("cores-per-socket", "--cores-per-socket=2"),
        ("ntasks-per-core", "--ntasks-per-core=1"),
        ("hint", "--hint=nomultithread"),
        ("tmp", "--tmp=100"),
        ("mincpus", "--mincpus=2"),
        ("deadline", "--deadline=2030-01-01T00:00:00"),
        ("profile", "--profile=none"),
        ("acctg-freq", "--acctg-freq=task=10"),
        ("spread-job", "--spread-job"),
        ("use-min-nodes", "--use-min-nodes"),
        ("gpus-per-task", "-n 2 --gpus-per-task=1"),
        ("mem-per-gpu", "--gpus=1 --mem-per-gpu=1000"),
        ("parsable", "--parsable"),
    ] {
        let held = format!("sbatch -H {opt} --wrap true").replace("  ", " ");
        // The job's own id is `<ID>`: what the case shows is how the option is stored (the
        // ids given out are the `next-id` cases' subject).
        c.add(
            format!("sbatch/show-{id}"),
            format!(
                "out=$({held}) && id=${{out##* }} && id=${{id%%;*}} && {{ echo \"$out\"; scontrol show job $id; }} | sed -E \"s/(JobId=|ArrayJobId=|job |slurm-|out-|^)$id([^0-9]|$)/\\1<ID>\\2/g\"; scancel $id"
            ),
        );
    }
    // Directives in a script, and the file's own details.
    for (id, script) in [
        ("directives", "#!/bin/bash\n#SBATCH -J fromscript\n#SBATCH -t 2:00:00\n#SBATCH -n 2\ntrue\n"),
        ("directive-override", "#!/bin/bash\n#SBATCH -J fromscript\ntrue\n"),
        ("directive-after-command", "#!/bin/bash\ntrue\n#SBATCH -J ignored\n"),
        ("directive-parsable", "#!/bin/bash\n#SBATCH --parsable\ntrue\n"),
        ("directive-bad", "#!/bin/bash\n#SBATCH --bogus\ntrue\n"),
    ] {
        let extra = if id == "directive-override" { "-J fromcli " } else { "" };
        c.add(
            format!("sbatch/{id}"),
            format!(
                "printf '{}' > s.sh && out=$(sbatch -H {extra}s.sh) && id=${{out##* }} && id=${{id%%;*}} && {{ echo \"$out\"; squeue -j $id -o '%i|%j|%l|%C|%T'; }} | sed -E \"s/(JobId=|ArrayJobId=|job |slurm-|out-|^)$id([^0-9]|$)/\\1<ID>\\2/g\"; scancel $id",
                script.replace('\n', "\\n")
            ),
        );
    }
}

/// Steps on node4, freed for them: node drain reasons, outputs and environments.
fn srun(c: &mut Corpus) {
    // The pending job that backfill would plan onto node4 goes first.
    c.add("scancel/big", "scancel $BIG && squeue -t all -j $BIG -o '%i %T'");
    c.add("scontrol/node-resume", "scontrol update nodename=node4 state=resume && sinfo -N -o '%N %T'");
    let env_filter = "grep -E '^SLURM_(CPUS_ON_NODE|CPUS_PER_TASK|DISTRIBUTION|GTIDS|JOB_CPUS_PER_NODE|JOB_NAME|JOB_NODELIST|JOB_NUM_NODES|JOB_PARTITION|JOB_ACCOUNT|JOB_QOS|LOCALID|NNODES|NODEID|NODELIST|NPROCS|NTASKS|NTASKS_PER_NODE|PROCID|STEP_ID|STEP_NODELIST|STEP_NUM_NODES|STEP_NUM_TASKS|STEP_TASKS_PER_NODE|TASKS_PER_NODE|TASK_PID_X|CLUSTER_NAME|SUBMIT_DIR|SUBMIT_HOST|WORKING_CLUSTER_X|MEM_PER_CPU|MEM_PER_NODE|GPUS|TRES_PER_TASK)=' | sort";
    for (id, cmd) in [
        ("true", "srun true".to_string()),
        ("false", "srun false".into()),
        ("exit-code", "srun sh -c 'exit 7'".into()),
        ("echo", "srun echo hello".into()),
        ("n2-l", "srun -n2 -l echo hi | sort".into()),
        ("label-procid", "srun -n2 --label sh -c 'echo $SLURM_PROCID' | sort".into()),
        ("J", "srun -J named sh -c 'echo $SLURM_JOB_NAME'".into()),
        ("env", format!("srun printenv | {env_filter}")),
        ("env-n2", format!("srun -n2 -l printenv | sed 's/^[0-9]*: //' | {env_filter} | uniq -c")),
        ("env-c2", format!("srun -c2 printenv | {env_filter}")),
        ("env-mem", format!("srun --mem=100 printenv | {env_filter}")),
        ("o-file", "srun -o out.txt echo to-file; cat out.txt".into()),
        ("o-pattern", "srun -n2 -o 'o-%t.txt' sh -c 'echo $SLURM_PROCID'; cat o-0.txt o-1.txt".into()),
        ("e-file", "srun -e err.txt sh -c 'echo oops >&2'; cat err.txt".into()),
        ("input", "echo typed | srun cat".into()),
        ("i-none", "srun -i none cat".into()),
        ("chdir", "srun -D /tmp pwd".into()),
        ("chdir-missing", "srun -D /nonexistent pwd".into()),
        ("export-none", "srun --export=NONE sh -c 'echo ${FOO:-unset}'".into()),
        ("export-var", "FOO=x srun --export=FOO=bar sh -c 'echo $FOO'".into()),
        ("signal-exit", "srun sh -c 'kill -9 $$'".into()),
        ("u", "srun -u echo unbuffered".into()),
        ("t", "srun -t 1:30:00 sh -c 'echo limited'".into()),
        ("test-only", "srun --test-only true".into()),
        ("w-node4", "srun -w node4 true".into()),
        ("sbatch-wait", "sbatch -W -o /dev/null --wrap 'exit 4'".into()),
        ("sbatch-wait-ok", "sbatch -W -o /dev/null --wrap true".into()),
        ("sbatch-test-only", "sbatch --test-only --wrap true 2>&1 | sed 's/ at [^ ]* / at X /'".into()),
        ("salloc-run", "salloc -N1 sh -c 'echo $SLURM_JOB_NUM_NODES $SLURM_NNODES'".into()),
    ] {
        c.add(format!("srun/{id}"), without_ids(&cmd));
    }
}

/// [`BAD`] for srun and salloc (run on node4 where they are taken after all).
fn srun_refusals(c: &mut Corpus) {
    for (id, opt) in BAD.iter().filter(|(id, _)| !matches!(*id, "a-bad" | "a-range")) {
        c.add(format!("srun/bad-{id}"), without_ids(&format!("srun {opt} true")));
    }
    for (id, opt) in [("N-zero", "-N 0"), ("t-bad", "-t bogus"), ("mem-bad", "--mem=foo"), ("bogus-option", "--bogus")]
    {
        c.add(format!("salloc/bad-{id}"), without_ids(&format!("salloc {opt} true")));
    }
    c.add("srun/no-command", "srun");
    c.add("srun/missing-command", without_ids("srun -N1 /nonexistent/x"));
}

/// Submissions the controller refuses: Slurm uses a job id for each, so they come last.
fn refused_submissions(c: &mut Corpus) {
    for (id, opt) in [
        ("p-nosuch", "-p nosuch"),
        ("N-too-many", "-N 5"),
        ("n-too-many", "-n 9"),
        ("c-too-many", "-c 3"),
        ("mem-too-much", "--mem=5000"),
        ("gres-too-many", "--gres=gpu:3"),
        ("gres-nosuch", "--gres=nosuch:1"),
        ("w-nosuch", "-w node9"),
        ("C-nosuch", "-C nosuch"),
        ("q-nosuch", "-q nosuch"),
        ("A-nosuch", "-A nosuch"),
        ("d-nosuch", "-d afterok:99999"),
        ("reservation", "--reservation=nosuch"),
        ("x-all", "-N 4 -x node1"),
    ] {
        c.add(format!("sbatch/refused-{id}"), without_ids(&format!("sbatch {opt} -o /dev/null --wrap true")));
        // -I: a job that could run some day is refused too, not waited for.
        c.add(format!("srun/refused-{id}"), without_ids(&format!("srun -I {opt} true")));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_has_a_thousand_cases_with_distinct_ids() {
        let cases = super::cases();
        let ids: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), cases.len());
        assert!(cases.len() >= 1000, "{} cases", cases.len());
    }
}

//! Task CPU binding (`srun --cpu-bind`, `TaskPlugin=task/affinity`), as Slurm 22.05 does it:
//! the option's grammar, each task's CPUs on its node, and the `SLURM_CPU_BIND*` variables.
//!
//! CPU ids are the node's abstract ids (`((socket * cores) + core) * threads + thread`), as
//! Slurm numbers them; the node agent maps them onto the host's CPUs.

/// What `--cpu-bind` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindKind {
    None,
    Rank,
    MapCpu(Vec<u32>),
    /// CPU sets as hex masks (the text of each as given, less any `0x`).
    MaskCpu(Vec<String>),
    Threads,
    Cores,
    Sockets,
    /// NUMA locality domains: each socket is one (Drover reads no NUMA topology).
    Ldoms,
    RankLdom,
    MapLdom(Vec<u32>),
    MaskLdom(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBind {
    pub verbose: bool,
    /// `None`: automatic (`--cpu-bind=verbose` alone).
    pub kind: Option<BindKind>,
}

/// How a node's CPUs are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl Topology {
    fn per_socket(&self) -> u32 {
        (self.cores_per_socket * self.threads_per_core).max(1)
    }
    fn socket_of(&self, cpu: u32) -> u32 {
        cpu / self.per_socket()
    }
    fn core_of(&self, cpu: u32) -> u32 {
        cpu / self.threads_per_core.max(1)
    }
}

/// `map_cpu:0*4,3*4` → `[0,0,0,0,3,3,3,3]`; numbers are decimal unless `0x`.
fn expand_list(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let (v, n) = match item.split_once('*') {
            Some((v, n)) => (v, n.parse::<usize>().map_err(|_| bad_number(n))?),
            None => (item, 1),
        };
        if v.is_empty() {
            return Err(bad_number(v));
        }
        // Entries past any node's task count are never used: a repetition stops there.
        out.extend(std::iter::repeat_n(v.to_string(), n.min(MAX_ENTRIES - out.len())));
    }
    Ok(out)
}

/// More map or mask entries than a node could have tasks (Slurm's MAX_TASKS_PER_NODE is 512).
const MAX_ENTRIES: usize = 65_536;

fn bad_number(v: &str) -> String {
    let c = v.chars().find(|c| !c.is_ascii_hexdigit()).map(String::from).unwrap_or_default();
    format!("Failed to validate number: {v}, the offending character is {c}")
}

fn number(v: &str) -> Result<u32, String> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).map_err(|_| bad_number(v)),
        None => v.parse().map_err(|_| bad_number(v)),
    }
}

fn mask(v: &str) -> Result<String, String> {
    let h = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    if h.is_empty() || !h.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad_number(v));
    }
    Ok(h.to_ascii_lowercase())
}

impl CpuBind {
    /// `[{quiet|verbose},]TYPE`; errors in Slurm's words (srun adds `Failed to parse
    /// --cpu-bind= values.` as its fatal line).
    pub fn parse(text: &str) -> Result<CpuBind, String> {
        let mut verbose = false;
        let mut kind = None;
        for tok in text.split(',') {
            let (name, list) = tok.split_once(':').map_or((tok, None), |(n, l)| (n, Some(l)));
            // A list continues over the commas that follow it (`map_cpu:1,0`).
            if let Some(prev) = kind.as_mut().filter(|_| list.is_none() && !is_keyword(tok)) {
                let prev: &mut BindKind = prev;
                match prev {
                    BindKind::MapCpu(v) | BindKind::MapLdom(v) => {
                        v.extend(expand_list(tok)?.iter().map(|x| number(x)).collect::<Result<Vec<_>, _>>()?)
                    }
                    BindKind::MaskCpu(v) | BindKind::MaskLdom(v) => {
                        v.extend(expand_list(tok)?.iter().map(|x| mask(x)).collect::<Result<Vec<_>, _>>()?)
                    }
                    _ => return Err(format!("unrecognized --cpu-bind argument \"{tok}\"")),
                }
                continue;
            }
            let nums = |l: Option<&str>| -> Result<Vec<u32>, String> {
                expand_list(l.unwrap_or_default())?.iter().map(|x| number(x)).collect()
            };
            let masks = |l: Option<&str>| -> Result<Vec<String>, String> {
                expand_list(l.unwrap_or_default())?.iter().map(|x| mask(x)).collect()
            };
            match name.to_ascii_lowercase().as_str() {
                "q" | "quiet" => verbose = false,
                "v" | "verbose" => verbose = true,
                "no" | "none" => kind = Some(BindKind::None),
                "rank" => kind = Some(BindKind::Rank),
                "map_cpu" => kind = Some(BindKind::MapCpu(nums(list)?)),
                "mask_cpu" => kind = Some(BindKind::MaskCpu(masks(list)?)),
                "threads" => kind = Some(BindKind::Threads),
                "cores" => kind = Some(BindKind::Cores),
                "sockets" => kind = Some(BindKind::Sockets),
                "ldoms" => kind = Some(BindKind::Ldoms),
                "rank_ldom" => kind = Some(BindKind::RankLdom),
                "map_ldom" => kind = Some(BindKind::MapLdom(nums(list)?)),
                "mask_ldom" => kind = Some(BindKind::MaskLdom(masks(list)?)),
                _ => return Err(format!("unrecognized --cpu-bind argument \"{tok}\"")),
            }
        }
        Ok(CpuBind { verbose, kind })
    }
}

fn is_keyword(tok: &str) -> bool {
    let n = tok.split(':').next().unwrap_or(tok).to_ascii_lowercase();
    matches!(
        n.as_str(),
        "q" | "quiet"
            | "v"
            | "verbose"
            | "no"
            | "none"
            | "rank"
            | "map_cpu"
            | "mask_cpu"
            | "threads"
            | "cores"
            | "sockets"
            | "ldoms"
            | "rank_ldom"
            | "map_ldom"
            | "mask_ldom"
    )
}

/// The binding of one node's tasks of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBinding {
    /// Per local task: its CPUs (abstract ids); `None`: not bound.
    pub cpus: Vec<Option<Vec<u32>>>,
    /// `SLURM_CPU_BIND`, `_TYPE`, `_LIST`, `_VERBOSE`.
    pub env: Vec<(String, String)>,
    /// The word of the verbose line (`cpu-bind=MASK - node1, task  0  0 [pid]: mask 0x1 set`).
    pub word: &'static str,
    pub verbose: bool,
}

/// A CPU set as Slurm writes a mask: `0x` and lower-case hex, no leading zeros.
pub fn fmt_mask(cpus: &[u32]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let mut digits = vec![0u8; (max / 4 + 1) as usize];
    for &c in cpus {
        digits[(c / 4) as usize] |= 1 << (c % 4);
    }
    let hex: String = digits.iter().rev().map(|d| char::from_digit(u32::from(*d), 16).unwrap_or('0')).collect();
    let t = hex.trim_start_matches('0');
    format!("0x{}", if t.is_empty() { "0" } else { t })
}

/// The CPUs of a hex mask (without `0x`).
fn mask_cpus(hex: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let d = c.to_digit(16).unwrap_or(0);
        for b in 0..4 {
            if d & (1 << b) != 0 {
                out.push(i as u32 * 4 + b);
            }
        }
    }
    out
}

/// Units (threads, cores or sockets) of `cpus`, in order, each with its CPUs.
fn units(cpus: &[u32], of: impl Fn(u32) -> u32) -> Vec<Vec<u32>> {
    let mut out: Vec<(u32, Vec<u32>)> = Vec::new();
    for &c in cpus {
        let u = of(c);
        match out.iter_mut().find(|(k, _)| *k == u) {
            Some((_, v)) => v.push(c),
            None => out.push((u, vec![c])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// Each of `tasks` local tasks gets `per_task` consecutive units (wrapping when short).
fn spread(units: &[Vec<u32>], tasks: usize, per_task: usize) -> Vec<Option<Vec<u32>>> {
    if units.is_empty() {
        return vec![None; tasks];
    }
    (0..tasks)
        .map(|t| {
            let mut set: Vec<u32> =
                (0..per_task.max(1)).flat_map(|k| units[(t * per_task.max(1) + k) % units.len()].clone()).collect();
            set.sort_unstable();
            set.dedup();
            Some(set)
        })
        .collect()
}

/// Binds a node's `tasks` local tasks of a step that holds `step_cpus` there (sorted), each
/// task using `cpus_per_task`. `bind`: `--cpu-bind`; `None` is automatic binding, which
/// happens only with `task/affinity` (`affinity`). `Err`: Slurm's refusal for a map or mask
/// outside the step's CPUs (`CPU binding outside of job step allocation, allocated CPUs
/// are: 0x3.`).
pub fn bind_node(
    bind: Option<&CpuBind>,
    affinity: bool,
    topo: Topology,
    step_cpus: &[u32],
    tasks: usize,
    cpus_per_task: u32,
) -> Result<Option<NodeBinding>, String> {
    let cpt = cpus_per_task.max(1) as usize;
    let threads = units(step_cpus, |c| c);
    let cores = units(step_cpus, |c| topo.core_of(c));
    let sockets = units(step_cpus, |c| topo.socket_of(c));
    let verbose = bind.is_some_and(|b| b.verbose);
    let outside = |sets: &[Option<Vec<u32>>]| {
        sets.iter().flatten().any(|s| s.iter().any(|c| !step_cpus.contains(c))).then(|| {
            format!("CPU binding outside of job step allocation, allocated CPUs are: {}.", fmt_mask(step_cpus))
        })
    };
    let masked = |cpus: Vec<Option<Vec<u32>>>, word: &'static str| {
        let list: Vec<String> = cpus.iter().map(|c| fmt_mask(c.as_deref().unwrap_or(&[]))).collect();
        NodeBinding {
            env: env(verbose, &format!("mask_cpu:{}", list.join(",")), "mask_cpu:", &list.join(",")),
            cpus,
            word,
            verbose,
        }
    };
    let kind = match bind.and_then(|b| b.kind.clone()) {
        Some(k) => k,
        None if !affinity => return Ok(None),
        // Automatic: whichever of threads, cores, sockets the step holds exactly as many of
        // as its tasks need; none fits: no binding.
        None => {
            let need = tasks * cpt;
            if threads.len() == need && topo.threads_per_core > 1 {
                BindKind::Threads
            } else if cores.len() == need {
                BindKind::Cores
            } else if sockets.len() == need || sockets.len() == tasks {
                BindKind::Sockets
            } else {
                return Ok(None);
            }
        }
    };
    let b = match kind {
        BindKind::None => {
            NodeBinding { cpus: vec![None; tasks], env: env(verbose, "none", "none", ""), word: "NONE", verbose }
        }
        BindKind::Threads => masked(spread(&threads, tasks, cpt), "MASK"),
        BindKind::Cores => {
            // -c counts CPUs; a core holds threads_per_core of them.
            let per = cpt.div_ceil(topo.threads_per_core.max(1) as usize);
            masked(spread(&cores, tasks, per), "MASK")
        }
        BindKind::Sockets | BindKind::Ldoms => masked(spread(&sockets, tasks, 1), "MASK"),
        BindKind::Rank => {
            let cpus: Vec<Option<Vec<u32>>> = (0..tasks as u32).map(|t| Some(vec![t])).collect();
            if let Some(e) = outside(&cpus) {
                return Err(e);
            }
            NodeBinding { cpus, env: env(verbose, "rank", "rank", ""), word: "RANK", verbose }
        }
        BindKind::MapCpu(list) => {
            let cpus: Vec<Option<Vec<u32>>> = (0..tasks).map(|t| Some(vec![list[t % list.len()]])).collect();
            if let Some(e) = outside(&cpus) {
                return Err(e);
            }
            let l = list.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            NodeBinding { cpus, env: env(verbose, &format!("map_cpu:{l}"), "map_cpu:", &l), word: "MAP ", verbose }
        }
        BindKind::MaskCpu(list) => {
            let cpus: Vec<Option<Vec<u32>>> = (0..tasks).map(|t| Some(mask_cpus(&list[t % list.len()]))).collect();
            if let Some(e) = outside(&cpus) {
                return Err(e);
            }
            let l = list.join(",");
            NodeBinding { cpus, env: env(verbose, &format!("mask_cpu:{l}"), "mask_cpu:", &l), word: "MASK", verbose }
        }
        BindKind::RankLdom | BindKind::MapLdom(_) | BindKind::MaskLdom(_) => {
            let socket_cpus =
                |s: u32| -> Vec<u32> { step_cpus.iter().copied().filter(|c| topo.socket_of(*c) == s).collect() };
            let cpus: Vec<Option<Vec<u32>>> = (0..tasks)
                .map(|t| {
                    let set: Vec<u32> = match &kind {
                        BindKind::RankLdom => socket_cpus(t as u32 % topo.sockets.max(1)),
                        BindKind::MapLdom(l) => socket_cpus(l[t % l.len()]),
                        BindKind::MaskLdom(l) => mask_cpus(&l[t % l.len()]).into_iter().flat_map(socket_cpus).collect(),
                        _ => Vec::new(),
                    };
                    Some(set)
                })
                .collect();
            masked(cpus, "MASK")
        }
    };
    Ok(Some(b))
}

fn env(verbose: bool, bind: &str, kind: &str, list: &str) -> Vec<(String, String)> {
    let v = if verbose { "verbose" } else { "quiet" };
    vec![
        ("SLURM_CPU_BIND".into(), format!("{v},{bind}")),
        ("SLURM_CPU_BIND_LIST".into(), list.into()),
        ("SLURM_CPU_BIND_TYPE".into(), kind.into()),
        ("SLURM_CPU_BIND_VERBOSE".into(), v.into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: Topology = Topology { sockets: 1, cores_per_socket: 2, threads_per_core: 1 };

    fn get(b: &NodeBinding, k: &str) -> String {
        b.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    /// Found by fuzzing (scripts/fuzz values): `*N` repeated an entry N times whatever N,
    /// 18 GB for one `map_cpu`.
    #[test]
    fn a_repetition_stops_where_no_task_could_use_it() {
        assert_eq!(expand_list("1*99999999999").unwrap().len(), MAX_ENTRIES);
        assert_eq!(expand_list("0*2,3").unwrap(), ["0", "0", "3"]);
    }

    #[test]
    fn parses_slurms_grammar_and_refuses_in_its_words() {
        assert_eq!(CpuBind::parse("cores").unwrap(), CpuBind { verbose: false, kind: Some(BindKind::Cores) });
        assert_eq!(CpuBind::parse("verbose,map_cpu:1,0").unwrap().kind, Some(BindKind::MapCpu(vec![1, 0])));
        assert_eq!(CpuBind::parse("map_cpu:0*2,3").unwrap().kind, Some(BindKind::MapCpu(vec![0, 0, 3])));
        assert_eq!(
            CpuBind::parse("mask_cpu:0x2,3").unwrap().kind,
            Some(BindKind::MaskCpu(vec!["2".into(), "3".into()]))
        );
        assert_eq!(CpuBind::parse("v").unwrap(), CpuBind { verbose: true, kind: None });
        assert_eq!(CpuBind::parse("foo").unwrap_err(), "unrecognized --cpu-bind argument \"foo\"");
        assert_eq!(
            CpuBind::parse("map_cpu:x").unwrap_err(),
            "Failed to validate number: x, the offending character is x"
        );
    }

    /// What real Slurm 22.05 set on the lab (one socket of two cores per node).
    #[test]
    fn automatic_binding_matches_the_lab() {
        // Two tasks on two cores: one core each.
        let b = bind_node(None, true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND"), "quiet,mask_cpu:0x1,0x2");
        assert_eq!(get(&b, "SLURM_CPU_BIND_LIST"), "0x1,0x2");
        assert_eq!(get(&b, "SLURM_CPU_BIND_TYPE"), "mask_cpu:");
        assert_eq!(b.cpus, vec![Some(vec![0]), Some(vec![1])]);
        // One task holding both (srun -n1 in -n2, or -c2): the socket.
        let b = bind_node(None, true, LAB, &[0, 1], 1, 1).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND"), "quiet,mask_cpu:0x3");
        let b = bind_node(None, true, LAB, &[0, 1], 1, 2).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND_LIST"), "0x3");
        // A one-CPU step.
        assert_eq!(get(&bind_node(None, true, LAB, &[0], 1, 1).unwrap().unwrap(), "SLURM_CPU_BIND_LIST"), "0x1");
        // Without task/affinity nothing is bound unless asked.
        assert_eq!(bind_node(None, false, LAB, &[0, 1], 2, 1).unwrap(), None);
    }

    #[test]
    fn explicit_bindings_match_the_lab() {
        let p = |s: &str| CpuBind::parse(s).unwrap();
        let b = bind_node(Some(&p("none")), true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!((get(&b, "SLURM_CPU_BIND"), get(&b, "SLURM_CPU_BIND_TYPE")), ("quiet,none".into(), "none".into()));
        assert_eq!(b.cpus, vec![None, None]);
        let b = bind_node(Some(&p("rank")), true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!((get(&b, "SLURM_CPU_BIND"), b.word), ("quiet,rank".into(), "RANK"));
        let b = bind_node(Some(&p("verbose,map_cpu:1,0")), true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND"), "verbose,map_cpu:1,0");
        assert_eq!(b.cpus, vec![Some(vec![1]), Some(vec![0])]);
        let b = bind_node(Some(&p("mask_cpu:0x2,3")), true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!(
            (get(&b, "SLURM_CPU_BIND"), get(&b, "SLURM_CPU_BIND_LIST")),
            ("quiet,mask_cpu:2,3".into(), "2,3".into())
        );
        assert_eq!(b.cpus, vec![Some(vec![1]), Some(vec![0, 1])]);
        let b = bind_node(Some(&p("sockets")), true, LAB, &[0, 1], 2, 1).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND"), "quiet,mask_cpu:0x3,0x3");
        // Explicit binding works without task/affinity too.
        assert!(bind_node(Some(&p("cores")), false, LAB, &[0, 1], 2, 1).unwrap().is_some());
        assert_eq!(
            bind_node(Some(&p("map_cpu:5")), true, LAB, &[0, 1], 2, 1).unwrap_err(),
            "CPU binding outside of job step allocation, allocated CPUs are: 0x3."
        );
    }

    #[test]
    fn hyperthreads_and_cpus_per_task() {
        let ht = Topology { sockets: 2, cores_per_socket: 2, threads_per_core: 2 };
        // Two tasks of -c2 on 4 CPUs (2 cores): a core each.
        let b = bind_node(Some(&CpuBind::parse("cores").unwrap()), true, ht, &[0, 1, 2, 3], 2, 2).unwrap().unwrap();
        assert_eq!(b.cpus, vec![Some(vec![0, 1]), Some(vec![2, 3])]);
        // Automatic with four tasks on four threads: a thread each.
        let b = bind_node(None, true, ht, &[0, 1, 2, 3], 4, 1).unwrap().unwrap();
        assert_eq!(get(&b, "SLURM_CPU_BIND_LIST"), "0x1,0x2,0x4,0x8");
        assert_eq!(fmt_mask(&[0, 5, 64]), "0x10000000000000021");
        assert_eq!(mask_cpus("21"), vec![0, 5]);
    }
}

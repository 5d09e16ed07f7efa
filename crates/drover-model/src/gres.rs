//! Generic resources (GRES): what nodes have (`Gres=gpu:a100:4` in slurm.conf, the devices of
//! `gres.conf`), what jobs ask for (`--gres=gpu:2`, `--gpus-per-node`, `--gpus-per-task`,
//! `--gpus`), and what a job holds on a node (device indices), in Slurm's text forms.

use serde::{Deserialize, Serialize};

/// One kind of GRES a node has: `gpu:a100:4`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGres {
    pub name: String,
    pub kind: Option<String>,
    pub count: u64,
    /// `no_consume`: any number of jobs may use it at once.
    pub no_consume: bool,
}

impl NodeGres {
    /// `gpu:a100:4` (without the `(S:0-1)` socket suffix, which is accepted and dropped).
    pub fn text(&self) -> String {
        let mut s = self.name.clone();
        if let Some(k) = &self.kind {
            s.push(':');
            s.push_str(k);
        }
        if self.no_consume {
            s.push_str(":no_consume");
        }
        s.push(':');
        s.push_str(&self.count.to_string());
        s
    }
}

fn count(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1024),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1024 * 1024),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Splits a comma list, keeping `(S:0,1)` socket lists together.
fn items(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|x| !x.is_empty()).collect()
}

/// A node's `Gres=`: `gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:a100:2,gpu:v100:2`,
/// `bandwidth:no_consume:100`, `nvme` (one).
pub fn parse_node_gres(s: &str) -> Result<Vec<NodeGres>, String> {
    let bad = |item: &str| format!("Invalid GRES specification `{item}`");
    let mut out = Vec::new();
    if s.eq_ignore_ascii_case("(null)") {
        return Ok(out);
    }
    for item in items(s) {
        let plain = item.split('(').next().unwrap_or(item);
        let mut parts: Vec<&str> = plain.split(':').collect();
        let no_consume = parts.iter().any(|p| p.eq_ignore_ascii_case("no_consume"));
        parts.retain(|p| !p.eq_ignore_ascii_case("no_consume"));
        let (name, kind, n) = match parts.as_slice() {
            [name] => (*name, None, 1),
            [name, last] => match count(last) {
                Some(n) => (*name, None, n),
                None => (*name, Some(*last), 1),
            },
            [name, kind, n] => (*name, Some(*kind), count(n).ok_or_else(|| bad(item))?),
            _ => return Err(bad(item)),
        };
        if name.is_empty() || kind.is_some_and(str::is_empty) {
            return Err(bad(item));
        }
        out.push(NodeGres { name: name.to_string(), kind: kind.map(String::from), count: n, no_consume });
    }
    Ok(out)
}

/// A request for some of one GRES: `gpu:a100:2`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresReq {
    pub name: String,
    pub kind: Option<String>,
    pub count: u64,
}

impl GresReq {
    /// `gpu:a100:2`, `gpu:2`.
    pub fn text(&self) -> String {
        match &self.kind {
            Some(k) => format!("{}:{k}:{}", self.name, self.count),
            None => format!("{}:{}", self.name, self.count),
        }
    }

    /// Whether a node's GRES serves this request.
    pub fn matches(&self, g: &NodeGres) -> bool {
        g.name == self.name && self.kind.as_ref().is_none_or(|k| g.kind.as_ref() == Some(k))
    }
}

/// `--gres`: `gpu`, `gpu:2`, `gpu:a100:2`, comma lists; `none` is no request.
pub fn parse_gres_request(s: &str) -> Result<Vec<GresReq>, String> {
    let bad = || "Invalid generic resource (gres) specification".to_string();
    let mut out = Vec::new();
    for item in items(s) {
        if item.eq_ignore_ascii_case("none") {
            continue;
        }
        // Slurm also takes the `gres:` prefix of its own TRES strings.
        let item = item.strip_prefix("gres:").unwrap_or(item);
        let parts: Vec<&str> = item.split(':').collect();
        let (name, kind, n) = match parts.as_slice() {
            [name] => (*name, None, 1),
            [name, last] => match count(last) {
                Some(n) => (*name, None, n),
                None => (*name, Some(*last), 1),
            },
            [name, kind, n] => (*name, Some(*kind), count(n).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        if name.is_empty() || n == 0 {
            return Err(bad());
        }
        out.push(GresReq { name: name.to_string(), kind: kind.map(String::from), count: n });
    }
    Ok(out)
}

/// `--gpus`, `--gpus-per-node`, `--gpus-per-task`: `[type:]N`.
pub fn parse_gpus(s: &str) -> Result<GresReq, String> {
    let bad = || format!("Invalid GPU specification: {s}");
    let (kind, n) = match s.rsplit_once(':') {
        Some((k, n)) => (Some(k.to_string()), n),
        None => (None, s),
    };
    let count = n.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(bad)?;
    Ok(GresReq { name: "gpu".into(), kind, count })
}

/// What a job holds of one GRES on one node: device indices (for GRES with devices, as
/// GPUs) or a count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresAlloc {
    pub name: String,
    pub kind: Option<String>,
    /// Device indices on the node, numbered per GRES name as in Slurm (`IDX:0-1`).
    pub indices: Vec<u32>,
    pub count: u64,
}

/// Indices as Slurm prints them in `GresUsed` (`0-1,3`).
pub fn fmt_indices(ids: &[u32]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// A `gres.conf` line that applies to a node: its devices or count for one GRES.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresConfLine {
    /// `NodeName=` (a hostlist); none: every node.
    pub nodes: Option<Vec<String>>,
    pub name: String,
    pub kind: Option<String>,
    /// Device files (`File=/dev/nvidia[0-3]` expanded).
    pub files: Vec<String>,
    pub count: Option<u64>,
    /// `Cores=` as written: the cores near these devices (see [`gpu_cpus`]).
    pub cores: Option<String>,
    /// `Links=`: per device index of the node, how many direct links this device has to it
    /// (`-1` for itself; see [`gpu_links`]).
    pub links: Option<String>,
}

/// `gres.conf`: `AutoDetect=`, and lines of `[NodeName=...] Name=... [Type=...] [File=...]
/// [Count=...] [Cores=...] [Links=...] [Flags=...]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GresConf {
    pub autodetect: Option<String>,
    pub lines: Vec<GresConfLine>,
}

impl GresConf {
    pub fn parse(text: &str) -> Result<GresConf, String> {
        let mut conf = GresConf::default();
        let mut joined = String::new();
        let mut logical: Vec<(usize, String)> = Vec::new();
        let mut first = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim_end();
            if joined.is_empty() {
                first = i + 1;
            }
            if let Some(l) = line.strip_suffix('\\') {
                joined.push_str(l);
                joined.push(' ');
                continue;
            }
            joined.push_str(line);
            if !joined.trim().is_empty() {
                logical.push((first, std::mem::take(&mut joined)));
            }
            joined.clear();
        }
        for (n, line) in logical {
            let at = |e: String| format!("gres.conf:{n}: {e}");
            let mut nodes = None;
            let (mut name, mut kind, mut files, mut count_v, mut cores, mut links) =
                (None, None, Vec::new(), None, None, None);
            for word in line.split_whitespace() {
                let (k, v) = word.split_once('=').ok_or_else(|| at(format!("expected Key=Value, found `{word}`")))?;
                match k.to_ascii_lowercase().as_str() {
                    "autodetect" => conf.autodetect = Some(v.to_ascii_lowercase()),
                    "nodename" => {
                        nodes = Some(crate::hostlist::Hostlist::parse(v).map_err(|e| at(e.to_string()))?.names())
                    }
                    "name" => name = Some(v.to_string()),
                    "type" => kind = Some(v.to_string()),
                    "file" => {
                        files = crate::hostlist::Hostlist::parse(v).map_err(|e| at(e.to_string()))?.names();
                    }
                    "count" => {
                        count_v = Some(count(v).ok_or_else(|| at(format!("Count: expected a number, found `{v}`")))?)
                    }
                    "cores" | "cpus" => cores = Some(v.to_string()),
                    "links" => links = Some(v.to_string()),
                    "flags" | "multiplefiles" => {}
                    _ => return Err(at(format!("unknown key `{k}`"))),
                }
            }
            match name {
                Some(name) => conf.lines.push(GresConfLine { nodes, name, kind, files, count: count_v, cores, links }),
                None if line.to_ascii_lowercase().contains("autodetect=")
                    && !line.to_ascii_lowercase().contains("name=") => {}
                None => return Err(at("a line without Name=".into())),
            }
        }
        Ok(conf)
    }

    /// The lines that apply to `node`.
    pub fn for_node(&self, node: &str) -> Vec<&GresConfLine> {
        self.lines.iter().filter(|l| l.nodes.as_ref().is_none_or(|n| n.iter().any(|x| x == node))).collect()
    }
}

/// Something a node's gres.conf says of each of its GPUs, by device index (numbered as its
/// `Gres=` numbers them); empty when no GPU line says it.
fn per_gpu<T: Clone>(
    gc: &GresConf,
    node: &crate::conf::NodeConf,
    of: impl Fn(&GresConfLine) -> Option<T>,
) -> Vec<Option<T>> {
    let lines: Vec<&GresConfLine> = gc.for_node(&node.name).into_iter().filter(|l| l.name == "gpu").collect();
    if lines.iter().all(|l| of(l).is_none()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for g in node.gres_list.iter().filter(|g| g.name == "gpu") {
        // This type's lines, device by device (a line without File= stands for its Count).
        let mut per_device: Vec<Option<T>> = Vec::new();
        for l in lines.iter().filter(|l| l.kind.is_none() || l.kind == g.kind) {
            let n = if l.files.is_empty() { l.count.unwrap_or(g.count) } else { l.files.len() as u64 };
            per_device.extend(std::iter::repeat_n(of(l), n.min(MAX_DEVICES) as usize));
        }
        per_device.resize(g.count.min(MAX_DEVICES) as usize, None);
        out.extend(per_device);
    }
    out
}

/// Per GPU device index of `node`, the CPU ids near it from `gres.conf` `Cores=` (core ids;
/// each core is `threads_per_core` CPUs); `None` where the file says nothing.
pub fn gpu_cpus(gc: &GresConf, node: &crate::conf::NodeConf) -> Vec<Option<Vec<u32>>> {
    let tpc = node.threads_per_core.max(1);
    per_gpu(gc, node, |l| {
        let mut out = Vec::new();
        for part in l.cores.as_deref()?.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
            for core in a..=b {
                out.extend(core * tpc..core * tpc + tpc);
            }
        }
        Some(out)
    })
}

/// Per GPU device index of `node`, its direct links to every device index (`Links=`; itself
/// and unknown ones count 0).
pub fn gpu_links(gc: &GresConf, node: &crate::conf::NodeConf) -> Vec<Vec<u32>> {
    per_gpu(gc, node, |l| {
        l.links.as_deref().map(|v| v.split(',').map(|x| x.trim().parse::<i64>().unwrap_or(0).max(0) as u32).collect())
    })
    .into_iter()
    .map(Option::unwrap_or_default)
    .collect()
}

/// Devices counted one by one (larger counts are plain counts, as in the scheduler).
const MAX_DEVICES: u64 = 1024;

/// `--gpu-bind=[verbose,]TYPE`: which of a node's step GPUs (`gpus`, node device indices in
/// order) local task `local` sees, as positions in `gpus`; `None`: all of them.
/// `closest` binds to all (Drover reads no GPU-CPU affinity); `single:N` gives N tasks each
/// GPU; `per_task:N` N GPUs each task; `map_gpu:`/`mask_gpu:` name node device indices.
pub fn gpu_bind(bind: &str, gpus: &[u32], local: usize) -> Result<Option<Vec<usize>>, String> {
    let bad = || format!("Invalid --gpu-bind argument: gpu:{bind}");
    let kind = bind.strip_prefix("verbose,").unwrap_or(bind);
    let (name, arg) = kind.split_once(':').unwrap_or((kind, ""));
    if gpus.is_empty() {
        return Ok(None);
    }
    let n = gpus.len();
    let pos_of = |dev: u32| gpus.iter().position(|g| *g == dev);
    let list = |a: &str| -> Result<Vec<String>, String> {
        let v: Vec<String> = a.split(',').filter(|x| !x.is_empty()).map(String::from).collect();
        if v.is_empty() {
            Err(bad())
        } else {
            Ok(v)
        }
    };
    let picks: Vec<usize> = match name {
        "none" | "closest" | "" => return Ok(None),
        "single" => {
            let per: usize = arg.parse().ok().filter(|p| *p > 0).unwrap_or(1);
            vec![(local / per) % n]
        }
        "per_task" => {
            let per: usize = arg.parse().map_err(|_| bad())?;
            (0..per.max(1)).map(|k| (local * per + k) % n).collect()
        }
        "map_gpu" => {
            let l = list(arg)?;
            let dev: u32 = l[local % l.len()].parse().map_err(|_| bad())?;
            pos_of(dev).into_iter().collect()
        }
        "mask_gpu" => {
            let l = list(arg)?;
            let m = l[local % l.len()].trim_start_matches("0x");
            let mask = u64::from_str_radix(m, 16).map_err(|_| bad())?;
            (0..64u32).filter(|b| mask & (1 << b) != 0).filter_map(pos_of).collect()
        }
        _ => return Err(bad()),
    };
    Ok(Some(picks))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (scripts/fuzz values): a count whose suffix overflows panicked.
    #[test]
    fn a_count_too_big_is_refused() {
        assert!(parse_node_gres("gpu:a100:081083200320083g").is_err());
        assert!(parse_gres_request("gpu:a100:081083200320083g").is_err());
        assert_eq!(count("2k"), Some(2048));
    }

    #[test]
    fn gpu_cores_become_cpu_ids_per_device() {
        let gc = GresConf::parse("NodeName=n1 Name=gpu File=/dev/nvidia[0-1] Cores=0-1\nNodeName=n1 Name=gpu File=/dev/nvidia[2-3] Cores=2-3\n").unwrap();
        let cfg = crate::conf::parse_str(
            "slurm.conf",
            "GresTypes=gpu\nNodeName=n1 CPUs=8 Sockets=2 CoresPerSocket=2 ThreadsPerCore=2 Gres=gpu:4\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        let v = gpu_cpus(&gc, &cfg.nodes[0]);
        assert_eq!(v, [Some(vec![0, 1, 2, 3]), Some(vec![0, 1, 2, 3]), Some(vec![4, 5, 6, 7]), Some(vec![4, 5, 6, 7])]);
        assert!(gpu_cpus(&GresConf::parse("Name=gpu File=/dev/null\n").unwrap(), &cfg.nodes[0]).is_empty());
        let gc = GresConf::parse(
            "Name=gpu File=/dev/nvidia0 Links=-1,2,0,0\nName=gpu File=/dev/nvidia1 Links=2,-1,0,0\n\
             Name=gpu File=/dev/nvidia2 Links=0,0,-1,2\nName=gpu File=/dev/nvidia3 Links=0,0,2,-1\n",
        )
        .unwrap();
        assert_eq!(gpu_links(&gc, &cfg.nodes[0])[2], [0, 0, 0, 2]);
    }

    #[test]
    fn gpu_bind_picks_each_tasks_gpus() {
        let gpus = [0, 1, 2, 3];
        assert_eq!(gpu_bind("none", &gpus, 1).unwrap(), None);
        assert_eq!(gpu_bind("closest", &gpus, 1).unwrap(), None);
        assert_eq!(gpu_bind("single:1", &gpus, 2).unwrap(), Some(vec![2]));
        assert_eq!(gpu_bind("single:2", &gpus, 3).unwrap(), Some(vec![1]));
        assert_eq!(gpu_bind("per_task:2", &gpus, 1).unwrap(), Some(vec![2, 3]));
        assert_eq!(gpu_bind("verbose,map_gpu:3,2", &gpus, 1).unwrap(), Some(vec![2]));
        assert_eq!(gpu_bind("mask_gpu:0x3,0xc", &[2, 3], 1).unwrap(), Some(vec![0, 1]));
        assert_eq!(gpu_bind("foo", &gpus, 0).unwrap_err(), "Invalid --gpu-bind argument: gpu:foo");
    }

    #[test]
    fn node_gres_parses_slurm_forms() {
        let g = parse_node_gres("gpu:fake:2").unwrap();
        assert_eq!(g, [NodeGres { name: "gpu".into(), kind: Some("fake".into()), count: 2, no_consume: false }]);
        let g = parse_node_gres("gpu:a100:4(S:0-1),gpu:v100:2,nvme,bandwidth:no_consume:4G").unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g[0].count, 4);
        assert_eq!(g[2], NodeGres { name: "nvme".into(), kind: None, count: 1, no_consume: false });
        assert!(g[3].no_consume && g[3].count == 4 << 30);
        assert_eq!(g[0].text(), "gpu:a100:4");
        assert_eq!(parse_node_gres("gpu:2").unwrap()[0].kind, None);
        assert!(parse_node_gres("gpu:a:b:c").is_err());
        assert!(parse_node_gres("(null)").unwrap().is_empty());
    }

    #[test]
    fn requests_parse_like_sbatch() {
        let r = parse_gres_request("gpu:a100:2,nvme").unwrap();
        assert_eq!(r[0], GresReq { name: "gpu".into(), kind: Some("a100".into()), count: 2 });
        assert_eq!(r[1].count, 1);
        assert_eq!(parse_gres_request("gres:gpu:1").unwrap()[0].text(), "gpu:1");
        assert!(parse_gres_request("none").unwrap().is_empty());
        assert!(parse_gres_request("gpu:0").is_err());
        assert_eq!(parse_gpus("a100:4").unwrap(), GresReq { name: "gpu".into(), kind: Some("a100".into()), count: 4 });
        assert!(parse_gpus("x").is_err());
        let fake = NodeGres { name: "gpu".into(), kind: Some("fake".into()), count: 2, no_consume: false };
        assert!(parse_gpus("2").unwrap().matches(&fake));
        assert!(!parse_gpus("a100:2").unwrap().matches(&fake));
    }

    #[test]
    fn gres_conf_lines() {
        let c = GresConf::parse(
            "# fake GPUs\nAutoDetect=off\nNodeName=node[1-2] Name=gpu Type=fake File=/dev/null\n\
             NodeName=node3 Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-15\nName=nvme Count=1\n",
        )
        .unwrap();
        assert_eq!(c.autodetect.as_deref(), Some("off"));
        assert_eq!(c.for_node("node1").len(), 2);
        let n3 = c.for_node("node3");
        assert_eq!(n3[0].files, ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"]);
        assert!(GresConf::parse("Name=gpu Bogus=1").unwrap_err().starts_with("gres.conf:1: unknown key"));
        assert_eq!(fmt_indices(&[3, 0, 1]), "0-1,3");
    }
}

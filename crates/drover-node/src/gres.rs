//! The node's GRES devices: `gres.conf` (beside `slurm.conf`) read against the node's
//! `Gres=`. The controller allocates device indices; here they are checked and explained.
//! A `File=` that is not a GPU device (`/dev/null`, as Slurm learners write it) stands for
//! as many fake devices as `Gres=` counts, and the node says so once in its log (real Slurm
//! 22.05 refuses that configuration: "count does not match File value").

use drover_model::conf::NodeConf;
use drover_model::gres::GresConf;
use std::path::Path;

/// Log lines about the node's GRES (empty when there is nothing to say), or an error for a
/// `gres.conf` that does not parse.
pub fn check(conf_path: &Path, node: &NodeConf) -> Result<Vec<String>, String> {
    let path = conf_path.parent().unwrap_or(Path::new("/")).join("gres.conf");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) if node.gres_list.is_empty() => return Ok(Vec::new()),
        Err(_) => {
            return Ok(vec![format!(
                "gres: no {} beside slurm.conf; {} served as counted resources without device files",
                path.display(),
                node.gres
            )])
        }
    };
    let gc = GresConf::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    if let Some(a) = gc.autodetect.as_deref().filter(|a| *a != "off") {
        out.push(format!(
            "gres.conf: AutoDetect={a} is not supported by this build (NVML detection is a cargo feature); using the configured Gres={}",
            node.gres
        ));
    }
    for g in &node.gres_list {
        let lines: Vec<_> = gc
            .for_node(&node.name)
            .into_iter()
            .filter(|l| l.name == g.name && (l.kind.is_none() || l.kind == g.kind))
            .collect();
        let files: Vec<&String> = lines.iter().flat_map(|l| l.files.iter()).collect();
        if lines.iter().any(|l| l.cores.is_some()) {
            out.push(format!("gres/{}: Cores= is accepted; placement does not use GPU-core affinity yet", g.name));
        }
        if files.is_empty() {
            continue;
        }
        let real = files.iter().filter(|f| is_gpu_device(f)).count();
        if real == 0 {
            out.push(format!(
                "gres/{}: File={} is not a GPU device: {} has {} fake {} device(s), numbered 0-{}",
                g.name,
                files.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(","),
                node.name,
                g.count,
                g.text().rsplit_once(':').map_or(g.name.clone(), |(k, _)| k.to_string()),
                g.count.saturating_sub(1)
            ));
        } else if files.len() as u64 != g.count {
            out.push(format!(
                "gres/{}: gres.conf names {} device file(s) but Gres= counts {}: the first {} are used",
                g.name,
                files.len(),
                g.count,
                g.count.min(files.len() as u64)
            ));
        }
    }
    Ok(out)
}

/// A character device that looks like a GPU (`/dev/nvidia0`, `/dev/dri/renderD128`, ...).
fn is_gpu_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let name = Path::new(path).file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let gpu_name = (name.starts_with("nvidia") && name[6..].chars().all(|c| c.is_ascii_digit()) && name.len() > 6)
        || name.starts_with("renderD")
        || name.starts_with("card");
    gpu_name && std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_null_stands_for_fake_gpus() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(dir.path().join("gres.conf"), "NodeName=node[1-2] Name=gpu Type=fake File=/dev/null\n").unwrap();
        let cfg = drover_model::conf::parse_str(
            "slurm.conf",
            "GresTypes=gpu\nNodeName=node[1-2] CPUs=2 Gres=gpu:fake:2\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        let lines = check(&conf, &cfg.nodes[0]).unwrap();
        assert_eq!(
            lines,
            ["gres/gpu: File=/dev/null is not a GPU device: node1 has 2 fake gpu:fake device(s), numbered 0-1"]
        );
        std::fs::write(dir.path().join("gres.conf"), "Name=gpu Bogus=1\n").unwrap();
        assert!(check(&conf, &cfg.nodes[0]).unwrap_err().contains("gres.conf:1: unknown key"));
        assert!(!is_gpu_device("/dev/null"));
    }
}

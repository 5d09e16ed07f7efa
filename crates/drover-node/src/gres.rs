//! The node's GRES devices: `gres.conf` (beside `slurm.conf`) read against the node's
//! `Gres=`. The controller allocates device indices; here they are checked and explained.
//! A `File=` that is not a GPU device (`/dev/null`, as Slurm learners write it) stands for
//! as many fake devices as `Gres=` counts, and the node says so once in its log (real Slurm
//! 22.05 refuses that configuration: "count does not match File value").

use drover_model::conf::NodeConf;
use drover_model::gres::GresConf;
use std::path::Path;

/// A GPU NVML found (`AutoDetect=nvml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectedGpu {
    /// `/dev/nvidiaN`, N the device's minor number.
    pub file: String,
    /// The model as a GRES type, as Slurm writes it: lower case, spaces as `_`
    /// (`nvidia_a100-sxm4-80gb`).
    pub kind: String,
    pub bus_id: String,
}

/// The file where the agent leaves what NVML found, for the job supervisors (device
/// confinement): one device file per line, in index order.
pub const DETECTED: &str = "gpus.nvml";

/// Slurm's GRES type for an NVML device name.
pub fn type_of(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(' ', "_")
}

/// The node's NVIDIA GPUs, ordered by PCI bus (as `nvidia-smi` and CUDA number them).
#[cfg(feature = "nvml")]
pub fn detect_gpus() -> Result<Vec<DetectedGpu>, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML could not start: {e}"))?;
    let count = nvml.device_count().map_err(|e| format!("NVML device count: {e}"))?;
    let mut out = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(|e| format!("NVML device {i}: {e}"))?;
        let minor = d.minor_number().map_err(|e| format!("NVML device {i} minor number: {e}"))?;
        out.push(DetectedGpu {
            file: format!("/dev/nvidia{minor}"),
            kind: type_of(&d.name().unwrap_or_default()),
            bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
        });
    }
    out.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
    Ok(out)
}

#[cfg(not(feature = "nvml"))]
pub fn detect_gpus() -> Result<Vec<DetectedGpu>, String> {
    Err("this build has no NVML support (build with `--features nvml`)".into())
}

/// Log lines about the node's GRES (empty when there is nothing to say), or an error for a
/// `gres.conf` that does not parse; with `AutoDetect=nvml`, what NVML found (the device files
/// are written to `spool/gpus.nvml` for device confinement).
pub fn check(conf_path: &Path, node: &NodeConf, spool: &Path) -> Result<Vec<String>, String> {
    let _ = std::fs::remove_file(spool.join(DETECTED));
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
    match gc.autodetect.as_deref() {
        None | Some("off") => {}
        Some("nvml") => match detect_gpus() {
            Ok(gpus) => {
                let configured: u64 = node.gres_list.iter().filter(|g| g.name == "gpu").map(|g| g.count).sum();
                let list: Vec<String> = gpus.iter().map(|g| format!("{} ({}, {})", g.file, g.kind, g.bus_id)).collect();
                out.push(format!("gres/gpu: AutoDetect=nvml found {} GPU(s): {}", gpus.len(), list.join(", ")));
                if (gpus.len() as u64) < configured {
                    out.push(format!(
                        "error: gres/gpu count reported lower than configured ({} < {configured})",
                        gpus.len()
                    ));
                }
                let files: String = gpus.iter().map(|g| format!("{}\n", g.file)).collect();
                let _ = std::fs::write(spool.join(DETECTED), files);
            }
            Err(e) => out.push(format!("gres/gpu: AutoDetect=nvml: {e}; using the configured Gres={}", node.gres)),
        },
        Some(a) => out.push(format!(
            "gres.conf: AutoDetect={a} is not supported by Drover (nvml is); using the configured Gres={}",
            node.gres
        )),
    }
    for g in &node.gres_list {
        let lines: Vec<_> = gc
            .for_node(&node.name)
            .into_iter()
            .filter(|l| l.name == g.name && (l.kind.is_none() || l.kind == g.kind))
            .collect();
        let files: Vec<&String> = lines.iter().flat_map(|l| l.files.iter()).collect();
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
        let lines = check(&conf, &cfg.nodes[0], dir.path()).unwrap();
        assert_eq!(
            lines,
            ["gres/gpu: File=/dev/null is not a GPU device: node1 has 2 fake gpu:fake device(s), numbered 0-1"]
        );
        std::fs::write(dir.path().join("gres.conf"), "Name=gpu Bogus=1\n").unwrap();
        assert!(check(&conf, &cfg.nodes[0], dir.path()).unwrap_err().contains("gres.conf:1: unknown key"));
        assert!(!is_gpu_device("/dev/null"));
    }

    /// Without a GPU (or without the feature), AutoDetect=nvml says why and the configured
    /// Gres= stands; nothing is left for the supervisors to read.
    #[test]
    fn autodetect_nvml_without_nvidia_falls_back_to_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(dir.path().join("gres.conf"), "AutoDetect=nvml\n").unwrap();
        let cfg = drover_model::conf::parse_str(
            "slurm.conf",
            "GresTypes=gpu\nNodeName=node1 CPUs=2 Gres=gpu:2\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        let lines = check(&conf, &cfg.nodes[0], dir.path()).unwrap();
        if std::path::Path::new("/dev/nvidiactl").exists() {
            return; // a real GPU host: detection is checked on the GPU machine
        }
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("gres/gpu: AutoDetect=nvml: "), "{lines:?}");
        assert!(lines[0].ends_with("; using the configured Gres=gpu:2"), "{lines:?}");
        assert!(!dir.path().join(DETECTED).exists());
        assert_eq!(type_of("NVIDIA A100-SXM4-80GB"), "nvidia_a100-sxm4-80gb");
    }
}

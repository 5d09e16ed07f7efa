//! `cgroup.conf` (beside `slurm.conf`): which cgroup hierarchy confines jobs and what it
//! constrains, in Slurm's keys and defaults.

/// `CgroupPlugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgroupPlugin {
    /// The host's: v2 where `/sys/fs/cgroup` is a cgroup2 mount, else v1.
    #[default]
    Autodetect,
    V1,
    V2,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CgroupConf {
    pub plugin: CgroupPlugin,
    pub mountpoint: String,
    pub constrain_cores: bool,
    pub constrain_ram: bool,
    /// `AllowedRAMSpace`: percent of the job's memory it may use.
    pub allowed_ram_percent: f64,
    pub constrain_swap: bool,
    /// `AllowedSwapSpace`: percent of the job's memory it may add in swap.
    pub allowed_swap_percent: f64,
    pub constrain_devices: bool,
    /// Keys Drover does not act on: (line, key).
    pub unsupported: Vec<(usize, String)>,
}

impl Default for CgroupConf {
    fn default() -> Self {
        CgroupConf {
            plugin: CgroupPlugin::Autodetect,
            mountpoint: "/sys/fs/cgroup".into(),
            constrain_cores: false,
            constrain_ram: false,
            allowed_ram_percent: 100.0,
            constrain_swap: false,
            allowed_swap_percent: 0.0,
            constrain_devices: false,
            unsupported: Vec::new(),
        }
    }
}

impl CgroupConf {
    pub fn parse(text: &str) -> Result<CgroupConf, String> {
        let mut c = CgroupConf::default();
        for (n, k, v) in crate::conf::key_value_lines("cgroup.conf", text)? {
            let (k, v) = (k.as_str(), v.as_str());
            let yes = || match v.to_ascii_lowercase().as_str() {
                "yes" | "true" | "1" => Ok(true),
                "no" | "false" | "0" => Ok(false),
                _ => Err(format!("cgroup.conf:{n}: {k}: expected yes or no, found `{v}`")),
            };
            let pct = || {
                v.trim_end_matches('%')
                    .parse::<f64>()
                    .map_err(|_| format!("cgroup.conf:{n}: {k}: expected a percentage, found `{v}`"))
            };
            match k.to_ascii_lowercase().as_str() {
                "cgroupplugin" => {
                    c.plugin = match v.to_ascii_lowercase().as_str() {
                        "autodetect" => CgroupPlugin::Autodetect,
                        "cgroup/v1" => CgroupPlugin::V1,
                        "cgroup/v2" => CgroupPlugin::V2,
                        _ => {
                            return Err(format!(
                            "cgroup.conf:{n}: CgroupPlugin: expected autodetect, cgroup/v1 or cgroup/v2, found `{v}`"
                        ))
                        }
                    }
                }
                "cgroupmountpoint" => c.mountpoint = v.to_string(),
                "constraincores" => c.constrain_cores = yes()?,
                "constrainramspace" => c.constrain_ram = yes()?,
                "allowedramspace" => c.allowed_ram_percent = pct()?,
                "constrainswapspace" => c.constrain_swap = yes()?,
                "allowedswapspace" => c.allowed_swap_percent = pct()?,
                "constraindevices" => c.constrain_devices = yes()?,
                // Read by Slurm's own cgroup code paths that Drover does not have.
                "cgroupautomount" | "cgroupreleaseagentdir" => {}
                other => c.unsupported.push((n, other.to_string())),
            }
        }
        Ok(c)
    }
}

/// A node's directory below `drover/` in a cgroup hierarchy: `<cluster>-<digest>/<node>`,
/// the digest of the cluster's `slurm.conf` path, so that several clusters on one host
/// (`drover up`, parallel tests) never share a job's cgroup.
pub fn node_dir(cluster: &str, slurm_conf: &std::path::Path, node: &str) -> String {
    // FNV-1a: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in slurm_conf.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{cluster}-{:08x}/{node}", h as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_lab_cgroup_conf() {
        let c = CgroupConf::parse(
            "# lab\nCgroupPlugin=cgroup/v1\nConstrainCores=yes\nConstrainRAMSpace=no\nAllowedRAMSpace=95\nMemorySwappiness=0\n",
        )
        .unwrap();
        assert_eq!(c.plugin, CgroupPlugin::V1);
        assert!(c.constrain_cores && !c.constrain_ram);
        assert_eq!(c.allowed_ram_percent, 95.0);
        assert_eq!(c.unsupported, [(6, "memoryswappiness".to_string())]);
        assert!(CgroupConf::parse("ConstrainCores=maybe").unwrap_err().starts_with("cgroup.conf:1:"));
        assert_eq!(CgroupConf::parse("").unwrap(), CgroupConf::default());
    }
}

//! The submitter's resource limits on their way to the job: commands send each soft limit as
//! `SLURM_RLIMIT_<NAME>` (decimal; `RLIM_INFINITY` as 18446744073709551615, as Slurm's
//! `%lu`), and the node applies those it propagates. Names as `slurm.conf` writes them
//! (`drover_model::rlimits::NAMES`).

use nix::sys::resource::Resource;

pub const ENV_PREFIX: &str = "SLURM_RLIMIT_";

/// The limit `name` (`NOFILE`, ...).
pub fn resource(name: &str) -> Option<Resource> {
    Some(match name {
        "AS" => Resource::RLIMIT_AS,
        "CORE" => Resource::RLIMIT_CORE,
        "CPU" => Resource::RLIMIT_CPU,
        "DATA" => Resource::RLIMIT_DATA,
        "FSIZE" => Resource::RLIMIT_FSIZE,
        "MEMLOCK" => Resource::RLIMIT_MEMLOCK,
        "NOFILE" => Resource::RLIMIT_NOFILE,
        "NPROC" => Resource::RLIMIT_NPROC,
        "RSS" => Resource::RLIMIT_RSS,
        "STACK" => Resource::RLIMIT_STACK,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_name_slurm_conf_knows_is_a_limit() {
        for n in drover_model::rlimits::NAMES {
            assert!(super::resource(n).is_some(), "{n}");
        }
        assert!(super::resource("FILES").is_none());
    }
}

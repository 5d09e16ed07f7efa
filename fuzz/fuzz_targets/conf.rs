//! slurm.conf, gres.conf, topology.conf, cgroup.conf and slurmdbd.conf: any text is parsed
//! or refused, never a panic, hang or unbounded allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = drover_model::conf::parse_str("slurm.conf", &text);
    let _ = drover_model::gres::GresConf::parse(&text);
    let _ = drover_model::topology::Topology::parse(&text);
    let _ = drover_model::topology::Topology::parse_blocks(&text);
    let _ = drover_model::cgroup_conf::CgroupConf::parse(&text);
    let _ = drover_model::dbd_conf::DbdConf::parse("slurmdbd.conf", &text);
});

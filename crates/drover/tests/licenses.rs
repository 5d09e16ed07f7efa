//! Cluster licenses (`Licenses=`, `-L`) and counted GRES on a real cluster, shown and refused
//! as Slurm 22.05 shows and refuses them.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn licenses_bound_running_jobs() {
    let c = Cluster::start(
        EXE,
        Options { nodes: 2, cpus: 2, extra_conf: "Licenses=matlab:2,fluent\n".into(), ..Default::default() },
    );
    assert_eq!(
        c.ok("scontrol", &["show", "lic"]),
        "LicenseName=fluent\n    Total=1 Used=0 Free=1 Reserved=0 Remote=no\n\
         LicenseName=matlab\n    Total=2 Used=0 Free=2 Reserved=0 Remote=no\n"
    );
    let a = c.submit(&["-L", "matlab:2", "--wrap", "sleep 30"]);
    c.wait_state(a, &["RUNNING"], Duration::from_secs(20));
    let b = c.submit(&["-L", "matlab", "--wrap", "true"]);
    // Nodes are free; the license is not.
    c.wait_until("the license wait", Duration::from_secs(10), || {
        c.ok("squeue", &["-h", "-j", &b.to_string(), "-o", "%T %r %W"]).trim() == "PENDING Licenses matlab"
    });
    assert!(c.ok("scontrol", &["show", "job", &b.to_string()]).contains(" Licenses=matlab "));
    assert_eq!(
        c.ok("scontrol", &["show", "licenses", "matlab", "-o"]),
        "LicenseName=matlab Total=2 Used=2 Free=0 Reserved=0 Remote=no\n"
    );
    c.ok("scancel", &[&a.to_string()]);
    c.wait_state(b, &["COMPLETED"], Duration::from_secs(20));
    for bad in ["matlab:3", "nosuch"] {
        let o = c.run("sbatch", &["-L", bad, "--wrap", "true"]);
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "sbatch: error: Batch job submission failed: Invalid license specification\n"
        );
    }
}

#[test]
fn counted_gres_are_consumed_without_device_files() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            cpus: 4,
            extra_conf: "GresTypes=nvme\n".into(),
            node_line: Some(
                "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=2000 Gres=nvme:2 State=UNKNOWN"
                    .into(),
            ),
            ..Default::default()
        },
    );
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%G"]).trim(), "nvme:2");
    let a = c.submit(&["--gres=nvme:2", "--wrap", "sleep 30"]);
    c.wait_state(a, &["RUNNING"], Duration::from_secs(20));
    let b = c.submit(&["--gres=nvme:1", "--wrap", "true"]);
    c.wait_until("the gres wait", Duration::from_secs(10), || {
        c.ok("squeue", &["-h", "-j", &b.to_string(), "-o", "%T %r %b"]).trim() == "PENDING Resources gres:nvme:1"
    });
    c.ok("scancel", &[&a.to_string()]);
    c.wait_state(b, &["COMPLETED"], Duration::from_secs(20));
    let o = c.run("sbatch", &["--gres=nvme:3", "--wrap", "true"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Requested node configuration is not available"), "{o:?}");
}

#[test]
fn gpus_are_a_tres_where_accounting_tracks_them() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            cpus: 2,
            extra_conf: "GresTypes=gpu\nAccountingStorageTRES=gres/gpu\n".into(),
            node_line: Some(
                "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Gres=gpu:fake:2 State=UNKNOWN"
                    .into(),
            ),
            files: vec![("gres.conf".into(), "Name=gpu Type=fake File=/dev/null\n".into())],
            ..Default::default()
        },
    );
    let id = c.submit(&["--gpus=1", "--wrap", "sleep 30"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    let node = c.ok("scontrol", &["show", "node", "node1"]);
    assert!(node.contains("CfgTRES=cpu=2,mem=2000M,billing=2,gres/gpu=2\n"), "{node}");
    assert!(node.contains("AllocTRES=cpu=1,gres/gpu=1\n"), "{node}");
    let job = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(job.contains("TRES=cpu=1,node=1,billing=1,gres/gpu=1\n"), "{job}");
    c.ok("scancel", &[&id.to_string()]);
}

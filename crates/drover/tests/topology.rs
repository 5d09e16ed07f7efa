//! Network topology on a real cluster. `topology/tree`: `scontrol show topology` as Slurm
//! prints it, jobs placed under one leaf switch when one has room, the switch path in the
//! job's environment, and `--switches=N@wait`. `topology/block`: jobs within one block,
//! `--segment`, the block in the job's environment, the blocks as `scontrol` lists them.

use drover_testkit::{words, Capture, Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn captures() -> std::path::PathBuf {
    drover_testkit::testdata("captures/slurm-22.05")
}

fn with_topology(plugin: &str, nodes: u32, topology: &str) -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes,
            cpus: 2,
            extra_conf: format!("TopologyPlugin=topology/{plugin}\n"),
            files: vec![("topology.conf".into(), topology.into())],
            ..Default::default()
        },
    )
}

/// A job that fills both cores of `node` for two minutes, running.
fn fill(c: &Cluster, node: &str) -> u32 {
    let id = c.submit(&["-w", node, "-n", "2", "-t", "5", "--wrap", "sleep 120"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    id
}

/// Where a four-node step runs: each node's name and topology address, sorted.
fn four_node_addresses(c: &Cluster) -> Vec<String> {
    let out = c.ok(
        "srun",
        &["-N4", "-t", "1", "bash", "-c", "echo $SLURMD_NODENAME $SLURM_TOPOLOGY_ADDR $SLURM_TOPOLOGY_ADDR_PATTERN"],
    );
    let mut lines: Vec<String> = out.lines().map(String::from).collect();
    lines.sort();
    lines
}

fn tree(nodes: u32, topology: &str) -> Cluster {
    with_topology("tree", nodes, topology)
}

#[test]
fn show_topology_matches_slurm() {
    let c = tree(
        4,
        "SwitchName=s0 Nodes=node[1-2] LinkSpeed=100\nSwitchName=s1 Nodes=node[3-4]\nSwitchName=top Switches=s[0-1]\n",
    );
    let mut failed = Vec::new();
    for name in Capture::names(&captures(), "topo_") {
        failed.extend(c.matches(&Capture::load(&captures(), &name, words)).err());
    }
    assert!(failed.is_empty(), "{} of the captures differ:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn a_four_node_job_lands_under_one_leaf_switch_when_one_is_free() {
    let c = tree(
        8,
        "SwitchName=leaf1 Nodes=node[1-4]\nSwitchName=leaf2 Nodes=node[5-8]\nSwitchName=spine Switches=leaf[1-2]\n",
    );
    // node2 full: leaf1 has three nodes left, leaf2 four.
    let busy = fill(&c, "node2");
    assert_eq!(
        four_node_addresses(&c),
        [
            "node5 spine.leaf2.node5 switch.switch.node",
            "node6 spine.leaf2.node6 switch.switch.node",
            "node7 spine.leaf2.node7 switch.switch.node",
            "node8 spine.leaf2.node8 switch.switch.node",
        ]
    );
    // Five nodes span both leaves: all of leaf2 and one of leaf1.
    let out = c.ok("srun", &["-N5", "-t", "1", "bash", "-c", "echo $SLURMD_NODENAME"]);
    let mut got: Vec<&str> = out.lines().collect();
    got.sort();
    assert_eq!(got, ["node1", "node5", "node6", "node7", "node8"]);

    // With node6 full too, no leaf has four nodes: --switches=1 waits its time, then takes
    // what there is.
    let busy2 = fill(&c, "node6");
    let waiting = c.submit(&["-N4", "--switches=1@0:04", "-t", "1", "--wrap", "true"]);
    let show = c.ok("scontrol", &["show", "job", &waiting.to_string()]);
    assert!(show.contains("\n   Switches=1@00:00:04\n"), "{show}");
    assert_eq!(c.ok("squeue", &["-h", "-j", &waiting.to_string(), "-o", "%t %r"]), "PD Resources\n");
    let why = c.ok("drover", &["explain", &waiting.to_string()]);
    assert!(why.contains("  - no 1 leaf switch(es) hold its 4 nodes now (--switches; it waits until "), "{why}");
    c.wait_state(waiting, &["COMPLETED"], Duration::from_secs(20));
    let show = c.ok("scontrol", &["show", "job", &waiting.to_string()]);
    let nodes = show.split("\n   NodeList=").nth(1).unwrap().split('\n').next().unwrap();
    assert_eq!(nodes, "node[1,3-5]", "{show}");
    c.ok("scancel", &[&busy.to_string(), &busy2.to_string()]);
}

#[test]
fn a_broken_topology_conf_stops_the_controller_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("slurm.conf"), "ClusterName=t\nSlurmctldHost=localhost\nTopologyPlugin=topology/tree\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n").unwrap();
    std::fs::write(dir.path().join("topology.conf"), "SwitchName=a Switches=b\n").unwrap();
    let out =
        std::process::Command::new(EXE).args(["controller", "-f"]).arg(dir.path().join("slurm.conf")).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("topology.conf:1: switch b is not defined"), "{err}");
}

#[test]
fn jobs_stay_within_a_block_and_segments_each_within_one() {
    let c = with_topology("block", 8, "BlockName=b1 Nodes=node[1-4]\nBlockName=b2 Nodes=node[5-8]\nBlockSizes=4,8\n");
    assert_eq!(
        c.ok("scontrol", &["show", "topology"]),
        "BlockName=b1 BlockIndex=0 Nodes=node[1-4] BlockSize=4\n\
         BlockName=b2 BlockIndex=1 Nodes=node[5-8] BlockSize=4\n\
         AggregatedBlock=b[1-2] BlockIndex=2 Nodes=node[1-8] BlockSize=8\n"
    );
    assert_eq!(
        c.ok("scontrol", &["show", "topology", "node6"]).lines().next(),
        Some("BlockName=b2 BlockIndex=1 Nodes=node[5-8] BlockSize=4")
    );
    // node2 full: b1 has three nodes left, b2 four; a four-node job takes b2 whole.
    let busy = fill(&c, "node2");
    assert_eq!(
        four_node_addresses(&c),
        [
            "node5 b2.node5 block.node",
            "node6 b2.node6 block.node",
            "node7 b2.node7 block.node",
            "node8 b2.node8 block.node"
        ]
    );
    // node6 full too: no block has four nodes, but two pairs (--segment=2) fit, one in each.
    let busy2 = fill(&c, "node6");
    let out = c.ok("srun", &["-N4", "--segment=2", "-t", "1", "bash", "-c", "echo $SLURMD_NODENAME"]);
    let mut got: Vec<&str> = out.lines().collect();
    got.sort();
    assert_eq!(got, ["node1", "node3", "node5", "node7"]);
    let waiting = c.submit(&["-N4", "-t", "1", "--wrap", "true"]);
    assert_eq!(c.ok("squeue", &["-h", "-j", &waiting.to_string(), "-o", "%t %r"]), "PD Resources\n");
    // Six nodes are free, but no block has four: explain says so, not that nodes are short.
    let why = c.ok("drover", &["explain", &waiting.to_string()]);
    assert!(why.contains("  - no block has 4 nodes with room (topology/block)\n"), "{why}");
    // A segment must divide the job's nodes.
    let o = c.run("sbatch", &["-N3", "--segment=2", "--wrap", "true"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string()),
        (
            Some(1),
            "sbatch: error: Batch job submission failed: Requested topology configuration is not available\n"
                .to_string()
        )
    );
    c.ok("scancel", &[&busy.to_string(), &busy2.to_string()]);
    c.wait_state(waiting, &["COMPLETED"], Duration::from_secs(20));
}

//! Placement requests on a real cluster, as a user writes them: Slurm's constraint grammar
//! (matching OR, node counts), node ranges, `--spread-job`, `--use-min-nodes`,
//! `--contiguous`, and best fit.

use drover_testkit::{Cluster, Options};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster() -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes: 5,
            node_line: Some(
                "NodeName=node[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Features=rack1,ib State=UNKNOWN\n\
                 NodeName=node[3-5] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Features=rack2 State=UNKNOWN"
                    .into(),
            ),
            ..Default::default()
        },
    )
}

/// The nodes of each task of `srun ARGS hostname`, sorted.
fn nodes(c: &Cluster, args: &[&str]) -> Vec<String> {
    let mut all = args.to_vec();
    all.extend(["bash", "-c", "echo $SLURMD_NODENAME"]);
    let mut v: Vec<String> = c.ok("srun", &all).lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn placement_requests_as_users_write_them() {
    let c = cluster();
    // Matching OR: three whole nodes of one rack — only rack2 has three.
    assert_eq!(nodes(&c, &["-N3", "--ntasks-per-node=1", "-C", "[rack1|rack2]"]), ["node3", "node4", "node5"]);
    // Two nodes, one of them at least with ib.
    assert_eq!(nodes(&c, &["-N2", "-C", "ib*1&(rack1|rack2)"]), ["node1", "node2"]);
    // A count raises the node count: ib*2 needs two nodes.
    assert_eq!(nodes(&c, &["-C", "ib*2"]), ["node1", "node2"]);
    // Node ranges take the most nodes unless told otherwise; --spread-job one task a node.
    assert_eq!(nodes(&c, &["-N2-4", "-n4"]), ["node1", "node2", "node3", "node4"]);
    assert_eq!(nodes(&c, &["-N2-4", "-n4", "--use-min-nodes"]), ["node1", "node1", "node2", "node2"]);
    assert_eq!(nodes(&c, &["-n5", "--spread-job"]), ["node1", "node2", "node3", "node4", "node5"]);
    // A malformed expression (counts do not mix with OR).
    let bad = c.run("srun", &["-C", "a*2|b", "true"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Invalid feature specification"));

    // Contiguous: node3 busy, two consecutive whole nodes are node1-2 or node4-5; three are not there.
    let busy = c.submit(&["-w", "node3", "-n2", "--wrap", "sleep 60"]);
    c.wait_state(busy, &["RUNNING"], std::time::Duration::from_secs(20));
    assert_eq!(nodes(&c, &["-N2", "-n4", "--contiguous"]), ["node1", "node1", "node2", "node2"]);
    let show = c.ok("sbatch", &["--parsable", "--hold", "--contiguous", "--wrap", "true"]);
    let id = show.trim();
    assert!(c.ok("scontrol", &["show", "job", id]).contains(" Contiguous=1 "));
    // Best fit: node4 half used.
    let half = c.submit(&["-w", "node4", "-n1", "--wrap", "sleep 60"]);
    c.wait_state(half, &["RUNNING"], std::time::Duration::from_secs(20));
    // A one-core job packs onto node4 (one core left) rather than an empty node.
    assert_eq!(nodes(&c, &["-n1"]), ["node4"]);
    c.ok("scancel", &[&busy.to_string(), &half.to_string(), id]);
}

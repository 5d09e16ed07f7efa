//! The network (`topology.conf`): with `TopologyPlugin=topology/tree`, which nodes hang
//! under which leaf switch and how the switches nest; with `topology/block`, the blocks of
//! nodes (rack-scale NVLink domains) and the sizes jobs may span.

use crate::hostlist::Hostlist;
use serde::{Deserialize, Serialize};

/// One switch: its level (leaves are 0, a switch one above its highest child), its link
/// speed, every node below it (in configuration order), and its child switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub name: String,
    pub level: u32,
    pub link_speed: u32,
    pub nodes: Vec<String>,
    /// Indices of its child switches (empty for a leaf).
    pub children: Vec<usize>,
    pub parent: Option<usize>,
}

/// A base block (`BlockName=`): its nodes in configuration order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub name: String,
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Topology {
    /// In the file's order.
    pub switches: Vec<Switch>,
    /// `topology/block`: the base blocks in the file's order.
    #[serde(default)]
    pub blocks: Vec<Block>,
    /// `topology/block`: nodes in a base block (`BlockSizes`' first, else the first
    /// block's node count).
    #[serde(default)]
    pub base_size: u32,
    /// `topology/block`: the levels a job may span, as counts of base blocks (powers of two,
    /// ascending; `BlockSizes` divided by the base size, by default 1, 2, 4 and 8), cut after
    /// the first that covers every block.
    #[serde(default)]
    pub block_levels: Vec<u32>,
}

/// A block as `scontrol show topology` lists it: its name (a base block's, or the hostlist
/// of an aggregate's), its line, and its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLine {
    pub name: String,
    pub line: String,
    pub nodes: Vec<String>,
}

/// Consecutive base blocks at a level: one base block, or an aggregate of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockGroup {
    /// The base blocks in it (indices, consecutive).
    pub blocks: std::ops::Range<usize>,
    /// Its level's size in base blocks (1 for a base block).
    pub level: u32,
}

impl Topology {
    /// Parses `topology.conf`: `SwitchName=NAME [Nodes=HOSTLIST | Switches=HOSTLIST]
    /// [LinkSpeed=N]`, one switch a line, `#` comments. Errors name the line.
    pub fn parse(text: &str) -> Result<Topology, String> {
        struct Raw {
            name: String,
            nodes: Vec<String>,
            switches: Vec<String>,
            speed: u32,
            line: usize,
        }
        let mut raw: Vec<Raw> = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut r = Raw { name: String::new(), nodes: Vec::new(), switches: Vec::new(), speed: 1, line: k + 1 };
            for word in line.split_whitespace() {
                let (key, val) = word
                    .split_once('=')
                    .ok_or_else(|| format!("topology.conf:{}: expected Key=Value, found `{word}`", k + 1))?;
                let list = || {
                    Hostlist::parse(val).map(|h| h.names()).map_err(|e| format!("topology.conf:{}: {key}: {e}", k + 1))
                };
                match key.to_ascii_lowercase().as_str() {
                    "switchname" => r.name = val.to_string(),
                    "nodes" => r.nodes = list()?,
                    "switches" => r.switches = list()?,
                    "linkspeed" => {
                        r.speed = val.parse().map_err(|_| {
                            format!("topology.conf:{}: LinkSpeed expects a number, found `{val}`", k + 1)
                        })?
                    }
                    _ => return Err(format!("topology.conf:{}: {key} is not a topology.conf key", k + 1)),
                }
            }
            if r.name.is_empty() {
                return Err(format!("topology.conf:{}: a line without SwitchName", k + 1));
            }
            if !r.nodes.is_empty() && !r.switches.is_empty() {
                return Err(format!("topology.conf:{}: switch {} has both Nodes and Switches", k + 1, r.name));
            }
            if raw.iter().any(|x| x.name == r.name) {
                return Err(format!("topology.conf:{}: switch {} is defined twice", k + 1, r.name));
            }
            raw.push(r);
        }
        let index = |n: &str| raw.iter().position(|r| r.name == n);
        let mut switches: Vec<Switch> = raw
            .iter()
            .map(|r| Switch {
                name: r.name.clone(),
                level: 0,
                link_speed: r.speed,
                nodes: r.nodes.clone(),
                children: Vec::new(),
                parent: None,
            })
            .collect();
        for (i, r) in raw.iter().enumerate() {
            for c in &r.switches {
                let j = index(c).ok_or_else(|| format!("topology.conf:{}: switch {c} is not defined", r.line))?;
                if switches[j].parent.is_some() || j == i {
                    return Err(format!("topology.conf:{}: switch {c} has two parents", r.line));
                }
                switches[j].parent = Some(i);
                switches[i].children.push(j);
            }
        }
        // Levels and node lists bottom up: a switch is done once all its children are.
        let mut done = vec![false; switches.len()];
        for _ in 0..=switches.len() {
            for i in 0..switches.len() {
                if done[i] || switches[i].children.iter().any(|&c| !done[c]) {
                    continue;
                }
                if !switches[i].children.is_empty() {
                    let kids = switches[i].children.clone();
                    switches[i].level = kids.iter().map(|&c| switches[c].level).max().unwrap_or(0) + 1;
                    switches[i].nodes = kids.iter().flat_map(|&c| switches[c].nodes.clone()).collect();
                }
                done[i] = true;
            }
        }
        if let Some(i) = done.iter().position(|d| !d) {
            return Err(format!("topology.conf: switch {} is part of a loop", switches[i].name));
        }
        Ok(Topology { switches, ..Default::default() })
    }

    /// Parses `topology.conf` for `topology/block`: `BlockName=NAME Nodes=HOSTLIST`, one
    /// block a line, and `BlockSizes=N[,N...]` (node counts: the first is the base block's,
    /// each other that times a power of two). Errors name the line, in Slurm's words where
    /// it has them.
    pub fn parse_blocks(text: &str) -> Result<Topology, String> {
        let mut blocks: Vec<Block> = Vec::new();
        let mut sizes: Option<Vec<u32>> = None;
        for (k, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut block: Option<Block> = None;
            for word in line.split_whitespace() {
                let (key, val) = word
                    .split_once('=')
                    .ok_or_else(|| format!("topology.conf:{}: expected Key=Value, found `{word}`", k + 1))?;
                match key.to_ascii_lowercase().as_str() {
                    "blockname" => block = Some(Block { name: val.to_string(), nodes: Vec::new() }),
                    "nodes" => {
                        let b = block
                            .as_mut()
                            .ok_or_else(|| format!("topology.conf:{}: Nodes= before BlockName=", k + 1))?;
                        b.nodes = Hostlist::parse(val)
                            .map(|h| h.names())
                            .map_err(|e| format!("topology.conf:{}: {key}: {e}", k + 1))?;
                    }
                    "blocksizes" => {
                        let mut v = Vec::new();
                        for n in val.split(',') {
                            match n.trim().parse::<u32>() {
                                Ok(n) if n > 0 => v.push(n),
                                _ => return Err(format!("topology.conf:{}: Invalid BlockSizes value: {n}", k + 1)),
                            }
                        }
                        sizes = Some(v);
                    }
                    _ => return Err(format!("topology.conf:{}: {key} is not a topology/block key", k + 1)),
                }
            }
            if let Some(b) = block {
                if b.nodes.is_empty() {
                    return Err(format!("topology.conf:{}: block {} hasn't got nodes", k + 1, b.name));
                }
                if blocks.iter().any(|x| x.name == b.name) {
                    return Err(format!("topology.conf:{}: Block ({}) has already been defined", k + 1, b.name));
                }
                if let Some(n) = b.nodes.iter().find(|n| blocks.iter().any(|x| x.nodes.contains(n))) {
                    return Err(format!("topology.conf:{}: node {n} is in two blocks", k + 1));
                }
                blocks.push(b);
            }
        }
        if blocks.is_empty() {
            return Err("topology.conf: No blocks configured".into());
        }
        let base = sizes.as_ref().and_then(|s| s.first().copied()).unwrap_or(blocks[0].nodes.len() as u32);
        if let Some(b) = blocks.iter().find(|b| (b.nodes.len() as u32) < base) {
            return Err(format!(
                "topology.conf: Block configuration ({}) children count lower than bblock_node_cnt",
                b.name
            ));
        }
        let mut levels: Vec<u32> = match &sizes {
            None => vec![1, 2, 4, 8],
            Some(s) => {
                let mut v = Vec::new();
                for &n in s {
                    let ratio = n / base;
                    if !n.is_multiple_of(base) || !ratio.is_power_of_two() || ratio > 1 << 15 {
                        return Err(format!("topology.conf: Invalid BlockSizes value: {n}"));
                    }
                    v.push(ratio);
                }
                v.sort_unstable();
                v.dedup();
                v
            }
        };
        if let Some(k) = levels.iter().position(|&l| l as usize >= blocks.len()) {
            levels.truncate(k + 1);
        }
        Ok(Topology { switches: Vec::new(), blocks, base_size: base, block_levels: levels })
    }

    /// The base block a node is in.
    pub fn block_of(&self, node: &str) -> Option<usize> {
        self.blocks.iter().position(|b| b.nodes.iter().any(|n| n == node))
    }

    /// The smallest level (in base blocks) whose blocks can hold `nodes` nodes; `None` when
    /// none can (the job may then span all of them).
    pub fn level_for(&self, nodes: u32) -> Option<u32> {
        let need = nodes.div_ceil(self.base_size.max(1)).max(1);
        self.block_levels.iter().copied().find(|&l| l >= need)
    }

    /// The blocks of a level: runs of `level` consecutive base blocks from the first; a
    /// shorter last run counts only where it is longer than the level below.
    pub fn groups(&self, level: u32) -> Vec<BlockGroup> {
        let n = self.blocks.len();
        let level = level.max(1) as usize;
        let below = self.block_levels.iter().copied().filter(|&l| (l as usize) < level).max().unwrap_or(0) as usize;
        (0..n)
            .step_by(level)
            .filter(|&start| level == 1 || n - start >= level || n - start > below)
            .map(|start| BlockGroup { blocks: start..(start + level).min(n), level: level as u32 })
            .collect()
    }

    /// The blocks as `scontrol show topology` prints them: base blocks, then the aggregates
    /// of each level above.
    pub fn block_lines(&self) -> Vec<BlockLine> {
        let mut out = Vec::new();
        for (k, b) in self.blocks.iter().enumerate() {
            out.push(BlockLine {
                name: b.name.clone(),
                line: format!(
                    "BlockName={} BlockIndex={k} Nodes={} BlockSize={}",
                    b.name,
                    Hostlist::from_iter(&b.nodes).ranged(),
                    self.base_size
                ),
                nodes: b.nodes.clone(),
            });
        }
        let mut index = self.blocks.len();
        for &level in self.block_levels.iter().filter(|&&l| l > 1) {
            for g in self.groups(level) {
                let names: Vec<&String> = self.blocks[g.blocks.clone()].iter().map(|b| &b.name).collect();
                let name = Hostlist::from_iter(names).ranged();
                let nodes: Vec<String> = self.blocks[g.blocks.clone()].iter().flat_map(|b| b.nodes.clone()).collect();
                let line = format!(
                    "AggregatedBlock={name} BlockIndex={index} Nodes={} BlockSize={}",
                    Hostlist::from_iter(&nodes).ranged(),
                    self.base_size * level
                );
                out.push(BlockLine { name, line, nodes });
                index += 1;
            }
        }
        out
    }

    /// The leaf switch a node hangs under.
    pub fn leaf_of(&self, node: &str) -> Option<usize> {
        self.switches.iter().position(|s| s.children.is_empty() && s.nodes.iter().any(|n| n == node))
    }

    /// `SLURM_TOPOLOGY_ADDR` and `SLURM_TOPOLOGY_ADDR_PATTERN` of a node: the switches from
    /// the top down to it, then its name (`top.s0.node1`, `switch.switch.node`); just the
    /// node where it is under no switch.
    pub fn address(&self, node: &str) -> (String, String) {
        if let Some(b) = self.block_of(node) {
            return (format!("{}.{node}", self.blocks[b].name), "block.node".into());
        }
        let mut path: Vec<&str> = vec![node];
        let mut at = self.leaf_of(node);
        while let Some(i) = at {
            path.push(&self.switches[i].name);
            at = self.switches[i].parent;
        }
        path.reverse();
        let pattern: Vec<&str> = (0..path.len()).map(|k| if k + 1 == path.len() { "node" } else { "switch" }).collect();
        (path.join("."), pattern.join("."))
    }

    /// One switch as `scontrol show topology` prints it.
    pub fn show_line(&self, i: usize) -> String {
        let s = &self.switches[i];
        let mut out = format!(
            "SwitchName={} Level={} LinkSpeed={} Nodes={}",
            s.name,
            s.level,
            s.link_speed,
            Hostlist::from_iter(&s.nodes).ranged()
        );
        if !s.children.is_empty() {
            let kids: Vec<&String> = s.children.iter().map(|&c| &self.switches[c].name).collect();
            out.push_str(&format!(" Switches={}", Hostlist::from_iter(kids).ranged()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: &str = "SwitchName=s0 Nodes=node[1-2] LinkSpeed=100\nSwitchName=s1 Nodes=node[3-4]\n\
                       # the spine\nSwitchName=top Switches=s[0-1]\n";

    #[test]
    fn parses_a_tree_and_shows_it_as_slurm_does() {
        let t = Topology::parse(LAB).unwrap();
        let lines: Vec<String> = (0..t.switches.len()).map(|i| t.show_line(i)).collect();
        assert_eq!(
            lines,
            [
                "SwitchName=s0 Level=0 LinkSpeed=100 Nodes=node[1-2]",
                "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[3-4]",
                "SwitchName=top Level=1 LinkSpeed=1 Nodes=node[1-4] Switches=s[0-1]",
            ]
        );
        assert_eq!(t.address("node2"), ("top.s0.node2".into(), "switch.switch.node".into()));
        assert_eq!(t.address("node9"), ("node9".into(), "node".into()));
        assert_eq!(t.leaf_of("node3"), Some(1));
    }

    #[test]
    fn blocks_aggregate_by_powers_of_two_and_show_as_slurm_lists_them() {
        let t = Topology::parse_blocks(
            "BlockName=b1 Nodes=node[1-4]\nBlockName=b2 Nodes=node[5-8]\nBlockName=b3 Nodes=node[9-12]\n\
             BlockSizes=4,8,16\n",
        )
        .unwrap();
        assert_eq!((t.base_size, t.block_levels.clone()), (4, vec![1, 2, 4]));
        assert_eq!(t.level_for(3), Some(1));
        assert_eq!(t.level_for(5), Some(2));
        assert_eq!(t.level_for(12), Some(4));
        assert_eq!(t.level_for(17), None);
        // Pairs from the first block: b3 alone is no longer than a base block, so no pair.
        assert_eq!(t.groups(2), [BlockGroup { blocks: 0..2, level: 2 }]);
        assert_eq!(t.groups(4), [BlockGroup { blocks: 0..3, level: 4 }]);
        let lines: Vec<String> = t.block_lines().into_iter().map(|l| l.line).collect();
        assert_eq!(
            lines,
            [
                "BlockName=b1 BlockIndex=0 Nodes=node[1-4] BlockSize=4",
                "BlockName=b2 BlockIndex=1 Nodes=node[5-8] BlockSize=4",
                "BlockName=b3 BlockIndex=2 Nodes=node[9-12] BlockSize=4",
                "AggregatedBlock=b[1-2] BlockIndex=3 Nodes=node[1-8] BlockSize=8",
                "AggregatedBlock=b[1-3] BlockIndex=4 Nodes=node[1-12] BlockSize=16",
            ]
        );
        assert_eq!(t.address("node6"), ("b2.node6".into(), "block.node".into()));
        // Without BlockSizes: the first block's size, levels 1, 2, 4, 8 as far as needed.
        let t = Topology::parse_blocks("BlockName=r1 Nodes=n[1-2]\nBlockName=r2 Nodes=n[3-4]\n").unwrap();
        assert_eq!((t.base_size, t.block_levels.clone()), (2, vec![1, 2]));
    }

    #[test]
    fn refuses_blocks_slurm_refuses() {
        let err = |s: &str| Topology::parse_blocks(s).unwrap_err();
        assert!(err("BlockName=b1\n").contains("block b1 hasn't got nodes"));
        assert!(err("BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n").contains("Block (b1) has already been defined"));
        assert!(err("BlockName=b1 Nodes=n[1-2]\nBlockSizes=2,6\n").contains("Invalid BlockSizes value: 6"));
        assert!(err("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n3\n").contains("children count lower"));
        assert!(err("# nothing\n").contains("No blocks configured"));
        assert!(err("BlockName=b1 Nodes=n1\nBlockName=b2 Nodes=n1\n").contains("node n1 is in two blocks"));
    }

    #[test]
    fn refuses_what_is_not_a_tree() {
        assert!(Topology::parse("SwitchName=a Switches=b\n").unwrap_err().contains("switch b is not defined"));
        assert!(Topology::parse("SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2\n").is_err());
        assert!(Topology::parse("SwitchName=a Switches=b\nSwitchName=b Switches=a\n").unwrap_err().contains("loop"));
        assert!(Topology::parse("Nodes=n1\n").unwrap_err().contains("without SwitchName"));
        assert!(Topology::parse("SwitchName=a Speed=1\n").unwrap_err().contains("Speed is not"));
    }
}

//! The network's switches (`topology.conf` with `TopologyPlugin=topology/tree`): which nodes
//! hang under which leaf switch, and how the switches nest.

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

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Topology {
    /// In the file's order.
    pub switches: Vec<Switch>,
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
        Ok(Topology { switches })
    }

    /// The leaf switch a node hangs under.
    pub fn leaf_of(&self, node: &str) -> Option<usize> {
        self.switches.iter().position(|s| s.children.is_empty() && s.nodes.iter().any(|n| n == node))
    }

    /// `SLURM_TOPOLOGY_ADDR` and `SLURM_TOPOLOGY_ADDR_PATTERN` of a node: the switches from
    /// the top down to it, then its name (`top.s0.node1`, `switch.switch.node`); just the
    /// node where it is under no switch.
    pub fn address(&self, node: &str) -> (String, String) {
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
    fn refuses_what_is_not_a_tree() {
        assert!(Topology::parse("SwitchName=a Switches=b\n").unwrap_err().contains("switch b is not defined"));
        assert!(Topology::parse("SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2\n").is_err());
        assert!(Topology::parse("SwitchName=a Switches=b\nSwitchName=b Switches=a\n").unwrap_err().contains("loop"));
        assert!(Topology::parse("Nodes=n1\n").unwrap_err().contains("without SwitchName"));
        assert!(Topology::parse("SwitchName=a Speed=1\n").unwrap_err().contains("Speed is not"));
    }
}

//! `srun --multi-prog FILE`: a program and arguments per task rank, in Slurm's file format.
//!
//! ```text
//! # comments start in column one
//! 4-6       hostname
//! 1,7       echo task:%t          (%t: the task's rank)
//! 0,2-3     echo offset:%o        (%o: its position among the line's ranks)
//! *         worker 'two words'    (every other task; single quotes group)
//! ```

/// Which ranks a line is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ranks {
    List(Vec<(u32, u32)>),
    Rest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    ranks: Ranks,
    argv: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiProg {
    lines: Vec<Line>,
}

/// Splits on white space, keeping what single quotes enclose as one word (double quotes are
/// ordinary characters, as in Slurm).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn ranks(spec: &str) -> Option<Ranks> {
    if spec == "*" {
        return Some(Ranks::Rest);
    }
    let mut list = Vec::new();
    for part in spec.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi) = (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?);
        // No step has 16 million tasks: a larger rank is a typing error, not a loop to run.
        if hi < lo || hi >= 1 << 24 {
            return None;
        }
        list.push((lo, hi));
    }
    Some(Ranks::List(list))
}

impl MultiProg {
    /// Parses `text` (the file `name`) for a step of `ntasks` tasks; errors are srun's lines
    /// (`Invalid task range specification (x)`, then `Line 1 of configuration file F invalid`).
    pub fn parse(text: &str, name: &str, ntasks: Option<u32>) -> Result<MultiProg, Vec<String>> {
        let mut lines: Vec<Line> = Vec::new();
        let mut seen: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
        for (n, raw) in text.lines().enumerate() {
            let invalid = |why: String| vec![why, format!("Line {} of configuration file {name} invalid", n + 1)];
            if raw.starts_with('#') || raw.trim().is_empty() {
                continue;
            }
            let w = words(raw);
            let Some(spec) = w.first() else { continue };
            let r = ranks(spec).ok_or_else(|| invalid(format!("Invalid task range specification ({spec})")))?;
            if let Ranks::List(list) = &r {
                for &(lo, hi) in list {
                    for t in lo..=hi {
                        if ntasks.is_some_and(|n| t >= n) {
                            return Err(invalid(format!("Invalid task id, {t} >= ntasks")));
                        }
                        if !seen.insert(t) {
                            return Err(invalid(format!("Duplicate record for task {t}")));
                        }
                    }
                }
            }
            if w.len() < 2 {
                return Err(invalid("No executable program specified".into()));
            }
            lines.push(Line { ranks: r, argv: w[1..].to_vec() });
        }
        let mp = MultiProg { lines };
        if let Some(n) = ntasks {
            if let Some(t) = (0..n).find(|t| mp.argv_for(*t).is_none()) {
                return Err(vec![format!("Configuration file {name} invalid, no record for task id {t}")]);
            }
        }
        Ok(mp)
    }

    /// Task `task`'s program and arguments, `%t` and `%o` replaced; `None`: no line has it.
    pub fn argv_for(&self, task: u32) -> Option<Vec<String>> {
        let listed = self.lines.iter().find_map(|l| match &l.ranks {
            Ranks::List(list) => {
                let mut offset = 0;
                for &(lo, hi) in list {
                    if (lo..=hi).contains(&task) {
                        return Some((l, offset + task - lo));
                    }
                    offset += hi - lo + 1;
                }
                None
            }
            Ranks::Rest => None,
        });
        // `*` takes every task no earlier line names; its offset is the rank itself.
        let (line, offset) =
            listed.or_else(|| self.lines.iter().find(|l| l.ranks == Ranks::Rest).map(|l| (l, task)))?;
        let sub = |w: &String| w.replace("%t", &task.to_string()).replace("%o", &offset.to_string());
        Some(line.argv.iter().map(sub).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_example() {
        let text = "#####\n# srun -n8 -l --multi-prog silly.conf\n4-6       hostname\n1,7       echo  task:%t\n\
                    0,2-3     echo  offset:%o\n";
        let mp = MultiProg::parse(text, "silly.conf", Some(8)).unwrap();
        let got: Vec<String> = (0..8).map(|t| mp.argv_for(t).unwrap().join(" ")).collect();
        assert_eq!(
            got,
            [
                "echo offset:0",
                "echo task:1",
                "echo offset:1",
                "echo offset:2",
                "hostname",
                "hostname",
                "hostname",
                "echo task:7"
            ]
        );
    }

    #[test]
    fn rest_quotes_and_slurms_errors() {
        let mp = MultiProg::parse("0 echo a %t\n* echo rest %o %t\n", "f", Some(3)).unwrap();
        assert_eq!(mp.argv_for(2).unwrap(), ["echo", "rest", "2", "2"]);
        let mp = MultiProg::parse("0-1 echo 'a b'  \"c d\" %t\n", "f", Some(2)).unwrap();
        assert_eq!(mp.argv_for(1).unwrap(), ["echo", "a b", "\"c", "d\"", "1"]);
        let e = |t: &str, n| MultiProg::parse(t, "mp.conf", n).unwrap_err();
        assert_eq!(e("0 echo a\n", Some(2)), ["Configuration file mp.conf invalid, no record for task id 1"]);
        assert_eq!(
            e("5 echo x\n", Some(2)),
            ["Invalid task id, 5 >= ntasks", "Line 1 of configuration file mp.conf invalid"]
        );
        assert_eq!(
            e("x echo y\n", Some(1)),
            ["Invalid task range specification (x)", "Line 1 of configuration file mp.conf invalid"]
        );
        assert_eq!(
            e("\n#x\n\n0-1 echo a\n1 echo b\n", Some(2)),
            ["Duplicate record for task 1", "Line 5 of configuration file mp.conf invalid"]
        );
        // The step's size unknown yet: the file is checked, the tasks later.
        assert!(MultiProg::parse("0 echo a\n", "f", None).unwrap().argv_for(1).is_none());
    }
}

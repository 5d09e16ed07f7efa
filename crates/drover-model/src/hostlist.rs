//! Slurm hostlist expressions (`node[01-10,12],gpu[1-3]`), expanded and compressed exactly as
//! Slurm 22.05's `src/common/hostlist.c` does: duplicates kept, input order kept by
//! [`Hostlist::ranged`], sorted (not de-duplicated) by [`Hostlist::sorted`], zero-padding widths
//! merged by Slurm's rules, and multi-dimensional prefixes (`x[1-2]y[3-4]`) expanded with the
//! last bracket varying fastest.

use std::cmp::Ordering;
use std::fmt;

/// Slurm refuses a single bracket range of more hosts than this (`MAX_RANGE`).
pub const MAX_RANGE: u64 = 64 * 1024;
/// Slurm caps the number of prefix expansions in multi-bracket expressions (`MAX_PREFIX_CNT`).
const MAX_PREFIX_CNT: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// `detail` is Slurm's `_parse_single_range` message, when Slurm prints one.
    #[error("Invalid hostlist: {input}")]
    Invalid { input: String, detail: Option<String> },
}

impl HostlistError {
    /// The lines Slurm prints on stderr for this error, as `scontrol` does.
    pub fn slurm_lines(&self, prog: &str) -> Vec<String> {
        match self {
            HostlistError::Invalid { input, detail } => {
                let mut v = Vec::new();
                if let Some(d) = detail {
                    v.push(format!("{prog}: error: _parse_single_range: {d}"));
                }
                v.push(format!("Invalid hostlist: {input}"));
                v
            }
        }
    }
}

/// One run of hosts sharing a prefix: `prefix` + numbers `lo..=hi` printed `width` wide, or a
/// single host without a numeric suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    prefix: String,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

impl Range {
    fn count(&self) -> u64 {
        if self.single {
            1
        } else {
            self.hi - self.lo + 1
        }
    }
    fn within(&self, other: &Range) -> bool {
        self.prefix == other.prefix && !self.single && !other.single
    }
    fn numstr(&self, out: &mut String) {
        use fmt::Write;
        if self.single {
            return;
        }
        let _ = write!(out, "{:0w$}", self.lo, w = self.width);
        if self.hi > self.lo {
            let _ = write!(out, "-{:0w$}", self.hi, w = self.width);
        }
    }
}

/// An ordered list of host names, stored as ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hostlist {
    ranges: Vec<Range>,
}

fn zero_padded(num: u64, width: usize) -> usize {
    let digits = num.to_string().len();
    width.saturating_sub(digits)
}

/// Slurm's `_width_equiv`: may two numbers of these widths be printed in one range?
fn width_equiv(n: u64, wn: &mut usize, m: u64, wm: &mut usize) -> bool {
    if *wn == *wm {
        return true;
    }
    let npad = zero_padded(n, *wn);
    let nmpad = zero_padded(n, *wm);
    let mpad = zero_padded(m, *wm);
    let mmpad = zero_padded(m, *wn);
    if npad != nmpad && mpad != mmpad {
        return false;
    }
    if npad != nmpad {
        *wm = *wn;
    } else {
        *wn = *wm;
    }
    true
}

/// Splits a host name into prefix and numeric suffix as Slurm's `hostname_create` does.
fn split_host(name: &str) -> Range {
    let bytes = name.as_bytes();
    let mut idx = bytes.len();
    while idx > 0 && bytes[idx - 1].is_ascii_digit() {
        idx -= 1;
    }
    let suffix = &name[idx..];
    // Slurm treats an all-digit name with no prefix as numeric too, but refuses suffixes too
    // long to be a number.
    if suffix.is_empty() || suffix.len() > 18 {
        return Range { prefix: name.to_string(), lo: 0, hi: 0, width: 0, single: true };
    }
    let num: u64 = suffix.parse().unwrap_or(0);
    Range { prefix: name[..idx].to_string(), lo: num, hi: num, width: suffix.len(), single: false }
}

impl Hostlist {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a hostlist expression. Separators are `,`, space, tab and newline outside brackets.
    pub fn parse(input: &str) -> Result<Hostlist, HostlistError> {
        let mut hl = Hostlist::new();
        let invalid = |detail: Option<String>| HostlistError::Invalid { input: input.to_string(), detail };
        for tok in tokens(input) {
            if let Some(open) = tok.rfind('[') {
                let prefix = &tok[..open];
                let rest = &tok[open + 1..];
                if let Some(close) = rest.find(']') {
                    let after = &rest[close + 1..];
                    if !after.is_empty() {
                        return Err(invalid(None));
                    }
                    let ranges = parse_range_list(&rest[..close]).map_err(|d| invalid(Some(d)))?;
                    let mut budget = MAX_PREFIX_CNT;
                    hl.push_range_list(prefix, &ranges, &mut budget).map_err(&invalid)?;
                } else {
                    // Slurm 22.05 closes an unbalanced trailing bracket and keeps the name.
                    hl.push_host(&format!("{prefix}{rest}]"));
                }
            } else {
                hl.push_host(tok);
            }
        }
        Ok(hl)
    }

    /// `budget`: prefix expansions left for the whole expression (nested brackets multiply:
    /// `a[1-1000]b[1-1000]c[1-1000]` would be a billion); a prefix of more than 32 bytes
    /// counts once per 32.
    fn push_range_list(
        &mut self,
        prefix: &str,
        ranges: &[(u64, u64, usize)],
        budget: &mut u64,
    ) -> Result<(), Option<String>> {
        if let Some(open) = prefix.rfind('[') {
            if let Some(close_rel) = prefix[open..].rfind(']') {
                let head = &prefix[..open];
                let inner = &prefix[open + 1..open + close_rel];
                let tail = &prefix[open + close_rel + 1..];
                let recurse = head.contains('[');
                let pre = parse_range_list(inner).map_err(Some)?;
                let mut cnt = 0u64;
                for (lo, hi, width) in pre {
                    cnt += hi - lo + 1;
                    if cnt > MAX_PREFIX_CNT {
                        return Err(None);
                    }
                    for j in lo..=hi {
                        let new_prefix = format!("{head}{j:0width$}{tail}");
                        // Long prefixes count for more: memory, not only names, is bounded.
                        let cost = (new_prefix.len() as u64 / 32).max(1);
                        *budget = budget.checked_sub(cost).ok_or(None)?;
                        if recurse {
                            self.push_range_list(&new_prefix, ranges, budget)?;
                        } else {
                            for &(l, h, w) in ranges {
                                self.push_range(Range {
                                    prefix: new_prefix.clone(),
                                    lo: l,
                                    hi: h,
                                    width: w,
                                    single: false,
                                });
                            }
                        }
                    }
                }
                return Ok(());
            }
        }
        for &(l, h, w) in ranges {
            self.push_range(Range { prefix: prefix.to_string(), lo: l, hi: h, width: w, single: false });
        }
        Ok(())
    }

    /// Appends one host name.
    pub fn push_host(&mut self, name: &str) {
        self.push_range(split_host(name));
    }

    fn push_range(&mut self, mut r: Range) {
        if let Some(tail) = self.ranges.last_mut() {
            if !tail.single
                && !r.single
                && tail.prefix == r.prefix
                && tail.hi + 1 == r.lo
                && width_equiv(tail.lo, &mut tail.width, r.lo, &mut r.width)
            {
                tail.hi = r.hi;
                return;
            }
        }
        self.ranges.push(r);
    }

    /// Appends every host of another list.
    pub fn extend(&mut self, other: &Hostlist) {
        for r in &other.ranges {
            self.push_range(r.clone());
        }
    }

    /// Number of hosts, duplicates included.
    pub fn len(&self) -> usize {
        self.ranges.iter().map(|r| r.count() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Every host name in order.
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.ranges.iter().flat_map(|r| {
            let n = r.count();
            (0..n).map(
                move |i| {
                    if r.single {
                        r.prefix.clone()
                    } else {
                        format!("{}{:0w$}", r.prefix, r.lo + i, w = r.width)
                    }
                },
            )
        })
    }

    pub fn names(&self) -> Vec<String> {
        self.iter().collect()
    }

    /// The compressed form in list order (`scontrol show hostlist`).
    pub fn ranged(&self) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < self.ranges.len() {
            if !out.is_empty() {
                out.push(',');
            }
            let first = &self.ranges[i];
            let bracket = first.count() > 1 || self.ranges.get(i + 1).is_some_and(|n| first.within(n));
            out.push_str(&first.prefix);
            if bracket {
                out.push('[');
            }
            loop {
                self.ranges[i].numstr(&mut out);
                if bracket {
                    out.push(',');
                }
                i += 1;
                if i >= self.ranges.len() || !self.ranges[i].within(&self.ranges[i - 1]) {
                    break;
                }
            }
            if bracket {
                out.pop();
                out.push(']');
            }
        }
        out
    }

    /// Sorted, duplicates kept, then compressed (`scontrol show hostlistsorted`).
    pub fn sorted(&self) -> Hostlist {
        let mut hosts: Vec<Range> = Vec::new();
        for r in &self.ranges {
            if r.single {
                hosts.push(r.clone());
            } else {
                for n in r.lo..=r.hi {
                    hosts.push(Range { prefix: r.prefix.clone(), lo: n, hi: n, width: r.width, single: false });
                }
            }
        }
        hosts.sort_by(cmp_host);
        let mut hl = Hostlist::new();
        for h in hosts {
            hl.push_range(h);
        }
        hl
    }

    /// Membership by name.
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|h| h == name)
    }
}

/// Slurm's `hostrange_cmp`: prefix, then single hosts first, then width, then number.
fn cmp_host(a: &Range, b: &Range) -> Ordering {
    natural_cmp(&a.prefix, &b.prefix)
        .then_with(|| b.single.cmp(&a.single))
        .then_with(|| a.width.cmp(&b.width))
        .then_with(|| a.lo.cmp(&b.lo))
}

/// Natural order (`n9` < `n10`), as Slurm's `strnatcmp` on prefixes.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let na = std::str::from_utf8(&a[si..i]).unwrap_or("0").trim_start_matches('0');
            let nb = std::str::from_utf8(&b[sj..j]).unwrap_or("0").trim_start_matches('0');
            let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.ranged())
    }
}

impl std::str::FromStr for Hostlist {
    type Err = HostlistError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hostlist::parse(s)
    }
}

impl<S: AsRef<str>> FromIterator<S> for Hostlist {
    fn from_iter<T: IntoIterator<Item = S>>(iter: T) -> Self {
        let mut hl = Hostlist::new();
        for h in iter {
            hl.push_host(h.as_ref());
        }
        hl
    }
}

/// Splits on separators, keeping a separator inside `[...]` part of the token (Slurm's `_next_tok`).
fn tokens(input: &str) -> Vec<&str> {
    let is_sep = |c: char| matches!(c, ',' | ' ' | '\t' | '\n');
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start: Option<usize> = None;
    for (i, c) in input.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if is_sep(c) && depth <= 0 {
            if let Some(s) = start.take() {
                out.push(&input[s..i]);
            }
            depth = 0;
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(&input[s..]);
    }
    out
}

/// Parses `1-3,5,007-9` into (lo, hi, width) triples; errors carry Slurm's message.
fn parse_range_list(s: &str) -> Result<Vec<(u64, u64, usize)>, String> {
    s.split(',').map(parse_single_range).collect()
}

fn parse_single_range(s: &str) -> Result<(u64, u64, usize), String> {
    let invalid = || format!("Invalid range: `{s}'");
    if s.contains('x') {
        return Err(invalid());
    }
    let (lo_s, hi_s) = match s.split_once('-') {
        Some((l, h)) => {
            if h.starts_with('-') {
                return Err(invalid());
            }
            (l, Some(h))
        }
        None => (s, None),
    };
    let width = lo_s.len();
    let lo: u64 = lo_s.parse().map_err(|_| invalid())?;
    if !lo_s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let hi = match hi_s {
        Some(h) if !h.is_empty() => {
            if !h.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            h.parse().map_err(|_| invalid())?
        }
        _ => lo,
    };
    if lo > hi {
        return Err(invalid());
    }
    if hi - lo + 1 > MAX_RANGE {
        return Err(format!("Too many hosts in range `{s}'"));
    }
    Ok((lo, hi, width))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_compresses_simple_lists() {
        let hl = Hostlist::parse("node[01-03,05],gpu1").unwrap();
        assert_eq!(hl.names(), ["node01", "node02", "node03", "node05", "gpu1"]);
        assert_eq!(hl.ranged(), "node[01-03,05],gpu1");
        assert_eq!(hl.sorted().ranged(), "gpu1,node[01-03,05]");
        assert_eq!(hl.len(), 5);
    }

    /// Found by fuzzing (scripts/fuzz hostlist): nested brackets multiply, and a capped
    /// count per bracket let three of them ask for a billion names (minutes, gigabytes).
    #[test]
    fn nested_brackets_share_one_expansion_budget() {
        let t = std::time::Instant::now();
        assert!(Hostlist::parse("n[1-1000]x[1-1000]y[1-1000]z[1-2]").is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "refused at once, not after expanding");
        let ok = Hostlist::parse("rack[1-4]n[01-16]").unwrap();
        assert_eq!((ok.len(), ok.names()[17].as_str()), (64, "rack2n02"));
    }

    #[test]
    fn from_names_compresses() {
        let hl: Hostlist = ["node1", "node2", "node4"].into_iter().collect();
        assert_eq!(hl.to_string(), "node[1-2,4]");
    }

    proptest::proptest! {
        #[test]
        fn ranged_round_trips(nums in proptest::collection::vec(0u64..200, 0..40), width in 1usize..4) {
            let names: Vec<String> = nums.iter().map(|n| format!("n{n:0width$}")).collect();
            let hl: Hostlist = names.iter().collect();
            let back = Hostlist::parse(&hl.ranged()).unwrap();
            proptest::prop_assert_eq!(back.names(), names);
        }
    }
}

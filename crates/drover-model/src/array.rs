//! Job arrays: the `--array` expression (`0-15`, `0,6,16-32`, `0-15:4`, `%N` throttle), the set
//! of task ids it names, and that set printed as Slurm prints it (`squeue`'s `21_[0-3]`,
//! `scontrol`'s `ArrayTaskId=`).
//!
//! A set is kept as a few stepped ranges, never as one entry per task: a pending array of a
//! million tasks is one range of 12 bytes until its tasks start.

use serde::{Deserialize, Serialize};

/// The highest task id any configuration allows (Slurm caps `MaxArraySize` at 4,000,001).
pub const MAX_TASK_ID: u32 = 4_000_000;

/// `first, first+step, ..., last` (`last` is always an element).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRange {
    pub first: u32,
    pub last: u32,
    pub step: u32,
}

impl TaskRange {
    fn len(&self) -> u64 {
        u64::from((self.last - self.first) / self.step) + 1
    }
    fn contains(&self, t: u32) -> bool {
        t >= self.first && t <= self.last && (t - self.first).is_multiple_of(self.step)
    }
}

/// A set of array task ids: disjoint ranges in ascending order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskSet {
    ranges: Vec<TaskRange>,
}

/// Why an `--array` expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    /// sbatch's own check of the expression.
    #[error("Invalid --array specification")]
    Syntax,
    /// The controller's check against `MaxArraySize`.
    #[error("Invalid job array specification")]
    TooLarge,
}

/// A parsed `--array` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    pub tasks: TaskSet,
    /// `%N`: at most N tasks run at once (0: no limit).
    pub throttle: u32,
}

impl ArraySpec {
    /// Parses `0-15`, `0,6,16-32`, `0-15:4`, `1-100%5`.
    pub fn parse(s: &str) -> Result<ArraySpec, ArrayError> {
        let (list, throttle) = match s.split_once('%') {
            Some((l, t)) => (l, t.trim().parse::<u32>().map_err(|_| ArrayError::Syntax)?),
            None => (s, 0),
        };
        let mut ranges = Vec::new();
        for part in list.split(',') {
            let part = part.trim();
            let (span, step) = match part.split_once(':') {
                Some((sp, st)) => (sp, st.parse::<u32>().map_err(|_| ArrayError::Syntax)?),
                None => (part, 1),
            };
            let (a, b) = match span.split_once('-') {
                Some((a, b)) => (a, b),
                None => (span, span),
            };
            let first: u32 = a.parse().map_err(|_| ArrayError::Syntax)?;
            let last: u32 = b.parse().map_err(|_| ArrayError::Syntax)?;
            if step == 0 || last < first {
                return Err(ArrayError::Syntax);
            }
            let last = first + (last - first) / step * step;
            ranges.push(TaskRange { first, last, step });
        }
        ranges.sort_by_key(|r| (r.first, r.last));
        if ranges.windows(2).any(|w| w[1].first <= w[0].last) && ranges.iter().any(|r| r.last > MAX_TASK_ID) {
            // Overlapping ranges are merged element by element: not beyond what any
            // MaxArraySize allows.
            return Err(ArrayError::TooLarge);
        }
        Ok(ArraySpec { tasks: TaskSet::from_ranges(ranges), throttle })
    }

    /// The expression again, in the canonical form [`ArraySpec::parse`] reads back.
    pub fn canonical(&self) -> String {
        let mut s = self.tasks.canonical();
        if self.throttle > 0 {
            s.push_str(&format!("%{}", self.throttle));
        }
        s
    }
}

impl TaskSet {
    /// Normalises any ranges into disjoint ascending ones (overlaps are merged).
    pub fn from_ranges(mut ranges: Vec<TaskRange>) -> TaskSet {
        ranges.sort_by_key(|r| (r.first, r.last));
        let overlaps = ranges.windows(2).any(|w| w[1].first <= w[0].last);
        if !overlaps {
            return TaskSet { ranges };
        }
        // Rare (an expression that names a task twice): rebuild from the elements, in a
        // bitmap as Slurm does. Slurm's MaxArraySize is at most 4,000,001, so a task id above
        // 4,000,000 is refused anyway (the caller checks): the bitmap stays within 500 kB.
        ranges.dedup();
        let top = ranges.iter().map(|r| r.last).max().unwrap_or(0).min(MAX_TASK_ID);
        let mut bits = vec![0u64; top as usize / 64 + 1];
        for r in &ranges {
            for t in (r.first..=r.last.min(top)).step_by(r.step as usize) {
                bits[t as usize / 64] |= 1 << (t % 64);
            }
        }
        let mut set = TaskSet::default();
        for (w, &word) in bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let b = word.trailing_zeros();
                word &= word - 1;
                set.push_back(w as u32 * 64 + b);
            }
        }
        set
    }

    /// Appends `t`, which must be above every element.
    fn push_back(&mut self, t: u32) {
        if let Some(r) = self.ranges.last_mut() {
            if r.first == r.last && t > r.last {
                r.step = t - r.first;
                r.last = t;
                return;
            }
            if t == r.last + r.step {
                r.last = t;
                return;
            }
        }
        self.ranges.push(TaskRange { first: t, last: t, step: 1 });
    }

    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|r| r.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn min(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.first)
    }

    pub fn max(&self) -> Option<u32> {
        self.ranges.last().map(|r| r.last)
    }

    /// The step between tasks when the set is one evenly spaced range, else 1 (as
    /// `SLURM_ARRAY_TASK_STEP` reports it).
    pub fn step(&self) -> u32 {
        match self.ranges.as_slice() {
            [r] if r.first != r.last => r.step,
            _ => 1,
        }
    }

    pub fn contains(&self, t: u32) -> bool {
        let i = self.ranges.partition_point(|r| r.last < t);
        self.ranges.get(i).is_some_and(|r| r.contains(t))
    }

    /// Removes and returns the lowest task id.
    pub fn pop_first(&mut self) -> Option<u32> {
        let r = self.ranges.first_mut()?;
        let t = r.first;
        if r.first == r.last {
            self.ranges.remove(0);
        } else {
            r.first += r.step;
        }
        Some(t)
    }

    /// Removes `t`; false when it was not there.
    pub fn remove(&mut self, t: u32) -> bool {
        let i = self.ranges.partition_point(|r| r.last < t);
        let Some(r) = self.ranges.get(i).copied() else { return false };
        if !r.contains(t) {
            return false;
        }
        let mut pieces = Vec::with_capacity(2);
        if t > r.first {
            pieces.push(TaskRange { first: r.first, last: t - r.step, step: r.step });
        }
        if t < r.last {
            pieces.push(TaskRange { first: t + r.step, last: r.last, step: r.step });
        }
        self.ranges.splice(i..=i, pieces);
        true
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|r| (r.first..=r.last).step_by(r.step as usize))
    }

    /// Ranges of consecutive ids (`0-3`, `5`), in order, adjacent ranges joined.
    fn runs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut pieces = self.ranges.iter().flat_map(|r| {
            let single = r.step == 1;
            let mut next = Some(r.first);
            std::iter::from_fn(move || {
                let a = next?;
                if single {
                    next = None;
                    return Some((a, r.last));
                }
                next = if a < r.last { Some(a + r.step) } else { None };
                Some((a, a))
            })
        });
        let mut cur = pieces.next();
        std::iter::from_fn(move || {
            let (a, mut b) = cur?;
            loop {
                match pieces.next() {
                    Some((c, d)) if c == b + 1 => b = d,
                    other => {
                        cur = other;
                        return Some((a, b));
                    }
                }
            }
        })
    }

    /// `first-last:step,...` without loss, for the wire (read back by [`ArraySpec::parse`]).
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        for r in &self.ranges {
            if !out.is_empty() {
                out.push(',');
            }
            if r.first == r.last {
                out.push_str(&r.first.to_string());
            } else if r.step == 1 {
                out.push_str(&format!("{}-{}", r.first, r.last));
            } else {
                out.push_str(&format!("{}-{}:{}", r.first, r.last, r.step));
            }
        }
        out
    }

    /// The set as Slurm 22.05 prints an array's pending tasks: one evenly spaced run wider
    /// than ten as `first-last:step`, otherwise ranges (`0-3,5`) written into a buffer of
    /// `bitstr_len` bytes (`SLURM_BITSTR_LEN`, 64 by default, 0 = unlimited) and cut with
    /// `...` as its `bit_fmt` does; then the throttle as `%N`.
    pub fn fmt_slurm(&self, throttle: u32, bitstr_len: usize) -> String {
        let mut s = String::new();
        if let (Some(first), Some(last)) = (self.min(), self.max()) {
            let step = self.uniform_step();
            if last - first > 10 && step.is_some_and(|st| st > 1) {
                s = format!("{first}-{last}:{}", step.unwrap_or(1));
            } else {
                s = self.fmt_ranges(bitstr_len);
            }
        }
        if throttle > 0 {
            s.push_str(&format!("%{throttle}"));
        }
        s
    }

    /// The step when every element is the same distance from the next.
    fn uniform_step(&self) -> Option<u32> {
        let mut it = self.iter();
        let a = it.next()?;
        let b = it.next()?;
        let step = b - a;
        let mut prev = b;
        for t in it.take(1_000_000) {
            if t - prev != step {
                return None;
            }
            prev = t;
        }
        // Sets too large to walk are ranges whose shape tells.
        if self.ranges.len() == 1 {
            Some(self.ranges[0].step)
        } else {
            Some(step)
        }
    }

    fn fmt_ranges(&self, bitstr_len: usize) -> String {
        let cap = if bitstr_len == 0 { usize::MAX } else { bitstr_len - 1 };
        let mut s = String::new();
        for (a, b) in self.runs() {
            if s.len() >= cap {
                break;
            }
            let term = if a == b { format!("{a},") } else { format!("{a}-{b},") };
            let room = cap - s.len();
            s.push_str(&term[..term.len().min(room)]);
        }
        s.pop();
        if bitstr_len >= 4 && s.len() > bitstr_len - 3 {
            s.truncate(bitstr_len - 4);
            s.push_str("...");
        }
        s
    }
}

/// `SLURM_BITSTR_LEN` as Slurm reads it: unset or negative is 64, 0 is unlimited, at most 4096.
pub fn bitstr_len(env: Option<&str>) -> usize {
    match env.map(|v| v.trim().parse::<i64>().unwrap_or(0)) {
        None => 64,
        Some(v) if v < 0 => 64,
        Some(v) => v.min(4096) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(bits: &[u32]) -> TaskSet {
        let mut s = TaskSet::default();
        for &b in bits {
            s.push_back(b);
        }
        s
    }

    #[test]
    fn expressions_parse() {
        let a = ArraySpec::parse("0-15:4").unwrap();
        assert_eq!(a.tasks.iter().collect::<Vec<_>>(), [0, 4, 8, 12]);
        let a = ArraySpec::parse("0,6,16-32%3").unwrap();
        assert_eq!(a.tasks.len(), 19);
        assert_eq!(a.throttle, 3);
        assert!(a.tasks.contains(6) && a.tasks.contains(20) && !a.tasks.contains(7));
        assert_eq!(ArraySpec::parse("0-999999").unwrap().tasks.len(), 1_000_000);
        let over = ArraySpec::parse("0-10,5-15").unwrap();
        assert_eq!(over.tasks.len(), 16);
        let over = ArraySpec::parse("0-20:4,2-30:2,3").unwrap();
        assert_eq!(
            over.tasks.iter().collect::<Vec<_>>(),
            [0, 2, 3, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
        );
        // Found by fuzzing (scripts/fuzz values): overlapping ranges were merged through a
        // list of every element, 6 GB for this one.
        assert_eq!(ArraySpec::parse("7777,0-147777777"), Err(ArrayError::TooLarge));
        assert_eq!(ArraySpec::parse("7777,0-4000000").unwrap().tasks.len(), 4_000_001);
        for bad in ["", "a", "3-1", "1-5:0", "1%x", "1,,2", "-1"] {
            assert_eq!(ArraySpec::parse(bad), Err(ArrayError::Syntax), "{bad}");
        }
        let a = ArraySpec::parse("1-7:2,20%4").unwrap();
        assert_eq!(ArraySpec::parse(&a.canonical()).unwrap(), a);
    }

    #[test]
    fn removal_splits_ranges() {
        let mut s = ArraySpec::parse("0-20:2").unwrap().tasks;
        assert!(s.remove(10));
        assert!(!s.remove(10));
        assert!(!s.remove(11));
        assert_eq!(s.len(), 10);
        assert_eq!(s.canonical(), "0-8:2,12-20:2");
        assert_eq!(s.pop_first(), Some(0));
        assert_eq!(s.min(), Some(2));
        let mut one = ArraySpec::parse("5").unwrap().tasks;
        assert_eq!(one.pop_first(), Some(5));
        assert!(one.is_empty());
    }

    #[test]
    fn formats_like_slurm_xlate_array_task_str() {
        // Vectors of Slurm's own tests of xlate_array_task_str.
        assert_eq!(set(&[0, 1, 2]).fmt_slurm(0, 64), "0-2");
        assert_eq!(set(&[1, 2, 6, 7, 8, 11]).fmt_slurm(0, 64), "1-2,6-8,11");
        assert_eq!(set(&[1, 2, 6, 7, 8, 11]).fmt_slurm(9, 64), "1-2,6-8,11%9");
        assert_eq!(set(&[2, 4, 6, 8, 10, 12, 14, 16, 18]).fmt_slurm(9, 64), "2-18:2%9");
        assert_eq!(set(&[2, 4, 5, 6, 8, 12, 14, 18]).fmt_slurm(9, 64), "2,4-6,8,12,14,18%9");
        assert_eq!(set(&[2, 4, 6, 8, 12, 14, 16, 18]).fmt_slurm(9, 64), "2,4,6,8,12,14,16,18%9");
        assert_eq!(set(&[2, 4, 6, 8, 12, 14, 16, 18]).fmt_slurm(0, 10), "2,4,6,...");
        assert_eq!(set(&[2, 4, 6, 8, 12, 14, 16, 18]).fmt_slurm(9, 10), "2,4,6,...%9");
        let wide: Vec<u32> = [0, 2, 4, 6, 8].into_iter().chain((12..=50).step_by(2)).collect();
        assert_eq!(set(&wide).fmt_slurm(0, 64), "0,2,4,6,8,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44...");
        assert_eq!(set(&wide).fmt_slurm(9, 64), "0,2,4,6,8,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44...%9");
        assert_eq!(set(&wide).fmt_slurm(0, 65), "0,2,4,6,8,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,...");
        assert_eq!(set(&wide).fmt_slurm(0, 0), "0,2,4,6,8,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,46,48,50");
        // The captured squeue of a pending 4-task array, and a throttled million.
        assert_eq!(ArraySpec::parse("0-3").unwrap().tasks.fmt_slurm(0, 64), "0-3");
        assert_eq!(ArraySpec::parse("0-999999").unwrap().tasks.fmt_slurm(5, 64), "0-999999%5");
        assert_eq!(ArraySpec::parse("0-15:4").unwrap().tasks.fmt_slurm(0, 64), "0-12:4");
        assert_eq!(ArraySpec::parse("0-8:4").unwrap().tasks.fmt_slurm(0, 64), "0,4,8");
        assert_eq!(bitstr_len(None), 64);
        assert_eq!(bitstr_len(Some("-1")), 64);
        assert_eq!(bitstr_len(Some("0")), 0);
        assert_eq!(bitstr_len(Some("99999")), 4096);
    }
}

//! Fairshare, the pure part: usage that decays with a half-life, and the Fair Tree algorithm
//! (Slurm's default since 19.05) that turns shares and usage into each user's fairshare
//! factor.
//!
//! Fair Tree, as Slurm's `fair_tree.c` computes it: at each level of the association tree,
//! every sibling gets a *level fairshare* LF = S / U, where S is its shares over its
//! siblings' (NormShares) and U its usage over its parent's (EffectvUsage); LF > 1 means
//! under-served. Siblings are visited in LF order (users before accounts on a tie), depth
//! first, and users ranked in the order they are reached: the first of N users gets N/N, the
//! next (N-1)/N, and so on; users tied on LF share a rank (as does the first user of an
//! account tied with what came before it). So a user's factor says where they stand among all
//! users, and an account's standing bounds its users'.

/// `PriorityDecayHalfLife` as Slurm applies it: usage is multiplied by this every second.
pub fn decay_per_second(half_life_secs: u64) -> f64 {
    if half_life_secs == 0 {
        1.0
    } else {
        1.0 - 0.693 / half_life_secs as f64
    }
}

/// `base` to the power `exp`, by the `libm` crate rather than the C library's `pow`: the
/// same bits on every host (the core is deterministic), and the only use of libm.so in the
/// binary, which every command process would otherwise load (~0.1 ms of its start).
fn pow(base: f64, exp: f64) -> f64 {
    libm::pow(base, exp)
}

/// Usage after `secs` seconds of decay.
pub fn decayed(usage: f64, per_second: f64, secs: f64) -> f64 {
    if secs <= 0.0 {
        usage
    } else {
        usage * pow(per_second, secs)
    }
}

/// What running for `secs` seconds at `billing` (and a QoS `usage_factor`) adds, as Slurm's
/// decay thread adds it (the run decayed by its own length).
pub fn run_usage(secs: f64, billing: f64, usage_factor: f64, per_second: f64) -> f64 {
    if secs <= 0.0 {
        0.0
    } else {
        secs * pow(per_second, secs) * billing * usage_factor
    }
}

/// An association: an account (user None) or a user in one, with its raw shares and, for a
/// user, its raw (decayed) usage. `parent` is the index of its account's association (None:
/// root).
#[derive(Debug, Clone, PartialEq)]
pub struct Assoc {
    pub account: String,
    pub user: Option<String>,
    pub parent: Option<usize>,
    pub shares: u32,
    pub usage: f64,
}

/// What sshare shows of an association, as Fair Tree computed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Share {
    /// Usage of the association (an account's: its whole subtree's).
    pub usage_raw: f64,
    /// Shares over its siblings'.
    pub shares_norm: f64,
    /// Usage over the root's.
    pub usage_norm: f64,
    /// Usage over its parent's.
    pub usage_efctv: f64,
    /// S / U (infinite where U is 0; 0 where S is 0). None for the root.
    pub level_fs: Option<f64>,
    /// A user's fairshare factor, 0..=1 (None for accounts).
    pub factor: Option<f64>,
}

/// Fair Tree over `assocs` (an account's association must come before its children's).
pub fn fair_tree(assocs: &[Assoc]) -> Vec<Share> {
    let n = assocs.len();
    let mut out = vec![Share::default(); n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (k, a) in assocs.iter().enumerate() {
        match a.parent {
            Some(p) if p < n && p != k => children[p].push(k),
            _ => roots.push(k),
        }
    }
    // Usage up the tree: an account's is its subtree's.
    fn subtree(k: usize, assocs: &[Assoc], children: &[Vec<usize>], out: &mut [Share]) -> f64 {
        let own = if assocs[k].user.is_some() { assocs[k].usage } else { 0.0 };
        let total = own + children[k].iter().map(|&c| subtree(c, assocs, children, out)).sum::<f64>();
        out[k].usage_raw = total;
        total
    }
    for &r in &roots {
        subtree(r, assocs, &children, &mut out);
    }
    let root_usage: f64 = roots.iter().map(|&r| out[r].usage_raw).sum();
    for (k, s) in out.iter_mut().enumerate() {
        s.usage_norm = if root_usage > 0.0 { s.usage_raw / root_usage } else { 0.0 };
        if roots.contains(&k) {
            s.usage_efctv = 1.0;
        }
    }
    // Level fairshare of every child, against its siblings and parent.
    for k in 0..n {
        let sibs = &children[k];
        let total: u64 = sibs.iter().map(|&c| u64::from(assocs[c].shares)).sum();
        for &c in sibs {
            let s = &mut out[c];
            s.shares_norm = if total > 0 { f64::from(assocs[c].shares) / total as f64 } else { 0.0 };
            let parent_usage = out[k].usage_raw;
            let s = &mut out[c];
            s.usage_efctv = if parent_usage > 0.0 { s.usage_raw / parent_usage } else { 0.0 };
            s.level_fs = Some(if s.shares_norm == 0.0 {
                0.0
            } else if s.usage_efctv == 0.0 {
                f64::INFINITY
            } else {
                s.shares_norm / s.usage_efctv
            });
        }
    }
    let users = assocs.iter().filter(|a| a.user.is_some()).count() as u32;
    let top: Vec<usize> = roots.iter().flat_map(|&r| children[r].iter().copied()).collect();
    let mut r = Ranker { assocs, children: &children, out: &mut out, users, rank: users, rnt: users };
    r.level(top, false);
    out
}

/// The ranking walk: users get `rank / users` in the order they are reached.
struct Ranker<'a> {
    assocs: &'a [Assoc],
    children: &'a [Vec<usize>],
    out: &'a mut [Share],
    users: u32,
    /// The current rank, and what it would be without ties.
    rank: u32,
    rnt: u32,
}

impl Ranker<'_> {
    fn lf(&self, k: usize) -> f64 {
        self.out[k].level_fs.unwrap_or(0.0)
    }

    /// Ranks one level, depth first.
    fn level(&mut self, mut siblings: Vec<usize>, account_tied: bool) {
        let assocs = self.assocs;
        // Highest LF first; users before accounts on a tie; then by name (Slurm's qsort
        // leaves such ties in no particular order; a fixed one keeps runs repeatable).
        siblings.sort_by(|&a, &b| {
            self.lf(b)
                .partial_cmp(&self.lf(a))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| assocs[b].user.is_some().cmp(&assocs[a].user.is_some()))
                .then_with(|| (&assocs[a].account, &assocs[a].user).cmp(&(&assocs[b].account, &assocs[b].user)))
        });
        let mut prev: Option<f64> = None;
        for (i, &k) in siblings.iter().enumerate() {
            let tied = if i == 0 && account_tied { true } else { prev == Some(self.lf(k)) };
            if assocs[k].user.is_some() {
                if !tied {
                    self.rank = self.rnt;
                }
                let f = if self.users > 0 { f64::from(self.rank) / f64::from(self.users) } else { 0.0 };
                self.out[k].factor = Some(f);
                self.rnt = self.rnt.saturating_sub(1);
            } else {
                // Slurm 22.05 means to merge the children of tied accounts here, but its count
                // of them stops at the first account (`_count_tied_accounts`), so none are
                // merged: each account is ranked on its own, its first child tied with what
                // came before.
                self.level(self.children[k].clone(), tied);
            }
            prev = Some(self.lf(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct(name: &str, parent: Option<usize>, shares: u32) -> Assoc {
        Assoc { account: name.into(), user: None, parent, shares, usage: 0.0 }
    }

    fn user(name: &str, acct: &str, parent: usize, shares: u32, usage: f64) -> Assoc {
        Assoc { account: acct.into(), user: Some(name.into()), parent: Some(parent), shares, usage }
    }

    /// The lab's tree (captures/slurm-22.05/sshare*.out) with no usage: every user ties
    /// (all infinite), so every user gets 1.0, and NormShares are as Slurm printed them.
    #[test]
    fn the_labs_tree_without_usage() {
        let t = vec![
            acct("root", None, 1),
            user("root", "root", 0, 1, 0.0),
            acct("chem", Some(0), 2),
            user("bob", "chem", 2, 1, 0.0),
            user("root", "chem", 2, 1, 0.0),
            acct("physics", Some(0), 1),
            user("alice", "physics", 5, 1, 0.0),
            user("root", "physics", 5, 1, 0.0),
            acct("theory", Some(5), 1),
            user("bob", "theory", 8, 1, 0.0),
        ];
        let s = fair_tree(&t);
        let norm: Vec<f64> = s.iter().map(|x| (x.shares_norm * 1e6).round() / 1e6).collect();
        assert_eq!(norm, [0.0, 0.25, 0.5, 0.5, 0.5, 0.25, 0.333333, 0.333333, 0.333333, 1.0]);
        for (a, x) in t.iter().zip(&s) {
            if a.user.is_some() {
                assert_eq!(x.factor, Some(1.0), "{a:?}");
                assert_eq!(x.level_fs, Some(f64::INFINITY));
            }
        }
        assert_eq!(s[0].usage_efctv, 1.0, "the root's");
    }

    #[test]
    fn heavier_users_rank_lower_and_accounts_bound_their_users() {
        // Two accounts of equal shares; a uses a lot, b little.
        let t = vec![
            acct("root", None, 1),
            acct("a", Some(0), 1),
            user("a1", "a", 1, 1, 900.0),
            user("a2", "a", 1, 1, 100.0),
            acct("b", Some(0), 1),
            user("b1", "b", 4, 1, 50.0),
            user("b2", "b", 4, 1, 0.0),
        ];
        let s = fair_tree(&t);
        let f = |k: usize| s[k].factor.unwrap();
        // b is under-served, so both its users outrank a's; inside each, less usage first.
        assert_eq!((f(6), f(5), f(3), f(2)), (1.0, 0.75, 0.5, 0.25));
        assert_eq!(s[1].usage_raw, 1000.0);
        assert!((s[1].level_fs.unwrap() - 0.5 / (1000.0 / 1050.0)).abs() < 1e-12);
        assert!((s[2].usage_norm - 900.0 / 1050.0).abs() < 1e-12);
    }

    #[test]
    fn usage_decays_by_half_in_a_half_life() {
        let d = decay_per_second(7 * 86400);
        let u = decayed(1000.0, d, (7 * 86400) as f64);
        assert!((u - 500.0).abs() < 1.0, "{u}");
        assert_eq!(decayed(1000.0, decay_per_second(0), 1e9), 1000.0, "no half-life: no decay");
        assert!(run_usage(60.0, 4.0, 1.0, d) < 240.0 && run_usage(60.0, 4.0, 1.0, d) > 239.9);
        assert_eq!(run_usage(60.0, 4.0, 0.0, d), 0.0, "UsageFactor=0: free");
    }

    proptest::proptest! {
        /// Any tree: every user's factor is in (0, 1], the least-served user gets 1, and of two sibling users with equal shares the one that used less never
        /// ranks below the other.
        #[test]
        fn factors_rank_users_fairly(
            accounts in proptest::collection::vec((0usize..4, 1u32..5), 1..5),
            users in proptest::collection::vec((0usize..5, 1u32..4, 0u32..1000), 1..12),
        ) {
            let mut t = vec![acct("root", None, 1)];
            for (k, (parent, shares)) in accounts.iter().enumerate() {
                let p = (*parent).min(k);
                t.push(acct(&format!("a{k}"), Some(p), *shares));
            }
            let n_acct = t.len();
            for (k, (a, shares, usage)) in users.iter().enumerate() {
                let a = (*a).min(n_acct - 1);
                let name = t[a].account.clone();
                t.push(user(&format!("u{k}"), &name, a, *shares, f64::from(*usage)));
            }
            let s = fair_tree(&t);
            let factors: Vec<f64> = s.iter().filter_map(|x| x.factor).collect();
            proptest::prop_assert_eq!(factors.len(), users.len());
            proptest::prop_assert!(factors.iter().all(|f| *f > 0.0 && *f <= 1.0));
            proptest::prop_assert!(factors.contains(&1.0));
            for i in n_acct..t.len() {
                for j in n_acct..t.len() {
                    if t[i].parent == t[j].parent && t[i].shares == t[j].shares && t[i].usage < t[j].usage {
                        proptest::prop_assert!(s[i].factor >= s[j].factor, "{:?} {:?}", t[i], t[j]);
                    }
                }
            }
        }
    }
}

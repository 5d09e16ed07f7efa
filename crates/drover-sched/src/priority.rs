//! Multifactor priority (`PriorityType=priority/multifactor`), the pure part: each factor
//! between 0 and 1, as Slurm 22.05's `set_priority_factors` computes it, times its
//! `PriorityWeight*`, summed, less the job's nice value.

use drover_model::priority_conf::PriorityConf;

/// What a job's factors are computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobInput {
    /// When it began to accrue age (its eligible time; 0: not yet).
    pub eligible: i64,
    /// Its user's fairshare factor (Fair Tree), 0..=1.
    pub fairshare: f64,
    pub min_nodes: u32,
    pub cpus: u32,
    /// Its partition's, QoS's and association's priority, and the largest of each (for the
    /// normalised factors).
    pub partition: (u32, u32),
    pub qos: (u32, u32),
    pub assoc: (u32, u32),
    /// `--nice` (may be negative for an administrator).
    pub nice: i64,
}

/// The factors (unweighted, 0..=1 unless a `NO_NORMAL_*` flag keeps one raw).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Factors {
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub jobsize: f64,
    pub partition: f64,
    pub qos: f64,
    pub nice: i64,
}

/// The cluster's size, for the job size factor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterSize {
    pub nodes: u32,
    pub cpus: u32,
}

fn norm(v: (u32, u32), raw: bool) -> f64 {
    if raw {
        f64::from(v.0)
    } else if v.1 == 0 {
        0.0
    } else {
        f64::from(v.0) / f64::from(v.1)
    }
}

pub fn factors(c: &PriorityConf, j: &JobInput, size: ClusterSize, now: i64) -> Factors {
    let mut f = Factors { nice: j.nice, ..Default::default() };
    if c.weight_age > 0 && j.eligible > 0 {
        let diff = (now - j.eligible).max(0) as f64;
        f.age = if c.max_age == 0 || diff >= c.max_age as f64 { 1.0 } else { diff / c.max_age as f64 };
    }
    if c.weight_fairshare > 0 {
        f.fairshare = j.fairshare;
    }
    if c.weight_jobsize > 0 && size.nodes > 0 {
        let nodes = f64::from(size.nodes);
        let min_nodes = f64::from(j.min_nodes.max(1));
        let mut js = if c.favor_small { (nodes - min_nodes) / nodes } else { min_nodes / nodes };
        if j.cpus > 0 && size.cpus > 0 {
            let cpus = f64::from(size.cpus);
            let c_part = if c.favor_small { (cpus - f64::from(j.cpus)) / cpus } else { f64::from(j.cpus) / cpus };
            js = (js + c_part) / 2.0;
        }
        f.jobsize = js.clamp(0.0, 1.0);
    }
    if c.weight_partition > 0 && j.partition.0 > 0 {
        f.partition = norm(j.partition, c.flag("NO_NORMAL_PART"));
    }
    if c.weight_assoc > 0 {
        f.assoc = norm(j.assoc, c.flag("NO_NORMAL_ASSOC"));
    }
    if c.weight_qos > 0 && j.qos.0 > 0 {
        f.qos = norm(j.qos, c.flag("NO_NORMAL_QOS"));
    }
    f
}

/// The factors times their weights (what sprio shows).
pub fn weighted(c: &PriorityConf, f: &Factors) -> Factors {
    Factors {
        age: f.age * f64::from(c.weight_age),
        assoc: f.assoc * f64::from(c.weight_assoc),
        fairshare: f.fairshare * f64::from(c.weight_fairshare),
        jobsize: f.jobsize * f64::from(c.weight_jobsize),
        partition: f.partition * f64::from(c.weight_partition),
        qos: f.qos * f64::from(c.weight_qos),
        nice: f.nice,
    }
}

/// The job's priority: the weighted factors less its nice value, at least 1, at most
/// 2^32 - 1 (truncated, as Slurm does).
pub fn priority(c: &PriorityConf, f: &Factors) -> u32 {
    let w = weighted(c, f);
    let p = w.age + w.assoc + w.fairshare + w.jobsize + w.partition + w.qos - f.nice as f64;
    if p < 1.0 {
        1
    } else if p >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        p as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> PriorityConf {
        PriorityConf {
            multifactor: true,
            weight_age: 1000,
            weight_fairshare: 10000,
            weight_jobsize: 100,
            weight_qos: 2000,
            max_age: 1000,
            ..Default::default()
        }
    }

    #[test]
    fn weights_times_factors_less_nice() {
        let c = conf();
        let j = JobInput {
            eligible: 100,
            fairshare: 0.5,
            min_nodes: 1,
            cpus: 4,
            qos: (50, 100),
            nice: 10,
            ..Default::default()
        };
        let f = factors(&c, &j, ClusterSize { nodes: 4, cpus: 16 }, 600);
        assert_eq!(f.age, 0.5);
        assert_eq!(f.jobsize, (0.25 + 0.25) / 2.0);
        assert_eq!(f.qos, 0.5);
        assert_eq!(priority(&c, &f), 500 + 5000 + 25 + 1000 - 10);
        // Old enough: age is 1; nothing can push a priority below 1.
        let old = factors(&c, &JobInput { eligible: 1, ..j }, ClusterSize { nodes: 4, cpus: 16 }, 1_000_000);
        assert_eq!(old.age, 1.0);
        let low = Factors { nice: 1_000_000, ..Default::default() };
        assert_eq!(priority(&c, &low), 1);
    }

    #[test]
    fn favor_small_inverts_the_size_factor_and_no_normal_keeps_raw_values() {
        let mut c = conf();
        c.favor_small = true;
        let j = JobInput { min_nodes: 4, cpus: 16, qos: (50, 100), ..Default::default() };
        let f = factors(&c, &j, ClusterSize { nodes: 4, cpus: 16 }, 0);
        assert_eq!(f.jobsize, 0.0);
        c.flags = vec!["NO_NORMAL_QOS".into()];
        assert_eq!(factors(&c, &j, ClusterSize { nodes: 4, cpus: 16 }, 0).qos, 50.0);
    }
}

//! Per-user RPC rate limiting (`SlurmctldParameters=rl_enable`, Slurm 23.02's): each user
//! has a bucket of tokens refilled at a steady rate; an RPC takes one. A user whose bucket is
//! empty is told to back off: the answer waits for the user's next token (the command just
//! takes longer, as Slurm's client sleeps and retries), and one so far behind that it would
//! wait longer than [`MAX_WAIT`] is refused at once with "RPC rate limit exceeded". Root and
//! `SlurmUser` are never limited. Everyone else's RPCs go on at full speed.

use drover_model::conf::RateLimitConf;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a request is held back before it is refused instead.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

struct Bucket {
    /// Tokens left; below zero, the requests waiting for tokens to come.
    tokens: i64,
    /// When tokens were last added.
    refilled: Instant,
    last_log: Option<Instant>,
}

pub struct RateLimit {
    conf: RateLimitConf,
    exempt: Vec<u32>,
    buckets: Mutex<HashMap<u32, Bucket>>,
}

/// What a request gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    Now,
    /// After this long (log it when `log`).
    After {
        wait: Duration,
        log: bool,
    },
    /// Too far behind: refused.
    Refused {
        log: bool,
    },
}

impl RateLimit {
    pub fn new(conf: RateLimitConf, exempt: Vec<u32>) -> RateLimit {
        RateLimit { conf, exempt, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one of `uid`'s tokens at `now`.
    pub fn admit(&self, uid: u32, now: Instant) -> Admit {
        if self.exempt.contains(&uid) {
            return Admit::Now;
        }
        let Ok(mut buckets) = self.buckets.lock() else { return Admit::Now };
        let size = i64::from(self.conf.bucket_size);
        let period = Duration::from_secs(u64::from(self.conf.refill_period.max(1)));
        let rate = i64::from(self.conf.refill_rate.max(1));
        if buckets.len() >= self.conf.table_size as usize && !buckets.contains_key(&uid) {
            // Forget the users whose buckets are full again (idle); they start full anyway.
            buckets.retain(|_, b| b.tokens + periods(now, b.refilled, period) * rate < size);
        }
        let b = buckets.entry(uid).or_insert(Bucket { tokens: size, refilled: now, last_log: None });
        let n = periods(now, b.refilled, period);
        if n > 0 {
            b.tokens = (b.tokens + n * rate).min(size);
            b.refilled += period * n as u32;
        }
        let log = match b.last_log {
            _ if self.conf.log_freq == 0 => true,
            Some(t) if now.duration_since(t) < Duration::from_secs(u64::from(self.conf.log_freq)) => false,
            _ => true,
        };
        if b.tokens > 0 {
            b.tokens -= 1;
            return Admit::Now;
        }
        // Waiting behind -tokens others: its token comes after that many more refills.
        let behind = (-b.tokens) / rate + 1;
        let wait = (b.refilled + period * behind as u32).saturating_duration_since(now);
        if log {
            b.last_log = Some(now);
        }
        if wait > MAX_WAIT {
            return Admit::Refused { log };
        }
        b.tokens -= 1;
        Admit::After { wait, log }
    }
}

fn periods(now: Instant, since: Instant, period: Duration) -> i64 {
    (now.saturating_duration_since(since).as_nanos() / period.as_nanos().max(1)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(size: u32, rate: u32) -> RateLimitConf {
        RateLimitConf { bucket_size: size, refill_rate: rate, refill_period: 1, table_size: 2, log_freq: 0 }
    }

    #[test]
    fn a_bucket_empties_then_waits_for_its_refills_and_exempt_users_never_wait() {
        let rl = RateLimit::new(conf(3, 1), vec![0]);
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(rl.admit(1000, t), Admit::Now);
        }
        // The 4th waits for the next refill, the 5th for the one after.
        assert_eq!(rl.admit(1000, t), Admit::After { wait: Duration::from_secs(1), log: true });
        assert_eq!(rl.admit(1000, t), Admit::After { wait: Duration::from_secs(2), log: true });
        // Another user, and root, are not held back.
        assert_eq!(rl.admit(1001, t), Admit::Now);
        for _ in 0..100 {
            assert_eq!(rl.admit(0, t), Admit::Now);
        }
        // Three seconds on: the two waiting took theirs; one is left.
        let later = t + Duration::from_secs(3);
        assert_eq!(rl.admit(1000, later), Admit::Now);
        assert!(matches!(rl.admit(1000, later), Admit::After { .. }));
        // Far behind: refused rather than held.
        for _ in 0..20 {
            let _ = rl.admit(1000, later);
        }
        assert_eq!(rl.admit(1000, later), Admit::Refused { log: true });
    }

    #[test]
    fn the_table_forgets_idle_users_and_logging_is_thinned() {
        let rl = RateLimit::new(RateLimitConf { log_freq: 5, ..conf(1, 1) }, vec![]);
        let t = Instant::now();
        assert_eq!(rl.admit(1, t), Admit::Now);
        assert_eq!(rl.admit(1, t), Admit::After { wait: Duration::from_secs(1), log: true });
        assert_eq!(rl.admit(1, t), Admit::After { wait: Duration::from_secs(2), log: false });
        assert_eq!(rl.admit(2, t), Admit::Now);
        // A third user, 10 s on: the table (2) makes room by forgetting full buckets.
        let later = t + Duration::from_secs(10);
        assert_eq!(rl.admit(3, later), Admit::Now);
        assert!(rl.buckets.lock().unwrap().len() <= 2);
    }
}

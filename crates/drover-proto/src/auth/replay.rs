//! auth/slurm's replay check: every nonce is remembered until its credential expires, so a
//! credential is taken once (MUNGE does this itself for auth/munge).

use std::collections::HashMap;

#[derive(Default)]
pub struct Seen {
    /// nonce -> when its credential expires.
    until: HashMap<[u8; 16], i64>,
    /// The next time expired nonces are dropped.
    next_prune: i64,
}

impl Seen {
    /// Whether `nonce` is new (and remembers it until `expires`).
    pub fn first_use(&mut self, nonce: &[u8], expires: i64, now: i64) -> bool {
        let Ok(n) = <[u8; 16]>::try_from(nonce) else {
            return false;
        };
        if now >= self.next_prune {
            self.until.retain(|_, e| *e >= now);
            self.next_prune = now + 10;
        }
        self.until.insert(n, expires).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_taken_once_and_forgotten_after_it_expires() {
        let mut s = Seen::default();
        assert!(s.first_use(&[1; 16], 100, 50));
        assert!(!s.first_use(&[1; 16], 100, 60));
        assert!(s.first_use(&[2; 16], 70, 60));
        assert!(!s.first_use(&[3; 15], 100, 60), "a nonce is 16 bytes");
        // Past both expiries the table is pruned (a credential that old is refused as expired
        // before it gets here).
        assert!(s.first_use(&[9; 16], 300, 200));
        assert_eq!(s.until.len(), 1);
    }
}

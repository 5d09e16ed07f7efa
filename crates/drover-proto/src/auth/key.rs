//! auth/slurm's shared key (`slurm.key`) and HMAC-SHA256 under it.

use super::AuthError;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;

type HmacSha256 = Hmac<Sha256>;

/// The shortest key accepted (Slurm's own advice is 1024 random bytes; 32 is HMAC-SHA256's
/// own strength).
const MIN_KEY: usize = 32;

pub struct Key(Vec<u8>);

impl Key {
    /// Reads `path`, refusing a key others may read or one too short to be a key.
    pub fn load(path: &Path) -> Result<Key, AuthError> {
        use std::os::unix::fs::MetadataExt;
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| AuthError::Unavailable(format!("auth/slurm: cannot read {shown}: {e}")))?;
        if meta.mode() & 0o004 != 0 {
            return Err(AuthError::Unavailable(format!(
                "auth/slurm: {shown} is readable by every user (mode {:04o}): anyone could sign as root; \
                 chmod 0600 {shown} (owned by root or SlurmUser)",
                meta.mode() & 0o7777
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| AuthError::Unavailable(format!("auth/slurm: cannot read {shown}: {e}")))?;
        if bytes.len() < MIN_KEY {
            return Err(AuthError::Unavailable(format!(
                "auth/slurm: {shown} holds {} bytes; a key needs at least {MIN_KEY} random bytes \
                 (dd if=/dev/random of={shown} bs=1024 count=1)",
                bytes.len()
            )));
        }
        Ok(Key(bytes))
    }

    pub fn from_bytes(b: &[u8]) -> Key {
        Key(b.to_vec())
    }

    pub fn mac(&self, data: &[u8]) -> [u8; 32] {
        mac_parts(&self.0, &[data])
    }

    pub fn verify(&self, data: &[u8], mac: &[u8]) -> bool {
        verify_parts(&self.0, &[data], mac)
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("invariant: HMAC takes a key of any length");
    for p in parts {
        // Each part is length-prefixed, so that ("ab","c") and ("a","bc") differ.
        m.update(&(p.len() as u64).to_be_bytes());
        m.update(p);
    }
    m
}

pub fn mac_parts(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    hmac(key, parts).finalize().into_bytes().into()
}

/// Constant-time comparison (hmac's `verify_slice`).
pub fn verify_parts(key: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
    hmac(key, parts).verify_slice(mac).is_ok()
}

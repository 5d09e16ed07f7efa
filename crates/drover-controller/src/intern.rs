//! Shared copies of the few strings that millions of job records repeat (partition names):
//! each record holds a pointer to one copy instead of its own allocation.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// The one shared copy of `s`. The set only grows, by the distinct names a site ever uses.
pub fn intern(s: &str) -> Arc<str> {
    static SET: OnceLock<Mutex<HashSet<Arc<str>>>> = OnceLock::new();
    let mut set = SET.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = set.get(s) {
        return a.clone();
    }
    let a: Arc<str> = Arc::from(s);
    set.insert(a.clone());
    a
}

/// Deserializes a string as its shared copy (recovery rebuilds records from the journal).
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
    Ok(intern(&s))
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_names_share_one_copy() {
        let a = super::intern("gpu");
        let b = super::intern(&String::from("gpu"));
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert!(!std::sync::Arc::ptr_eq(&a, &super::intern("cpu")));
    }
}

//! Reuse of Key Vault clients across reconciles.
//!
//! A new `SecretClient` starts with an empty challenge cache, and a new credential with an empty
//! token cache, so building them on every reconcile costs a 401 challenge round-trip to the vault
//! and a token request to Entra ID each time. The provider keeps the built clients per store
//! identity, provider spec and credential material (the referenced Secret values, hashed), so a
//! rotated client secret or an edited store builds new clients at once. Entries expire after a
//! while (picking up ServiceAccount annotation changes for workload identity) and the cache is
//! bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How long a cached client is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);
/// How many stores' clients are kept.
pub const DEFAULT_CAPACITY: usize = 1024;

struct Entry<T> {
    clients: Arc<T>,
    created: Instant,
}

/// The cache (cheap to clone: shared), of `T` = the vault's clients.
pub struct ClientCache<T> {
    entries: Arc<Mutex<HashMap<String, Entry<T>>>>,
    ttl: Duration,
    capacity: usize,
}

impl<T> Clone for ClientCache<T> {
    fn clone(&self) -> Self {
        ClientCache {
            entries: self.entries.clone(),
            ttl: self.ttl,
            capacity: self.capacity,
        }
    }
}

impl<T> std::fmt::Debug for ClientCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCache")
            .field("entries", &self.len())
            .field("ttl", &self.ttl)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl<T> Default for ClientCache<T> {
    fn default() -> Self {
        Self::new(DEFAULT_TTL, DEFAULT_CAPACITY)
    }
}

/// A cache key from its parts (hashed, so credential material never sits in memory as a key).
pub fn key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

impl<T> ClientCache<T> {
    /// A cache with the given lifetime per entry and capacity.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        ClientCache {
            entries: Arc::new(Mutex::new(HashMap::new())),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// Number of entries (expired ones included until the next insert).
    pub fn len(&self) -> usize {
        self.entries.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live clients for `key`.
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        let m = self.entries.lock().ok()?;
        m.get(key)
            .filter(|e| e.created.elapsed() < self.ttl)
            .map(|e| e.clients.clone())
    }

    /// Stores clients; drops expired entries and, when full, the oldest.
    pub fn insert(&self, key: String, clients: Arc<T>) {
        let Ok(mut m) = self.entries.lock() else {
            return;
        };
        let ttl = self.ttl;
        m.retain(|_, e| e.created.elapsed() < ttl);
        while m.len() >= self.capacity {
            let oldest = m
                .iter()
                .min_by_key(|(_, e)| e.created)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    m.remove(&k);
                }
                None => break,
            }
        }
        m.insert(
            key,
            Entry {
                clients,
                created: Instant::now(),
            },
        );
    }

    /// Drops the entry for `key` (e.g. after the vault refused its credential).
    pub fn remove(&self, key: &str) {
        if let Ok(mut m) = self.entries.lock() {
            m.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_parts() {
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert_eq!(key(&["a", "b"]), key(&["a", "b"]));
        assert_eq!(key(&["x"]).len(), 64);
    }

    #[test]
    fn get_returns_the_same_clients_until_they_expire() {
        let c: ClientCache<u32> = ClientCache::new(Duration::from_secs(3600), 8);
        assert!(c.get("k").is_none());
        c.insert("k".into(), Arc::new(7));
        let a = c.get("k").unwrap();
        let b = c.get("k").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        c.remove("k");
        assert!(c.get("k").is_none());

        let expired: ClientCache<u32> = ClientCache::new(Duration::ZERO, 8);
        expired.insert("k".into(), Arc::new(1));
        assert!(expired.get("k").is_none());
        expired.insert("j".into(), Arc::new(2));
        assert_eq!(expired.len(), 1, "expired entries are dropped on insert");
    }

    #[test]
    fn capacity_evicts_the_oldest() {
        let c: ClientCache<u32> = ClientCache::new(Duration::from_secs(3600), 2);
        c.insert("a".into(), Arc::new(1));
        std::thread::sleep(Duration::from_millis(2));
        c.insert("b".into(), Arc::new(2));
        std::thread::sleep(Duration::from_millis(2));
        c.insert("c".into(), Arc::new(3));
        assert_eq!(c.len(), 2);
        assert!(c.get("a").is_none());
        assert_eq!(*c.get("b").unwrap(), 2);
        assert_eq!(*c.get("c").unwrap(), 3);
    }
}

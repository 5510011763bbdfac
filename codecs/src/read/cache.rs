//! An opt-in cache of decoded chunks, least-recently-used and bounded in bytes.
//!
//! Entries are `Bytes` that readers share: a chunk served from here is not unique, so
//! `into_dlpack()` refuses it (docs/architecture.md, "The Tensor ownership contract"). Multi-chunk
//! reads copy out of it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

/// A chunk's store key; an inner chunk of a shard is `"{shard key}#{i},{j},..."` (its
/// position in the shard). Keys are unique within a store, so one cache serves its arrays.
pub type ChunkKey = String;

/// The cache key of the inner chunk at `coords` of the shard at `shard_key`.
#[must_use]
pub fn inner_key(shard_key: &str, coords: &[u64]) -> ChunkKey {
    let coords: Vec<String> = coords.iter().map(u64::to_string).collect();
    format!("{shard_key}#{}", coords.join(","))
}

/// A snapshot of the cache's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub bytes: usize,
    pub capacity: usize,
}

#[derive(Default)]
struct Lru {
    /// Ordered, so the entries of one array or one shard can be dropped by key prefix.
    map: BTreeMap<ChunkKey, (Bytes, u64)>,
    /// Recency tick → key; the smallest tick is the least recently used.
    order: BTreeMap<u64, ChunkKey>,
    bytes: usize,
    tick: u64,
}

impl Lru {
    fn remove(&mut self, key: &str) {
        if let Some((old, t)) = self.map.remove(key) {
            self.bytes -= old.len();
            self.order.remove(&t);
        }
    }
}

pub struct ChunkCache {
    capacity: usize,
    lru: Mutex<Lru>,
    /// The process that made the cache: a forked child does not use it (`crate::process::fork`).
    pid: u32,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ChunkCache {
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            lru: Mutex::new(Lru::default()),
            pid: std::process::id(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The LRU, or None in a forked child: a parent thread may have held the lock, in the
    /// middle of a change, at the fork; the child then reads without the cache.
    fn lock(&self) -> Option<std::sync::MutexGuard<'_, Lru>> {
        if crate::process::fork::forked(self.pid) {
            return None;
        }
        Some(self.lru.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The cached chunk, marked as just used; counts a hit or a miss.
    #[must_use]
    pub fn get(&self, key: &ChunkKey) -> Option<Bytes> {
        let found = self.get_if_hit(key);
        if found.is_none() {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Like [`Self::get`], but a miss is not counted: for a caller whose miss is looked up
    /// (and counted) again on the way to the store.
    #[must_use]
    pub fn get_if_hit(&self, key: &ChunkKey) -> Option<Bytes> {
        let mut lru = self.lock()?;
        lru.tick += 1;
        let tick = lru.tick;
        let found = lru.map.get_mut(key).map(|(bytes, t)| {
            let old = std::mem::replace(t, tick);
            (bytes.clone(), old)
        });
        match found {
            Some((bytes, old)) => {
                if let Some(k) = lru.order.remove(&old) {
                    lru.order.insert(tick, k);
                }
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(bytes)
            }
            None => None,
        }
    }

    /// Whether `key` is cached (no effect on recency or counters).
    #[must_use]
    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.lock().is_some_and(|lru| lru.map.contains_key(key))
    }

    /// Caches `bytes` under `key`, evicting the least recently used entries to make room.
    /// Chunks larger than the whole cache are not cached.
    pub fn insert(&self, key: ChunkKey, bytes: Bytes) {
        if bytes.len() > self.capacity {
            return;
        }
        let Some(mut lru) = self.lock() else {
            return;
        };
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((old, t)) = lru.map.remove(&key) {
            lru.bytes -= old.len();
            lru.order.remove(&t);
        }
        while lru.bytes + bytes.len() > self.capacity {
            let Some((_, victim)) = lru.order.pop_first() else {
                break;
            };
            if let Some((old, _)) = lru.map.remove(&victim) {
                lru.bytes -= old.len();
            }
        }
        lru.bytes += bytes.len();
        lru.order.insert(tick, key.clone());
        lru.map.insert(key, (bytes, tick));
    }

    /// Drops every entry whose key starts with `prefix` (an array's chunks, after its
    /// metadata changed: the prefix of its keys).
    pub fn forget_prefix(&self, prefix: &str) {
        let Some(mut lru) = self.lock() else {
            return;
        };
        let victims: Vec<ChunkKey> = lru
            .map
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for key in victims {
            lru.remove(&key);
        }
    }

    /// Drops the entry of the chunk (or shard) at `key`, and those of a shard's inner chunks.
    pub fn forget_chunk(&self, key: &str) {
        if let Some(mut lru) = self.lock() {
            lru.remove(key);
        }
        self.forget_prefix(&format!("{key}#"));
    }

    pub fn clear(&self) {
        if let Some(mut lru) = self.lock() {
            *lru = Lru::default();
        }
    }

    #[must_use]
    pub fn stats(&self) -> CacheStats {
        let (entries, bytes) = self.lock().map_or((0, 0), |lru| (lru.map.len(), lru.bytes));
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
            bytes,
            capacity: self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> ChunkKey {
        format!("a/c/{i}")
    }

    #[test]
    fn evicts_least_recently_used_within_capacity() {
        let cache = ChunkCache::new(30);
        cache.insert(key(0), Bytes::from(vec![0; 10]));
        cache.insert(key(1), Bytes::from(vec![1; 10]));
        cache.insert(key(2), Bytes::from(vec![2; 10]));
        assert!(cache.get(&key(0)).is_some()); // 0 is now the most recent
        cache.insert(key(3), Bytes::from(vec![3; 10]));
        assert!(!cache.contains(&key(1)));
        assert!(cache.contains(&key(0)) && cache.contains(&key(2)) && cache.contains(&key(3)));
        let s = cache.stats();
        assert_eq!((s.bytes, s.entries, s.hits), (30, 3, 1));
        assert!(cache.get(&key(1)).is_none());
        assert_eq!(cache.stats().misses, 1);
    }

    #[test]
    fn oversized_chunks_are_not_cached_and_arrays_can_be_forgotten() {
        let cache = ChunkCache::new(8);
        cache.insert(key(0), Bytes::from(vec![0; 9]));
        assert_eq!(cache.stats().entries, 0);
        cache.insert(key(1), Bytes::from(vec![0; 4]));
        cache.insert("b/c/1".into(), Bytes::from(vec![0; 4]));
        cache.forget_prefix("a/");
        assert_eq!(cache.stats().entries, 1);
        assert_eq!(cache.stats().bytes, 4);
    }

    #[test]
    fn a_shard_is_forgotten_with_its_inner_chunks() {
        let cache = ChunkCache::new(100);
        for k in ["s/c/0", "s/c/0#0,1", "s/c/0#1,1", "s/c/01#0,0", "s/c/1#0,0"] {
            cache.insert(k.into(), Bytes::from(vec![0; 4]));
        }
        cache.forget_chunk("s/c/0");
        assert!(!cache.contains(&"s/c/0#1,1".to_owned()));
        assert!(cache.contains(&"s/c/01#0,0".to_owned()));
        assert!(cache.contains(&"s/c/1#0,0".to_owned()));
        assert_eq!(cache.stats().entries, 2);
        assert_eq!(inner_key("s/c/0", &[2, 3]), "s/c/0#2,3");
    }
}

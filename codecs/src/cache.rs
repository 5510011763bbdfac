//! An opt-in cache of decoded chunks, least-recently-used and bounded in bytes.
//!
//! Entries are `Bytes` that readers share: a chunk served from here is not unique, so
//! `into_dlpack()` refuses it (see DESIGN.md). Multi-chunk reads copy out of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

/// (array node path, chunk index in the array's `chunks` grid)
pub type ChunkKey = (String, Vec<u64>);

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
    map: HashMap<ChunkKey, (Bytes, u64)>,
    /// Recency tick → key; the smallest tick is the least recently used.
    order: BTreeMap<u64, ChunkKey>,
    bytes: usize,
    tick: u64,
}

pub struct ChunkCache {
    capacity: usize,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ChunkCache {
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            lru: Mutex::new(Lru::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached chunk, marked as just used; counts a hit or a miss.
    #[must_use]
    pub fn get(&self, key: &ChunkKey) -> Option<Bytes> {
        let mut lru = self.lock();
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
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether `key` is cached (no effect on recency or counters).
    #[must_use]
    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.lock().map.contains_key(key)
    }

    /// Caches `bytes` under `key`, evicting the least recently used entries to make room.
    /// Chunks larger than the whole cache are not cached.
    pub fn insert(&self, key: ChunkKey, bytes: Bytes) {
        if bytes.len() > self.capacity {
            return;
        }
        let mut lru = self.lock();
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

    /// Drops every entry of the array at `path` (its metadata may have changed).
    pub fn forget_array(&self, path: &str) {
        let mut lru = self.lock();
        let victims: Vec<ChunkKey> = lru.map.keys().filter(|(p, _)| p == path).cloned().collect();
        for key in victims {
            if let Some((old, t)) = lru.map.remove(&key) {
                lru.bytes -= old.len();
                lru.order.remove(&t);
            }
        }
    }

    pub fn clear(&self) {
        *self.lock() = Lru::default();
    }

    #[must_use]
    pub fn stats(&self) -> CacheStats {
        let lru = self.lock();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: lru.map.len(),
            bytes: lru.bytes,
            capacity: self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> ChunkKey {
        ("/a".into(), vec![i])
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
        cache.insert(("/b".into(), vec![1]), Bytes::from(vec![0; 4]));
        cache.forget_array("/a");
        assert_eq!(cache.stats().entries, 1);
        assert_eq!(cache.stats().bytes, 4);
    }
}

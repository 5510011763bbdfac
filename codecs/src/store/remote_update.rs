//! Conditional writes to object stores: a value is read with its version (ETag) and stored
//! again only if nobody changed it meanwhile (`If-Match`; `If-None-Match: *` for a key
//! that did not exist), so that two writers updating parts of one chunk or shard never lose
//! each other's update. On a conflict the update starts over from the value that won, a
//! bounded number of times.
//!
//! Stores that cannot write conditionally (plain HTTP, or a server that answers "not
//! implemented") either refuse the write or, when the store was opened to allow it, write
//! unconditionally; [`Remote::wrote_unconditionally`] then tells the caller to warn.
//! A server that ignores `If-Match` altogether cannot be detected from here: the docs say so.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, Result};
use crate::store::remote::Remote;
use crate::store::{value_too_large, Made, Prior, Rebuild};

/// Attempts of one update before it gives up with [`Error::Conflict`].
pub const UPDATE_ATTEMPTS: u32 = 20;

/// What became of a conditional put.
pub enum PutOutcome {
    Stored,
    /// Another writer changed the value after it was read.
    Conflict,
}

impl Remote {
    /// The value at `key` and the version a conditional write of it names; `None` if the
    /// key does not exist.
    pub async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, UpdateVersion)>> {
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let result = match self.store().get(&self.path(key)).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error(key, e)),
        };
        let version = UpdateVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        let bytes = crate::store::remote::body(result)
            .await
            .map_err(|e| self.error(key, e))?;
        self.counts
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(Some((bytes, version)))
    }

    /// Stores `bytes` at `key` if the value there is still the one read at `read` (`None`:
    /// if there is still none). Unconditionally, with a note for the caller to warn, when
    /// the store cannot write conditionally and unconditional writes are allowed.
    pub async fn put_if(
        &self,
        key: &str,
        bytes: Bytes,
        read: Option<UpdateVersion>,
    ) -> Result<PutOutcome> {
        if read
            .as_ref()
            .is_some_and(|v| v.e_tag.is_none() && v.version.is_none())
        {
            // Nothing to name in a condition: the store gives no ETags.
            return self.unconditional(key, bytes, "it returns no ETag").await;
        }
        let mode = read.map_or(PutMode::Create, PutMode::Update);
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .store()
            .put_opts(
                &self.path(key),
                PutPayload::from_bytes(bytes.clone()),
                options,
            )
            .await
        {
            Ok(_) => Ok(PutOutcome::Stored),
            // A key created meanwhile fails `Create`; one deleted meanwhile fails `If-Match`
            // with "not found" on S3.
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(PutOutcome::Conflict),
            Err(object_store::Error::NotImplemented { .. }) => {
                self.unconditional(key, bytes, "it does not support conditional writes")
                    .await
            }
            Err(e) => Err(self.error(key, e)),
        }
    }

    async fn unconditional(&self, key: &str, bytes: Bytes, why: &str) -> Result<PutOutcome> {
        if !self.settings.unconditional_writes {
            return Err(Error::Unsupported(format!(
                "{} cannot be updated safely: {why}, so a write of part of {key:?} could \
                 undo another writer's update. Open the store with \
                 conditional_writes=\"warn\" to write unconditionally (safe only with one \
                 writer per chunk or shard)",
                self.url()
            )));
        }
        self.unconditional_writes.fetch_add(1, Ordering::Relaxed);
        self.put(key, bytes).await.map(|()| PutOutcome::Stored)
    }

    /// How many writes went unconditionally since the last call (the binding warns).
    pub fn wrote_unconditionally(&self) -> u64 {
        self.unconditional_writes.swap(0, Ordering::Relaxed)
    }
}

/// `Store::update` on an object store: read the value with its version, rebuild it, store
/// it on the condition that it is unchanged; on a conflict, pause and start over.
pub(crate) fn update(
    remote: &Arc<Remote>,
    key: &str,
    limit: u64,
    rebuild: &mut Rebuild<'_>,
) -> Result<Option<u64>> {
    for attempt in 0..UPDATE_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(backoff(attempt));
        }
        let (r, k) = (remote.clone(), key.to_owned());
        let old = remote.block_on(async move { r.get_versioned(&k).await })?;
        if let Some((bytes, _)) = &old {
            if bytes.len() as u64 > limit {
                return Err(value_too_large(key, bytes.len() as u64, limit));
            }
        }
        let mut new = Vec::new();
        let made = rebuild(
            Prior {
                encoded: old.as_ref().map(|(bytes, _)| &bytes[..]),
                // Deleting needs no condition only where there is nothing to delete.
                may_delete: old.is_none(),
            },
            &mut new,
        )?;
        if made == Made::Delete {
            if old.is_some() {
                return Err(Error::Internal(format!(
                    "an update of {key:?} asked to delete it, which needs a condition"
                )));
            }
            return Ok(None); // missing, and nothing to store
        }
        let len = new.len() as u64;
        let (r, k) = (remote.clone(), key.to_owned());
        let read = old.map(|(_, version)| version);
        match remote.block_on(async move { r.put_if(&k, Bytes::from(new), read).await })? {
            PutOutcome::Stored => return Ok(Some(len)),
            PutOutcome::Conflict => {}
        }
    }
    Err(Error::Conflict(format!(
        "gave up updating {key:?} in {} after {UPDATE_ATTEMPTS} attempts: other writers \
         changed it every time between this writer's read and its write",
        remote.url()
    )))
}

/// A pause before attempt `attempt` (1, 2, ...) of an update that conflicted: exponential
/// with jitter, from about 2 ms up to 0.5 s, so writers that collided spread out.
#[must_use]
pub fn backoff(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let cap_ms = (2u64 << attempt.min(8)).min(500);
    let jitter = RandomState::new().hash_one(std::time::Instant::now()) % cap_ms;
    Duration::from_millis(cap_ms / 2 + jitter / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn put(sink: &mut dyn crate::store::sink::Sink, bytes: &[u8]) -> Result<Made> {
        sink.put(bytes).unwrap();
        Ok(Made::Stored)
    }

    fn counter(prior: Prior<'_>) -> Vec<u8> {
        let n = prior
            .encoded
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
        (n + 1).to_le_bytes().to_vec()
    }

    #[test]
    fn updates_from_threads_lose_nothing() {
        // Without turns (each thread its own writer, as processes are): every conflict
        // goes through the conditional write and the retry.
        let remote = Remote::over(Arc::new(object_store::memory::InMemory::new()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let remote = remote.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        update(&remote, "n", 8, &mut |p, s| put(s, &counter(p))).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let r = remote.clone();
        let n = remote
            .block_on(async move { r.get("n").await })
            .unwrap()
            .unwrap();
        assert_eq!(u64::from_le_bytes(n[..].try_into().unwrap()), 100);
    }

    #[test]
    fn a_conflict_starts_the_update_over_from_the_winner() {
        let remote = Remote::over(Arc::new(object_store::memory::InMemory::new()));
        let calls = AtomicU32::new(0);
        let stored = update(&remote, "k", 8, &mut |p, s| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                // Another writer stores its value between this read and this write.
                let r = remote.clone();
                remote
                    .block_on(async move { r.put("k", Bytes::from_static(&[7; 8])).await })
                    .unwrap();
            }
            put(s, &counter(p))
        })
        .unwrap();
        assert_eq!(stored, Some(8));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let r = remote.clone();
        let v = remote
            .block_on(async move { r.get("k").await })
            .unwrap()
            .unwrap();
        assert_eq!(
            u64::from_le_bytes(v[..].try_into().unwrap()),
            u64::from_le_bytes([7; 8]) + 1
        );
    }

    #[test]
    fn an_update_that_always_conflicts_gives_up_with_a_clear_error() {
        let remote = Remote::over(Arc::new(object_store::memory::InMemory::new()));
        let err = update(&remote, "k", 8, &mut |p, s| {
            let r = remote.clone();
            remote
                .block_on(async move { r.put("k", Bytes::from_static(&[1; 8])).await })
                .unwrap();
            put(s, &counter(p))
        })
        .unwrap_err();
        assert!(matches!(err, Error::Conflict(_)), "{err}");
        assert!(err.to_string().contains("after 20 attempts"), "{err}");
    }

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for attempt in 1..40 {
            let d = backoff(attempt);
            assert!(d <= Duration::from_millis(500), "{attempt}: {d:?}");
            let floor = (2u64 << attempt.min(8)).min(500) / 2;
            assert!(d >= Duration::from_millis(floor), "{attempt}: {d:?}");
        }
    }
}

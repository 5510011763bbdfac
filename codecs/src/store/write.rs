//! Writes to any backend, each under its key's turn: a local file through the lock-file
//! protocol (`local_write`), an object-store value by a conditional put (`remote_update`), a
//! memory value under the turn alone.

use crate::error::{Error, Result};
use crate::store::local_write::LockedValue;
use crate::store::sink::{FileSink, Sink};
use bytes::Bytes;
use std::io::ErrorKind;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::StoreKey;

use super::{store_key, zarrs_storage_error, Backend, Made, Make, Prior, Rebuild, Store};

impl Store {
    /// Deletes every value whose key starts with `prefix` (`""`: everything in the store).
    pub fn delete_prefix(&self, prefix: &str) -> Result<()> {
        self.check_writable()?;
        match &self.backend {
            Backend::Local(root) => {
                let dir = root.join(prefix.trim_matches('/'));
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                    Err(e) => return Err(Error::storage(prefix, e)),
                };
                for entry in entries {
                    let path = entry.map_err(|e| Error::storage(prefix, e))?.path();
                    let removed = if path.is_dir() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                    removed.map_err(|e| Error::storage(prefix, e))?;
                }
                Ok(())
            }
            Backend::Remote(remote) => {
                let r = remote.clone();
                let p = prefix.to_owned();
                let keys = remote.block_on(async move { r.list_keys(&p).await })?;
                let ops: Vec<(&str, Option<&[u8]>)> =
                    keys.iter().map(|k| (k.as_str(), None)).collect();
                self.put_many(&ops)
            }
            Backend::Memory(store) => {
                use zarrs::storage::WritableStorageTraits;
                store
                    .erase_prefix(&super::store_prefix(prefix)?)
                    .map_err(|e| zarrs_storage_error(prefix, &e))
            }
            Backend::Zarrs => unreachable!("check_writable refuses zarrs stores"),
        }
    }

    /// Stores (`Some`) or deletes (`None`) each value whole, all attempted; the first error
    /// is returned. Every value ends old or new, never torn, and a replacement never lands
    /// inside another writer's [`Store::update`] of the same key (see [`Store::replace`]).
    pub fn put_many(&self, ops: &[(&str, Option<&[u8]>)]) -> Result<()> {
        self.check_writable()?;
        if let Backend::Remote(remote) = &self.backend {
            let owned: Vec<(String, Option<Bytes>)> = ops
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(Bytes::copy_from_slice)))
                .collect();
            let r = remote.clone();
            let concurrency = remote.settings.concurrency.max(1);
            return remote.block_on(async move {
                use futures::StreamExt;
                let results: Vec<Result<()>> = futures::stream::iter(owned)
                    .map(|(key, value)| {
                        let r = r.clone();
                        async move {
                            match value {
                                Some(bytes) => r.put(&key, bytes).await,
                                None => r.delete(&key).await,
                            }
                        }
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await;
                results.into_iter().collect()
            });
        }
        let one = |(key, value): &(&str, Option<&[u8]>)| {
            self.replace(key, &mut |sink| match value {
                Some(bytes) => {
                    sink.put(bytes).map_err(|e| Error::storage(key, e))?;
                    Ok(Made::Stored)
                }
                None => Ok(Made::Delete),
            })
            .map(|_| ())
        };
        // Every value attempted even when one fails: each result is kept, then the first error.
        let results = crate::process::pool::try_map(ops, |op| Ok(one(op)))?;
        results.into_iter().collect()
    }

    /// Replaces the value at `key` whole with what `make` writes (or deletes the key), never
    /// inside another writer's [`Store::update`] of it: local files are written into the
    /// key's lock file and renamed over the key (`local_write`); object-store values are
    /// one PUT (an update that read the value before fails its condition and starts over).
    /// `make` runs with the engine's parallel loops kept on this thread. Returns the stored
    /// size, or `None` when the key was deleted.
    pub fn replace(&self, key: &str, make: &mut Make<'_>) -> Result<Option<u64>> {
        self.check_writable()?;
        let mut make = |sink: &mut dyn Sink| crate::process::pool::sequential(|| make(sink));
        if let Backend::Remote(remote) = &self.backend {
            let mut value = Vec::new();
            let made = make(&mut value)?;
            let (r, k) = (remote.clone(), key.to_owned());
            let len = value.len() as u64;
            return match made {
                Made::Stored => remote
                    .block_on(async move { r.put(&k, Bytes::from(value)).await })
                    .map(|()| Some(len)),
                Made::Delete => remote
                    .block_on(async move { r.delete(&k).await })
                    .map(|()| None),
            };
        }
        self.locked(key, |locked| self.store_locked(key, locked, &mut make))
    }

    /// Reads the value at `key`, builds the new one from it with `rebuild`, and stores it
    /// (or deletes the key) as one step that no other writer of this key can interleave
    /// with, in this process or another: threads take turns per key (`key_turns`); local
    /// files are read and replaced under the key's lock file (`local_write`); object
    /// stores write conditionally and start over when another writer got there first
    /// (`remote_update`). `rebuild` runs with the engine's parallel loops kept on the
    /// calling thread (`pool::sequential`), and may run more than once on an object store.
    /// Stored values larger than `limit` are refused as corrupt. Returns the stored size,
    /// or `None` when the key was deleted (or stays missing).
    pub fn update(&self, key: &str, limit: u64, rebuild: &mut Rebuild<'_>) -> Result<Option<u64>> {
        self.check_writable()?;
        let mut rebuild = |prior: Prior<'_>, sink: &mut dyn Sink| {
            crate::process::pool::sequential(|| rebuild(prior, sink))
        };
        if let Backend::Remote(remote) = &self.backend {
            let _turn = crate::store::key_turns::take(&self.turn_name(key))?;
            return crate::store::remote_update::update(remote, key, limit, &mut rebuild);
        }
        self.locked(key, |locked| {
            let old = self.read(key, limit)?;
            let prior = Prior {
                encoded: old.as_deref(),
                may_delete: true,
            };
            self.store_locked(key, locked, &mut |sink| rebuild(prior, sink))
        })
    }

    /// Writes the value `make` makes for a key this thread holds, and makes it the value.
    fn store_locked(
        &self,
        key: &str,
        locked: Locked<'_>,
        make: &mut dyn FnMut(&mut dyn Sink) -> Result<Made>,
    ) -> Result<Option<u64>> {
        let io = |e: std::io::Error| Error::storage(key, e);
        match locked {
            Locked::File(file) => {
                let mut sink = FileSink::new(file.file()).map_err(io)?;
                let made = make(&mut sink)?;
                let len = sink.len();
                match made {
                    Made::Stored => file.commit(self.durable).map_err(io).map(|()| Some(len)),
                    Made::Delete => file.remove(self.durable).map_err(io).map(|()| None),
                }
            }
            Locked::Memory(store, k) => {
                let mut value = Vec::new();
                let made = make(&mut value)?;
                let len = value.len() as u64;
                set_in_memory(store, &k, (made == Made::Stored).then_some(&value[..]))?;
                Ok((made == Made::Stored).then_some(len))
            }
        }
    }

    /// Runs `f` holding `key` against every other writer: this process's turn at it, and
    /// for a local directory the key's lock file.
    fn locked<T>(&self, key: &str, f: impl FnOnce(Locked) -> Result<T>) -> Result<T> {
        let _turn = crate::store::key_turns::take(&self.turn_name(key))?;
        match &self.backend {
            Backend::Local(root) => {
                let path = root.join(key.trim_start_matches('/'));
                let file = LockedValue::acquire(&path).map_err(|e| Error::storage(key, e))?;
                f(Locked::File(file))
            }
            Backend::Memory(store) => f(Locked::Memory(store.as_ref(), store_key(key)?)),
            Backend::Remote(_) | Backend::Zarrs => Err(Error::Internal(
                "key locks are for local and memory stores".into(),
            )),
        }
    }

    fn turn_name(&self, key: &str) -> String {
        format!("{}/{}", self.turn_scope, key.trim_start_matches('/'))
    }
}

/// A key held against other writers, as its kind of store holds it.
enum Locked<'a> {
    File(LockedValue),
    Memory(&'a MemoryStore, StoreKey),
}

fn set_in_memory(store: &MemoryStore, key: &StoreKey, value: Option<&[u8]>) -> Result<()> {
    use zarrs::storage::WritableStorageTraits;
    match value {
        Some(bytes) => store.set(key, Bytes::copy_from_slice(bytes)),
        None => store.erase(key),
    }
    .map_err(|e| zarrs_storage_error(key.as_str(), &e))
}

//! zarrs sees an object store through this blocking adapter: metadata, listing, and zarrs'
//! own decoder for the codecs zarrpipe does not decode itself.

use std::sync::Arc;

use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    ListableStorageTraits, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, StorePrefixes,
};

use crate::error::{Error, Result};

use crate::store::remote::Remote;

/// zarrs' view of a remote store: every call blocks on the I/O runtime.
pub struct RemoteStorage(pub Arc<Remote>);

fn to_storage_error(e: Error) -> StorageError {
    StorageError::Other(e.to_string())
}

impl RemoteStorage {
    /// Runs `f(remote, key)` on the I/O runtime and waits for it, as zarrs' blocking calls do.
    fn blocking<T, F>(
        &self,
        key: &StoreKey,
        f: impl FnOnce(Arc<Remote>, String) -> F,
    ) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        self.0
            .block_on(f(self.0.clone(), key.as_str().to_owned()))
            .map_err(to_storage_error)
    }
}

impl ReadableStorageTraits for RemoteStorage {
    /// The whole value in one request (zarrs' default would ask for its size first: a second
    /// round trip for every metadata document it opens).
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.blocking(key, |remote, key| async move { remote.get(&key).await })
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        if let [ByteRange::FromStart(0, None)] = ranges[..] {
            return Ok(match self.get(key)? {
                Some(bytes) => Some(Box::new(std::iter::once(Ok(bytes)))),
                None => None,
            });
        }
        let parts = self.blocking(key, |remote, key| async move {
            let Some(size) = remote.size(&key).await? else {
                return Ok(None);
            };
            let mut concrete = Vec::with_capacity(ranges.len());
            for r in &ranges {
                let (start, end) = match *r {
                    ByteRange::FromStart(offset, len) => {
                        (offset, len.map_or(size, |l| offset.saturating_add(l)))
                    }
                    ByteRange::Suffix(len) => (size.saturating_sub(len), size),
                };
                if start > end || end > size {
                    return Err(Error::corrupt(
                        &key,
                        format!("byte range {start}..{end} is outside the {size}-byte value"),
                    ));
                }
                concrete.push(start..end);
            }
            remote.get_ranges(&key, &concrete, None).await
        })?;
        Ok(parts
            .map(|parts| -> Box<dyn Iterator<Item = _>> { Box::new(parts.into_iter().map(Ok)) }))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.blocking(key, |remote, key| async move { remote.size(&key).await })
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl ListableStorageTraits for RemoteStorage {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        let remote = self.0.clone();
        let p = prefix.as_str().to_owned();
        let keys = remote
            .clone()
            .block_on(async move { remote.list_keys(&p).await })
            .map_err(to_storage_error)?;
        let mut out: StoreKeys = keys
            .into_iter()
            .filter_map(|k| StoreKey::new(k).ok())
            .collect();
        out.sort();
        Ok(out)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        let keys = self.list_prefix(prefix)?;
        let mut direct = Vec::new();
        let mut prefixes: StorePrefixes = Vec::new();
        for key in keys {
            let rest = &key.as_str()[prefix.as_str().len()..];
            match rest.split_once('/') {
                None => direct.push(key),
                Some((dir, _)) => {
                    if let Ok(p) = StorePrefix::new(format!("{}{dir}/", prefix.as_str())) {
                        if !prefixes.contains(&p) {
                            prefixes.push(p);
                        }
                    }
                }
            }
        }
        Ok(StoreKeysPrefixes::new(direct, prefixes))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        let keys = self.list_prefix(prefix)?;
        keys.iter()
            .try_fold(0u64, |acc, k| Ok(acc + self.size_key(k)?.unwrap_or(0)))
    }
}

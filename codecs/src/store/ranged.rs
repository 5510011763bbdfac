//! A stored value read by byte range ([`ByteSource`]): a shard's index and its inner chunks
//! from a local file (positioned reads straight into the caller's buffer), an object store
//! (range requests) or any zarrs store, or a value already in memory.

use std::borrow::Cow;
use std::fs::File;
use std::io::ErrorKind;
use std::sync::Arc;

use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::StoreKey;

use crate::error::{Error, Result};
use crate::memory::out::RawTarget;
use crate::store::remote::Remote;
use crate::store::{local_read, zarrs_storage_error, Store};

/// A stored value (a shard, or a chunk) read by byte range: from memory or from a store.
pub trait ByteSource: Sync {
    /// The value's length in bytes.
    fn size(&self) -> u64;
    /// Bytes `offset..offset + len`; the caller keeps the range inside [`Self::size`].
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>>;
    /// Copies bytes `offset..offset + target.len` straight into `target`, which may be
    /// uninitialised memory; the caller keeps the range inside [`Self::size`].
    fn read_to(&self, offset: u64, target: &RawTarget) -> Result<()> {
        let bytes = self.read(offset, target.len as u64)?;
        let n = bytes.len().min(target.len);
        // SAFETY: `target` is valid for `target.len` bytes (RawTarget's contract) and does
        // not overlap `bytes`, which we own or borrow from the source.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), target.ptr, n) };
        Ok(())
    }
    /// True when [`Self::read_to`] writes straight into its target (a file read), so that
    /// reading into a reused buffer saves allocating, zeroing and faulting in a new one.
    fn reads_in_place(&self) -> bool {
        false
    }
}

/// A shard already in memory.
pub struct InMemory<'a>(pub &'a [u8]);

impl ByteSource for InMemory<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(
            &self.0[offset as usize..(offset + len) as usize],
        ))
    }
}

pub(crate) struct LocalRanged {
    pub(crate) file: File,
    pub(crate) len: u64,
    pub(crate) key: String,
}

impl ByteSource for LocalRanged {
    fn size(&self) -> u64 {
        self.len
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let mut buf = crate::memory::buffer::try_with_capacity(len as usize, &self.key)?;
        let target = RawTarget {
            ptr: buf.as_mut_ptr(),
            len: len as usize,
        };
        self.read_to(offset, &target)?;
        // SAFETY: `read_to` wrote all `len` bytes of the reserved capacity (or failed).
        unsafe { buf.set_len(len as usize) };
        Ok(Cow::Owned(buf))
    }

    fn read_to(&self, offset: u64, target: &RawTarget) -> Result<()> {
        // SAFETY: `target` is writable and unread meanwhile (RawTarget's contract).
        let n = unsafe { local_read::read_at_most(&self.file, offset, target.ptr, target.len) }
            .map_err(|e| Error::storage(&self.key, e))?;
        if n < target.len {
            return Err(Error::corrupt(
                &self.key,
                "stored value ended early (truncated while reading?)",
            ));
        }
        Ok(())
    }
}

pub(crate) struct RemoteRanged {
    pub(crate) remote: Arc<Remote>,
    pub(crate) key: String,
    pub(crate) size: u64,
}

impl ByteSource for RemoteRanged {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let r = self.remote.clone();
        let k = self.key.clone();
        let parts = self
            .remote
            .block_on(async move {
                r.get_ranges(&k, std::slice::from_ref(&(offset..offset + len)), None)
                    .await
            })?
            .ok_or_else(|| {
                Error::storage(
                    &self.key,
                    std::io::Error::new(ErrorKind::NotFound, "value vanished while reading"),
                )
            })?;
        Ok(Cow::Owned(
            parts
                .into_iter()
                .next()
                .map(|b| b.to_vec())
                .unwrap_or_default(),
        ))
    }
}

pub(crate) struct ZarrsRanged<'a> {
    pub(crate) store: &'a Store,
    pub(crate) key: StoreKey,
    pub(crate) len: u64,
}

impl ByteSource for ZarrsRanged<'_> {
    fn size(&self) -> u64 {
        self.len
    }

    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let key = self.key.as_str();
        let bytes = self
            .store
            .zarrs
            .get_partial(&self.key, ByteRange::FromStart(offset, Some(len)))
            .map_err(|e| zarrs_storage_error(key, &e))?
            .ok_or_else(|| {
                Error::storage(
                    key,
                    std::io::Error::new(ErrorKind::NotFound, "value vanished while reading"),
                )
            })?;
        if bytes.len() as u64 != len {
            return Err(Error::corrupt(
                key,
                format!("asked for {len} bytes at {offset}, got {}", bytes.len()),
            ));
        }
        Ok(Cow::Owned(bytes.to_vec()))
    }
}

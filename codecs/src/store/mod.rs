//! Where encoded chunks come from and go to: a local directory read with plain file I/O
//! (whole files into pooled buffers, shards by byte range; files replaced atomically on
//! write), an object store, memory, or any other zarrs store (read-only). The kind of store
//! is recognised once, when it is opened. Every write of a key takes the key's turn
//! (`key_turns`) and replaces the value whole (`write`: lock files, conditional puts).
//! Uses `memory` (pooled buffers) and `process` (the I/O runtime survives `fork`), nothing
//! about codecs or arrays.

mod file_os;
mod inventory;
pub mod key_turns;
pub mod local_read;
pub mod local_write;
pub mod open_mode;
pub mod ranged;
pub mod remote;
mod remote_runtime;
pub mod remote_update;
pub mod remote_zarrs;
pub mod response_body;
pub mod sink;
mod write;

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{ReadableListableStorage, StoreKey};

use crate::error::{Error, Result};
use crate::memory::buffer::try_room_for;
use crate::memory::scratch::Scratch;
use crate::store::ranged::{ByteSource, LocalRanged, RemoteRanged, ZarrsRanged};
use crate::store::remote::{Remote, RemoteSettings};
use crate::store::remote_zarrs::RemoteStorage;
use crate::store::sink::Sink;

/// Encoded bytes of one stored value.
pub enum Encoded {
    /// Read into this thread's reusable buffer.
    Pooled(Scratch),
    /// Handed over by a zarrs store.
    Shared(Bytes),
}

impl std::ops::Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Pooled(s) => s,
            Self::Shared(b) => b,
        }
    }
}

enum Backend {
    /// A directory on this machine.
    Local(PathBuf),
    /// An object store (S3, GCS, Azure, HTTP), read concurrently by zarrpipe.
    Remote(Arc<Remote>),
    /// Keys and values in memory (tests, fuzzing, caller-supplied chunks).
    Memory(Arc<MemoryStore>),
    /// Anything else zarrs can read.
    Zarrs,
}

/// A Zarr store.
pub struct Store {
    backend: Backend,
    zarrs: ReadableListableStorage,
    description: String,
    read_only: bool,
    /// Names this store's keys among every store of the process, for `key_turns`.
    turn_scope: String,
    /// Local writes are forced to disk before they count as done (`local_write`).
    durable: bool,
}

/// The stored value an update starts from.
#[derive(Clone, Copy)]
pub struct Prior<'a> {
    /// Its bytes; `None` when the key is missing.
    pub encoded: Option<&'a [u8]>,
    /// Whether the update may end by deleting the key. Object stores cannot delete
    /// conditionally, so there an update that leaves a value all fill value stores it.
    pub may_delete: bool,
}

/// What a rebuild made of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// The new value, put into the sink.
    Stored,
    /// Nothing: the key is to be deleted.
    Delete,
}

/// Builds a key's new value from its old one, into the sink (which starts empty).
pub type Rebuild<'a> = dyn FnMut(Prior<'_>, &mut dyn Sink) -> Result<Made> + 'a;

/// Builds a key's whole new value into the sink (which starts empty).
pub type Make<'a> = dyn FnMut(&mut dyn Sink) -> Result<Made> + 'a;

impl Store {
    /// A local directory store. The directory must exist.
    pub fn open_local(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => Error::NotFound(format!("no Zarr store at {}", path.display())),
            _ => Error::storage(&path.display().to_string(), e),
        })?;
        if !meta.is_dir() {
            return Err(Error::NotFound(format!(
                "{} is a file, not a Zarr directory store",
                path.display()
            )));
        }
        let scope = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Self::local(path, &scope)
    }

    /// A local directory store at `path`, its keys' turns named by `scope` (the directory's
    /// one absolute name).
    fn local(path: &Path, scope: &Path) -> Result<Self> {
        let zarrs = FilesystemStore::new(path).map_err(|e| {
            Error::storage(
                &path.display().to_string(),
                std::io::Error::other(e.to_string()),
            )
        })?;
        Ok(Self {
            backend: Backend::Local(path.to_path_buf()),
            zarrs: Arc::new(zarrs),
            description: path.display().to_string(),
            read_only: false,
            turn_scope: format!("file:{}", scope.display()),
            durable: false,
        })
    }

    /// A local directory store that may not exist yet: nothing is created until the first
    /// write (which makes the directories it needs), as zarr-python's modes "a" and "w" do.
    /// A missing directory reads as an empty store.
    pub fn open_local_lazily(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        match std::fs::metadata(path) {
            Ok(_) => Self::open_local(path),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if path.parent().is_some_and(|p| p.is_file()) {
                    return Err(Error::NotFound(format!(
                        "{} cannot be created: its parent is a file",
                        path.display()
                    )));
                }
                let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                Self::local(path, &absolute)
            }
            Err(e) => Err(Error::storage(&path.display().to_string(), e)),
        }
    }

    /// Whether the store holds no value at all under `prefix` (`""`: the whole store).
    pub fn is_empty_under(&self, prefix: &str) -> Result<bool> {
        match &self.backend {
            Backend::Local(root) => {
                let dir = root.join(prefix.trim_matches('/'));
                match std::fs::read_dir(&dir) {
                    Ok(mut entries) => Ok(entries.next().is_none()),
                    Err(e)
                        if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
                    {
                        Ok(true)
                    }
                    Err(e) => Err(Error::storage(prefix, e)),
                }
            }
            Backend::Remote(remote) => {
                let (r, p) = (remote.clone(), prefix.to_owned());
                Ok(remote
                    .block_on(async move { r.list_keys(&p).await })?
                    .is_empty())
            }
            Backend::Memory(_) | Backend::Zarrs => {
                use zarrs::storage::ListableStorageTraits;
                let keys = self
                    .zarrs
                    .list_prefix(&store_prefix(prefix)?)
                    .map_err(|e| zarrs_storage_error(prefix, &e))?;
                Ok(keys.is_empty())
            }
        }
    }

    /// The same store, refusing writes (`mode="r"`).
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The same store, forcing each local write to disk (file and directory `fsync`) before
    /// it counts as done, so that it survives a power loss, not only a killed process.
    #[must_use]
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Whether local writes are forced to disk.
    #[must_use]
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// Whether writes are refused.
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.read_only || matches!(self.backend, Backend::Zarrs)
    }

    /// `ReadOnly` unless this store takes writes.
    pub fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly(format!(
                "{} was opened read-only{}",
                self.description,
                if self.read_only {
                    " (mode=\"r\"); open it with mode=\"a\" to write"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }

    /// An object store at `url` (`s3://`, `gs://`, `az://`, `http(s)://`); `file://` URLs
    /// open the local directory.
    pub fn open_url(
        url: &str,
        options: &[(String, String)],
        settings: RemoteSettings,
    ) -> Result<Self> {
        if let Some(path) = url.strip_prefix("file://") {
            return Self::open_local(path);
        }
        let remote = Arc::new(Remote::open(url, options, settings)?);
        Ok(Self {
            backend: Backend::Remote(remote.clone()),
            zarrs: Arc::new(RemoteStorage(remote)),
            description: url.to_owned(),
            read_only: false,
            turn_scope: format!("url:{}", url.trim_end_matches('/')),
            durable: false,
        })
    }

    /// A store over `remote` (tests: an object store of the test's own).
    #[cfg(test)]
    pub(crate) fn over_remote(remote: Arc<Remote>) -> Self {
        Self {
            backend: Backend::Remote(remote.clone()),
            zarrs: Arc::new(RemoteStorage(remote)),
            description: "test remote".into(),
            read_only: false,
            turn_scope: "url:test".into(),
            durable: false,
        }
    }

    /// The object store behind this store, if it is one.
    #[must_use]
    pub fn remote(&self) -> Option<&Arc<Remote>> {
        match &self.backend {
            Backend::Remote(r) => Some(r),
            _ => None,
        }
    }

    /// Any store zarrs can read and list (memory, object stores...).
    #[must_use]
    pub fn from_zarrs(storage: ReadableListableStorage, description: String) -> Self {
        Self {
            backend: Backend::Zarrs,
            zarrs: storage,
            turn_scope: format!("zarrs:{description}"),
            description,
            read_only: true,
            durable: false,
        }
    }

    /// An in-memory store holding `entries` (key, value): for tests, fuzzing, and arrays
    /// whose chunks the caller supplies.
    #[must_use]
    pub fn in_memory(entries: impl IntoIterator<Item = (String, Vec<u8>)>) -> Self {
        use zarrs::storage::WritableStorageTraits;
        let store = Arc::new(MemoryStore::new());
        for (key, value) in entries {
            if let Ok(key) = StoreKey::new(key) {
                // Setting a key in a memory store cannot fail.
                let _ = store.set(&key, Bytes::from(value));
            }
        }
        Self {
            turn_scope: format!("memory:{:p}", Arc::as_ptr(&store)),
            backend: Backend::Memory(store.clone()),
            zarrs: store,
            description: "memory".into(),
            read_only: false,
            durable: false,
        }
    }

    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The store as zarrs sees it (metadata, and the decoder for codecs zarrpipe lacks).
    #[must_use]
    pub fn zarrs(&self) -> ReadableListableStorage {
        self.zarrs.clone()
    }

    /// The local root directory, if this is a local store.
    #[must_use]
    pub fn local_root(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Local(root) => Some(root),
            Backend::Remote(_) | Backend::Memory(_) | Backend::Zarrs => None,
        }
    }

    /// Reads the whole value at `key`; `None` if it does not exist. Values larger than
    /// `limit` are refused as corrupt without being read.
    pub fn read(&self, key: &str, limit: u64) -> Result<Option<Encoded>> {
        let too_big = |len: u64| value_too_large(key, len, limit);
        match &self.backend {
            Backend::Local(root) => {
                let Some(file) = open_file(&root.join(key.trim_start_matches('/')), key)? else {
                    return Ok(None);
                };
                let len = file.metadata().map_err(|e| Error::storage(key, e))?.len();
                if len > limit {
                    return Err(too_big(len));
                }
                let mut buf = Scratch::fitting(len as usize);
                buf.clear();
                try_room_for(&mut buf, len as usize, &format!("reading {key:?}"))?;
                // SAFETY: `try_room_for` reserved `len` bytes in the empty buffer.
                let n =
                    unsafe { local_read::read_at_most(&file, 0, buf.as_mut_ptr(), len as usize) }
                        .map_err(|e| Error::storage(key, e))?;
                // SAFETY: the first `n <= len` reserved bytes were written.
                unsafe { buf.set_len(n) };
                // Whatever a writer appended since the length was taken, up to the limit.
                (&file)
                    .seek(SeekFrom::Start(n as u64))
                    .and_then(|_| (&file).take(limit + 1 - n as u64).read_to_end(&mut buf))
                    .map_err(|e| Error::storage(key, e))?;
                if buf.len() as u64 > limit {
                    return Err(too_big(buf.len() as u64));
                }
                Ok(Some(Encoded::Pooled(buf)))
            }
            Backend::Remote(remote) => {
                let r = remote.clone();
                let k = key.to_owned();
                match remote.block_on(async move { r.get(&k).await })? {
                    Some(b) if b.len() as u64 > limit => Err(too_big(b.len() as u64)),
                    other => Ok(other.map(Encoded::Shared)),
                }
            }
            Backend::Memory(_) | Backend::Zarrs => {
                let store_key = store_key(key)?;
                if let Some(len) = self
                    .zarrs
                    .size_key(&store_key)
                    .map_err(|e| zarrs_storage_error(key, &e))?
                {
                    if len > limit {
                        return Err(too_big(len));
                    }
                }
                let value = self
                    .zarrs
                    .get(&store_key)
                    .map_err(|e| zarrs_storage_error(key, &e))?;
                match value {
                    Some(b) if b.len() as u64 > limit => Err(too_big(b.len() as u64)),
                    other => Ok(other.map(Encoded::Shared)),
                }
            }
        }
    }

    /// Opens the value at `key` for reads by byte range; `None` if it does not exist.
    pub fn open_ranged(&self, key: &str) -> Result<Option<Box<dyn ByteSource + '_>>> {
        match &self.backend {
            Backend::Local(root) => {
                let Some(file) = open_file(&root.join(key.trim_start_matches('/')), key)? else {
                    return Ok(None);
                };
                let len = file.metadata().map_err(|e| Error::storage(key, e))?.len();
                Ok(Some(Box::new(LocalRanged {
                    file,
                    len,
                    key: key.to_owned(),
                })))
            }
            Backend::Remote(remote) => {
                let r = remote.clone();
                let k = key.to_owned();
                let size = remote.block_on(async move { r.size(&k).await })?;
                Ok(size.map(|size| {
                    Box::new(RemoteRanged {
                        remote: remote.clone(),
                        key: key.to_owned(),
                        size,
                    }) as Box<dyn ByteSource>
                }))
            }
            Backend::Memory(_) | Backend::Zarrs => {
                let store_key = store_key(key)?;
                let len = self
                    .zarrs
                    .size_key(&store_key)
                    .map_err(|e| zarrs_storage_error(key, &e))?;
                Ok(len.map(|len| {
                    Box::new(ZarrsRanged {
                        store: self,
                        key: store_key,
                        len,
                    }) as Box<dyn ByteSource>
                }))
            }
        }
    }
}

fn store_key(key: &str) -> Result<StoreKey> {
    StoreKey::new(key)
        .map_err(|e| Error::InvalidArgument(format!("invalid store key {key:?}: {e}")))
}

/// A zarrs storage error, keeping the I/O error kind (so a permission problem stays a
/// `PermissionError` in Python). A value that ends early is a truncated, corrupt value.
pub(crate) fn zarrs_storage_error(key: &str, e: &zarrs::storage::StorageError) -> Error {
    match e {
        zarrs::storage::StorageError::IOError(io) if io.kind() == ErrorKind::UnexpectedEof => {
            Error::corrupt(key, "stored value is shorter than the data it must hold")
        }
        zarrs::storage::StorageError::IOError(io) => {
            Error::storage(key, std::io::Error::new(io.kind(), io.to_string()))
        }
        other => Error::storage(key, std::io::Error::other(other.to_string())),
    }
}

/// Opens a regular file; a missing one (or a missing parent directory) is `None`, and a
/// directory where a value should be is an error, not an empty value.
fn open_file(path: &Path, key: &str) -> Result<Option<File>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None)
        }
        Err(e) => return Err(Error::storage(key, e)),
    };
    let meta = file.metadata().map_err(|e| Error::storage(key, e))?;
    if meta.is_dir() {
        return Err(Error::storage(
            key,
            std::io::Error::new(
                ErrorKind::IsADirectory,
                "a directory stands where a stored value should be",
            ),
        ));
    }
    Ok(Some(file))
}

/// zarrs' prefix of the keys under `prefix` (`""`, `"a"`, `"a/b/"`: the root, `a/`, `a/b/`).
pub(crate) fn store_prefix(prefix: &str) -> Result<zarrs::storage::StorePrefix> {
    let p = prefix.trim_matches('/');
    if p.is_empty() {
        return Ok(zarrs::storage::StorePrefix::root());
    }
    zarrs::storage::StorePrefix::new(format!("{p}/"))
        .map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// The key prefix of the node at `node`: `"a/b/"`, or `""` for the root.
pub fn key_prefix(node: &str) -> String {
    let p = node.trim_matches('/');
    if p.is_empty() {
        String::new()
    } else {
        format!("{p}/")
    }
}

/// Turns a user's array path (`"a/b"`, `"/a/b"`, `""`) into zarrs' node path (`"/a/b"`),
/// refusing anything that could step outside the store (`..`, `.`, empty components).
pub fn node_path(path: &str) -> Result<String> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    for part in trimmed.split('/') {
        if part.is_empty()
            || part == "."
            || part == ".."
            || part.contains('\\')
            || part.contains('\0')
        {
            return Err(Error::InvalidArgument(format!(
                "invalid array path {path:?}: components must be non-empty names, not '.', '..' or containing '\\\\'"
            )));
        }
    }
    Ok(format!("/{trimmed}"))
}

/// The error for a stored value larger than any encoding of what it should hold: it is
/// refused before it is read.
pub(crate) fn value_too_large(key: &str, len: u64, limit: u64) -> Error {
    Error::corrupt(
        key,
        format!(
            "stored value is {len} bytes, more than the {limit} bytes any encoding of it can take"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_never_leave_the_store() {
        assert_eq!(node_path("").unwrap(), "/");
        assert_eq!(node_path("/").unwrap(), "/");
        assert_eq!(node_path("a/b/").unwrap(), "/a/b");
        for bad in ["../x", "a/../../x", "a//b", "./a", "a\\..\\b"] {
            assert!(node_path(bad).is_err(), "{bad}");
        }
    }
}

//! Writing one key of a local directory store so that no other writer's update is lost,
//! whichever process or thread it runs in, and readers see the old value or the new one.
//!
//! The protocol is TensorStore's file kvstore's (`kvstore/file/file_key_value_store.cc`),
//! so zarrpipe and TensorStore writers on one directory also exclude each other:
//!
//! 1. open (creating it) `<key>.__lock` beside the value and take an exclusive lock on the
//!    whole file: an open-file-description lock on Linux (`F_OFD_SETLKW`), `flock` elsewhere;
//! 2. open the lock path again: if it is no longer the file we locked (its holder renamed
//!    or removed it meanwhile), lock the new one instead; the lock is ours once the path and
//!    the locked file agree;
//! 3. read the value, if the write needs it, and build the new one;
//! 4. write the new value into the lock file (truncated first: a killed writer may have left
//!    bytes there) and rename it over the value, or remove the value and then the lock file.
//!
//! Only the holder of the lock, while the lock file still has its name, may rename or remove
//! it, so two writers of one key never overlap between steps 3 and 4. The kernel drops a
//! lock when its holder dies, SIGKILL included: a killed writer leaves at most a stale
//! `.__lock` file (never a torn value), which the next writer of that key reuses.
//!
//! Durability: the rename makes a value whole or absent for readers and survives the writer
//! being killed. Only with `durable` are the file's data and the rename forced to disk
//! (`fsync` of the file, then of its directory), so that they survive a power loss.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::file_os::{lock_whole, same_file};

/// The suffix of a key's lock file (TensorStore's `kLockSuffix`).
pub const LOCK_SUFFIX: &str = ".__lock";

/// Exclusive write access to one value of a local store.
pub struct LockedValue {
    path: PathBuf,
    lock_path: PathBuf,
    /// The lock file, locked; `None` once renamed or removed.
    file: Option<File>,
}

impl LockedValue {
    /// Waits until this process may write `path` (creating its directory when missing).
    pub fn acquire(path: &Path) -> std::io::Result<Self> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(LOCK_SUFFIX);
        let lock_path = PathBuf::from(lock_path);
        let mut file = match open_lock_file(&lock_path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                open_lock_file(&lock_path)?
            }
            other => other?,
        };
        loop {
            lock_whole(&file)?;
            let again = open_lock_file(&lock_path)?;
            if same_file(&file, &again)? {
                return Ok(Self {
                    path: path.to_path_buf(),
                    lock_path,
                    file: Some(file),
                });
            }
            // Renamed or removed by its holder while we waited: the lock we got guards
            // nothing. Closing the file drops it; wait on the file that has the name now.
            file = again;
        }
    }

    /// The value's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file, which becomes the value on [`LockedValue::commit`]: write the new
    /// value into it from its start (see `encode::sink::FileSink`).
    #[must_use]
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("an unreleased lock has its file")
    }

    /// Makes what was written into [`LockedValue::file`] the value, and releases the lock.
    /// On an error the old value stays.
    pub fn commit(mut self, durable: bool) -> std::io::Result<()> {
        let file = self.file.take().expect("an unreleased lock has its file");
        if durable {
            if let Err(e) = file.sync_data() {
                self.file = Some(file); // Drop removes the lock file, then unlocks
                return Err(e);
            }
        }
        // Renamed while locked and still open: the lock is released when `file` closes,
        // after the value has its new content.
        if let Err(e) = std::fs::rename(&self.lock_path, &self.path) {
            self.file = Some(file);
            return Err(e);
        }
        drop(file);
        if durable {
            sync_dir(&self.path)?;
        }
        Ok(())
    }

    /// Replaces the value with `bytes` and releases the lock.
    pub fn replace(self, bytes: &[u8], durable: bool) -> std::io::Result<()> {
        use crate::store::sink::{FileSink, Sink};
        FileSink::new(self.file())?.put(bytes)?;
        self.commit(durable)
    }

    /// Removes the value (a missing one is no error) and releases the lock.
    pub fn remove(mut self, durable: bool) -> std::io::Result<()> {
        let removed = match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        self.release();
        if removed.is_ok() && durable {
            sync_dir(&self.path)?;
        }
        removed
    }

    /// Removes the lock file while it is still ours, then unlocks (by closing it).
    fn release(&mut self) {
        if let Some(file) = self.file.take() {
            // Best effort: a lock file left behind is reused by the next writer.
            let _ = std::fs::remove_file(&self.lock_path);
            drop(file);
        }
    }
}

impl Drop for LockedValue {
    fn drop(&mut self) {
        self.release();
    }
}

fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Forces a rename or removal in the directory of `path` to disk.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn replace_and_remove_leave_no_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c/0/0");
        LockedValue::acquire(&path)
            .unwrap()
            .replace(b"new", false)
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        LockedValue::acquire(&path).unwrap().remove(true).unwrap();
        assert!(!path.exists());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("c/0")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_stale_lock_file_is_reused_and_its_bytes_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        // What a writer killed between steps 1 and 4 leaves.
        std::fs::write(dir.path().join("k.__lock"), b"half of a value").unwrap();
        LockedValue::acquire(&path)
            .unwrap()
            .replace(b"v", false)
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"v");
        assert!(!dir.path().join("k.__lock").exists());
    }

    #[test]
    fn threads_updating_one_value_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("count"));
        std::fs::write(&*path, 0u64.to_le_bytes()).unwrap();
        let overlaps = Arc::new(AtomicUsize::new(0));
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, overlaps, inside) = (path.clone(), overlaps.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        let locked = LockedValue::acquire(&path).unwrap();
                        if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let old = std::fs::read(locked.path()).unwrap();
                        let n = u64::from_le_bytes(old.try_into().unwrap()) + 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                        locked.replace(&n.to_le_bytes(), false).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = u64::from_le_bytes(std::fs::read(&*path).unwrap().try_into().unwrap());
        assert_eq!(n, 400);
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_failed_write_keeps_the_old_value_and_frees_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, b"old").unwrap();
        let locked = LockedValue::acquire(&path).unwrap();
        drop(locked); // an update that failed before storing anything
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert!(!dir.path().join("k.__lock").exists());
        LockedValue::acquire(&path)
            .unwrap()
            .replace(b"new", false)
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }
}

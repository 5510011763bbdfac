//! Where an encoded value goes while it is made: memory (object stores, zarr-python's
//! stores), or the file that becomes the value (local stores: the key's lock file, renamed
//! over the key when it is done), so that a local write never holds a whole encoded chunk.

use std::fs::File;

use super::file_os::write_all_at;

/// A value being written, from its first byte on.
pub trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Bytes put so far.
    fn len(&self) -> u64;
    /// Whether nothing was put yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Overwrites bytes already put, from `at` (a shard's index, when it comes first).
    fn patch(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()>;
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.try_reserve(bytes.len())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        self.extend_from_slice(bytes);
        Ok(())
    }

    fn len(&self) -> u64 {
        Vec::len(self) as u64
    }

    fn patch(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        let at = at as usize;
        self.get_mut(at..at + bytes.len())
            .ok_or_else(|| std::io::Error::other("patch beyond the end of the value"))?
            .copy_from_slice(bytes);
        Ok(())
    }
}

/// An empty file written from its start.
pub struct FileSink<'a> {
    file: &'a File,
    written: u64,
}

impl<'a> FileSink<'a> {
    /// Writes `file` from its start (it is truncated first).
    pub fn new(file: &'a File) -> std::io::Result<Self> {
        file.set_len(0)?;
        Ok(Self { file, written: 0 })
    }
}

impl Sink for FileSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        write_all_at(self.file, bytes, self.written)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.written
    }

    fn patch(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        if at + bytes.len() as u64 > self.written {
            return Err(std::io::Error::other("patch beyond the end of the value"));
        }
        write_all_at(self.file, bytes, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_files_take_the_same_writes() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.path().join("v"))
            .unwrap();
        std::fs::write(dir.path().join("v"), b"stale bytes of a killed writer").unwrap();
        let mut to_file = FileSink::new(&file).unwrap();
        let mut to_memory = Vec::new();
        for sink in [&mut to_file as &mut dyn Sink, &mut to_memory] {
            sink.put(b"....body").unwrap();
            sink.patch(0, b"head").unwrap();
            assert!(sink.patch(6, b"xyz").is_err());
            assert_eq!(sink.len(), 8);
        }
        assert_eq!(to_memory, b"headbody");
        assert_eq!(std::fs::read(dir.path().join("v")).unwrap(), b"headbody");
    }
}

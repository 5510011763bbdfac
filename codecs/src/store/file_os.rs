//! The file operations whose system calls differ between platforms, in one place: positional
//! reads into memory that may be uninitialised, positional writes, "is this the same file",
//! and an exclusive lock on a whole file. Everything else in `store/` is portable `std`.
//!
//! Why: the release wheels are built for Linux, macOS and Windows (RELEASING.md). Linux and
//! macOS share the POSIX calls (`pread`, `flock`; Linux adds open-file-description locks,
//! which TensorStore takes and which also exclude threads of one process); Windows reads and
//! writes at an offset with `seek_read`/`seek_write`, locks with `LockFileEx` (`File::lock`)
//! and names a file by its volume and index.

use std::fs::File;
use std::io::ErrorKind;

/// Reads up to `len` bytes at `offset` into `ptr` in one system call (fewer at the end of
/// the file or when interrupted: the caller loops); returns the bytes read.
///
/// # Safety
/// `ptr .. ptr + len` must be writable and read by no one meanwhile; it may be uninitialised.
#[cfg(unix)]
pub unsafe fn read_at(
    file: &File,
    offset: u64,
    ptr: *mut u8,
    len: usize,
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let at = libc::off_t::try_from(offset).map_err(|_| {
        std::io::Error::new(ErrorKind::InvalidInput, "offset beyond what pread takes")
    })?;
    // SAFETY: `ptr .. ptr + len` is writable (the caller's contract), and the kernel writes
    // at most `len` bytes there.
    let n = unsafe { libc::pread(file.as_raw_fd(), ptr.cast(), len, at) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

/// As the Unix [`read_at`]. `seek_read` wants an initialised slice, so the bytes pass through
/// a zeroed bounce buffer of this thread (a copy the Unix path does not make).
///
/// # Safety
/// As the Unix [`read_at`].
#[cfg(windows)]
pub unsafe fn read_at(
    file: &File,
    offset: u64,
    ptr: *mut u8,
    len: usize,
) -> std::io::Result<usize> {
    use std::cell::RefCell;
    use std::os::windows::fs::FileExt;
    thread_local! {
        static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    const PIECE: usize = 1 << 20;
    BOUNCE.with(|bounce| {
        let mut bounce = bounce.borrow_mut();
        let want = len.min(PIECE);
        if bounce.len() < want {
            bounce.resize(want, 0);
        }
        let n = file.seek_read(&mut bounce[..want], offset)?;
        // SAFETY: `n <= want <= len`, inside the caller's writable range, which cannot
        // overlap this thread's own buffer.
        unsafe { std::ptr::copy_nonoverlapping(bounce.as_ptr(), ptr, n) };
        Ok(n)
    })
}

/// Writes all of `bytes` at `offset`.
pub fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    use std::os::unix::fs::FileExt;
    #[cfg(windows)]
    use std::os::windows::fs::FileExt;
    while !bytes.is_empty() {
        #[cfg(unix)]
        let written = file.write_at(bytes, offset);
        #[cfg(windows)]
        let written = file.seek_write(bytes, offset);
        match written {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether two open files are the same file (not merely two with the same name over time).
#[cfg(unix)]
pub fn same_file(a: &File, b: &File) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (a.metadata()?, b.metadata()?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Whether two open files are the same file: the same volume and file index.
#[cfg(windows)]
pub fn same_file(a: &File, b: &File) -> std::io::Result<bool> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    };
    let id = |f: &File| -> std::io::Result<(u32, u32, u32)> {
        // SAFETY: the struct is plain data, valid when zeroed.
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the handle is open for the call, which only fills `info`.
        if unsafe { GetFileInformationByHandle(f.as_raw_handle().cast(), &mut info) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((
            info.dwVolumeSerialNumber,
            info.nFileIndexHigh,
            info.nFileIndexLow,
        ))
    };
    Ok(id(a)? == id(b)?)
}

/// An exclusive lock on all of `file`, held until it is closed: on Linux an open-file-
/// description lock, so that threads of one process exclude each other too, and the lock
/// TensorStore takes; `flock` where the kernel or file system lacks them and on other Unixes;
/// `LockFileEx` on Windows.
pub fn lock_whole(file: &File) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    loop {
        use std::os::fd::AsRawFd;
        // SAFETY: a zeroed `flock` is a valid value; the fields that matter are set below.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: `file` is an open descriptor and `lock` a valid `flock` for this call.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &lock) } != -1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EINVAL | libc::EOPNOTSUPP) => break,
            _ => return Err(e),
        }
    }
    #[cfg(unix)]
    loop {
        use std::os::fd::AsRawFd;
        // SAFETY: `file` is an open descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != -1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    #[cfg(not(unix))]
    file.lock()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn positional_reads_and_writes() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[0u8; 16]).unwrap();
        write_all_at(&file, b"abcd", 6).unwrap();
        let mut out = [0xFFu8; 8];
        // SAFETY: `out` is writable for its 8 bytes.
        let n = unsafe { read_at(&file, 4, out.as_mut_ptr(), 8) }.unwrap();
        assert_eq!((n, &out), (8, b"\0\0abcd\0\0"));
        // SAFETY: as above; the file ends 2 bytes past offset 14.
        let n = unsafe { read_at(&file, 14, out.as_mut_ptr(), 8) }.unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn same_file_tells_files_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (p, q) = (dir.path().join("p"), dir.path().join("q"));
        let (a, b) = (File::create(&p).unwrap(), File::create(&q).unwrap());
        assert!(same_file(&a, &File::open(&p).unwrap()).unwrap());
        assert!(!same_file(&a, &b).unwrap());
        std::fs::rename(&q, &p).unwrap();
        assert!(!same_file(&a, &File::open(&p).unwrap()).unwrap());
    }
}

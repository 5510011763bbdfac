//! Reads from local files, steered clear of a slow case of the kernel's copy.
//!
//! The kernel copies a file's bytes out of the page cache with `rep movsb`, which runs at a
//! third of its speed when the destination is not in cache and lies a few bytes past the
//! source modulo 4 KiB (its stores then seem to alias the loads just ahead). Measured with
//! pread(2) of the benchmark's 32 MiB chunk files into a 1 GiB buffer on the benchmark
//! machine (a 2-core AMD EPYC VM, Linux 6.18): 2.6–2.7 GB/s when the destination's address
//! minus the file offset was 1–24 bytes modulo 4096, 6.4–8.1 GB/s at the other distances
//! tried (0 and fifteen from 32 to 4095). glibc places large buffers 16 bytes into a page,
//! so reading a file from its start into a fresh `Vec` hit exactly that. Reads at such a
//! distance now go through a small buffer of this thread, placed where both the kernel's
//! copy and `memmove`'s are fast. With the pieces streamed from files also cut to 128 KiB,
//! the 1 GiB read-all went from 0.26 to 0.09–0.10 s uncompressed, 0.31 to 0.25 s blosc,
//! 1.07–1.08 to 0.97–1.02 s zstd and 1.02–1.05 to 0.96 s sharded zstd. Small reads bounce
//! too: a 128 KiB piece read straight into the start of a pooled buffer that a blosc read
//! had left (20 MiB, 16 bytes into a page) kept the uncompressed read-all at 0.25 s instead
//! of 0.10 s.

use std::cell::RefCell;
use std::fs::File;
use std::io::ErrorKind;

use super::file_os;

/// Bytes per pread(2) through the bounce buffer, and the size of the pieces that callers
/// stream a file through: small enough to stay in any current x86 core's L2 cache.
pub const CACHED_READ: usize = 128 << 10;

/// The distances (destination address minus file offset, modulo a page) at which the
/// kernel's copy is slow, with a margin past the 24 bytes measured.
const SLOW_DISTANCE: std::ops::Range<u64> = 1..64;
const PAGE: usize = 4096;
const HALF_PAGE: u64 = 2048;

thread_local! {
    // Held only inside `read_at_most`, which calls nothing that could run another task on
    // this thread, so it is never borrowed twice.
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// True when the kernel would copy file bytes at `offset` to `ptr` at its slow speed.
#[must_use]
pub fn copies_slowly(ptr: *const u8, offset: u64) -> bool {
    SLOW_DISTANCE.contains(&((ptr as u64).wrapping_sub(offset) % PAGE as u64))
}

/// Reads up to `len` bytes at `offset` of `file` into `ptr`, stopping early only at the
/// end of the file; returns the bytes read.
///
/// # Safety
/// `ptr .. ptr + len` must be writable, and nothing may read it meanwhile. It may be
/// uninitialised: it is never made into a `&mut [u8]`.
pub unsafe fn read_at_most(
    file: &File,
    offset: u64,
    ptr: *mut u8,
    len: usize,
) -> std::io::Result<usize> {
    if !copies_slowly(ptr, offset) {
        // SAFETY: the caller's contract.
        return unsafe { pread_loop(file, offset, ptr, len) };
    }
    BOUNCE.with(|bounce| {
        let mut bounce = bounce.borrow_mut();
        if bounce.len() < CACHED_READ + 2 * PAGE {
            bounce.resize(CACHED_READ + 2 * PAGE, 0);
        }
        let page_start = bounce.as_ptr().align_offset(PAGE);
        let mut done = 0usize;
        while done < len {
            let at = offset + done as u64;
            let want = CACHED_READ.min(len - done);
            // Half a page past the file position, and so half a page (give or take the
            // destination's few bytes) before the destination: both copies, the kernel's
            // and `memmove`'s (which checks only for short absolute distances), run fast.
            let start = page_start + ((at + HALF_PAGE) % PAGE as u64) as usize;
            let into = bounce[start..start + want].as_mut_ptr();
            debug_assert!(!copies_slowly(into, at));
            debug_assert!(!copies_slowly(ptr.wrapping_add(done), into as u64));
            // SAFETY: `into .. into + want` lies inside `bounce`.
            let n = unsafe { pread_loop(file, at, into, want)? };
            // SAFETY: `done + n <= len`, inside the caller's writable range, which cannot
            // overlap this thread's own buffer.
            unsafe { std::ptr::copy_nonoverlapping(into, ptr.add(done), n) };
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    })
}

/// Positional reads until `len` bytes are read or the file ends; retries when interrupted.
///
/// # Safety
/// As [`read_at_most`].
unsafe fn pread_loop(file: &File, offset: u64, ptr: *mut u8, len: usize) -> std::io::Result<usize> {
    let mut done = 0usize;
    while done < len {
        // SAFETY: `ptr + done .. ptr + len` is writable (the caller's contract).
        match unsafe { file_os::read_at(file, offset + done as u64, ptr.add(done), len - done) } {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(len: usize) -> (File, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        (file, data)
    }

    /// Reads into a buffer placed `distance` bytes past the file offset modulo a page.
    fn read(file: &File, offset: u64, len: usize, distance: usize) -> (usize, Vec<u8>) {
        let mut room = vec![0xAAu8; len + 2 * PAGE];
        let base = room.as_ptr() as usize;
        let skip = (offset as usize + distance).wrapping_sub(base) % PAGE;
        let ptr = room[skip..].as_mut_ptr();
        assert_eq!(
            copies_slowly(ptr, offset),
            SLOW_DISTANCE.contains(&(distance as u64))
        );
        // SAFETY: `ptr .. ptr + len` is inside `room`.
        let n = unsafe { read_at_most(file, offset, ptr, len) }.unwrap();
        assert!(
            room[..skip].iter().all(|&b| b == 0xAA),
            "wrote before the target"
        );
        (n, room[skip..skip + len].to_vec())
    }

    #[test]
    fn reads_give_the_file_s_bytes_at_fast_and_slow_distances() {
        let total = 3 * CACHED_READ + 12_345;
        let (file, data) = file_of(total);
        for distance in [0, 1, 16, 63, 64, 100, 4095] {
            for (offset, len) in [
                (0, 10),
                (5, CACHED_READ),
                (0, CACHED_READ + 1),
                (1, 2 * CACHED_READ + 3),
                (777, total - 777),
                (0, total),
            ] {
                let (n, out) = read(&file, offset as u64, len, distance);
                assert_eq!(n, len, "offset {offset} len {len} distance {distance}");
                assert!(
                    out == data[offset..offset + len],
                    "offset {offset} len {len} distance {distance}"
                );
            }
        }
    }

    #[test]
    fn reads_stop_at_the_end_of_the_file_and_leave_the_rest_alone() {
        let total = 2 * CACHED_READ + 100;
        let (file, data) = file_of(total);
        for distance in [0, 16, 200] {
            for (offset, len) in [
                (0, total + 5000),
                (CACHED_READ + 50, 3 * CACHED_READ),
                (10, 200),
            ] {
                let (n, out) = read(&file, offset as u64, len, distance);
                let expect = len.min(total.saturating_sub(offset));
                assert_eq!(n, expect, "offset {offset} len {len} distance {distance}");
                assert!(out[..n] == data[offset..offset + n]);
                assert!(
                    out[n..].iter().all(|&b| b == 0xAA),
                    "wrote past the file's end"
                );
            }
            let (n, _) = read(&file, total as u64 + 1, 3 * CACHED_READ, distance);
            assert_eq!(n, 0);
        }
    }

    #[test]
    fn the_slow_distances_are_the_measured_ones() {
        let at = |d: usize| copies_slowly((8 * PAGE + d) as *const u8, 0);
        assert!(!at(0) && !at(64) && !at(2048) && !at(4095));
        assert!(at(1) && at(16) && at(24) && at(63));
        // Distance counts modulo a page and from the file offset.
        assert!(copies_slowly((5 * PAGE + 116) as *const u8, 100));
        assert!(!copies_slowly((5 * PAGE + 100) as *const u8, 100));
    }
}

//! Output buffers of reads, kept for the next read of about the same size instead of being
//! handed back to the kernel.
//!
//! Why: a fresh 1 GiB output costs 262,144 page faults, each a zeroed page and, on a VM with
//! free page reporting, possibly a fault in the host too (see [`crate::memory::first_touch`]). In
//! repeated reads within one process that is a third of an uncompressed read and most of its
//! spread: `read_into` a reused buffer took 0.28 s where `read` took 0.50 s (BENCHMARKS.md).
//! Small outputs pay the same per page: reading a GiB one 64³ inner chunk at a time and
//! holding the results (a batch, a benchmark's loop) faulted 150,000 pages per pass, because
//! the allocator hands memory back once all of it is freed. So when the last holder of a
//! read's buffer lets it go (its `Tensor` dropped, or the consumer of `into_dlpack()` freeing
//! it), the buffer is kept, already faulted in, and the next read of its size, or up to an
//! eighth smaller (the edge chunks of an array, selections a row apart), takes it. Reads
//! overwrite every byte of their output, so nothing of the old contents shows through, and a
//! taken buffer is again held by one owner only.
//!
//! Bounded: only buffers of at least [`MIN_BYTES`], at most [`limit`] bytes in all (the
//! oldest go first). Kept memory counts in the process's RSS until it is reused or pushed
//! out. `ZARRPIPE_RECYCLE_BYTES=N` sets the limit (`0`: never keep a buffer). A forked child
//! never touches its parent's pool (a parent thread may have been changing it at the fork).

use std::sync::OnceLock;

use crate::memory::kept_buffers::KeptBuffers;

/// Smaller buffers come from the allocator's free lists (glibc's threshold for giving a
/// block its own mapping, which is returned to the kernel when freed, starts here).
pub const MIN_BYTES: usize = 128 << 10;
/// The default limit: at most this much, and at most an eighth of physical memory.
const DEFAULT_LIMIT: usize = 2 << 30;

static POOL: KeptBuffers = KeptBuffers::new();

/// The most bytes the pool keeps.
#[must_use]
pub fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        match std::env::var("ZARRPIPE_RECYCLE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            Some(n) => n,
            None => DEFAULT_LIMIT.min(physical_memory() / 8),
        }
    })
}

fn physical_memory() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return (pages as usize).saturating_mul(size as usize);
        }
    }
    0
}

/// Keeps `buf` for a later read of `buf.capacity()` bytes (its contents do not matter), or
/// frees it when it is small, too large for the pool, or recycling is off.
pub fn give(buf: Vec<u8>) {
    if buf.capacity() < MIN_BYTES {
        return;
    }
    POOL.keep(buf, limit());
}

/// The largest capacity a kept buffer may have to serve a request of `len` bytes: an
/// eighth more.
#[must_use]
pub fn largest_fit(len: usize) -> usize {
    len.saturating_add(len / 8)
}

/// A kept buffer with room for `len` bytes and at most [`largest_fit`] (and length 0), its
/// pages faulted in: the smallest there is.
#[must_use]
pub fn take(len: usize) -> Option<Vec<u8>> {
    if len < MIN_BYTES {
        return None;
    }
    POOL.take(len..=largest_fit(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_serves_a_request_of_its_size_or_up_to_an_eighth_smaller() {
        let size = 2 * MIN_BYTES;
        if limit() < size {
            return; // recycling turned off in this environment
        }
        let buf: Vec<u8> = Vec::with_capacity(size);
        let at = buf.as_ptr();
        give(buf);
        assert!(take(size + 1).is_none(), "too small");
        assert!(take(MIN_BYTES).is_none(), "twice the request: too large");
        let again = take(size - MIN_BYTES / 8).expect("an eighth of a request more serves");
        assert_eq!(
            (again.as_ptr(), again.len(), again.capacity()),
            (at, 0, size)
        );
        assert!(take(size - MIN_BYTES / 8).is_none(), "given out once");
        give(again);
        assert_eq!(take(size).map(|b| b.as_ptr()), Some(at), "kept again");
        give(Vec::with_capacity(MIN_BYTES - 1)); // small: freed, not kept
        assert!(take(MIN_BYTES - 1).is_none());
        // The output of one 64³ uint16 inner chunk is kept.
        let inner = 64 * 64 * 64 * 2 + crate::memory::buffer::OUTPUT_ALIGN - 1;
        give(Vec::with_capacity(inner));
        assert_eq!(take(inner).map(|b| b.capacity()), Some(inner));
    }
}

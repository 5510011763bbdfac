//! Copies that write around the cache (non-temporal stores), for outputs too large to stay
//! in it.
//!
//! Why: placing a decoded row into a large output with ordinary stores first reads each
//! destination cache line from memory (read-for-ownership), then writes it back, and the
//! rows of a chunk are short runs far apart (512 bytes every 2 KiB in the benchmark's
//! 256³ chunks, 128 bytes for 64³ inner chunks), which defeats the prefetcher. Measured on
//! this project's 2-vCPU benchmark machine, scattering 1 GiB in 512-byte rows from an
//! L2-resident piece: `memcpy` 0.28 s, streaming stores 0.05 s (128-byte rows: 0.52 s
//! against 0.05 s). Large allocations start 16 bytes into a page (glibc's chunk header),
//! so rows are seldom line-aligned: everything from the first 16-byte boundary is streamed,
//! partial lines too, which measured faster than copying the partial lines ordinarily
//! (C model, 2 GiB at that offset: 128-byte rows 0.69 s against 0.74 s, 512-byte rows
//! 0.22 s against 0.37 s; `memcpy` 1.01 s and 0.62 s).
//!
//! Streaming stores are weakly ordered: the thread that issued them must call [`fence`]
//! before anyone else (or anything else) reads those bytes.

/// Copies `src` to `dst` (which must not overlap it), streaming from its first 16-byte
/// boundary on.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes. The caller calls [`fence`] on this
/// thread before the bytes are read.
#[inline]
pub unsafe fn copy(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller; SSE2 is part of the x86-64 baseline.
    unsafe {
        x86::copy(dst, src);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from the caller.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
    }
}

/// Orders this thread's streaming stores before its later stores (and so before whatever
/// signals that the work is done).
#[inline]
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};

    /// `_mm_stream_si128` writes 16 aligned bytes.
    const UNIT: usize = 16;

    /// # Safety
    /// As [`crate::codec::decode::copy`].
    #[inline]
    pub unsafe fn copy(dst: *mut u8, src: &[u8]) {
        let n = src.len();
        let head = dst.align_offset(UNIT).min(n);
        let body = (n - head) / UNIT * UNIT;
        // SAFETY: every pointer below stays within `dst[..n]` and `src[..n]` (the caller's
        // contract); the streamed addresses are 16-byte aligned, as `_mm_stream_si128` needs.
        unsafe {
            if head > 0 {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
            }
            let mut i = head;
            while i < head + body {
                let v = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm_stream_si128(dst.add(i).cast::<__m128i>(), v);
                i += UNIT;
            }
            if i < n {
                std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), n - i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_alignment_exactly() {
        let src: Vec<u8> = (0..600u32).map(|i| (i * 7 + 3) as u8).collect();
        for start in [0, 1, 15, 16, 63, 64, 65] {
            for len in [0, 1, 15, 63, 64, 65, 127, 128, 200, 511, 512] {
                let mut dst = vec![0xEEu8; 700];
                // SAFETY: `start + len <= 700`; fenced before the read below.
                unsafe { copy(dst.as_mut_ptr().add(start), &src[..len]) };
                fence();
                assert_eq!(
                    &dst[start..start + len],
                    &src[..len],
                    "start {start} len {len}"
                );
                assert!(dst[..start].iter().all(|&b| b == 0xEE));
                assert!(dst[start + len..].iter().all(|&b| b == 0xEE));
            }
        }
    }
}

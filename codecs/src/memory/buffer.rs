//! Allocation of the buffers zarrpipe hands out: fallible (a too-large read is a
//! `MemoryError`, not an abort) and never zero-filled when every byte will be written anyway.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::memory::first_touch::PARALLEL_AT_LEAST;

/// An empty `Vec` with room for exactly `len` bytes, or `OutOfMemory`.
pub fn try_with_capacity(len: usize, what: &str) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    try_room_for(&mut v, len, what)?;
    Ok(v)
}

/// Makes room in `v` for `len` bytes in all (a pooled buffer may have it already), or
/// `OutOfMemory` saying `what` needed them.
pub fn try_room_for(v: &mut Vec<u8>, len: usize, what: &str) -> Result<()> {
    v.try_reserve_exact(len.saturating_sub(v.len()))
        .map_err(|_| Error::OutOfMemory {
            bytes: len as u128,
            what: what.to_owned(),
        })
}

/// Like [`try_with_capacity`], for an output buffer about to be filled once (every byte is
/// written before it is read): a kept buffer of an earlier read of this size when there is
/// one ([`crate::memory::recycle`]), else fresh memory faulted in first, on all pool threads, with
/// the page size that is cheap right now ([`crate::memory::first_touch`]). Call it on the pool.
pub fn try_output_buffer(len: usize, what: &str) -> Result<Vec<u8>> {
    // A kept output of an earlier read (see `recycle`): its pages are in already.
    if let Some(v) = crate::memory::recycle::take(len) {
        return Ok(v);
    }
    let mut v = try_with_capacity(len, what)?;
    // SAFETY: fresh capacity of `len` bytes that nothing has touched or shared yet.
    unsafe { crate::memory::first_touch::populate(v.as_mut_ptr(), len) };
    Ok(v)
}

/// Where every fresh read's output starts: a multiple of this many bytes. XLA's CPU client
/// (JAX) adopts a DLPack buffer without a copy only at this alignment (it copies any other),
/// and it is a cache line, where streaming stores and SIMD loads like to start. The
/// allocator alone gives 16 (and large blocks start 16 bytes into a page).
pub const OUTPUT_ALIGN: usize = 64;

/// A fresh read's output: `len` bytes starting at a multiple of [`OUTPUT_ALIGN`] inside
/// an allocation from [`try_output_buffer`], to be written once and handed out as `Bytes`
/// that nobody else holds.
pub struct AlignedOutput {
    /// The allocation; its first `skip` bytes (zeros, under [`OUTPUT_ALIGN`]) are not data.
    buf: Vec<u8>,
    skip: usize,
    len: usize,
}

impl AlignedOutput {
    /// Room for `len` bytes (see [`try_output_buffer`]), or `OutOfMemory` naming `what`.
    /// Call it on the pool.
    pub fn new(len: usize, what: &str) -> Result<Self> {
        let total = len
            .checked_add(OUTPUT_ALIGN - 1)
            .ok_or_else(|| Error::OutOfMemory {
                bytes: len as u128,
                what: what.to_owned(),
            })?;
        let mut buf = try_output_buffer(total, what)?;
        let skip = buf.as_ptr().align_offset(OUTPUT_ALIGN);
        // Initialised, so that the `Vec` never claims bytes nobody wrote.
        buf.resize(skip, 0);
        Ok(Self { buf, skip, len })
    }

    /// The start of the `len` bytes to write (a multiple of [`OUTPUT_ALIGN`]).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.uninit_mut().as_mut_ptr().cast()
    }

    /// The `len` bytes to write, not initialised yet.
    pub fn uninit_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        &mut self.buf.spare_capacity_mut()[..self.len]
    }

    /// The data as `Bytes` that nobody else holds: `Bytes::try_into_mut` takes it without a
    /// copy, and [`allocation_of`] gives its allocation back for reuse.
    ///
    /// # Safety
    /// All `len` bytes from [`Self::as_mut_ptr`] must have been written.
    pub unsafe fn into_bytes(mut self) -> Bytes {
        // SAFETY: the first `skip` bytes were zeroed in `new`, the next `len` the caller
        // wrote, and `skip + len` is within the capacity `len + OUTPUT_ALIGN - 1`.
        unsafe { self.buf.set_len(self.skip + self.len) };
        Bytes::from(self.buf).slice(self.skip..self.skip + self.len)
    }
}

/// An output for a caller to fill itself (zarr-python's output array, made by
/// `zarrpipe.NDBuffer`): the memory of an [`AlignedOutput`] — a kept output of an earlier
/// read, whose pages are in already, else fresh memory faulted in on the pool threads —
/// zeroed on the pool threads, so that it is handed out initialised. `None` where that saves
/// nothing: outputs are not kept (`ZARRPIPE_RECYCLE_BYTES=0`, or `len` over the limit), or
/// `len` is under [`PARALLEL_AT_LEAST`], below which a fresh buffer is not faulted in first
/// either. Call it on the pool.
pub fn zeroed_output(len: usize, what: &str) -> Result<Option<Bytes>> {
    if len < PARALLEL_AT_LEAST || len > crate::memory::recycle::limit() {
        return Ok(None);
    }
    let mut out = AlignedOutput::new(len, what)?;
    out.uninit_mut()
        .par_chunks_mut(ZERO_STEP)
        .for_each(|part| part.fill(MaybeUninit::new(0)));
    // SAFETY: every one of the `len` bytes was just written.
    Ok(Some(unsafe { out.into_bytes() }))
}

/// Bytes zeroed per task by [`zeroed_output`].
const ZERO_STEP: usize = 4 << 20;

/// The whole allocation of a read's output taken back from its last holder (its contents
/// dropped), for [`crate::memory::recycle`]; `None` if `owned` is not a read's output (whose
/// allocation is its length plus less than [`OUTPUT_ALIGN`] bytes, or a kept buffer that
/// served that request: at most an eighth more).
#[must_use]
pub fn allocation_of(mut owned: BytesMut) -> Option<Vec<u8>> {
    let len = owned.len();
    // Emptied first, so taking the allocation copies nothing to its front.
    owned.clear();
    let v = Vec::from(owned);
    let most = crate::memory::recycle::largest_fit(len + OUTPUT_ALIGN - 1);
    (v.capacity() >= len && v.capacity() <= most).then_some(v)
}

/// A fresh copy of `data`.
pub fn try_copy(data: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut v = try_with_capacity(data.len(), what)?;
    v.extend_from_slice(data);
    Ok(v)
}

/// The byte length of `shape` elements of `elem_size` bytes, checked for overflow.
pub fn checked_nbytes(shape: &[u64], elem_size: usize) -> Result<usize> {
    let elements = shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(u128::from(d)));
    let bytes = elements.and_then(|e| e.checked_mul(elem_size as u128));
    match bytes
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| isize::try_from(b).is_ok())
    {
        Some(b) => Ok(b),
        None => Err(Error::OutOfMemory {
            bytes: bytes.unwrap_or(u128::MAX),
            what: format!("an array of shape {shape:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_start_aligned_and_come_back_whole_for_reuse() {
        for len in [1, 63, 64, 1000, 40 << 20] {
            let mut out = AlignedOutput::new(len, "test").unwrap();
            let at = out.as_mut_ptr();
            assert_eq!(at as usize % OUTPUT_ALIGN, 0, "len {len}");
            // SAFETY: `len` bytes from `at` are the output's to write.
            unsafe { std::ptr::write_bytes(at, 7, len) };
            // SAFETY: all `len` bytes were written just above.
            let bytes = unsafe { out.into_bytes() };
            assert_eq!(bytes.as_ptr(), at.cast_const());
            assert_eq!(bytes.len(), len);
            assert!(bytes.iter().all(|&b| b == 7));
            let owned = bytes
                .try_into_mut()
                .expect("nobody else holds a fresh output");
            assert_eq!(owned.as_ptr(), at.cast_const(), "taken without a copy");
            let whole = allocation_of(owned).expect("a read's output");
            assert_eq!(
                whole.capacity(),
                len + OUTPUT_ALIGN - 1,
                "the whole allocation"
            );
            assert!(whole.is_empty());
        }
        assert!(
            allocation_of(BytesMut::from(&[0u8; 300][..]).split_off(100)).is_none(),
            "a slice of a larger buffer is not a read's output"
        );
    }

    #[test]
    fn outputs_for_callers_are_zeroed_even_when_kept_memory_held_data() {
        let len = PARALLEL_AT_LEAST + 12345;
        assert!(zeroed_output(PARALLEL_AT_LEAST - 1, "test")
            .unwrap()
            .is_none());
        if crate::memory::recycle::limit() < 2 * len {
            return; // outputs not kept in this environment
        }
        let mut out = AlignedOutput::new(len, "test").unwrap();
        // SAFETY: `len` bytes from the start are the output's to write.
        unsafe { std::ptr::write_bytes(out.as_mut_ptr(), 7, len) };
        // SAFETY: written just above.
        let used = unsafe { out.into_bytes() };
        let at = used.as_ptr();
        crate::memory::recycle::give(allocation_of(used.try_into_mut().unwrap()).unwrap());
        let fresh = zeroed_output(len, "test").unwrap().expect("a large output");
        assert_eq!(fresh.len(), len);
        assert_eq!(fresh.as_ptr(), at, "the kept output served it");
        assert!(fresh.iter().all(|&b| b == 0), "what it held is gone");
    }

    #[test]
    fn huge_requests_are_errors_not_aborts() {
        assert!(matches!(
            try_with_capacity(usize::MAX / 2, "test"),
            Err(Error::OutOfMemory { .. })
        ));
        assert!(matches!(
            AlignedOutput::new(usize::MAX - 10, "test"),
            Err(Error::OutOfMemory { .. })
        ));
        assert!(matches!(
            checked_nbytes(&[u64::MAX, 4], 8),
            Err(Error::OutOfMemory { .. })
        ));
        assert_eq!(checked_nbytes(&[3, 4], 2).unwrap(), 24);
        assert_eq!(checked_nbytes(&[], 8).unwrap(), 8);
    }
}

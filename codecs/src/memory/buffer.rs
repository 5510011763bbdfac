//! Allocation of the buffers zarrpipe hands out: fallible (a too-large read is a
//! `MemoryError`, not an abort) and never zero-filled when every byte will be written anyway.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};

use crate::error::{Error, Result};

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

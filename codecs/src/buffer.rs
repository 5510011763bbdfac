//! Allocation of the buffers zarrpipe hands out: fallible (a too-large read is a
//! `MemoryError`, not an abort) and never zero-filled when every byte will be written anyway.

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
/// one ([`crate::recycle`]), else fresh memory faulted in first, on all pool threads, with
/// the page size that is cheap right now ([`crate::first_touch`]). Call it on the pool.
pub fn try_output_buffer(len: usize, what: &str) -> Result<Vec<u8>> {
    // A kept output of an earlier read (see `recycle`): its pages are in already.
    if let Some(v) = crate::recycle::take(len) {
        return Ok(v);
    }
    let mut v = try_with_capacity(len, what)?;
    // SAFETY: fresh capacity of `len` bytes that nothing has touched or shared yet.
    unsafe { crate::first_touch::populate(v.as_mut_ptr(), len) };
    Ok(v)
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
    fn huge_requests_are_errors_not_aborts() {
        assert!(matches!(
            try_with_capacity(usize::MAX / 2, "test"),
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

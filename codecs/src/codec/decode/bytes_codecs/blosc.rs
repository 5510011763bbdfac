//! blosc (v1 frames), through blosc's C library: the header is checked before anything is
//! allocated.

use super::{DecodeError, PIECE};
use crate::codec::decode::scatter::Scatter;
use crate::memory::out::{RawTarget, SinkError};
use crate::memory::scratch::Scratch;

pub(super) struct BloscHeader {
    pub(super) nbytes: usize,
    typesize: usize,
    blocksize: usize,
}

/// Validates a blosc frame against its own length before anything trusts its header.
pub(super) fn blosc_header(src: &[u8]) -> Result<BloscHeader, DecodeError> {
    const HEADER: usize = 16;
    if src.len() < HEADER {
        return Err(DecodeError::Corrupt(format!(
            "blosc: {} bytes is shorter than the 16-byte header",
            src.len()
        )));
    }
    let mut nbytes = 0usize;
    // SAFETY: `src` is a valid slice; c-blosc reads at most `src.len()` bytes of it.
    let ok = unsafe {
        blosc_src::blosc_cbuffer_validate(src.as_ptr().cast(), src.len(), &raw mut nbytes)
    };
    if ok != 0 {
        return Err(DecodeError::Corrupt(
            "blosc: header is inconsistent with the frame length".into(),
        ));
    }
    let typesize = usize::from(src[3]);
    let blocksize = u32::from_le_bytes([src[8], src[9], src[10], src[11]]) as usize;
    // A buffer smaller than its typesize gets blocks shorter than typesize (c-blosc writes
    // a blocksize of 1 for 2 bytes of typesize 4): valid, and decoded whole below.
    if typesize == 0
        || (nbytes > 0
            && (blocksize == 0 || !(blocksize.is_multiple_of(typesize) || nbytes < typesize)))
    {
        return Err(DecodeError::Corrupt(
            "blosc: invalid typesize or blocksize".into(),
        ));
    }
    Ok(BloscHeader {
        nbytes,
        typesize,
        blocksize,
    })
}

/// Decompresses a validated frame of `nbytes` into `target` (at least `nbytes` long).
pub(super) fn blosc_decompress(
    src: &[u8],
    target: &RawTarget,
    nbytes: usize,
    threads: usize,
) -> Result<(), DecodeError> {
    if nbytes == 0 {
        return Ok(());
    }
    // SAFETY: the frame was validated against `src.len()`; `target` has room for `nbytes`
    // and c-blosc writes no more than `destsize`.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            src.as_ptr().cast(),
            target.ptr.cast(),
            target.len,
            i32::try_from(threads.clamp(1, 64)).unwrap_or(1),
        )
    };
    if usize::try_from(n).ok() == Some(nbytes) {
        Ok(())
    } else {
        Err(DecodeError::Corrupt(format!(
            "blosc: decompression failed ({n})"
        )))
    }
}

pub(super) fn blosc_stream(
    src: &[u8],
    sink: &mut Scatter<'_>,
    threads: usize,
) -> Result<(), DecodeError> {
    let h = blosc_header(src)?;
    let expected = sink.expected();
    if h.nbytes != expected {
        return Err(if h.nbytes > expected {
            SinkError::TooLong { expected }
        } else {
            SinkError::TooShort {
                expected,
                got: h.nbytes,
            }
        }
        .into());
    }
    if let Some(target) = sink.direct_target() {
        // Straight into place, with blosc's own threads when this chunk is the whole read.
        blosc_decompress(src, &target, h.nbytes, threads)?;
        sink.assume_written(h.nbytes);
        return Ok(());
    }
    // Decode a few blocks at a time (blosc_getitem), so memory stays at a few blocks.
    let blocks = (PIECE / h.blocksize.max(1)).max(1);
    let step = h.blocksize * blocks;
    let mut piece = Scratch::fitting(PIECE);
    if h.nbytes.is_multiple_of(h.typesize)
        && step.is_multiple_of(h.typesize)
        && step.is_multiple_of(sink.elem())
        && i32::try_from(h.nbytes).is_ok()
    {
        piece.resize(step.min(h.nbytes), 0);
        let mut start = 0;
        while start < h.nbytes {
            let len = step.min(h.nbytes - start);
            // SAFETY: validated frame; `piece` has room for `len` bytes; start and count
            // are in items of `typesize` and inside `nbytes`, which fits in i32.
            let n = unsafe {
                blosc_src::blosc_getitem(
                    src.as_ptr().cast(),
                    (start / h.typesize) as i32,
                    (len / h.typesize) as i32,
                    piece.as_mut_ptr().cast(),
                )
            };
            if usize::try_from(n).ok() != Some(len) {
                return Err(DecodeError::Corrupt(format!(
                    "blosc: decompression failed ({n})"
                )));
            }
            sink.write(&piece[..len])?;
            start += len;
        }
    } else {
        piece.resize(h.nbytes, 0);
        let target = RawTarget {
            ptr: piece.as_mut_ptr(),
            len: h.nbytes,
        };
        blosc_decompress(src, &target, h.nbytes, 1)?;
        sink.write(&piece[..h.nbytes])?;
    }
    Ok(())
}

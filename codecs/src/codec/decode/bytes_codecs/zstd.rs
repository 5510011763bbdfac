//! zstd: streamed into the scatter, decoded whole when small, through a window buffer when a
//! frame asks for one as large as the chunk, and read from a file piece by piece.

use std::cell::RefCell;

use zstd::zstd_safe::{self, DCtx, InBuffer, OutBuffer, ResetDirective, WriteBuf};

use super::{room_for, DecodeError, PIECE};
use crate::codec::decode::arriving::{Arrived, Arriving};
use crate::codec::decode::scatter::Scatter;
use crate::memory::out::{RawTarget, SinkError};
use crate::memory::scratch::Scratch;

thread_local! {
    /// One decompression context per thread, reused: creating one costs ~100 KiB of setup.
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's zstd context, reset and with its window capped so that a
/// frame header claiming a huge window cannot make zstd allocate it.
pub(super) fn with_dctx<T>(
    expected: usize,
    f: impl FnOnce(&mut DCtx<'static>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut dctx = DCTX
        .with(|c| c.borrow_mut().take())
        .unwrap_or_else(DCtx::create);
    // Legitimate frames for an n-byte chunk need a window of at most ~n; 2^24 leaves room
    // for streaming compressors that do not know the size up front.
    let window_log = (usize::BITS - expected.max(1).leading_zeros()).clamp(24, 31);
    let setup = dctx
        .reset(ResetDirective::SessionAndParameters)
        .and_then(|_| dctx.set_parameter(zstd_safe::DParameter::WindowLogMax(window_log)));
    let result = match setup {
        Ok(_) => f(&mut dctx),
        Err(code) => Err(zstd_error(code)),
    };
    DCTX.with(|c| *c.borrow_mut() = Some(dctx));
    result
}

fn zstd_error(code: usize) -> DecodeError {
    DecodeError::Corrupt(format!("zstd: {}", zstd_safe::get_error_name(code)))
}

/// Decompresses into `piece` until it is full or the input is used up.
/// Returns the bytes written and whether the input ended at a frame boundary.
pub(super) fn zstd_fill(
    dctx: &mut DCtx<'static>,
    input: &mut InBuffer<'_>,
    piece: &mut [u8],
) -> Result<(usize, bool), DecodeError> {
    let total = input.src.len();
    let mut out = OutBuffer::around(piece);
    while out.pos() < out.capacity() {
        let (in_before, out_before) = (input.pos(), out.pos());
        let hint = dctx
            .decompress_stream(&mut out, input)
            .map_err(zstd_error)?;
        if hint == 0 && input.pos() == total {
            return Ok((out.pos(), true));
        }
        if input.pos() == in_before && out.pos() == out_before {
            return Err(DecodeError::Corrupt("zstd: truncated frame".into()));
        }
    }
    Ok((out.pos(), false))
}

/// Writes through a raw pointer, so zstd can fill memory that is not initialised yet.
struct RawBuf<'a> {
    target: &'a RawTarget,
    filled: usize,
}

// SAFETY: `as_mut_ptr` points to `capacity` writable bytes (RawTarget's contract);
// `as_slice` only exposes the `filled` bytes zstd reported writing.
unsafe impl WriteBuf for RawBuf<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes were written by zstd.
        unsafe { std::slice::from_raw_parts(self.target.ptr, self.filled) }
    }
    fn capacity(&self) -> usize {
        self.target.len
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.target.ptr
    }
    unsafe fn filled_until(&mut self, n: usize) {
        self.filled = n;
    }
}

/// Chunks up to this size are decompressed whole into a pooled buffer and then scattered:
/// it stays in cache, and zstd's one-shot mode writes straight into it, where streaming
/// decodes each block into its window and copies it out again. Measured on the benchmark's
/// zstd arrays (2 threads, 1 GiB read-all): 64³ uint16 inner chunks (512 KiB) 4 % faster
/// whole, 256³ chunks (32 MiB, out of cache) 10 % slower whole than streamed.
pub const WHOLE_AT_MOST: usize = 1 << 20;

pub(super) fn zstd_stream(src: &[u8], sink: &mut Scatter<'_>) -> Result<(), DecodeError> {
    let expected = sink.expected();
    if sink.direct_target().is_none() && decode_through_window(src, expected) {
        // The input goes through the same small buffer as a file's: zstd's progress is
        // then a few blocks per call, which are scattered while in cache.
        let copy = |offset: u64, buf: &mut [u8]| -> Result<(), std::convert::Infallible> {
            let at = offset as usize;
            buf.copy_from_slice(&src[at..at + buf.len()]);
            Ok(())
        };
        return zstd_window_decode(src.len(), copy, sink).map(|copied| match copied {
            Ok(()) => (),
            Err(never) => match never {},
        });
    }
    with_dctx(sink.expected(), |dctx| {
        if let Some(target) = sink.direct_target() {
            // One shot into place: zstd refuses a frame larger than the target up front.
            let mut buf = RawBuf {
                target: &target,
                filled: 0,
            };
            let n = dctx.decompress(&mut buf, src).map_err(zstd_error)?;
            sink.assume_written(n);
            return Ok(());
        }
        if sink.expected() <= WHOLE_AT_MOST {
            let expected = sink.expected();
            let mut whole = Scratch::fitting(expected);
            // Exactly the chunk's size, whatever capacity the pooled buffer has: zstd refuses
            // a frame that decodes to more.
            let target = room_for(&mut whole, expected)?;
            let mut buf = RawBuf {
                target: &target,
                filled: 0,
            };
            let n = dctx.decompress(&mut buf, src).map_err(zstd_error)?;
            // SAFETY: zstd wrote the first `n <= expected` bytes of the reserved capacity.
            unsafe { whole.set_len(n) };
            return Ok(sink.write(&whole)?);
        }
        let mut input = InBuffer::around(src);
        let mut piece = Scratch::fitting(PIECE);
        piece.resize(PIECE, 0);
        loop {
            let (n, done) = zstd_fill(dctx, &mut input, &mut piece)?;
            sink.write(&piece[..n])?;
            if done {
                return Ok(());
            }
        }
    })
}

/// Bytes of a stored zstd chunk read from its file at a time by [`zstd_stream_read`]: few
/// enough that the kernel copies them into a buffer in cache (see `local_read`).
const INPUT_PIECE: usize = crate::store::local_read::CACHED_READ;

/// Decompresses `len` bytes of zstd frames that `fill(offset, buf)` reads from a file piece
/// by piece into `sink`: the file's bytes pass through a buffer that stays in cache, where
/// reading the whole chunk first writes it all to memory and zstd then reads it back.
/// A storage error from `fill` is returned as it is; a decoding error names `key`.
pub fn zstd_stream_read(
    len: usize,
    mut fill: impl FnMut(u64, &mut [u8]) -> crate::error::Result<()>,
    sink: &mut Scatter<'_>,
    key: &str,
) -> crate::error::Result<()> {
    let expected = sink.expected();
    let mut head = [0u8; FRAME_HEADER_MAX];
    let head = &mut head[..FRAME_HEADER_MAX.min(len)];
    if expected > WHOLE_AT_MOST && !head.is_empty() {
        fill(0, head)?;
    }
    if decode_through_window(head, expected) {
        return match zstd_window_decode(len, fill, sink) {
            Ok(read) => read,
            Err(e) => Err(e.at(key)),
        };
    }
    let mut input = Scratch::fitting(INPUT_PIECE);
    input.resize(INPUT_PIECE.min(len).max(1), 0);
    let mut piece = Scratch::fitting(PIECE);
    piece.resize(PIECE, 0);
    let mut storage = None;
    let decoded = with_dctx(sink.expected(), |dctx| {
        let (mut read, mut avail, mut pos) = (0usize, 0usize, 0usize);
        // Bytes of `piece` filled: it goes to the sink only whole (or at the end), since a
        // call may stop mid-element when the input piece ends.
        let mut filled = 0usize;
        loop {
            if pos == avail && read < len {
                let n = INPUT_PIECE.min(len - read);
                if let Err(e) = fill(read as u64, &mut input[..n]) {
                    storage = Some(e);
                    return Ok(());
                }
                (read, avail, pos) = (read + n, n, 0);
            }
            let mut src = InBuffer::around(&input[..avail]);
            src.set_pos(pos);
            let mut out = OutBuffer::around(&mut piece[filled..]);
            let hint = dctx
                .decompress_stream(&mut out, &mut src)
                .map_err(zstd_error)?;
            let produced = out.pos();
            let progressed = src.pos() != pos || produced > 0;
            pos = src.pos();
            filled += produced;
            let all_read = read == len && pos == avail;
            let done = hint == 0 && all_read;
            if filled == piece.len() || done {
                sink.write(&piece[..filled])?;
                filled = 0;
            }
            if done {
                return Ok(());
            }
            if !progressed && (all_read || pos < avail) {
                return Err(DecodeError::Corrupt("zstd: truncated frame".into()));
            }
        }
    });
    match (storage, decoded) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(e.at(key)),
        (None, Ok(())) => Ok(()),
    }
}

/// Chunks up to this size may decode through a buffer of their own size (see
/// [`decode_through_window`]).
pub const WINDOW_AT_MOST: usize = 64 << 20;

/// The longest zstd frame header: magic, descriptor, window, dictionary id, content size.
const FRAME_HEADER_MAX: usize = 18;

/// Whether a scattered zstd chunk of `expected` bytes, whose encoding starts with `head`,
/// decodes through a buffer of its own size ([`zstd_window_decode`]): when it is too large
/// to decode whole in cache, and its first frame's window is as large as the chunk, so that
/// streaming would hold a buffer as large anyway. A frame with a smaller window (zstd's
/// compressors choose 2 MiB at level 3 for a large input) streams through it instead: a
/// buffer of the chunk's size on every pool thread would cost more memory than it saves
/// time (+60 MiB of peak RSS for the benchmark's 32 MiB chunks on two threads, for 4 %).
fn decode_through_window(head: &[u8], expected: usize) -> bool {
    expected > WHOLE_AT_MOST
        && expected <= WINDOW_AT_MOST
        && frame_window(head).is_some_and(|w| w >= expected as u64)
}

/// The window a zstd frame declares (for a single-segment frame, its content size), read
/// from its header at the start of `head`; `None` for anything else (a skippable frame, a
/// header cut short, not zstd).
fn frame_window(head: &[u8]) -> Option<u64> {
    const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    let (magic, rest) = head.split_first_chunk::<4>()?;
    let (&descriptor, rest) = rest.split_first()?;
    if *magic != MAGIC {
        return None;
    }
    if descriptor & 0x20 == 0 {
        let &window = rest.first()?;
        let base = 1u64 << (10 + (window >> 3));
        return Some(base + base / 8 * u64::from(window & 7));
    }
    // Single segment: no window byte; the dictionary id, then the content size.
    let dict_len = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let size_len = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let field = rest.get(dict_len..dict_len + size_len)?;
    let mut le = [0u8; 8];
    le[..size_len].copy_from_slice(field);
    let size = u64::from_le_bytes(le);
    Some(if size_len == 2 { size + 256 } else { size })
}

/// Decodes `len` bytes of zstd frames, which `fill(offset, buf)` supplies piece by piece,
/// with zstd writing straight into a pooled buffer of the chunk's size (its stable output
/// mode, as in one-shot decoding), and scatters each block while it is still in cache.
/// Streaming through small pieces instead makes zstd decode each block into its own window
/// and copy it out again. A/B, the two ways alternating in one process: 512 MiB in 2 MiB
/// single-segment chunks (zarr-python, level 3) 0.437 s against 0.448 on two threads, 0.866
/// against 0.887 on one; the benchmark's 32 MiB chunks (2 MiB windows, which
/// [`decode_through_window`] leaves to streaming) 0.992 against 1.038 on two threads.
/// The first error of `fill` stops the decode and is returned as it is, in `Ok(Err(..))`.
fn zstd_window_decode<E>(
    len: usize,
    mut fill: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    sink: &mut Scatter<'_>,
) -> Result<Result<(), E>, DecodeError> {
    let expected = sink.expected();
    let elem = sink.elem().max(1);
    let mut window = Scratch::fitting(expected);
    let target = room_for(&mut window, expected)?;
    let mut input = Scratch::fitting(INPUT_PIECE);
    input.resize(INPUT_PIECE.min(len).max(1), 0);
    with_dctx(expected, |dctx| {
        dctx.set_parameter(zstd_safe::DParameter::StableOutBuffer(true))
            .map_err(zstd_error)?;
        let mut out = RawBuf {
            target: &target,
            filled: 0,
        };
        // Bytes of the input read, in `input`, and used; bytes of the window scattered.
        let (mut read, mut avail, mut pos, mut sent) = (0usize, 0usize, 0usize, 0usize);
        loop {
            if pos == avail && read < len {
                let n = INPUT_PIECE.min(len - read);
                if let Err(e) = fill(read as u64, &mut input[..n]) {
                    return Ok(Err(e));
                }
                (read, avail, pos) = (read + n, n, 0);
            }
            let mut src = InBuffer::around(&input[..avail]);
            src.set_pos(pos);
            let written = out.filled;
            let mut dst = OutBuffer::around_pos(&mut out, written);
            let hint = dctx.decompress_stream(&mut dst, &mut src);
            let progressed = src.pos() != pos || dst.pos() != written;
            pos = src.pos();
            let full = out.filled == expected;
            let hint = match hint {
                Ok(hint) => hint,
                // More output than the chunk holds: zstd refuses it at the window's end.
                Err(_) if full => return Err(SinkError::TooLong { expected }.into()),
                Err(code) => return Err(zstd_error(code)),
            };
            let all_read = read == len && pos == avail;
            let done = hint == 0 && all_read;
            // Whole elements only, except at the end (a partial one is the sink's to report).
            let upto = if done {
                out.filled
            } else {
                out.filled - (out.filled - sent) % elem
            };
            if upto > sent {
                sink.write(&out.as_slice()[sent..upto])?;
                sent = upto;
            }
            if done {
                return Ok(Ok(()));
            }
            if !progressed && (all_read || pos < avail) {
                if full {
                    return Err(SinkError::TooLong { expected }.into());
                }
                return Err(DecodeError::Corrupt("zstd: truncated frame".into()));
            }
        }
    })
}

/// Decompresses zstd frames into `target` (the whole chunk, contiguous) as their bytes
/// arrive from a reader on another thread, each piece decoded as soon as it lands. zstd
/// writes straight into `target` (its stable output mode), as in one-shot decoding.
/// Returns the bytes written, or `None` if the reader failed (its error is the read's).
pub fn zstd_decode_arriving(
    input: &Arriving<'_>,
    target: &RawTarget,
) -> Result<Option<usize>, DecodeError> {
    with_dctx(target.len, |dctx| {
        dctx.set_parameter(zstd_safe::DParameter::StableOutBuffer(true))
            .map_err(zstd_error)?;
        let mut out = RawBuf { target, filled: 0 };
        let mut pos = 0usize;
        loop {
            let (bytes, complete) = match input.wait_past(pos) {
                Arrived::Failed => return Ok(None),
                Arrived::Prefix { bytes, complete } => (bytes, complete),
            };
            let mut src = InBuffer::around(bytes);
            src.set_pos(pos);
            let written = out.filled;
            let mut dst = OutBuffer::around_pos(&mut out, written);
            let hint = dctx
                .decompress_stream(&mut dst, &mut src)
                .map_err(zstd_error)?;
            let progressed = src.pos() != pos || dst.pos() != written;
            pos = src.pos();
            if hint == 0 && complete && pos == bytes.len() {
                return Ok(Some(out.filled));
            }
            if !progressed && pos < bytes.len() {
                return Err(SinkError::TooLong {
                    expected: target.len,
                }
                .into());
            }
            if !progressed && complete {
                return Err(DecodeError::Corrupt("zstd: truncated frame".into()));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as zstd's streaming compressor writes it: no content size, the window of
    /// `window_log`.
    fn streamed_frame(data: &[u8], window_log: u32) -> Vec<u8> {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.window_log(window_log).unwrap();
        std::io::Write::write_all(&mut e, data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn frame_windows_come_from_the_header() {
        // One-shot compression of a known size: single segment, the content size is the
        // window, in whichever field width the size needs.
        for n in [0usize, 200, 300, 70_000, 3 << 20] {
            let frame = zstd::bulk::compress(&vec![7u8; n], 3).unwrap();
            if frame[4] & 0x20 != 0 {
                assert_eq!(frame_window(&frame), Some(n as u64), "{n} bytes");
            }
        }
        // A large input at level 3: a 2 MiB window, not single segment.
        let big = zstd::bulk::compress(&vec![7u8; 8 << 20], 3).unwrap();
        assert_eq!(frame_window(&big), Some(2 << 20));
        assert_eq!(frame_window(&streamed_frame(b"abc", 22)), Some(4 << 20));
        let mut skippable = vec![0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0];
        assert_eq!(frame_window(&skippable), None);
        skippable[0] = 0x28;
        assert_eq!(frame_window(&skippable), None);
        assert_eq!(frame_window(&big[..4]), None);
        assert_eq!(frame_window(b""), None);
    }

    #[test]
    fn only_large_chunks_with_large_windows_decode_through_a_buffer_of_their_size() {
        let chunk = 4usize << 20;
        let one_shot = zstd::bulk::compress(&vec![1u8; chunk], 19).unwrap();
        let window = frame_window(&one_shot).unwrap();
        assert_eq!(
            decode_through_window(&one_shot, chunk),
            window >= chunk as u64
        );
        assert!(decode_through_window(&streamed_frame(b"x", 23), chunk));
        assert!(!decode_through_window(&streamed_frame(b"x", 21), chunk));
        assert!(!decode_through_window(
            &streamed_frame(b"x", 23),
            WHOLE_AT_MOST
        ));
        assert!(!decode_through_window(
            &streamed_frame(b"x", 27),
            WINDOW_AT_MOST + 2
        ));
    }
}

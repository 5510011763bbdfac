//! Bytes-to-bytes decoders (zstd, gzip, zlib, blosc, crc32c) that stream into a [`Scatter`].
//!
//! Hardened against hostile input (zarrs' own decoders are not, see docs/architecture.md, "Hostile
//! input"): sizes in frame headers are never trusted for allocation, every decoder stops as soon as
//! it has produced more than the chunk's size, and crc32c is checked on every read, partial or not.
//!
//! One file per codec: [`zstd`], [`flate`] (gzip and zlib), [`blosc`]; crc32c and the
//! dispatch live here.

mod blosc;
mod flate;
mod zstd;

use std::borrow::Cow;
use std::io::Read;

use ::zstd::zstd_safe::InBuffer;

use crate::codec::chain::BytesCodec;
use crate::codec::decode::scatter::Scatter;
use crate::memory::out::{RawTarget, SinkError};

use self::zstd::{with_dctx, zstd_fill, zstd_stream};
pub use self::zstd::{zstd_decode_arriving, zstd_stream_read, WHOLE_AT_MOST, WINDOW_AT_MOST};
use blosc::{blosc_decompress, blosc_header, blosc_stream};
use flate::{flate_reader, flate_stream};

/// Size of the pieces a streaming decoder hands to the scatter: fits in L2 with room to spare.
const PIECE: usize = 256 << 10;

/// What went wrong decoding one chunk; the caller adds the chunk key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    Corrupt(String),
    Checksum {
        stored: u32,
        computed: u32,
    },
    /// A checksum zarrs checked, with what it said.
    ChecksumFailed(String),
    OutOfMemory(usize),
}

impl From<SinkError> for DecodeError {
    fn from(e: SinkError) -> Self {
        Self::Corrupt(e.to_string())
    }
}

/// Decodes `encoded` through `codecs` (listed in encoding order) into `sink`.
/// The caller checks the total with `sink.finish()`.
pub fn decode_stream(
    codecs: &[BytesCodec],
    encoded: &[u8],
    sink: &mut Scatter<'_>,
    threads: usize,
) -> Result<(), DecodeError> {
    let Some((first, rest)) = codecs.split_first() else {
        return Ok(sink.write(encoded)?);
    };
    // Any intermediate result is compressed data for `first`: bounded by the worst-case
    // expansion of any of these formats, so a bomb in an outer stage is stopped too.
    let limit = sink.expected() + sink.expected() / 8 + (1 << 20);
    let current = decode_full_stages(rest, encoded, limit)?;
    match first {
        BytesCodec::Crc32c => Ok(sink.write(crc32c_strip(&current)?)?),
        BytesCodec::Zstd => zstd_stream(&current, sink),
        BytesCodec::Gzip | BytesCodec::Zlib => flate_stream(*first, &current, sink),
        BytesCodec::Blosc => blosc_stream(&current, sink, threads),
    }
}

/// Undoes every codec in `codecs` (encoding order) in memory, refusing results over `limit`.
pub fn decode_full_stages<'a>(
    codecs: &[BytesCodec],
    encoded: &'a [u8],
    limit: usize,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    let mut current: Cow<'a, [u8]> = Cow::Borrowed(encoded);
    for codec in codecs.iter().rev() {
        current = match (codec, current) {
            (BytesCodec::Crc32c, Cow::Borrowed(b)) => Cow::Borrowed(crc32c_strip(b)?),
            (BytesCodec::Crc32c, Cow::Owned(mut v)) => {
                let n = crc32c_strip(&v)?.len();
                v.truncate(n);
                Cow::Owned(v)
            }
            (other, data) => Cow::Owned(decode_full(*other, &data, limit)?),
        };
    }
    Ok(current)
}

/// Checks and strips a crc32c suffix (4 bytes, little-endian).
pub fn crc32c_strip(data: &[u8]) -> Result<&[u8], DecodeError> {
    let Some(split) = data.len().checked_sub(4) else {
        return Err(DecodeError::Corrupt(format!(
            "{} bytes is shorter than its 4-byte crc32c checksum",
            data.len()
        )));
    };
    let (payload, suffix) = data.split_at(split);
    let stored = u32::from_le_bytes([suffix[0], suffix[1], suffix[2], suffix[3]]);
    let computed = crc32c::crc32c(payload);
    if stored == computed {
        Ok(payload)
    } else {
        Err(DecodeError::Checksum { stored, computed })
    }
}

/// Decodes a whole intermediate stage into memory, refusing to grow past `limit` bytes.
fn decode_full(codec: BytesCodec, data: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let too_big = || {
        DecodeError::Corrupt(format!(
            "an intermediate stage decodes to more than {limit} bytes"
        ))
    };
    let mut out = Vec::new();
    match codec {
        BytesCodec::Crc32c => out.extend_from_slice(crc32c_strip(data)?),
        BytesCodec::Zstd => with_dctx(limit, |dctx| {
            let mut input = InBuffer::around(data);
            let mut piece = vec![0u8; PIECE];
            loop {
                let (n, done) = zstd_fill(dctx, &mut input, &mut piece)?;
                if out.len() + n > limit {
                    return Err(too_big());
                }
                out.extend_from_slice(&piece[..n]);
                if done {
                    return Ok(());
                }
            }
        })?,
        BytesCodec::Gzip | BytesCodec::Zlib => {
            let mut reader = flate_reader(codec, data).take(limit as u64 + 1);
            reader
                .read_to_end(&mut out)
                .map_err(|e| DecodeError::Corrupt(format!("{codec:?} stream: {e}")))?;
            if out.len() > limit {
                return Err(too_big());
            }
        }
        BytesCodec::Blosc => {
            let header = blosc_header(data)?;
            if header.nbytes > limit {
                return Err(too_big());
            }
            let target = room_for(&mut out, header.nbytes)?;
            blosc_decompress(data, &target, header.nbytes, 1)?;
            // SAFETY: blosc wrote exactly `nbytes` bytes into the reserved capacity.
            unsafe { out.set_len(header.nbytes) };
        }
    }
    Ok(out)
}

/// Empties `buf` and makes room in it for `n` bytes, returned as a target to write them to
/// (the bytes are not initialised: the writer sets the length).
fn room_for(buf: &mut Vec<u8>, n: usize) -> Result<RawTarget, DecodeError> {
    buf.clear();
    buf.try_reserve_exact(n)
        .map_err(|_| DecodeError::OutOfMemory(n))?;
    Ok(RawTarget {
        ptr: buf.as_mut_ptr(),
        len: n,
    })
}

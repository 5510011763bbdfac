//! Reading one stored chunk or shard of a local directory or any zarrs store: whole, or
//! streamed from the file while it decodes (large zstd chunks), or read in pieces straight into
//! place (uncompressed chunks).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::chain::ChunkChain;
use crate::codec::decode::arriving::Arriving;
use crate::codec::decode::bytes_codecs::{
    zstd_decode_arriving, zstd_stream_read, DecodeError, WHOLE_AT_MOST,
};
use crate::codec::decode::scatter::Scatter;
use crate::codec::decode::sharding::decode_shard;
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::layout::placement::Placement;
use crate::memory::buffer::try_room_for;
use crate::memory::out::RawTarget;
use crate::memory::scratch::Scratch;
use crate::read::stored_limit;
use crate::store::ranged::{ByteSource, InMemory};
use crate::store::{value_too_large, Store};

/// Reads the stored chunk (or shard) at `key` and decodes the part `placement` wants into
/// `target`; a missing key reads as the fill value. Returns whether the key was present.
pub fn read_stored(
    store: &Store,
    chain: &ChunkChain,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<bool> {
    let fill = || {
        placement
            .fill(target.out, target.fill)
            .map_err(|e| DecodeError::from(e).at(key))
    };
    if let Some(spec) = chain.plain_sharding() {
        // A whole shard is one read (measured faster than parallel ranged reads of its
        // inner chunks: 1117 vs 837 MB/s reading 1 GiB, where other shards keep the threads
        // busy meanwhile); part of one reads the index, then each needed inner chunk. So
        // does a whole file read by itself on several threads, which would otherwise wait
        // for that one read: 1 GiB shard by shard (32 MiB shards, 2 threads) took 0.82 s
        // instead of 0.97 (medians of interleaved runs, BENCHMARKS.md).
        let lone_file = target.threads > 1 && store.local_root().is_some();
        if placement.wants_whole_chunk() && !lone_file {
            return match store.read(key, stored_limit(chain, placement, target.elem))? {
                Some(shard) => {
                    decode_shard(spec, &InMemory(&shard), placement, target, key).map(|()| true)
                }
                None => fill().map(|()| false),
            };
        }
        return match store.open_ranged(key)? {
            Some(src) => decode_shard(spec, src.as_ref(), placement, target, key).map(|()| true),
            None => fill().map(|()| false),
        };
    }
    if let (Some(order), Some(_)) = (chain.raw_order(), store.local_root()) {
        return match store.open_ranged(key)? {
            Some(src) => {
                read_raw(src.as_ref(), chain, order, key, placement, target).map(|()| true)
            }
            None => fill().map(|()| false),
        };
    }
    if let (Some(order), Some(_)) = (chain.zstd_only_order(), store.local_root()) {
        let overlap = overlaps_read_and_decode(chain, order.clone(), placement, target);
        if overlap || streams_from_file(placement, target.elem) {
            return match store.open_ranged(key)? {
                Some(src) if overlap => {
                    read_zstd_overlapped(src.as_ref(), chain, order, key, placement, target)
                        .map(|()| true)
                }
                Some(src) => read_zstd_streamed(src.as_ref(), chain, order, key, placement, target)
                    .map(|()| true),
                None => fill().map(|()| false),
            };
        }
    }
    match store.read(key, stored_limit(chain, placement, target.elem))? {
        Some(encoded) => decode_chunk(chain, &encoded, placement, target, key).map(|()| true),
        None => fill().map(|()| false),
    }
}

/// True when a zstd chunk is decoded from its file piece by piece: it is scattered (zstd
/// cannot decode it straight into place, where it wants the whole frame at once) and too
/// large to be decoded whole in cache. No thread then keeps a chunk-sized buffer of encoded
/// bytes; on the benchmark's 1 GiB zstd read-all it measured about 1 % faster (within noise).
fn streams_from_file(placement: &Placement, elem: usize) -> bool {
    !placement.is_contiguous_whole(elem) && placement.chunk_bytes(elem) > WHOLE_AT_MOST
}

/// The stored value's length, refused as corrupt when no encoding of the chunk is that long.
fn checked_stored_len(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    placement: &Placement,
    target: &ChunkTarget<'_>,
    key: &str,
) -> Result<u64> {
    let limit = stored_limit(chain, placement, target.elem);
    let len = src.size();
    if len > limit {
        return Err(value_too_large(key, len, limit));
    }
    Ok(len)
}

/// Decoded chunks at least this large, read by themselves, overlap their file read with
/// their decoding: below it the wake-up of a second thread costs more than the copy.
pub(super) const OVERLAP_AT_LEAST: usize = 4 << 20;

/// True when a zstd chunk's file is read on one pool thread while another decodes it: a
/// large chunk that is the whole read (so the pool's other thread is idle, `threads > 1`)
/// and that zstd can decode straight into place.
fn overlaps_read_and_decode(
    chain: &ChunkChain,
    order: ByteOrder,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> bool {
    target.threads > 1
        && placement.chunk_bytes(target.elem) >= OVERLAP_AT_LEAST
        && chain
            .scatter(target, placement, order)
            .direct_target()
            .is_some()
}

static OVERLAPPED: AtomicU64 = AtomicU64::new(0);

/// How many chunk reads in this process have overlapped their file read with their
/// decoding (tests check that the path they mean to test was taken).
#[doc(hidden)]
#[must_use]
pub fn overlapped_reads() -> u64 {
    OVERLAPPED.load(Ordering::Relaxed)
}

/// A large zstd chunk read by itself: one pool thread reads its file a step at a time
/// while another decodes each step as it lands, straight into place. Measured chunk by
/// chunk through the benchmark's 1 GiB zstd array (256³ chunks, 20 MiB stored each): the
/// file read had been 7 % of the time, all of it before the decode could start.
fn read_zstd_overlapped(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let len = checked_stored_len(src, chain, placement, target, key)?;
    OVERLAPPED.fetch_add(1, Ordering::Relaxed);
    let len = len as usize;
    let mut buf = Scratch::fitting(len);
    buf.clear();
    try_room_for(&mut buf, len, &format!("reading {key:?}"))?;
    let arriving = Arriving::new(&mut buf.spare_capacity_mut()[..len]);
    let mut sink = chain.scatter(target, placement, order);
    let decode = |sink: &mut Scatter<'_>| -> Result<()> {
        let Some(direct) = sink.direct_target() else {
            return Err(Error::Internal(format!(
                "{key}: an overlapped zstd read needs a direct target"
            )));
        };
        let written = zstd_decode_arriving(&arriving, &direct).map_err(|e| e.at(key))?;
        // `None`: the reader failed, and its error is returned instead.
        sink.assume_written(written.unwrap_or(0));
        Ok(())
    };
    let (read, decoded) = rayon::join(
        || arriving.fill_from(src),
        || {
            let decoded = decode(&mut sink);
            if decoded.is_err() {
                arriving.abandon();
            }
            decoded
        },
    );
    read?;
    decoded?;
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

/// A zstd chunk decoded from its file piece by piece into place.
fn read_zstd_streamed(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let len = checked_stored_len(src, chain, placement, target, key)?;
    let mut sink = chain.scatter(target, placement, order);
    let fill = |offset: u64, buf: &mut [u8]| {
        src.read_to(
            offset,
            &RawTarget {
                ptr: buf.as_mut_ptr(),
                len: buf.len(),
            },
        )
    };
    zstd_stream_read(len as usize, fill, &mut sink, key)?;
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

/// Bytes per file read when streaming an uncompressed chunk into place: few enough that the
/// kernel copies them into a buffer in cache (see `local_read`).
const RAW_PIECE: usize = crate::store::local_read::CACHED_READ;

/// An uncompressed chunk: read from the file straight into the output when it lands there
/// whole and contiguous, else streamed through a small buffer into place. Either way no
/// chunk-sized intermediate buffer.
fn read_raw(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let expected = placement.chunk_bytes(target.elem);
    if src.size() != expected as u64 {
        return Err(Error::corrupt(
            key,
            format!(
                "uncompressed chunk is {} bytes, expected {expected}",
                src.size()
            ),
        ));
    }
    let mut sink = chain.scatter(target, placement, order);
    if let Some(direct) = sink.direct_target() {
        src.read_to(0, &direct)?;
        sink.assume_written(expected);
    } else {
        let mut piece = Scratch::fitting(RAW_PIECE.min(expected));
        piece.resize(RAW_PIECE.min(expected), 0);
        let mut offset = 0;
        while offset < expected {
            let n = piece.len().min(expected - offset);
            let into = RawTarget {
                ptr: piece.as_mut_ptr(),
                len: n,
            };
            src.read_to(offset as u64, &into)?;
            sink.write(&piece[..n])
                .map_err(|e| DecodeError::from(e).at(key))?;
            offset += n;
        }
    }
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

//! The `sharding_indexed` codec: read a shard's index, then decode only the inner chunks a
//! selection touches, each straight into the output.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/>. Every
//! index entry is checked before use (zarrs adds `offset + size` unchecked, see
//! docs/architecture.md): an entry pointing outside the shard is a corrupt-chunk error, never a
//! panic.

use crate::codec::chain::Sharding;
use crate::codec::decode::bytes_codecs::{crc32c_strip, DecodeError};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::dtype::ByteOrder;
use crate::error::Result;
use crate::layout::placement::Placement;
use crate::memory::out::RawTarget;
use crate::memory::scratch::Scratch;
use crate::store::ranged::{ByteSource, InMemory};

const EMPTY: u64 = u64::MAX;

/// A parsed, validated shard index: `(offset, nbytes)` per inner chunk, `None` if empty.
pub struct ShardIndex {
    entries: Vec<Option<(u64, u64)>>,
}

impl ShardIndex {
    /// Reads and checks the index of a shard with `n` inner chunks.
    pub fn read(spec: &Sharding, src: &dyn ByteSource, n: u64) -> Result<Self, DecodeError> {
        let index_len = spec.index_len(n);
        let shard_len = src.size();
        if shard_len < index_len {
            return Err(DecodeError::Corrupt(format!(
                "shard is {shard_len} bytes, shorter than its {index_len}-byte index"
            )));
        }
        let at = if spec.index_at_end {
            shard_len - index_len
        } else {
            0
        };
        let raw = src
            .read(at, index_len)
            .map_err(|e| DecodeError::Corrupt(format!("reading the shard index: {e}")))?;
        Self::from_index_bytes(spec, &raw, shard_len, n)
    }

    /// Checks and parses the encoded index of a shard of `shard_len` bytes.
    pub fn from_index_bytes(
        spec: &Sharding,
        raw: &[u8],
        shard_len: u64,
        n: u64,
    ) -> Result<Self, DecodeError> {
        let index_len = spec.index_len(n);
        if (raw.len() as u64) != index_len || shard_len < index_len {
            return Err(DecodeError::Corrupt(format!(
                "shard is {shard_len} bytes, shorter than its {index_len}-byte index"
            )));
        }
        let payload = if spec.index_crc32c {
            crc32c_strip(raw)?
        } else {
            raw
        };
        let word = |b: &[u8]| {
            let v = u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]));
            if spec.index_order == ByteOrder::Native {
                v
            } else {
                v.swap_bytes()
            }
        };
        let entries = payload
            .chunks_exact(16)
            .enumerate()
            .map(|(i, pair)| {
                let (offset, nbytes) = (word(&pair[..8]), word(&pair[8..]));
                match (offset, nbytes) {
                    (EMPTY, EMPTY) => Ok(None),
                    _ => match offset.checked_add(nbytes) {
                        Some(end) if end <= shard_len => Ok(Some((offset, nbytes))),
                        _ => Err(DecodeError::Corrupt(format!(
                            "shard index entry {i} points at bytes {offset}+{nbytes}, outside the {shard_len}-byte shard"
                        ))),
                    },
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// Lays `shard` out again with its inner chunks in `order` (C-order linear indices; any
    /// not listed keep their relative order after those that are), rewriting the index:
    /// zarr-python >= 3.4 writes shards in a configurable order (Morton by default).
    pub fn relayout(
        spec: &Sharding,
        shard: &[u8],
        n: u64,
        order: &[u64],
    ) -> Result<Vec<u8>, DecodeError> {
        let index = Self::read(spec, &InMemory(shard), n)?;
        let index_len = spec.index_len(n) as usize;
        let base = if spec.index_at_end {
            0
        } else {
            index_len as u64
        };
        let mut seen = vec![false; n as usize];
        let sequence = order
            .iter()
            .map(|&i| i as usize)
            .chain(0..n as usize)
            .filter(|&i| i < seen.len() && !std::mem::replace(&mut seen[i], true));
        let mut data = Vec::with_capacity(shard.len().saturating_sub(index_len));
        let mut entries = vec![(EMPTY, EMPTY); n as usize];
        for i in sequence {
            if let Some((offset, nbytes)) = index.entry(i) {
                entries[i] = (base + data.len() as u64, nbytes);
                data.extend_from_slice(&shard[offset as usize..(offset + nbytes) as usize]);
            }
        }
        let word = |v: u64| {
            if spec.index_order == ByteOrder::Native {
                v.to_ne_bytes()
            } else {
                v.swap_bytes().to_ne_bytes()
            }
        };
        let mut index_bytes: Vec<u8> = entries
            .iter()
            .flat_map(|&(o, l)| [word(o), word(l)])
            .flatten()
            .collect();
        if spec.index_crc32c {
            let crc = crc32c::crc32c(&index_bytes);
            index_bytes.extend_from_slice(&crc.to_le_bytes());
        }
        Ok(if spec.index_at_end {
            [data, index_bytes].concat()
        } else {
            [index_bytes, data].concat()
        })
    }

    /// The byte range of inner chunk `i` (C-order), or `None` if it is empty.
    #[must_use]
    pub fn entry(&self, i: usize) -> Option<(u64, u64)> {
        self.entries.get(i).copied().flatten()
    }
}

/// One inner chunk a read needs: its coordinates in the shard, its C-order position in the
/// shard's index, and where its wanted part goes.
#[derive(Clone, Debug)]
pub struct InnerPart {
    pub coord: Vec<u64>,
    pub linear: usize,
    pub placement: Placement,
}

/// The inner chunks of a shard that `placement` touches (no I/O: the index is not needed).
#[must_use]
pub fn inner_parts(spec: &Sharding, placement: &Placement) -> Vec<InnerPart> {
    let grid = spec.grid(&placement.chunk_shape);
    let ranges: Vec<_> = placement
        .want
        .iter()
        .zip(&spec.inner_shape)
        .map(|(w, &s)| w.start / s..w.end.div_ceil(s))
        .collect();
    let mut parts = Vec::new();
    crate::layout::index::for_each_index(&ranges, |coord| {
        let origin: Vec<u64> = coord
            .iter()
            .zip(&spec.inner_shape)
            .map(|(c, s)| c * s)
            .collect();
        if let Some(inner) = Placement::new(
            &origin,
            &spec.inner_shape,
            &placement.want,
            &placement.out_strides,
            placement.out_offset,
        ) {
            let linear = coord
                .iter()
                .zip(&grid)
                .fold(0u64, |acc, (c, g)| acc * g + c);
            parts.push(InnerPart {
                coord: coord.to_vec(),
                linear: linear as usize,
                placement: inner,
            });
        }
    });
    parts
}

/// The key errors about an inner chunk carry: the shard's key and the position in it.
#[must_use]
pub fn inner_chunk_name(key: &str, coord: &[u64]) -> String {
    format!("{key} (inner chunk {coord:?})")
}

/// Decodes inner chunk `part` of a shard whose index is `index` into `target`.
pub fn decode_inner(
    spec: &Sharding,
    src: &dyn ByteSource,
    index: &ShardIndex,
    part: &InnerPart,
    target: &ChunkTarget<'_>,
    key: &str,
) -> Result<()> {
    match index.entry(part.linear) {
        None => part
            .placement
            .fill(target.out, target.fill)
            .map_err(|e| DecodeError::from(e).at(&inner_chunk_name(key, &part.coord))),
        Some((offset, nbytes)) => {
            let name = || inner_chunk_name(key, &part.coord);
            if src.reads_in_place() {
                let len = usize::try_from(nbytes)
                    .map_err(|_| DecodeError::OutOfMemory(usize::MAX).at(&name()))?;
                let mut encoded = Scratch::fitting(len);
                encoded
                    .try_reserve_exact(len)
                    .map_err(|_| DecodeError::OutOfMemory(len).at(&name()))?;
                let into = RawTarget {
                    ptr: encoded.as_mut_ptr(),
                    len,
                };
                src.read_to(offset, &into)?;
                // SAFETY: `read_to` wrote all `len` reserved bytes (or returned an error).
                unsafe { encoded.set_len(len) };
                decode_chunk(&spec.inner, &encoded, &part.placement, target, &name())
            } else {
                let bytes = src.read(offset, nbytes)?;
                decode_chunk(&spec.inner, &bytes, &part.placement, target, &name())
            }
        }
    }
}

/// Decodes the wanted part of one shard into `target`.
pub fn decode_shard(
    spec: &Sharding,
    src: &dyn ByteSource,
    placement: &Placement,
    target: &ChunkTarget<'_>,
    key: &str,
) -> Result<()> {
    let n: u64 = spec.grid(&placement.chunk_shape).iter().product();
    let index = ShardIndex::read(spec, src, n).map_err(|e| e.at(key))?;
    let parts = inner_parts(spec, placement);
    crate::process::pool::try_each(&parts, |part| {
        decode_inner(spec, src, &index, part, target, key)
    })
}

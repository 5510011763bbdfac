//! Shards the caller fetches in part: for stores the engine does not reach (zarr-python's
//! memory and fsspec stores), zarr-python moves the bytes. A shard of which a read needs only
//! some inner chunks is then fetched as its index and the byte ranges of those inner chunks
//! (the ranges nearby merged, as for object stores), not whole: `partial_shard_indexes` says
//! which reads can, `inner_ranges` which ranges to fetch once the indexes are in, and a read
//! from `Source::Fetched` decodes from what was fetched (boxes and picks alike).

use std::borrow::Cow;
use std::ops::Range;

use crate::array::Array;
use crate::codec::chain::ChunkChain;
use crate::codec::chain::Sharding;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::{decode_inner, inner_parts, ShardIndex};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::layout::placement::Placement;
use crate::layout::plan::ChunkPlan;
use crate::store::ranged::ByteSource;
use crate::store::remote::{coalesce, COALESCE_GAP, MAX_REQUEST};

/// What the caller fetched for one plan item.
#[derive(Clone)]
pub enum Fetched<'a> {
    /// Nothing is stored under the key: the item reads as the fill value.
    Missing,
    /// The whole stored chunk or shard.
    Whole(&'a [u8]),
    /// A shard's encoded index and byte ranges of the shard, each `(offset, bytes)`.
    Partial {
        index: &'a [u8],
        pieces: Vec<(u64, &'a [u8])>,
    },
}

/// The byte ranges of a shard the caller fetched (offsets into the shard).
struct Pieces<'a> {
    key: &'a str,
    pieces: &'a [(u64, &'a [u8])],
}

impl ByteSource for Pieces<'_> {
    fn size(&self) -> u64 {
        // Not known, and not needed: the index comes separately, and every range read is
        // one the index gave and the caller fetched.
        u64::MAX
    }

    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        if len == 0 {
            // An empty inner chunk (corrupt: its decoder says so) needs no bytes.
            return Ok(Cow::Borrowed(&[]));
        }
        self.pieces
            .iter()
            .find_map(|&(start, bytes)| {
                let from = offset.checked_sub(start)?;
                let to = from.checked_add(len)?;
                (to <= bytes.len() as u64).then(|| Cow::Borrowed(&bytes[from as usize..to as usize]))
            })
            .ok_or_else(|| {
                Error::corrupt(
                    self.key,
                    format!(
                        "bytes {offset}..{} of the shard were not fetched (is the shard shorter than its index says?)",
                        offset.saturating_add(len)
                    ),
                )
            })
    }
}

/// A shard's encoded index as fetched on its own (the shard's length is not known: each
/// range it gives is checked when fetched instead).
fn parse_index(spec: &Sharding, raw: &[u8], n: u64, key: &str) -> Result<ShardIndex> {
    let want = spec.index_len(n);
    if raw.len() as u64 != want {
        return Err(Error::corrupt(
            key,
            format!(
                "its {want}-byte shard index came back as {} bytes (a shard shorter than its index?)",
                raw.len()
            ),
        ));
    }
    ShardIndex::from_index_bytes(spec, raw, u64::MAX, n).map_err(|e| e.at(key))
}

impl Array {
    /// Whether each placement's shard can be fetched in part: per placement the length of
    /// its shard's index where it needs only some of the shard's inner chunks (`None`: it
    /// needs all of them, or reads nothing; fetch the value whole), and whether indexes sit
    /// at the end. `None` overall when this array's chunks are not plain shards (no
    /// sharding, or codecs around the shard).
    pub fn partial_shard_indexes(
        &self,
        placements: &[Option<&Placement>],
    ) -> Result<Option<(Vec<Option<u64>>, bool)>> {
        let Some(spec) = self.chain()?.plain_sharding() else {
            return Ok(None);
        };
        let lens = placements
            .iter()
            .map(|placement| {
                let placement = (*placement)?;
                let n: u64 = spec.grid(&placement.chunk_shape).iter().product();
                let touched = inner_parts(spec, placement).len() as u64;
                (touched < n).then(|| spec.index_len(n))
            })
            .collect();
        Ok(Some((lens, spec.index_at_end)))
    }

    /// The byte ranges of the inner chunks each placement needs, from its shard's encoded
    /// index (`None`: the shard is missing, no ranges), merged where they are near. Every
    /// index is checked as a read checks it.
    pub fn inner_ranges(
        &self,
        wanted: &[(&str, Option<&Placement>)],
        indexes: &[Option<&[u8]>],
    ) -> Result<Vec<Vec<Range<u64>>>> {
        let spec = self.chain()?.plain_sharding().ok_or_else(|| {
            Error::InvalidArgument("this array's chunks are not plain shards".into())
        })?;
        if indexes.len() != wanted.len() {
            return Err(Error::InvalidArgument(format!(
                "{} shard indexes for {} chunks",
                indexes.len(),
                wanted.len()
            )));
        }
        wanted
            .iter()
            .zip(indexes)
            .map(|(&(key, placement), raw)| {
                let (Some(raw), Some(placement)) = (raw, placement) else {
                    return Ok(Vec::new());
                };
                let n: u64 = spec.grid(&placement.chunk_shape).iter().product();
                let index = parse_index(spec, raw, n, key)?;
                let wanted: Vec<Range<u64>> = inner_parts(spec, placement)
                    .iter()
                    .filter_map(|part| index.entry(part.linear))
                    .map(|(offset, nbytes)| offset..offset + nbytes)
                    .collect();
                Ok(coalesce(&wanted, COALESCE_GAP, MAX_REQUEST))
            })
            .collect()
    }
}

/// Decodes the wanted part of one plan item from what the caller fetched for it; whether
/// its chunk or shard is stored.
pub(crate) fn decode_fetched(
    chain: &ChunkChain,
    plan: &ChunkPlan,
    fetched: &Fetched<'_>,
    target: &ChunkTarget<'_>,
) -> Result<bool> {
    match fetched {
        Fetched::Missing => plan
            .placement
            .fill(target.out, target.fill)
            .map(|()| false)
            .map_err(|e| DecodeError::from(e).at(&plan.key)),
        Fetched::Whole(encoded) => {
            decode_chunk(chain, encoded, &plan.placement, target, &plan.key).map(|()| true)
        }
        Fetched::Partial { index, pieces } => {
            let spec = chain.plain_sharding().ok_or_else(|| {
                Error::InvalidArgument("this array's chunks are not plain shards".into())
            })?;
            let n: u64 = spec.grid(&plan.placement.chunk_shape).iter().product();
            let index = parse_index(spec, index, n, &plan.key)?;
            let src = Pieces {
                key: &plan.key,
                pieces,
            };
            let parts = inner_parts(spec, &plan.placement);
            crate::process::pool::try_each(&parts, |part| {
                decode_inner(spec, &src, &index, part, target, &plan.key)
            })?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_serve_only_ranges_inside_one_fetched_piece() {
        let (a, b) = (b"abcdef".as_slice(), b"xyz".as_slice());
        let pieces = [(10, a), (100, b)];
        let src = Pieces {
            key: "c/0",
            pieces: &pieces,
        };
        assert_eq!(&*src.read(10, 6).unwrap(), b"abcdef");
        assert_eq!(&*src.read(12, 2).unwrap(), b"cd");
        assert_eq!(&*src.read(101, 2).unwrap(), b"yz");
        assert!(src.read(50, 0).unwrap().is_empty());
        // Before, across the end of, between and after the pieces: never fetched.
        for (offset, len) in [(9, 2), (14, 3), (16, 1), (102, 2), (u64::MAX, 2)] {
            let err = src.read(offset, len).unwrap_err().to_string();
            assert!(err.contains("not fetched"), "{err}");
        }
    }
}

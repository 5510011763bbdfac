//! Picks from a local store, chunk by chunk straight into place: each touched chunk (inner
//! chunk of a shard) has its box of wanted elements decoded into a small per-thread buffer
//! and gathered into the output from there at once, while the box is still in cache. A shard
//! is opened and its index read once for all of its touched inner chunks.
//!
//! The batched path of `gather.rs` reads every box into one scratch buffer through the plan
//! path, then gathers in a second pass: for a pick touching every inner chunk of a small
//! sharded array it opened each shard and read its index once per inner chunk, and faulted
//! in and swept a scratch buffer as large as the boxes. It remains for what this path does
//! not take: a chunk cache, object stores, and boxes too large to keep one per thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::array::Array;
use crate::codec::chain::{ChunkChain, Sharding};
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::{decode_inner, InnerPart, ShardIndex};
use crate::codec::decode::ChunkTarget;
use crate::error::Result;
use crate::layout::placement::{c_strides, Placement};
use crate::memory::buffer::try_room_for;
use crate::memory::out::OutPtr;
use crate::memory::scratch::Scratch;
use crate::process::pool::try_each;
use crate::read::gather::{gather_item, origin_index, Group, Item};
use crate::read::read_stored;
use crate::select::pick::Factor;
use crate::store::ranged::{ByteSource, InMemory};

/// Boxes up to this size take the direct path (one per pool thread at a time); a pick with a
/// larger one takes the batched path, whose scratch is bounded for any chunk size.
pub(super) const DIRECT_AT_MOST: usize = 4 << 20;

static DIRECT: AtomicU64 = AtomicU64::new(0);

/// How many chunk boxes picks in this process have gathered by the direct path (tests check
/// that the path they mean to test was taken).
#[doc(hidden)]
#[must_use]
pub fn direct_pick_boxes() -> u64 {
    DIRECT.load(Ordering::Relaxed)
}

/// A shard whose touched inner chunks are most of its bytes is read whole up to this size
/// (one per pool thread at a time); a larger one is read inner chunk by inner chunk, so a
/// pick's memory stays its output plus a bounded working set.
const WHOLE_SHARD_AT_MOST: u64 = 64 << 20;

/// What one gather writes into: the pick's output and how it is laid out.
pub(super) struct PickOut<'a> {
    pub factors: &'a [Factor],
    pub groups: &'a [Vec<Group>],
    pub out: &'a OutPtr,
    pub out_strides: &'a [isize],
}

impl Array {
    /// Whether [`Self::gather_direct`] can read these items.
    pub(super) fn gathers_directly(&self, items: &[Item], cached: bool) -> bool {
        !cached
            && self.store.local_root().is_some()
            && items.iter().all(|item| item.bytes <= DIRECT_AT_MOST)
    }

    /// Reads and gathers every item (a touched chunk of the pick grid) into `to.out`.
    pub(super) fn gather_direct(&self, items: &[Item], to: &PickOut<'_>) -> Result<()> {
        let chain = self.chain()?;
        match chain.plain_sharding() {
            Some(spec) => {
                let shards = self.items_by_shard(items);
                try_each(&shards, |(shard, list)| {
                    self.gather_shard(spec, shard, list, items, to)
                })
            }
            None => try_each(items, |item| self.gather_chunk(chain, item, to)),
        }
    }

    /// The items grouped by the shard that holds them, in first-touched order.
    fn items_by_shard(&self, items: &[Item]) -> Vec<(Vec<u64>, Vec<usize>)> {
        let mut at: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut shards: Vec<(Vec<u64>, Vec<usize>)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let shard = origin_index(&self.grid, &item.bbox);
            let k = *at.entry(shard.clone()).or_insert_with(|| {
                shards.push((shard, Vec::new()));
                shards.len() - 1
            });
            shards[k].1.push(i);
        }
        shards
    }

    /// One unsharded chunk: its box decoded into a per-thread buffer, then gathered.
    fn gather_chunk(&self, chain: &ChunkChain, item: &Item, to: &PickOut<'_>) -> Result<()> {
        let index = origin_index(&self.grid, &item.bbox);
        let origin = self.grid.origin(&index);
        let chunk_shape = self.grid.chunk_shape(&index);
        let key = self.chunk_key(&index);
        self.with_box(item, &origin, &chunk_shape, to, |placement, target| {
            read_stored(&self.store, chain, &key, placement, target).map(|_| ())
        })
    }

    /// The touched inner chunks of one shard: the shard opened and its index read once; a
    /// shard whose touched inner chunks are most of its bytes is read whole, in one read,
    /// as a read of all of it is (one ranged read per inner chunk cost a 64 MiB image's
    /// pick of every 8th row and column 12 % more than reading all of it).
    fn gather_shard(
        &self,
        spec: &Sharding,
        shard: &[u64],
        list: &[usize],
        items: &[Item],
        to: &PickOut<'_>,
    ) -> Result<()> {
        let key = self.chunk_key(shard);
        let shard_origin = self.grid.origin(shard);
        let shard_shape = self.grid.chunk_shape(shard);
        let grid = spec.grid(&shard_shape);
        // Per item: the inner chunk holding its box (coordinates in the shard, C-order
        // position in the index) and that inner chunk's origin in the array.
        let parts: Vec<(usize, Vec<u64>, usize, Vec<u64>)> = list
            .iter()
            .map(|&i| {
                let coord: Vec<u64> = (items[i].bbox.iter().zip(&shard_origin))
                    .zip(&spec.inner_shape)
                    .map(|((r, &o), &s)| (r.start - o) / s)
                    .collect();
                let origin: Vec<u64> = (coord.iter().zip(&spec.inner_shape))
                    .zip(&shard_origin)
                    .map(|((&c, &s), &o)| o + c * s)
                    .collect();
                let linear = (coord.iter().zip(&grid)).fold(0u64, |acc, (&c, &g)| acc * g + c);
                (i, coord, linear as usize, origin)
            })
            .collect();
        let Some(src) = self.store.open_ranged(&key)? else {
            return try_each(&parts, |(i, _, _, origin)| {
                self.with_box(&items[*i], origin, &spec.inner_shape, to, |p, t| {
                    p.fill(t.out, t.fill)
                        .map_err(|e| DecodeError::from(e).at(&key))
                })
            });
        };
        let index =
            ShardIndex::read(spec, src.as_ref(), grid.iter().product()).map_err(|e| e.at(&key))?;
        let touched: u64 = (parts.iter())
            .filter_map(|(_, _, linear, _)| index.entry(*linear))
            .map(|(_, n)| n)
            .sum();
        let whole = if touched.saturating_mul(2) >= src.size() && src.size() <= WHOLE_SHARD_AT_MOST
        {
            Some(src.read(0, src.size())?)
        } else {
            None
        };
        let in_memory = whole.as_deref().map(InMemory);
        let source: &dyn ByteSource = match &in_memory {
            Some(m) => m,
            None => src.as_ref(),
        };
        try_each(&parts, |(i, coord, linear, origin)| {
            self.with_box(
                &items[*i],
                origin,
                &spec.inner_shape,
                to,
                |placement, target| {
                    let part = InnerPart {
                        coord: coord.clone(),
                        linear: *linear,
                        placement: placement.clone(),
                    };
                    decode_inner(spec, source, &index, &part, target, &key)
                },
            )
        })
    }

    /// Decodes an item's box (through `decode`, given the box's placement in a chunk of
    /// `chunk_shape` at `origin`) into this thread's buffer, then gathers it into place.
    fn with_box(
        &self,
        item: &Item,
        origin: &[u64],
        chunk_shape: &[u64],
        to: &PickOut<'_>,
        decode: impl FnOnce(&Placement, &ChunkTarget<'_>) -> Result<()>,
    ) -> Result<()> {
        let elem = self.info.dtype.size();
        let extent: Vec<u64> = item.bbox.iter().map(|r| r.end - r.start).collect();
        let placement = Placement {
            chunk_shape: chunk_shape.to_vec(),
            want: (item.bbox.iter().zip(origin))
                .map(|(r, &o)| r.start - o..r.end - o)
                .collect(),
            out_offset: 0,
            out_strides: c_strides(&extent, elem),
        };
        let mut buf = Scratch::fitting(item.bytes);
        buf.clear();
        try_room_for(&mut buf, item.bytes, "a selection's chunk box")?;
        // SAFETY: `buf` has room for `item.bytes` and outlives `out`; the placement's box is
        // exactly `item.bytes` in C order from offset 0.
        let out = unsafe { OutPtr::new(buf.as_mut_ptr(), item.bytes) };
        let target = ChunkTarget {
            out: &out,
            elem,
            fill: &self.info.fill_value,
            threads: 1,
        };
        decode(&placement, &target)?;
        // SAFETY: `decode` returned Ok, so it wrote (or filled) every element of the box.
        unsafe { buf.set_len(item.bytes) };
        DIRECT.fetch_add(1, Ordering::Relaxed);
        gather_item(
            to.factors,
            to.groups,
            item,
            &buf,
            to.out,
            to.out_strides,
            elem,
        )
    }
}

//! Cache slots: a chunk (or an inner chunk of a shard) trimmed to the array's bounds, how a
//! decoder fills one and how a read copies its wanted part out of one.

use bytes::Bytes;

use crate::array::Array;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::scatter::Scatter;
use crate::codec::decode::sharding::InnerPart;
use crate::codec::decode::ChunkTarget;
use crate::dtype::ByteOrder;
use crate::error::Result;
use crate::layout::placement::{c_strides, Placement};
use crate::layout::plan::ChunkPlan;
use crate::memory::buffer::{checked_nbytes, try_with_capacity};
use crate::memory::out::OutPtr;
use crate::read::cache::{inner_key, ChunkCache};

/// A cache entry: a chunk (or inner chunk) trimmed to the array's bounds, in C order.
#[derive(Clone, Debug)]
pub(crate) struct CacheSlot {
    pub key: String,
    /// The trimmed shape.
    pub shape: Vec<u64>,
}

impl CacheSlot {
    /// The slot of the chunk of `chunk_shape` at `origin` of an array of `array_shape`.
    pub fn new(key: String, origin: &[u64], chunk_shape: &[u64], array_shape: &[u64]) -> Self {
        let shape = origin
            .iter()
            .zip(chunk_shape)
            .zip(array_shape)
            .map(|((&o, &c), &s)| c.min(s.saturating_sub(o)))
            .collect();
        Self { key, shape }
    }

    /// Where a decoder writes the in-bounds part of the (padded) chunk to make the entry.
    fn fill_placement(&self, chunk_shape: &[u64], elem: usize) -> Placement {
        Placement {
            chunk_shape: chunk_shape.to_vec(),
            want: self.shape.iter().map(|&d| 0..d).collect(),
            out_offset: 0,
            out_strides: c_strides(&self.shape, elem),
        }
    }

    /// `placement` (of the padded chunk) re-aimed at the entry's trimmed layout: every wanted
    /// element is in bounds, so inside the entry.
    fn read_placement(&self, placement: &Placement) -> Placement {
        Placement {
            chunk_shape: self.shape.clone(),
            ..placement.clone()
        }
    }
}

/// Decodes a chunk for the cache: its in-bounds part, into a fresh buffer.
pub(crate) fn decode_entry(
    decode: impl FnOnce(&ChunkTarget<'_>, &Placement) -> Result<()>,
    slot: &CacheSlot,
    chunk_shape: &[u64],
    target: &ChunkTarget<'_>,
) -> Result<Bytes> {
    let n = checked_nbytes(&slot.shape, target.elem)?;
    let mut buf = try_with_capacity(n, &slot.key)?;
    // SAFETY: `buf` has capacity `n` and outlives `out`; only this thread writes it.
    let out = unsafe { OutPtr::new(buf.as_mut_ptr(), n) };
    let entry_target = ChunkTarget {
        out: &out,
        elem: target.elem,
        fill: target.fill,
        threads: target.threads,
    };
    decode(
        &entry_target,
        &slot.fill_placement(chunk_shape, target.elem),
    )?;
    // SAFETY: the placement covers every byte of the entry, decoded or filled, or the decode
    // returned an error above.
    unsafe { buf.set_len(n) };
    Ok(Bytes::from(buf))
}

/// Copies a cached chunk's wanted part into place.
pub(crate) fn scatter_entry(
    entry: &[u8],
    slot: &CacheSlot,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let p = slot.read_placement(placement);
    let mut sink = Scatter::new(target.out, &p, target.elem, ByteOrder::Native, None);
    let at = |e| DecodeError::from(e).at(&slot.key);
    sink.write(entry).map_err(at)?;
    sink.finish().map_err(at)
}

impl Array {
    /// The cache slot of plan item `plan` (`None` without a cache or a grid index).
    pub(crate) fn slot(&self, plan: &ChunkPlan, cache: Option<&ChunkCache>) -> Option<CacheSlot> {
        cache?;
        let index = plan.index.as_ref()?;
        Some(CacheSlot::new(
            plan.key.clone(),
            &self.grid.origin(index),
            &plan.placement.chunk_shape,
            &self.info.shape,
        ))
    }

    /// The cache slot of inner chunk `part` of the shard `plan` reads.
    pub(crate) fn inner_slot(
        &self,
        plan: &ChunkPlan,
        part: &InnerPart,
        inner_shape: &[u64],
    ) -> Option<CacheSlot> {
        let index = plan.index.as_ref()?;
        let origin: Vec<u64> = (self.grid.origin(index).iter())
            .zip(part.coord.iter().zip(inner_shape))
            .map(|(o, (p, s))| o + p * s)
            .collect();
        Some(CacheSlot::new(
            inner_key(&plan.key, &part.coord),
            &origin,
            inner_shape,
            &self.info.shape,
        ))
    }
}

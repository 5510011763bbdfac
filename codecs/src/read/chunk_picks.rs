//! Reading a [`Pick`] inside each of several stored chunks: zarr-python's pipeline hands over
//! per chunk a selection in chunk coordinates (steps, index arrays, masks), which becomes a
//! pick over the chunk's shape. Each chunk's bounding box of wanted elements is decoded once
//! through the ordinary plan path (shards read only the inner chunks the box touches) into
//! a bounded scratch buffer, then gathered into a fresh buffer of the pick's shape by the
//! same gather as [`Array::read_pick`]: the chunk is the whole grid, so every factor of a
//! pick makes one group.

use std::ops::Range;

use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::placement::{c_strides, Placement};
use crate::layout::plan::{check, ChunkPlan, OutLayout};
use crate::memory::buffer::{checked_nbytes, try_output_buffer, try_with_capacity};
use crate::memory::out::OutPtr;
use crate::read::gather::{check_partition, gather_item, group_factor, Group, Item};
use crate::read::Source;
use crate::select::pick::Pick;

/// Scratch bytes per batch of chunks (a batch has at least one chunk).
const SCRATCH_BYTES: usize = 64 << 20;

/// One chunk's pick, planned: its groups (one per factor, or none for an empty factor) and
/// the box they span.
struct Planned<'a> {
    key: &'a str,
    /// The stored chunk's shape.
    shape: &'a [u64],
    pick: &'a Pick,
    groups: Vec<Vec<Group>>,
    /// `None`: the pick selects nothing, so nothing is read.
    item: Option<Item>,
}

impl Array {
    /// Reads `picks[i].2` (chunk coordinates) from the stored chunk (shard) `picks[i].0`, of
    /// shape `picks[i].1`, into
    /// a fresh C-order buffer of the pick's shape; and whether each chunk is stored (a
    /// missing one reads as the fill value; a pick that selects nothing counts as stored).
    /// `source`: the store, or the caller's bytes, one per pick. Runs on the current pool.
    pub fn read_chunk_picks(
        &self,
        picks: &[(String, Vec<u64>, Pick)],
        source: Source<'_>,
    ) -> Result<(Vec<Vec<u8>>, Vec<bool>)> {
        let elem = self.info.dtype.size();
        if let Some(n) = source.supplied().filter(|&n| n != picks.len()) {
            return Err(Error::InvalidArgument(format!(
                "{n} stored values for {} chunk selections",
                picks.len()
            )));
        }
        let planned = picks
            .iter()
            .map(|(key, shape, pick)| self.plan_chunk_pick(key, shape, pick, elem))
            .collect::<Result<Vec<_>>>()?;
        let mut outs = Vec::with_capacity(picks.len());
        for p in &planned {
            let n = checked_nbytes(&p.pick.out_shape(), elem)?;
            let mut out = try_with_capacity(n, p.key)?;
            out.resize(n, 0);
            outs.push(out);
        }
        let mut present = vec![true; picks.len()];
        let wanted: Vec<usize> = (0..planned.len())
            .filter(|&i| planned[i].item.is_some())
            .collect();
        let bytes_of = |i: usize| planned[i].item.as_ref().map_or(0, |item| item.bytes);
        // Batches of consecutive wanted chunks within SCRATCH_BYTES (at least one each).
        let mut batches: Vec<Range<usize>> = Vec::new();
        let mut start = 0;
        while start < wanted.len() {
            let mut end = start + 1;
            let mut bytes = bytes_of(wanted[start]);
            while end < wanted.len() && bytes + bytes_of(wanted[end]) <= SCRATCH_BYTES {
                bytes += bytes_of(wanted[end]);
                end += 1;
            }
            batches.push(start..end);
            start = end;
        }
        let largest = batches
            .iter()
            .map(|r| r.clone().map(|k| bytes_of(wanted[k])).sum::<usize>())
            .max()
            .unwrap_or(0);
        let mut scratch = try_output_buffer(largest, "a selection's scratch buffer")?;
        for range in batches {
            let batch = &wanted[range];
            let found = self.read_chunk_boxes(&planned, batch, source, &mut scratch)?;
            let mut at = 0;
            for (&i, stored) in batch.iter().zip(found) {
                present[i] = stored;
                let p = &planned[i];
                let Some(item) = &p.item else { continue };
                let out = &mut outs[i];
                // SAFETY: `out` has exactly the pick's bytes and outlives `ptr`; only this
                // thread writes it, at the checked partition's positions.
                let ptr = unsafe { OutPtr::new(out.as_mut_ptr(), out.len()) };
                let out_strides = c_strides(&p.pick.out_shape(), elem);
                let src = &scratch[at..at + item.bytes];
                gather_item(
                    p.pick.factors(),
                    &p.groups,
                    item,
                    src,
                    &ptr,
                    &out_strides,
                    elem,
                )?;
                at += item.bytes;
            }
        }
        Ok((outs, present))
    }

    /// [`Self::read_chunk_picks`] straight into a caller's output: pick `i`'s k-th value goes
    /// to byte offset `offsets(i)[k]` of `out` (zarr-python's output selection, resolved by
    /// the caller, one pick at a time so that only one pick's offsets are held). Values to
    /// the same place: the last stays. Returns whether each chunk is stored.
    pub fn read_chunk_picks_into(
        &self,
        picks: &[(String, Vec<u64>, Pick)],
        source: Source<'_>,
        out: &OutPtr,
        offsets: impl Fn(usize) -> Result<Vec<usize>>,
    ) -> Result<Vec<bool>> {
        let elem = self.info.dtype.size();
        let (values, present) = self.read_chunk_picks(picks, source)?;
        for (i, vals) in values.iter().enumerate() {
            let at = offsets(i)?;
            if vals.len() != at.len() * elem {
                return Err(Error::InvalidArgument(format!(
                    "{} output positions for a chunk selection of {} elements",
                    at.len(),
                    vals.len() / elem.max(1)
                )));
            }
            scatter_values(vals, &at, elem, out)?;
        }
        Ok(present)
    }

    /// The part of its chunk each pick's read decodes (the box of its wanted elements), or
    /// `None` for a pick that selects nothing: what `partial_shard_indexes` and
    /// `inner_ranges` take.
    pub fn chunk_pick_placements(
        &self,
        picks: &[(String, Vec<u64>, Pick)],
    ) -> Result<Vec<Option<Placement>>> {
        let elem = self.info.dtype.size();
        picks
            .iter()
            .map(|(key, shape, pick)| {
                let planned = self.plan_chunk_pick(key, shape, pick, elem)?;
                Ok(planned.item.map(|item| Placement {
                    chunk_shape: shape.clone(),
                    out_strides: c_strides(
                        &item
                            .bbox
                            .iter()
                            .map(|r| r.end - r.start)
                            .collect::<Vec<_>>(),
                        elem,
                    ),
                    want: item.bbox,
                    out_offset: 0,
                }))
            })
            .collect()
    }

    /// Groups `pick` by the chunk (the whole grid: one group per factor) and finds its box.
    fn plan_chunk_pick<'a>(
        &self,
        key: &'a str,
        chunk_shape: &'a [u64],
        pick: &'a Pick,
        elem: usize,
    ) -> Result<Planned<'a>> {
        self.check_chunk_shape(chunk_shape, key)?;
        if pick
            .factors()
            .iter()
            .flat_map(|f| f.axes())
            .any(|&a| a >= chunk_shape.len())
        {
            return Err(Error::InvalidSelection(format!(
                "a selection of {key} has more axes than its chunk"
            )));
        }
        let factors = pick.factors();
        let one_chunk = ChunkGrid::regular(chunk_shape, chunk_shape);
        let groups: Vec<Vec<Group>> = factors
            .iter()
            .map(|f| group_factor(f, &one_chunk))
            .collect();
        check_partition(factors, &groups)?;
        if groups.iter().any(|g| g.len() != 1) {
            // An empty factor (no group) selects nothing; a second group would be a
            // position outside the chunk, which `Pick::new` refused.
            if groups.iter().any(|g| g.len() > 1) {
                return Err(Error::InvalidSelection(format!(
                    "a selection of {key} reaches outside its chunk"
                )));
            }
            return Ok(Planned {
                key,
                shape: chunk_shape,
                pick,
                groups,
                item: None,
            });
        }
        let mut bbox: Vec<Range<u64>> = chunk_shape.iter().map(|&n| 0..n).collect();
        for (f, gs) in factors.iter().zip(&groups) {
            for (t, &a) in f.axes().iter().enumerate() {
                bbox[a] = gs[0].lo[t]..gs[0].hi[t];
            }
        }
        let extent: Vec<u64> = bbox.iter().map(|r| r.end - r.start).collect();
        let item = Item {
            groups: vec![0; factors.len()],
            bytes: checked_nbytes(&extent, elem)?,
            bbox,
        };
        Ok(Planned {
            key,
            shape: chunk_shape,
            pick,
            groups,
            item: Some(item),
        })
    }

    /// Decodes the boxes of the chunks `batch` (indices into `planned`) one after the other
    /// into `scratch`; whether each is stored.
    fn read_chunk_boxes(
        &self,
        planned: &[Planned<'_>],
        batch: &[usize],
        source: Source<'_>,
        scratch: &mut Vec<u8>,
    ) -> Result<Vec<bool>> {
        let elem = self.info.dtype.size();
        let bytes: usize = batch
            .iter()
            .filter_map(|&i| planned[i].item.as_ref())
            .map(|item| item.bytes)
            .sum();
        scratch.clear();
        if scratch.capacity() < bytes {
            return Err(Error::Internal(format!(
                "scratch buffer of {} bytes for a batch of {bytes}",
                scratch.capacity()
            )));
        }
        let layout = OutLayout::c_order(&[(bytes / elem) as u64], elem);
        let mut plans = Vec::with_capacity(batch.len());
        let mut supplied = Vec::with_capacity(batch.len());
        let mut fetched = Vec::with_capacity(batch.len());
        let mut at = 0u64;
        for &i in batch {
            let p = &planned[i];
            let Some(item) = &p.item else { continue };
            let extent: Vec<u64> = item.bbox.iter().map(|r| r.end - r.start).collect();
            let n = (item.bytes / elem) as u64;
            plans.push(ChunkPlan {
                key: p.key.to_string(),
                index: None,
                placement: Placement {
                    chunk_shape: p.shape.to_vec(),
                    want: item.bbox.clone(),
                    out_offset: at as usize * elem,
                    out_strides: c_strides(&extent, elem),
                },
                out_box: std::iter::once(at..at + n).collect(),
            });
            match source {
                Source::Store => {}
                Source::Supplied(list) => supplied.push(list[i]),
                Source::Fetched(list) => fetched.push(list[i].clone()),
            }
            at += n;
        }
        check(&plans, &layout, true)?;
        let source = match source {
            Source::Store => Source::Store,
            Source::Supplied(_) => Source::Supplied(&supplied),
            Source::Fetched(_) => Source::Fetched(&fetched),
        };
        // SAFETY: `scratch` has capacity `bytes` and outlives `out`; the checked plan gives
        // every box its own part of it.
        let out = unsafe { OutPtr::new(scratch.as_mut_ptr(), bytes) };
        let found = self.read_plan(&plans, &out, source, None)?;
        // SAFETY: the checked plan covers every scratch element and every box was decoded or
        // filled (or an error returned above).
        unsafe { scratch.set_len(bytes) };
        Ok(found)
    }
}

/// Copies element `k` of `values` to byte `offsets[k]` of `out`, a run of elements adjacent
/// on both sides as one copy.
fn scatter_values(values: &[u8], offsets: &[usize], elem: usize, out: &OutPtr) -> Result<()> {
    let outside = |_| Error::InvalidSelection("an output position outside the output".into());
    let mut k = 0;
    while k < offsets.len() {
        let mut n = 1;
        while k + n < offsets.len() && offsets[k + n] == offsets[k] + n * elem {
            n += 1;
        }
        out.write(offsets[k], &values[k * elem..(k + n) * elem])
            .map_err(outside)?;
        k += n;
    }
    Ok(())
}

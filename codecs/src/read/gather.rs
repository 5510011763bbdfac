//! Reading a [`Pick`] (steps, index arrays, points): output positions are grouped by the
//! chunk of the read grid that holds them (inner chunks of a shard), each touched chunk's
//! bounding box of wanted elements is read once through the ordinary plan path (cache,
//! shards, object stores) into a bounded scratch buffer, and its elements are gathered from
//! there into their output positions, contiguous runs with one copy each. Every output
//! position belongs to exactly one chunk, so the parallel gathers write disjoint bytes;
//! [`check_partition`] proves it before any write.

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;

use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::index::for_each_index;
use crate::layout::placement::{c_strides, Placement};
use crate::layout::plan::{check, ChunkPlan, OutLayout};
use crate::memory::buffer::{checked_nbytes, try_output_buffer, AlignedOutput};
use crate::memory::out::OutPtr;
use crate::process::pool::try_each;
use crate::read::cache::ChunkCache;
use crate::read::pick_direct::PickOut;
use crate::read::Source;
use crate::select::pick::{Factor, Pick};

/// Scratch bytes per batch of chunks (a batch has at least one chunk): bounds the memory a
/// selection over many large chunks needs besides its output.
const SCRATCH_BYTES: usize = 64 << 20;

/// The part of one factor that falls in one chunk of the read grid.
#[derive(Clone, Debug, Default)]
pub(crate) struct Group {
    /// Chunk coordinates along the factor's axes.
    pub chunk: Vec<u64>,
    /// Bounding box of the wanted elements, chunk-relative, per factor axis.
    pub lo: Vec<u64>,
    pub hi: Vec<u64>,
    /// Output positions along the factor, and their chunk-relative coordinates
    /// (row-major: position, factor axis).
    pub pos: Vec<u64>,
    pub local: Vec<u64>,
}

impl Group {
    fn new(chunk: Vec<u64>) -> Self {
        let k = chunk.len();
        Self {
            chunk,
            lo: vec![u64::MAX; k],
            hi: vec![0; k],
            ..Self::default()
        }
    }

    fn push(&mut self, pos: u64, local: &[u64]) {
        self.pos.push(pos);
        for (t, &l) in local.iter().enumerate() {
            self.lo[t] = self.lo[t].min(l);
            self.hi[t] = self.hi[t].max(l + 1);
        }
        self.local.extend_from_slice(local);
    }
}

/// Splits factor `f` by the chunks of `grid`.
pub(crate) fn group_factor(f: &Factor, grid: &ChunkGrid) -> Vec<Group> {
    match f {
        Factor::Step {
            axis,
            start,
            step,
            count,
        } => {
            let mut groups: Vec<Group> = Vec::new();
            let mut span = 0..0; // the current chunk's elements
            for i in 0..*count {
                // In bounds: `Pick::new` checked the first and last element.
                let idx = (i128::from(*start) + i128::from(i) * i128::from(*step)) as u64;
                // A progression visits each chunk in one run.
                if groups.is_empty() || !span.contains(&idx) {
                    let chunk = grid.chunk_at(*axis, idx);
                    let lo = grid.start(*axis, chunk);
                    span = lo..lo + grid.edge(*axis, chunk);
                    groups.push(Group::new(vec![chunk]));
                }
                if let Some(g) = groups.last_mut() {
                    g.push(i, &[idx - span.start]);
                }
            }
            groups
        }
        Factor::Points { axes, coords } => {
            let k = axes.len();
            let mut at: HashMap<Vec<u64>, usize> = HashMap::new();
            let mut groups: Vec<Group> = Vec::new();
            let mut local = vec![0; k];
            for (p, point) in coords.chunks_exact(k).enumerate() {
                let chunk: Vec<u64> = point
                    .iter()
                    .zip(axes)
                    .map(|(&x, &a)| grid.chunk_at(a, x))
                    .collect();
                for (t, (&x, &a)) in point.iter().zip(axes).enumerate() {
                    local[t] = x - grid.start(a, chunk[t]);
                }
                let g = *at.entry(chunk.clone()).or_insert_with(|| {
                    groups.push(Group::new(chunk));
                    groups.len() - 1
                });
                groups[g].push(p as u64, &local);
            }
            groups
        }
    }
}

/// Checks that the groups of every factor cover each of its output positions exactly once:
/// then every output element belongs to exactly one chunk (one group per factor), so the
/// gathers of different chunks write disjoint elements and together write all of them.
pub(crate) fn check_partition(factors: &[Factor], groups: &[Vec<Group>]) -> Result<()> {
    for (f, gs) in factors.iter().zip(groups) {
        let n = usize::try_from(f.count())
            .map_err(|_| Error::InvalidSelection("selection too large".into()))?;
        let mut seen = vec![false; n];
        for g in gs {
            for &p in &g.pos {
                match seen.get_mut(p as usize) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(Error::Internal(format!(
                            "gather plan: output position {p} of a factor of {n} placed twice \
                             or outside"
                        )))
                    }
                }
            }
        }
        if seen.iter().any(|s| !s) {
            return Err(Error::Internal(
                "gather plan: an output position is not placed".into(),
            ));
        }
    }
    Ok(())
}

/// One touched chunk: which group of each factor it combines.
pub(crate) struct Item {
    pub groups: Vec<usize>,
    /// Per array axis: the wanted box in array coordinates.
    pub bbox: Vec<Range<u64>>,
    pub bytes: usize,
}

impl Array {
    /// The grid a selection is grouped by: inner chunks of a shard zarrpipe decodes
    /// itself (each read on its own), else the stored chunks.
    fn pick_grid(&self) -> Result<&ChunkGrid> {
        Ok(match self.chain()?.plain_sharding() {
            Some(_) => &self.read_grid,
            None => &self.grid,
        })
    }

    /// Reads `pick` into a fresh C-order buffer of `pick.out_shape()` that nobody else
    /// holds. Runs on the current rayon pool.
    pub fn read_pick(&self, pick: &Pick, cache: Option<&ChunkCache>) -> Result<Bytes> {
        if let Some(region) = pick.as_region() {
            return self.read_region(&region, cache);
        }
        let elem = self.info.dtype.size();
        let nbytes = checked_nbytes(&pick.out_shape(), elem)?;
        self.chain()?;
        if nbytes == 0 {
            return Ok(Bytes::new());
        }
        let mut buf = AlignedOutput::new(
            nbytes,
            &format!("reading {nbytes} bytes of {}", self.info.path),
        )?;
        // SAFETY: `buf` has room for `nbytes` and outlives `out`; `gather` checks that the
        // chunks' output positions partition the output before any write.
        let out = unsafe { OutPtr::new(buf.as_mut_ptr(), nbytes) };
        self.gather(pick, &out, cache)?;
        // SAFETY: `gather` returned Ok, so every output element was written (the checked
        // partition covers all of them, and every chunk was gathered).
        Ok(unsafe { buf.into_bytes() })
    }

    /// Reads `pick` into the caller's C-order buffer `out` of `pick.out_shape()`.
    pub fn read_pick_into(
        &self,
        pick: &Pick,
        out: &OutPtr,
        cache: Option<&ChunkCache>,
    ) -> Result<()> {
        let elem = self.info.dtype.size();
        let shape = pick.out_shape();
        let nbytes = checked_nbytes(&shape, elem)?;
        if out.len() != nbytes {
            return Err(Error::InvalidArgument(format!(
                "output buffer of {} bytes for a selection of {nbytes}",
                out.len()
            )));
        }
        if let Some(region) = pick.as_region() {
            let layout = OutLayout::c_order(&shape, elem);
            return self.read_region_into(&region, out, &layout, cache);
        }
        self.chain()?;
        if nbytes == 0 {
            return Ok(());
        }
        self.gather(pick, out, cache)
    }

    /// Plans, reads and gathers `pick` into `out` (C order, exactly its size).
    fn gather(&self, pick: &Pick, out: &OutPtr, cache: Option<&ChunkCache>) -> Result<()> {
        let elem = self.info.dtype.size();
        let grid = self.pick_grid()?;
        let factors = pick.factors();
        let groups: Vec<Vec<Group>> = factors.iter().map(|f| group_factor(f, grid)).collect();
        check_partition(factors, &groups)?;
        let items = self.items(factors, &groups, grid, elem)?;
        let out_strides = c_strides(&pick.out_shape(), elem);
        if self.gathers_directly(&items, cache.is_some()) {
            let to = PickOut {
                factors,
                groups: &groups,
                out,
                out_strides: &out_strides,
            };
            return self.gather_direct(&items, &to);
        }
        // Batches of consecutive items within SCRATCH_BYTES (at least one item each).
        let mut batches: Vec<(Range<usize>, usize)> = Vec::new();
        let mut start = 0;
        while start < items.len() {
            let mut end = start + 1;
            let mut bytes = items[start].bytes;
            while end < items.len() && bytes + items[end].bytes <= SCRATCH_BYTES {
                bytes += items[end].bytes;
                end += 1;
            }
            batches.push((start..end, bytes));
            start = end;
        }
        // One scratch buffer for every batch: its pages are faulted in once, not once per
        // batch (a selection touching every chunk decodes as many bytes as a read-all).
        let largest = batches.iter().map(|(_, b)| *b).max().unwrap_or(0);
        let mut scratch = try_output_buffer(largest, "a selection's scratch buffer")?;
        for (range, bytes) in batches {
            let batch = &items[range];
            self.read_boxes(batch, bytes, cache, &mut scratch)?;
            let mut offsets = Vec::with_capacity(batch.len());
            let mut at = 0;
            for item in batch {
                offsets.push(at);
                at += item.bytes;
            }
            let placed: Vec<(&Item, usize)> = batch.iter().zip(offsets).collect();
            try_each(&placed, |&(item, off)| {
                gather_item(
                    factors,
                    &groups,
                    item,
                    &scratch[off..off + item.bytes],
                    out,
                    &out_strides,
                    elem,
                )
            })?;
        }
        Ok(())
    }

    /// Every touched chunk (a combination of one group per factor) and its box.
    pub(crate) fn items(
        &self,
        factors: &[Factor],
        groups: &[Vec<Group>],
        grid: &ChunkGrid,
        elem: usize,
    ) -> Result<Vec<Item>> {
        let ndim = self.info.shape.len();
        let counts: Vec<Range<u64>> = groups.iter().map(|g| 0..g.len() as u64).collect();
        let total = counts
            .iter()
            .try_fold(1u128, |acc, r| acc.checked_mul(u128::from(r.end)))
            .and_then(|c| usize::try_from(c).ok())
            .ok_or_else(|| Error::OutOfMemory {
                bytes: u128::MAX,
                what: "planning a selection over too many chunks".into(),
            })?;
        let mut items = Vec::new();
        items
            .try_reserve_exact(total)
            .map_err(|_| Error::OutOfMemory {
                bytes: total as u128 * std::mem::size_of::<Item>() as u128,
                what: format!("planning a selection over {total} chunks"),
            })?;
        let mut err = None;
        for_each_index(&counts, |combo| {
            let mut bbox = vec![0..0; ndim];
            for ((f, gs), &g) in factors.iter().zip(groups).zip(combo) {
                let group = &gs[g as usize];
                for (t, &a) in f.axes().iter().enumerate() {
                    let origin = grid.start(a, group.chunk[t]);
                    bbox[a] = origin + group.lo[t]..origin + group.hi[t];
                }
            }
            let extent: Vec<u64> = bbox.iter().map(|r| r.end - r.start).collect();
            match checked_nbytes(&extent, elem) {
                Ok(bytes) => items.push(Item {
                    groups: combo.iter().map(|&g| g as usize).collect(),
                    bbox,
                    bytes,
                }),
                Err(e) => err = Some(e),
            }
        });
        err.map_or(Ok(items), Err)
    }

    /// Reads the boxes of `batch` one after the other into the first `bytes` of `scratch`
    /// (its capacity is at least `bytes`), through the plan path (each box is inside one
    /// chunk of the read grid).
    fn read_boxes(
        &self,
        batch: &[Item],
        bytes: usize,
        cache: Option<&ChunkCache>,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let elem = self.info.dtype.size();
        // Nothing of the last batch is read again: the plan below writes all `bytes`.
        scratch.clear();
        if scratch.capacity() < bytes {
            return Err(Error::Internal(format!(
                "scratch buffer of {} bytes for a batch of {bytes}",
                scratch.capacity()
            )));
        }
        let total = (bytes / elem) as u64;
        let layout = OutLayout::c_order(&[total], elem);
        let mut plans = Vec::with_capacity(batch.len());
        let mut at = 0u64;
        for item in batch {
            let index = origin_index(&self.grid, &item.bbox);
            let chunk_shape = self.grid.chunk_shape(&index);
            let origin = self.grid.origin(&index);
            let want: Vec<Range<u64>> = (item.bbox.iter().zip(&origin))
                .map(|(r, &o)| r.start - o..r.end - o)
                .collect();
            let extent: Vec<u64> = item.bbox.iter().map(|r| r.end - r.start).collect();
            let n = (item.bytes / elem) as u64;
            plans.push(ChunkPlan {
                key: self.chunk_key(&index),
                index: Some(index),
                placement: Placement {
                    chunk_shape,
                    want,
                    out_offset: at as usize * elem,
                    out_strides: c_strides(&extent, elem),
                },
                out_box: std::iter::once(at..at + n).collect(),
            });
            at += n;
        }
        check(&plans, &layout, true)?;
        // SAFETY: `scratch` has capacity `bytes` and outlives `out`; the checked plan gives
        // every box its own part of it.
        let out = unsafe { OutPtr::new(scratch.as_mut_ptr(), bytes) };
        self.read_plan(&plans, &out, Source::Store, cache)?;
        // SAFETY: the checked plan covers every scratch element and every box was decoded or
        // filled (or an error returned above).
        unsafe { scratch.set_len(bytes) };
        Ok(())
    }
}

/// The stored chunk holding the first element of `bbox`.
pub(crate) fn origin_index(grid: &ChunkGrid, bbox: &[Range<u64>]) -> Vec<u64> {
    (bbox.iter().enumerate())
        .map(|(a, r)| grid.chunk_at(a, r.start))
        .collect()
}

/// Copies one chunk's wanted elements from its box `src` (C order over `item.bbox`) to their
/// output positions.
pub(crate) fn gather_item(
    factors: &[Factor],
    groups: &[Vec<Group>],
    item: &Item,
    src: &[u8],
    out: &OutPtr,
    out_strides: &[isize],
    elem: usize,
) -> Result<()> {
    let extent: Vec<u64> = item.bbox.iter().map(|r| r.end - r.start).collect();
    let box_strides = c_strides(&extent, elem);
    let runs = Runs {
        factors,
        groups,
        item_groups: &item.groups,
        out_strides,
        elem,
    };
    runs.for_each(&box_strides, true, |d, s, n| {
        let piece = src
            .get(s..s + n)
            .ok_or_else(|| Error::Internal("gather outside its box".into()))?;
        out.write(d, piece)
            .map_err(|_| Error::Internal("gather outside its buffers".into()))
    })
}

/// The elements of one touched chunk: which output positions (C order, `out_strides`) go
/// to which positions of the chunk.
pub(crate) struct Runs<'a> {
    pub factors: &'a [Factor],
    pub groups: &'a [Vec<Group>],
    /// The group of each factor that this chunk combines.
    pub item_groups: &'a [usize],
    pub out_strides: &'a [isize],
    pub elem: usize,
}

impl Runs<'_> {
    /// Calls `f(output offset, chunk offset, bytes)` for each run of elements contiguous on
    /// both sides, in output order (so of repeated positions the last one comes last). Chunk
    /// offsets use `strides` per array axis from the box of wanted elements (`from_box`) or
    /// from the chunk's origin.
    pub fn for_each(
        &self,
        strides: &[isize],
        from_box: bool,
        mut f: impl FnMut(usize, usize, usize) -> Result<()>,
    ) -> Result<()> {
        let elem = self.elem;
        // Per factor: (output byte offset, chunk byte offset) of each of its positions here.
        let mut entries: Vec<Vec<(usize, usize)>> = Vec::with_capacity(self.factors.len());
        for ((f, gs), &g) in self.factors.iter().zip(self.groups).zip(self.item_groups) {
            let group = &gs[g];
            let k = f.axes().len();
            let k_stride = self.out_strides[entries.len()] as usize;
            let list = group
                .pos
                .iter()
                .zip(group.local.chunks_exact(k))
                .map(|(&p, local)| {
                    let s: usize = local
                        .iter()
                        .zip(f.axes())
                        .enumerate()
                        .map(|(t, (&l, &a))| {
                            let l = if from_box { l - group.lo[t] } else { l };
                            l as usize * strides[a] as usize
                        })
                        .sum();
                    (p as usize * k_stride, s)
                })
                .collect();
            entries.push(list);
        }
        let Some(last) = entries.pop() else {
            // A 0-d array: one element.
            return f(0, 0, elem);
        };
        // Runs of the innermost factor that are contiguous on both sides: one copy each.
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        for (d, s) in last {
            match runs.last_mut() {
                Some((rd, rs, n)) if *rd + *n == d && *rs + *n == s => *n += elem,
                _ => runs.push((d, s, elem)),
            }
        }
        let outer: Vec<Range<u64>> = entries.iter().map(|e| 0..e.len() as u64).collect();
        let mut result = Ok(());
        for_each_index(&outer, |combo| {
            if result.is_err() {
                return;
            }
            let (mut d0, mut s0) = (0usize, 0usize);
            for (e, &j) in entries.iter().zip(combo) {
                let (d, s) = e[j as usize];
                d0 += d;
                s0 += s;
            }
            for &(d, s, n) in &runs {
                if let Err(e) = f(d0 + d, s0 + s, n) {
                    result = Err(e);
                    return;
                }
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_group_by_chunk_in_runs() {
        let f = Factor::Step {
            axis: 0,
            start: 9,
            step: -2,
            count: 5,
        };
        let gs = group_factor(&f, &ChunkGrid::regular(&[10], &[4]));
        let chunks: Vec<u64> = gs.iter().map(|g| g.chunk[0]).collect();
        assert_eq!(chunks, vec![2, 1, 0]);
        assert_eq!(gs[1].pos, vec![1, 2]);
        assert_eq!((gs[1].lo[0], gs[1].hi[0]), (1, 4));
        check_partition(&[f], &[gs]).unwrap();
    }

    #[test]
    fn points_group_by_chunk_with_repeats() {
        let f = Factor::Points {
            axes: vec![0, 1],
            coords: vec![0, 0, 5, 5, 0, 1, 5, 5, 1, 0],
        };
        let gs = group_factor(&f, &ChunkGrid::regular(&[6, 6], &[2, 2]));
        assert_eq!(gs.len(), 2);
        assert_eq!(gs[0].pos, vec![0, 2, 4]);
        assert_eq!(gs[1].pos, vec![1, 3]);
        assert_eq!(
            (gs[1].lo.clone(), gs[1].hi.clone()),
            (vec![1, 1], vec![2, 2])
        );
        check_partition(std::slice::from_ref(&f), std::slice::from_ref(&gs)).unwrap();
        let mut twice = gs.clone();
        twice[1].pos = vec![1, 2];
        assert!(check_partition(std::slice::from_ref(&f), &[twice]).is_err());
        let mut short = gs;
        short.pop();
        assert!(check_partition(&[f], &[short]).is_err());
    }
}

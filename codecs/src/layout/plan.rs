//! The one plan: which stored chunks a read touches and where each one's wanted part lands
//! in the output, checked before any thread writes — every placement lies inside the output
//! buffer, the output does not overlap itself, and no two placements write the same
//! element. These checks are what makes the parallel, unsynchronised writes of the decoders
//! sound, whoever built the request (the engine from a selection, or zarr-python's planner
//! through the pipeline).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::index::for_each_index;
use crate::layout::placement::{c_strides, Placement};

/// The memory a read writes into: an N-d array of `elem`-byte elements with `shape` and
/// byte `strides` (any sign), whose element 0 is at byte `base` of a buffer of `len` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutLayout {
    pub shape: Vec<u64>,
    pub strides: Vec<isize>,
    pub base: usize,
    pub len: usize,
    pub elem: usize,
}

impl OutLayout {
    /// A fresh C-order buffer of `shape` (its byte size already checked to fit).
    #[must_use]
    pub fn c_order(shape: &[u64], elem: usize) -> Self {
        let len = shape.iter().product::<u64>() as usize * elem;
        Self {
            shape: shape.to_vec(),
            strides: c_strides(shape, elem),
            base: 0,
            len,
            elem,
        }
    }

    /// A caller's buffer: `len` bytes from its lowest address, element 0 at `base`. Refused
    /// unless every element lies inside the buffer and no two elements share bytes.
    pub fn strided(
        shape: &[u64],
        strides: &[isize],
        base: usize,
        len: usize,
        elem: usize,
    ) -> Result<Self> {
        let bad = |why: String| Error::InvalidArgument(format!("output buffer: {why}"));
        if shape.len() != strides.len() {
            return Err(bad(format!(
                "{} strides for {} dimensions",
                strides.len(),
                shape.len()
            )));
        }
        let layout = Self {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            base,
            len,
            elem,
        };
        if layout.is_empty() {
            return Ok(layout);
        }
        let (lo, hi) = layout
            .byte_span()
            .ok_or_else(|| bad("strides overflow".into()))?;
        if lo < 0 || hi > len as i128 {
            return Err(bad(format!(
                "elements reach bytes {lo}..{hi} of a {len}-byte buffer"
            )));
        }
        if layout.overlaps_itself() {
            return Err(bad(format!(
                "strides {strides:?} make elements of shape {shape:?} share memory"
            )));
        }
        Ok(layout)
    }

    /// Whether the output has no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// The lowest and one-past-highest byte any element touches, relative to the buffer.
    fn byte_span(&self) -> Option<(i128, i128)> {
        let mut lo = self.base as i128;
        let mut hi = self.base as i128 + self.elem as i128;
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let reach = i128::from(n.checked_sub(1)?).checked_mul(s as i128)?;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        Some((lo, hi))
    }

    /// Sufficient test for no internal overlap (NumPy's ordering argument): sorted by
    /// stride, each axis must step over everything the smaller axes span.
    fn overlaps_itself(&self) -> bool {
        let mut axes: Vec<(u128, u64)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (s.unsigned_abs() as u128, n))
            .collect();
        axes.sort_unstable();
        let mut span = self.elem as u128;
        for (stride, n) in axes {
            if stride < span {
                return true;
            }
            span += stride * u128::from(n - 1);
        }
        false
    }
}

/// One stored chunk (or shard) a read touches: its store key, its index in the storage
/// grid when the engine planned it, where its wanted part lands, and the output elements
/// that part covers (one range per output axis).
#[derive(Clone, Debug)]
pub struct ChunkPlan {
    pub key: String,
    pub index: Option<Vec<u64>>,
    pub placement: Placement,
    pub out_box: Vec<Range<u64>>,
}

/// How one chunk axis is selected by a request in element terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkAxis {
    /// `start..stop` of the chunk, landing on the next output axis.
    Range(u64, u64),
    /// One element; the axis has no output axis.
    Index(u64),
}

impl ChunkPlan {
    /// A chunk of `chunk_shape` at `key` whose selection `chunk_sel` (per chunk axis) lands
    /// at `out_sel` (per output axis, in order of the non-index chunk axes) of `out`.
    pub fn from_request(
        key: String,
        chunk_shape: &[u64],
        chunk_sel: &[ChunkAxis],
        out_sel: &[Range<u64>],
        out: &OutLayout,
    ) -> Result<Self> {
        let bad = |why: String| Error::InvalidSelection(format!("chunk {key:?}: {why}"));
        if chunk_sel.len() != chunk_shape.len() {
            return Err(bad(format!(
                "{} selections for {} chunk axes",
                chunk_sel.len(),
                chunk_shape.len()
            )));
        }
        if out_sel.len() != out.shape.len() {
            return Err(bad(format!(
                "{} output ranges for a {}-d output",
                out_sel.len(),
                out.shape.len()
            )));
        }
        let mut want = Vec::with_capacity(chunk_shape.len());
        let mut strides = Vec::with_capacity(chunk_shape.len());
        let mut delta: i128 = 0;
        let mut axes = out_sel.iter().zip(&out.shape).zip(&out.strides);
        for (sel, &n) in chunk_sel.iter().zip(chunk_shape) {
            match *sel {
                ChunkAxis::Index(i) if i < n => {
                    want.push(i..i + 1);
                    strides.push(0);
                }
                ChunkAxis::Range(a, b) if a <= b && b <= n => {
                    let ((o, &size), &stride) = axes
                        .next()
                        .ok_or_else(|| bad("more chunk ranges than output axes".into()))?;
                    if o.start > o.end || o.end > size || o.end - o.start != b - a {
                        return Err(bad(format!(
                            "chunk range {a}..{b} does not fit output range {o:?} of size {size}"
                        )));
                    }
                    want.push(a..b);
                    strides.push(stride);
                    delta += i128::from(o.start) * stride as i128;
                }
                other => return Err(bad(format!("{other:?} is outside a chunk of {n}"))),
            }
        }
        if axes.next().is_some() {
            return Err(bad("fewer chunk ranges than output axes".into()));
        }
        let out_offset = usize::try_from(out.base as i128 + delta)
            .map_err(|_| bad("lands before the output buffer".into()))?;
        Ok(Self {
            key,
            index: None,
            placement: Placement {
                chunk_shape: chunk_shape.to_vec(),
                want,
                out_offset,
                out_strides: strides,
            },
            out_box: out_sel.to_vec(),
        })
    }
}

/// Plans a read of `region` (array coordinates, one range per axis) from the chunks of
/// `grid` into `out`, whose axes are the region's axes (length-1 axes for integer
/// selections included). `key` names the chunk at a grid index.
pub fn plan_region(
    region: &[Range<u64>],
    grid: &ChunkGrid,
    out: &OutLayout,
    key: impl Fn(&[u64]) -> String,
) -> Result<Vec<ChunkPlan>> {
    let extent: Vec<u64> = region.iter().map(|r| r.end - r.start).collect();
    if extent != out.shape {
        return Err(Error::InvalidArgument(format!(
            "output shape {:?} does not match the selection's {extent:?}",
            out.shape
        )));
    }
    if extent.contains(&0) {
        return Ok(Vec::new());
    }
    let chunks: Vec<Range<u64>> = region
        .iter()
        .enumerate()
        .map(|(a, r)| grid.covering(a, r))
        .collect();
    // A plan per chunk: refuse (MemoryError) a selection over more chunks than memory holds
    // plans for, rather than growing until the OOM killer ends the process.
    let count = chunks
        .iter()
        .try_fold(1u128, |acc, g| acc.checked_mul(u128::from(g.end - g.start)));
    let what = || format!("planning a read over {count:?} chunks");
    let count = count
        .and_then(|c| usize::try_from(c).ok())
        .ok_or_else(|| Error::OutOfMemory {
            bytes: u128::MAX,
            what: what(),
        })?;
    let mut plans = Vec::new();
    plans
        .try_reserve_exact(count)
        .map_err(|_| Error::OutOfMemory {
            bytes: (count as u128) * std::mem::size_of::<ChunkPlan>() as u128,
            what: what(),
        })?;
    for_each_index(&chunks, |index| {
        let origin = grid.origin(index);
        let chunk_shape = grid.chunk_shape(index);
        if let Some(placement) =
            Placement::new(&origin, &chunk_shape, region, &out.strides, out.base)
        {
            let out_box = placement
                .want
                .iter()
                .zip(&origin)
                .zip(region)
                .map(|((w, &o), r)| w.start + o - r.start..w.end + o - r.start)
                .collect();
            plans.push(ChunkPlan {
                key: key(index),
                index: Some(index.to_vec()),
                placement,
                out_box,
            });
        }
    });
    Ok(plans)
}

/// Checks a plan before any thread writes: every box inside the output, no two boxes
/// sharing an element, and (`must_cover`: a fresh buffer that must not keep uninitialised
/// bytes) every element covered.
pub fn check(plans: &[ChunkPlan], out: &OutLayout, must_cover: bool) -> Result<()> {
    let internal = |why: String| Error::InvalidSelection(format!("invalid read plan: {why}"));
    for p in plans {
        if p.out_box.len() != out.shape.len()
            || p.out_box
                .iter()
                .zip(&out.shape)
                .any(|(b, &n)| b.start >= b.end || b.end > n)
        {
            return Err(internal(format!(
                "chunk {:?} lands at {:?}, outside an output of shape {:?}",
                p.key, p.out_box, out.shape
            )));
        }
        let wanted: u128 = p
            .placement
            .want
            .iter()
            .map(|w| u128::from(w.end - w.start))
            .product();
        if wanted != volume(&p.out_box) {
            return Err(internal(format!(
                "chunk {:?} selects {wanted} elements for {} output elements",
                p.key,
                volume(&p.out_box)
            )));
        }
    }
    if let Some((a, b)) = first_overlap(plans) {
        return Err(internal(format!(
            "chunks {:?} and {:?} both write output elements {:?} and {:?}",
            plans[a].key, plans[b].key, plans[a].out_box, plans[b].out_box
        )));
    }
    if must_cover {
        let covered: u128 = plans.iter().map(|p| volume(&p.out_box)).sum();
        let all: u128 = out.shape.iter().map(|&n| u128::from(n)).product();
        if covered != all && !out.is_empty() {
            return Err(internal(format!(
                "{covered} of {all} output elements would be written"
            )));
        }
    }
    Ok(())
}

fn volume(b: &[Range<u64>]) -> u128 {
    b.iter().map(|r| u128::from(r.end - r.start)).product()
}

/// The first pair of boxes that share an element: a sweep along the axis with the most
/// distinct box starts (the chunk grid's busiest axis), so grid plans cost n log n.
fn first_overlap(plans: &[ChunkPlan]) -> Option<(usize, usize)> {
    let ndim = plans.first()?.out_box.len();
    if ndim == 0 {
        return (plans.len() > 1).then_some((0, 1));
    }
    let axis = (0..ndim)
        .max_by_key(|&a| {
            let mut starts: Vec<u64> = plans.iter().map(|p| p.out_box[a].start).collect();
            starts.sort_unstable();
            starts.dedup();
            starts.len()
        })
        .unwrap_or(0);
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| plans[i].out_box[axis].start);
    let mut active: Vec<usize> = Vec::new();
    for &i in &order {
        let start = plans[i].out_box[axis].start;
        active.retain(|&j| plans[j].out_box[axis].end > start);
        for &j in &active {
            let meet = plans[i]
                .out_box
                .iter()
                .zip(&plans[j].out_box)
                .all(|(a, b)| a.start < b.end && b.start < a.end);
            if meet {
                return Some((j, i));
            }
        }
        active.push(i);
    }
    None
}

#[cfg(test)]
// `&[0..4]` is a slice of one range on purpose: a request of one run.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn key(i: &[u64]) -> String {
        format!("c/{i:?}")
    }

    #[test]
    fn a_grid_plan_covers_the_region_once() {
        let out = OutLayout::c_order(&[5, 7], 2);
        let grid = ChunkGrid::regular(&[8, 9], &[4, 3]);
        let plans = plan_region(&[3..8, 1..8], &grid, &out, key).unwrap();
        assert_eq!(plans.len(), 2 * 3);
        check(&plans, &out, true).unwrap();
        assert_eq!(plans[0].out_box, vec![0..1, 0..2]);
        assert_eq!(plans[0].index.as_deref(), Some(&[0u64, 0][..]));
    }

    #[test]
    fn a_rectilinear_plan_places_chunks_of_every_size() {
        let grid = ChunkGrid::from_edges(
            &[10],
            &[crate::layout::grid::AxisSpec::Edges(vec![2, 5, 3])],
        )
        .unwrap();
        let out = OutLayout::c_order(&[8], 1);
        let plans = plan_region(&[1..9], &grid, &out, key).unwrap();
        check(&plans, &out, true).unwrap();
        let boxes: Vec<_> = plans.iter().map(|p| p.out_box[0].clone()).collect();
        assert_eq!(boxes, [0..1, 1..6, 6..8]);
        assert_eq!(plans[1].placement.chunk_shape, [5]);
        assert_eq!(plans[2].placement.want, [0..2]);
    }

    #[test]
    fn overlapping_placements_are_refused_before_any_write() {
        let out = OutLayout::c_order(&[4, 4], 1);
        let a = ChunkPlan::from_request(
            "a".into(),
            &[2, 4],
            &[ChunkAxis::Range(0, 2), ChunkAxis::Range(0, 4)],
            &[0..2, 0..4],
            &out,
        )
        .unwrap();
        let b = ChunkPlan::from_request(
            "b".into(),
            &[2, 4],
            &[ChunkAxis::Range(0, 2), ChunkAxis::Range(0, 4)],
            &[1..3, 0..4],
            &out,
        )
        .unwrap();
        let err = check(&[a.clone(), b], &out, false).unwrap_err().to_string();
        assert!(err.contains("both write"), "{err}");
        let c = ChunkPlan::from_request(
            "c".into(),
            &[2, 4],
            &[ChunkAxis::Range(0, 2), ChunkAxis::Range(0, 4)],
            &[2..4, 0..4],
            &out,
        )
        .unwrap();
        check(&[a.clone(), c.clone()], &out, true).unwrap();
        assert!(
            check(&[a], &out, true).is_err(),
            "half the output unwritten"
        );
    }

    #[test]
    fn requests_that_do_not_fit_are_refused() {
        let out = OutLayout::c_order(&[4], 1);
        for (sel, o) in [
            (ChunkAxis::Range(0, 3), 0..2),
            (ChunkAxis::Range(0, 5), 0..5),
            (ChunkAxis::Range(2, 1), 0..0),
            (ChunkAxis::Index(4), 0..1),
        ] {
            assert!(
                ChunkPlan::from_request("k".into(), &[4], &[sel], std::slice::from_ref(&o), &out)
                    .is_err(),
                "{sel:?} -> {o:?}"
            );
        }
        let dropped = ChunkPlan::from_request(
            "k".into(),
            &[3, 4],
            &[ChunkAxis::Index(2), ChunkAxis::Range(1, 3)],
            &[2..4],
            &out,
        )
        .unwrap();
        assert_eq!(dropped.placement.out_offset, 2);
        assert_eq!(dropped.placement.out_strides, vec![0, 1]);
    }

    #[test]
    fn caller_buffers_are_checked() {
        // A reversed view: element 0 at the end, stride -8.
        let l = OutLayout::strided(&[4], &[-8], 24, 32, 8).unwrap();
        assert_eq!(l.byte_span(), Some((0, 32)));
        assert!(
            OutLayout::strided(&[4], &[-8], 16, 32, 8).is_err(),
            "before the start"
        );
        assert!(
            OutLayout::strided(&[4], &[8], 8, 32, 8).is_err(),
            "past the end"
        );
        assert!(
            OutLayout::strided(&[3, 4], &[8, 8], 0, 64, 8).is_err(),
            "self-overlap"
        );
        assert!(
            OutLayout::strided(&[3, 4], &[0, 8], 0, 32, 8).is_err(),
            "broadcast"
        );
        OutLayout::strided(&[3, 4], &[8, 24], 0, 96, 8).unwrap();
        OutLayout::strided(&[1, 4], &[0, 8], 0, 32, 8).unwrap();
    }
}

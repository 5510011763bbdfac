//! Whole rows along one axis, for the batch loader: [`Array::read_rows`] reads several
//! ranges of rows (every other axis whole), stacked in the order given, into one fresh
//! buffer in one parallel pass, every chunk decoded straight into place; [`gather_rows`]
//! copies chosen rows of such buffers into a fresh batch. A shuffled window of chunks is
//! read once with the first and cut into shuffled batches with the second, so each chunk is
//! decoded once per epoch and each batch costs one copy.

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::Bytes;
use rayon::prelude::*;

use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::plan::{check, plan_region, OutLayout};
use crate::memory::buffer::{checked_nbytes, try_output_buffer, AlignedOutput};
use crate::memory::out::OutPtr;
use crate::read::cache::ChunkCache;
use crate::read::Source;

/// Rows of one source buffer to copy: a C-order buffer of `shape`, and the indices along
/// the gather axis of the rows wanted, in output order.
pub struct RowSource<'a> {
    pub bytes: &'a [u8],
    pub shape: &'a [u64],
    pub rows: &'a [u64],
}

impl Array {
    /// Reads the rows `ranges` along `axis` (each `start..end`, in bounds, any order, may
    /// repeat) into a C-order buffer whose `axis` has the ranges' total length and every
    /// other axis the array's. One plan for all ranges, decoded in parallel on the current
    /// rayon pool; nobody else holds the result. The buffer is `reuse` when it is large
    /// enough (its memory is already faulted in, which on virtual machines costs as much as
    /// decoding), else a fresh one.
    pub fn read_rows(
        &self,
        axis: usize,
        ranges: &[Range<u64>],
        cache: Option<&ChunkCache>,
        reuse: Option<Vec<u8>>,
    ) -> Result<(Bytes, Vec<u64>)> {
        let shape = &self.info.shape;
        let Some(&len) = shape.get(axis) else {
            return Err(Error::InvalidArgument(format!(
                "axis {axis} of an array of {} dimensions",
                shape.len()
            )));
        };
        let mut total = 0u64;
        for r in ranges {
            if r.start > r.end || r.end > len {
                return Err(Error::InvalidSelection(format!(
                    "rows {}..{} are outside an axis of length {len}",
                    r.start, r.end
                )));
            }
            total += r.end - r.start;
        }
        let mut out_shape = shape.clone();
        out_shape[axis] = total;
        let elem = self.info.dtype.size();
        let nbytes = checked_nbytes(&out_shape, elem)?;
        self.chain()?;
        if nbytes == 0 {
            return Ok((Bytes::new(), out_shape));
        }
        let mut buf = match reuse {
            Some(mut v) if v.capacity() >= nbytes => {
                v.clear();
                v
            }
            _ => try_output_buffer(nbytes, &format!("reading rows of {}", self.info.path))?,
        };
        let layout = OutLayout::c_order(&out_shape, elem);
        let mut plans = Vec::new();
        let mut at = 0u64;
        for r in ranges {
            let mut region: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
            region[axis] = r.clone();
            let extent: Vec<u64> = region.iter().map(|q| q.end - q.start).collect();
            // This range's rows start `at` rows into the output.
            let sub = OutLayout {
                shape: extent,
                base: at as usize * layout.strides[axis].unsigned_abs(),
                ..layout.clone()
            };
            let mut part = plan_region(&region, &self.grid, &sub, |i| self.chunk_key(i))?;
            for p in &mut part {
                p.out_box[axis] = p.out_box[axis].start + at..p.out_box[axis].end + at;
            }
            plans.append(&mut part);
            at += r.end - r.start;
        }
        // Disjoint and covering: the placements above tile the output exactly.
        check(&plans, &layout, true)?;
        // SAFETY: `buf` has capacity `nbytes` and outlives `out`; the checked plan gives
        // every chunk a disjoint part of it.
        let out = unsafe { OutPtr::new(buf.as_mut_ptr(), nbytes) };
        self.read_plan(&plans, &out, Source::Store, cache)?;
        // SAFETY: the checked plan covers every element, and every chunk was decoded or
        // filled (or an error returned above).
        unsafe { buf.set_len(nbytes) };
        Ok((Bytes::from(buf), out_shape))
    }
}

/// Which row of which source each output row is, and the output's shape and sizes.
struct Gather {
    /// `(source, row)` of every output row along the axis, in order.
    picks: Vec<(usize, u64)>,
    shape: Vec<u64>,
    nbytes: usize,
    /// Bytes of one row (everything after the axis).
    row: usize,
}

impl Gather {
    fn plan(sources: &[RowSource<'_>], axis: usize, elem: usize) -> Result<Self> {
        let Some(first) = sources.first() else {
            return Err(Error::InvalidArgument("no rows to gather from".into()));
        };
        let bad = |why: String| Error::InvalidArgument(format!("gather rows: {why}"));
        if axis >= first.shape.len() {
            return Err(bad(format!(
                "axis {axis} of {} dimensions",
                first.shape.len()
            )));
        }
        let mut picks: Vec<(usize, u64)> = Vec::new();
        for (s, src) in sources.iter().enumerate() {
            let same = src.shape.len() == first.shape.len()
                && src
                    .shape
                    .iter()
                    .zip(first.shape)
                    .enumerate()
                    .all(|(a, (x, y))| a == axis || x == y);
            if !same {
                return Err(bad(format!(
                    "shapes {:?} and {:?} differ off axis {axis}",
                    src.shape, first.shape
                )));
            }
            if checked_nbytes(src.shape, elem)? != src.bytes.len() {
                return Err(bad(format!(
                    "{} bytes for shape {:?}",
                    src.bytes.len(),
                    src.shape
                )));
            }
            let n = src.shape[axis];
            if let Some(&r) = src.rows.iter().find(|&&r| r >= n) {
                return Err(Error::InvalidSelection(format!(
                    "row {r} of a buffer of {n} rows"
                )));
            }
            picks.extend(src.rows.iter().map(|&r| (s, r)));
        }
        let mut shape = first.shape.to_vec();
        shape[axis] = picks.len() as u64;
        Ok(Self {
            nbytes: checked_nbytes(&shape, elem)?,
            row: checked_nbytes(&first.shape[axis + 1..], elem)?,
            picks,
            shape,
        })
    }

    /// Copies every output row into `out` (`nbytes` bytes), in parallel on the current
    /// rayon pool.
    fn copy(&self, sources: &[RowSource<'_>], axis: usize, out: &mut [MaybeUninit<u8>]) {
        let (row, picks) = (self.row, &self.picks);
        let per_outer = picks.len();
        // Enough rows per task that a task copies at least ~64 KiB.
        let min_len = (65_536 / row.max(1)).max(1);
        out.par_chunks_mut(row)
            .with_min_len(min_len)
            .enumerate()
            .for_each(|(k, dst)| {
                let (o, j) = ((k / per_outer) as u64, k % per_outer);
                let (s, r) = picks[j];
                let src = &sources[s];
                let from = ((o * src.shape[axis] + r) as usize) * row;
                let src = &src.bytes[from..from + row];
                // SAFETY: `dst` is `row` bytes of the output, this task's alone, and `src` is
                // `row` initialised bytes of another buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), row);
                }
            });
    }
}

/// Copies the chosen rows of `sources` (all of the same shape but along `axis`, C order,
/// `elem`-byte elements), in order, into a fresh C-order buffer that starts at a multiple
/// of [`crate::memory::buffer::OUTPUT_ALIGN`] (where JAX adopts it) and that nobody else holds;
/// returns it and its shape. Rows are copied in parallel on the current rayon pool.
pub fn gather_rows(
    sources: &[RowSource<'_>],
    axis: usize,
    elem: usize,
) -> Result<(Bytes, Vec<u64>)> {
    let plan = Gather::plan(sources, axis, elem)?;
    if plan.nbytes == 0 {
        return Ok((Bytes::new(), plan.shape));
    }
    let mut buf = AlignedOutput::new(plan.nbytes, "a batch of rows")?;
    plan.copy(sources, axis, buf.uninit_mut());
    // SAFETY: `copy` wrote each of the `nbytes` bytes (the output rows tile them exactly:
    // `picks.len()` rows of `row` bytes per outer index).
    Ok((unsafe { buf.into_bytes() }, plan.shape))
}

/// Like [`gather_rows`], into the caller's C-order buffer `out` (a DataLoader worker's
/// shared memory), which must be exactly the batch's size; returns the batch's shape.
pub fn gather_rows_into(
    sources: &[RowSource<'_>],
    axis: usize,
    elem: usize,
    out: &OutPtr,
) -> Result<Vec<u64>> {
    let plan = Gather::plan(sources, axis, elem)?;
    if out.len != plan.nbytes {
        return Err(Error::InvalidArgument(format!(
            "gather rows: the output has {} bytes, the batch {:?} needs {}",
            out.len, plan.shape, plan.nbytes
        )));
    }
    if plan.nbytes > 0 {
        // SAFETY: `out` is `len` writable bytes that only this call writes (`OutPtr::new`'s
        // contract), viewed as possibly uninitialised bytes.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(out.ptr.cast::<MaybeUninit<u8>>(), out.len) };
        plan.copy(sources, axis, dst);
    }
    Ok(plan.shape)
}

#[cfg(test)]
// `&[0..4]` is a slice of one range on purpose: a request of one run.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::array::create::{create_array, ArraySpec};
    use crate::layout::placement::c_strides;
    use crate::select::selection::Region;
    use crate::store::Store;

    fn u16s(b: &[u8]) -> Vec<u16> {
        b.chunks_exact(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect()
    }

    /// A 10 x 3 uint16 array holding 0..30 (row r is 3r..3r+3), chunks of 4 x 2, optionally
    /// sharded 8 x 2.
    fn array(shards: Option<&[u64]>) -> Array {
        let store = Arc::new(Store::in_memory([]));
        let spec = ArraySpec::from_json(
            &json!({"shape": [10, 3], "dtype": "uint16", "chunks": [4, 2], "shards": shards})
                .to_string(),
        )
        .unwrap();
        let a = create_array(&store, "a", &spec, false).unwrap();
        let values: Vec<u8> = (0u16..30).flat_map(u16::to_ne_bytes).collect();
        let region = Region::all(&[10, 3]);
        let items = a.plan_write(&region, &c_strides(&[10, 3], 2), 0).unwrap();
        // SAFETY: `values` outlives the write.
        let src = unsafe { crate::write::SrcPtr::new(values.as_ptr(), values.len()) };
        a.write_chunks(&items, &src, None, false, None).unwrap();
        a
    }

    fn rows_of(ranges: &[Range<u64>]) -> Vec<u16> {
        ranges
            .iter()
            .flat_map(|r| r.clone())
            .flat_map(|r| (3 * r as u16)..(3 * r as u16 + 3))
            .collect()
    }

    #[test]
    fn ranges_stack_in_the_order_given() {
        for shards in [None, Some(&[8u64, 2][..])] {
            let a = array(shards);
            let ranges = [8..10, 0..4, 5..6, 2..3];
            let (bytes, shape) = a.read_rows(0, &ranges, None, None).unwrap();
            assert_eq!(shape, vec![8, 3]);
            assert_eq!(u16s(&bytes), rows_of(&ranges), "shards {shards:?}");
        }
    }

    #[test]
    fn a_reused_buffer_is_overwritten_in_place() {
        let a = array(None);
        let old = vec![0xAB_u8; 64];
        let at = old.as_ptr();
        let (bytes, _) = a.read_rows(0, &[1..3], None, Some(old)).unwrap();
        assert_eq!(bytes.as_ptr(), at, "the buffer was reused");
        assert_eq!(u16s(&bytes), rows_of(&[1..3]));
        let small = vec![0u8; 2];
        let (bytes, _) = a.read_rows(0, &[0..10], None, Some(small)).unwrap();
        assert_eq!(u16s(&bytes), rows_of(&[0..10]), "too small: a fresh buffer");
    }

    #[test]
    fn rows_along_another_axis() {
        let a = array(None);
        let (bytes, shape) = a.read_rows(1, &[2..3, 0..1], None, None).unwrap();
        assert_eq!(shape, vec![10, 2]);
        let want: Vec<u16> = (0u16..10).flat_map(|r| [3 * r + 2, 3 * r]).collect();
        assert_eq!(u16s(&bytes), want);
    }

    #[test]
    fn bad_rows_are_refused() {
        let a = array(None);
        assert!(matches!(
            a.read_rows(0, &[3..11], None, None),
            Err(Error::InvalidSelection(_))
        ));
        assert!(matches!(
            a.read_rows(2, &[0..1], None, None),
            Err(Error::InvalidArgument(_))
        ));
        let (bytes, shape) = a.read_rows(0, &[], None, None).unwrap();
        assert!(bytes.is_empty() && shape == vec![0, 3]);
    }

    #[test]
    fn gather_picks_rows_of_several_sources() {
        let a: Vec<u8> = (0u16..6).flat_map(u16::to_ne_bytes).collect(); // 2 x 3
        let b: Vec<u8> = (10u16..19).flat_map(u16::to_ne_bytes).collect(); // 3 x 3
        let sources = [
            RowSource {
                bytes: &a,
                shape: &[2, 3],
                rows: &[1],
            },
            RowSource {
                bytes: &b,
                shape: &[3, 3],
                rows: &[2, 0],
            },
        ];
        let (out, shape) = gather_rows(&sources, 0, 2).unwrap();
        assert_eq!(shape, vec![3, 3]);
        assert_eq!(u16s(&out), vec![3, 4, 5, 16, 17, 18, 10, 11, 12]);
        assert_eq!(
            out.as_ptr() as usize % crate::memory::buffer::OUTPUT_ALIGN,
            0
        );
        let mut owned = out.try_into_mut().expect("uniquely held");
        owned[0] = 1; // writable, in place
                      // Along axis 1 of a 2 x 3: columns 2 and 0.
        let cols = [RowSource {
            bytes: &a,
            shape: &[2, 3],
            rows: &[2, 0],
        }];
        let (out, shape) = gather_rows(&cols, 1, 2).unwrap();
        assert_eq!(shape, vec![2, 2]);
        assert_eq!(u16s(&out), vec![2, 0, 5, 3]);
        // Into the caller's buffer: the same rows; a buffer of another size is refused.
        let mut mine = vec![0u8; 18];
        // SAFETY: `mine` outlives `out` and only this thread writes it.
        let out = unsafe { OutPtr::new(mine.as_mut_ptr(), mine.len()) };
        assert_eq!(gather_rows_into(&sources, 0, 2, &out).unwrap(), vec![3, 3]);
        assert_eq!(u16s(&mine), vec![3, 4, 5, 16, 17, 18, 10, 11, 12]);
        // SAFETY: 16 of `mine`'s bytes, which outlive `short`; only this thread writes them.
        let short = unsafe { OutPtr::new(mine.as_mut_ptr(), 16) };
        assert!(matches!(
            gather_rows_into(&sources, 0, 2, &short),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn gather_refuses_rows_out_of_range_and_mismatched_shapes() {
        let a = vec![0u8; 12];
        let out_of_range = [RowSource {
            bytes: &a,
            shape: &[2, 3],
            rows: &[2],
        }];
        assert!(matches!(
            gather_rows(&out_of_range, 0, 2),
            Err(Error::InvalidSelection(_))
        ));
        let b = vec![0u8; 8];
        let mismatched = [
            RowSource {
                bytes: &a,
                shape: &[2, 3],
                rows: &[0],
            },
            RowSource {
                bytes: &b,
                shape: &[2, 2],
                rows: &[0],
            },
        ];
        assert!(matches!(
            gather_rows(&mismatched, 0, 2),
            Err(Error::InvalidArgument(_))
        ));
    }
}

//! Where one chunk's wanted part lands in an output buffer: its box in chunk coordinates,
//! the byte offset and strides of its first element in the output, and the copies that
//! follow from them (filling missing chunks with the fill value, reading a placed chunk
//! back). The decoder's sink that writes a chunk's stream there is `codec::decode::scatter`.

use std::ops::Range;

use crate::layout::index::try_for_each_index as for_each_index;
use crate::memory::out::{OutPtr, SinkError};

/// The part of one chunk a read wants and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Shape of the decoded chunk: the full (padded) chunk shape.
    pub chunk_shape: Vec<u64>,
    /// Wanted part of the chunk, in chunk coordinates.
    pub want: Vec<Range<u64>>,
    /// Byte offset in the output of the first wanted element.
    pub out_offset: usize,
    /// Byte strides of the output along each chunk axis (negative: the output runs backwards).
    pub out_strides: Vec<isize>,
}

/// C-order byte strides of `shape` (whose byte size the caller has checked fits in `isize`).
#[must_use]
pub fn c_strides(shape: &[u64], elem: usize) -> Vec<isize> {
    let mut strides = vec![elem as isize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * shape[a + 1] as isize;
    }
    strides
}

/// `base + delta` as an offset into the output, `None` if it falls before the start.
pub(crate) fn offset(base: usize, delta: isize) -> Option<usize> {
    base.checked_add_signed(delta)
}

impl Placement {
    /// Places the chunk at `origin` with `chunk_shape` into an output holding `region`, whose
    /// first element is at byte `base` and whose byte strides are `out_strides` (all in the
    /// same coordinates as `origin`). `None` if the chunk and the region do not meet (or the
    /// strides would place it before the output's start).
    #[must_use]
    pub fn new(
        origin: &[u64],
        chunk_shape: &[u64],
        region: &[Range<u64>],
        out_strides: &[isize],
        base: usize,
    ) -> Option<Self> {
        let mut want = Vec::with_capacity(region.len());
        let mut delta = 0isize;
        for a in 0..region.len() {
            let lo = region[a].start.max(origin[a]);
            let hi = region[a].end.min(origin[a] + chunk_shape[a]);
            if lo >= hi {
                return None;
            }
            want.push(lo - origin[a]..hi - origin[a]);
            delta = delta.checked_add(
                isize::try_from(lo - region[a].start)
                    .ok()?
                    .checked_mul(out_strides[a])?,
            )?;
        }
        Some(Self {
            chunk_shape: chunk_shape.to_vec(),
            want,
            out_offset: offset(base, delta)?,
            out_strides: out_strides.to_vec(),
        })
    }

    /// Places a whole chunk of `shape` (already bounded) as the entire output.
    #[must_use]
    pub fn whole(shape: &[u64], elem: usize) -> Self {
        Self {
            chunk_shape: shape.to_vec(),
            want: shape.iter().map(|&d| 0..d).collect(),
            out_offset: 0,
            out_strides: c_strides(shape, elem),
        }
    }

    #[must_use]
    pub fn chunk_bytes(&self, elem: usize) -> usize {
        self.chunk_shape.iter().product::<u64>() as usize * elem
    }

    /// True when every element of the chunk is wanted.
    #[must_use]
    pub fn wants_whole_chunk(&self) -> bool {
        self.want
            .iter()
            .zip(&self.chunk_shape)
            .all(|(w, &d)| w.start == 0 && w.end == d)
    }

    /// True when the whole chunk, in C order, is one contiguous block of the output: then it
    /// can be decoded straight into place.
    #[must_use]
    pub fn is_contiguous_whole(&self, elem: usize) -> bool {
        self.wants_whole_chunk()
            && c_strides(&self.chunk_shape, elem)
                .iter()
                .zip(&self.out_strides)
                .zip(&self.chunk_shape)
                .all(|((c, o), &d)| d <= 1 || c == o)
    }

    /// Writes `pattern` (one element) over the wanted part: a missing chunk's fill value.
    pub fn fill(&self, out: &OutPtr, pattern: &[u8]) -> Result<(), SinkError> {
        let elem = pattern.len();
        let ndim = self.want.len();
        let inner = self.want.last().map_or(1, |r| (r.end - r.start) as usize);
        let row: Vec<u8> = pattern.repeat(inner);
        let outer: Vec<Range<u64>> = self
            .want
            .iter()
            .take(ndim.saturating_sub(1))
            .cloned()
            .collect();
        let inner_stride = self.out_strides.last().copied().unwrap_or(elem as isize);
        for_each_index(&outer, |coord| {
            let dst = self.row_offset(&outer, coord)?;
            if inner_stride == elem as isize {
                out.write(dst, &row)
            } else {
                (0..inner).try_for_each(|i| {
                    let at =
                        offset(dst, i as isize * inner_stride).ok_or(SinkError::OutOfBounds)?;
                    out.write(at, pattern)
                })
            }
        })
    }

    /// The output offset of the first wanted element of the row at `coord` (outer axes).
    fn row_offset(&self, outer: &[Range<u64>], coord: &[u64]) -> Result<usize, SinkError> {
        let mut delta = 0isize;
        for (a, &c) in coord.iter().enumerate() {
            delta += (c - outer[a].start) as isize * self.out_strides[a];
        }
        offset(self.out_offset, delta).ok_or(SinkError::OutOfBounds)
    }
}

impl Placement {
    /// Copies the wanted part back out of the output, in C order: a chunk that a read just
    /// wrote, taken for the chunk cache.
    ///
    /// # Safety
    /// This placement's bytes of `out` must have been written and must not be written now.
    pub unsafe fn gather(&self, out: &OutPtr, elem: usize) -> Result<Vec<u8>, SinkError> {
        let ndim = self.want.len();
        let inner = self.want.last().map_or(1, |r| (r.end - r.start) as usize);
        let outer: Vec<Range<u64>> = self
            .want
            .iter()
            .take(ndim.saturating_sub(1))
            .cloned()
            .collect();
        let total: u64 = self.want.iter().map(|r| r.end - r.start).product();
        let mut v = Vec::with_capacity(total as usize * elem);
        let inner_stride = self.out_strides.last().copied().unwrap_or(elem as isize);
        for_each_index(&outer, |coord| {
            let src = self.row_offset(&outer, coord)?;
            if inner_stride == elem as isize {
                // SAFETY: written by this read (caller's contract), rows are inside `out`.
                v.extend_from_slice(unsafe { out.read(src, inner * elem)? });
            } else {
                for i in 0..inner {
                    let at =
                        offset(src, i as isize * inner_stride).ok_or(SinkError::OutOfBounds)?;
                    // SAFETY: as above, one element.
                    v.extend_from_slice(unsafe { out.read(at, elem)? });
                }
            }
            Ok(())
        })?;
        Ok(v)
    }
}

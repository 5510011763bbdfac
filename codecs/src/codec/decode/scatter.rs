//! The sink a chunk's decoded stream goes through: [`Scatter`] consumes the stream in C order
//! over its *stream shape* (the chunk shape, permuted by any `transpose` codec), in pieces,
//! and copies the wanted part of each row straight into the output where the chunk's
//! [`Placement`] says, byte-swapping on the way, so no decoded chunk is ever materialised on
//! its own.

use std::ops::Range;

use crate::dtype::ByteOrder;
use crate::layout::placement::{offset, Placement};
use crate::memory::out::{OutPtr, RawTarget, SinkError};
use crate::memory::stream_store;

/// Consumes one chunk's decoded stream and scatters the wanted part into the output.
pub struct Scatter<'o> {
    out: &'o OutPtr,
    elem: usize,
    order: ByteOrder,
    /// Per stream axis: wanted range and output byte stride (outer axes only).
    outer_want: Vec<Range<u64>>,
    outer_strides: Vec<isize>,
    outer_shape: Vec<u64>,
    inner_want: Range<usize>,
    inner_stride: isize,
    row_len: usize,
    base: usize,
    coord: Vec<u64>,
    col: usize,
    row_dst: Option<usize>,
    consumed: usize,
    expected: usize,
    direct: bool,
    /// Whether a streaming store was issued (and so a fence is owed before the drop).
    streamed: bool,
}

impl Drop for Scatter<'_> {
    fn drop(&mut self) {
        if self.streamed {
            stream_store::fence();
        }
    }
}

impl<'o> Scatter<'o> {
    /// `transpose`: the stream's axis `k` is chunk axis `transpose[k]` (`None` = identity).
    pub fn new(
        out: &'o OutPtr,
        placement: &Placement,
        elem: usize,
        order: ByteOrder,
        transpose: Option<&[usize]>,
    ) -> Self {
        let ndim = placement.chunk_shape.len();
        let axes: Vec<usize> = match transpose {
            Some(t) => t.to_vec(),
            None => (0..ndim).collect(),
        };
        let mut shape: Vec<u64> = axes.iter().map(|&a| placement.chunk_shape[a]).collect();
        let mut want: Vec<Range<u64>> = axes.iter().map(|&a| placement.want[a].clone()).collect();
        let mut strides: Vec<isize> = axes.iter().map(|&a| placement.out_strides[a]).collect();
        if ndim == 0 {
            shape.push(1);
            want.push(0..1);
            strides.push(elem as isize);
        }
        let inner = want.pop().unwrap_or(0..1);
        let inner_len = shape.pop().unwrap_or(1) as usize;
        let inner_stride = strides.pop().unwrap_or(elem as isize);
        let direct = order == ByteOrder::Native
            && axes.iter().enumerate().all(|(k, &a)| k == a)
            && placement.is_contiguous_whole(elem);
        let mut scatter = Self {
            out,
            elem,
            order,
            coord: want.iter().map(|_| 0).collect(),
            outer_want: want,
            outer_strides: strides,
            outer_shape: shape,
            inner_want: inner.start as usize * elem..inner.end as usize * elem,
            inner_stride,
            row_len: inner_len * elem,
            base: placement.out_offset,
            col: 0,
            row_dst: None,
            consumed: 0,
            expected: placement.chunk_bytes(elem),
            direct,
            streamed: false,
        };
        scatter.row_dst = scatter.locate_row();
        scatter
    }

    /// Bytes per element: every piece passed to [`Self::write`] is a multiple of it.
    #[must_use]
    pub fn elem(&self) -> usize {
        self.elem
    }

    /// Total bytes the stream must have.
    #[must_use]
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// The output bytes this chunk occupies, when the whole stream lands there unchanged and
    /// contiguously: a decoder may then write straight into it (through the raw pointer: the
    /// bytes may be uninitialised) and report what it wrote with [`Self::assume_written`].
    #[must_use]
    pub fn direct_target(&self) -> Option<RawTarget> {
        if !self.direct || self.consumed != 0 {
            return None;
        }
        let end = self.base.checked_add(self.expected)?;
        (end <= self.out.len).then(|| RawTarget {
            // SAFETY: `base + expected <= len`, so the pointer stays inside the buffer.
            ptr: unsafe { self.out.ptr.add(self.base) },
            len: self.expected,
        })
    }

    /// Records that a decoder wrote `n` bytes through [`Self::direct_target`].
    pub fn assume_written(&mut self, n: usize) {
        self.consumed += n;
    }

    /// The output offset of the current row's first wanted element, `None` if the row is
    /// not wanted (or would land before the output: a planner bug, refused at the write).
    fn locate_row(&self) -> Option<usize> {
        let mut delta = 0isize;
        for (k, &c) in self.coord.iter().enumerate() {
            let w = &self.outer_want[k];
            if c < w.start || c >= w.end {
                return None;
            }
            delta = delta.checked_add((c - w.start) as isize * self.outer_strides[k])?;
        }
        offset(self.base, delta)
    }

    fn next_row(&mut self) {
        // Along the last outer axis the next row is one stride on: no need to locate it.
        if let Some(last) = self.coord.len().checked_sub(1) {
            let c = self.coord[last] + 1;
            if c < self.outer_shape[last] {
                self.coord[last] = c;
                let w = &self.outer_want[last];
                self.row_dst = if c == w.start {
                    self.locate_row()
                } else if c > w.start && c < w.end {
                    self.row_dst
                        .and_then(|d| offset(d, self.outer_strides[last]))
                } else {
                    None
                };
                return;
            }
        }
        // The next row in C order, one step at a time as the stream arrives (a cursor, so
        // not `layout::index::for_each_index`, which owns the loop).
        let mut axis = self.coord.len();
        while axis > 0 {
            axis -= 1;
            self.coord[axis] += 1;
            if self.coord[axis] < self.outer_shape[axis] {
                break;
            }
            self.coord[axis] = 0;
        }
        self.row_dst = self.locate_row();
    }

    /// Feeds the next piece of the stream; its length must be a multiple of the element size.
    pub fn write(&mut self, mut data: &[u8]) -> Result<(), SinkError> {
        if !data.len().is_multiple_of(self.elem) {
            return Err(SinkError::Misaligned { elem: self.elem });
        }
        if self.consumed + data.len() > self.expected {
            return Err(SinkError::TooLong {
                expected: self.expected,
            });
        }
        self.consumed += data.len();
        // Whole rows, the common case, without the bookkeeping of a partial one.
        while !data.is_empty() && self.col == 0 && data.len() >= self.row_len {
            let rows = self.run_rows(data.len() / self.row_len);
            if rows > 1 {
                let (run, rest) = data.split_at(rows * self.row_len);
                self.copy_run(run, rows)?;
                data = rest;
                continue;
            }
            let (row, rest) = data.split_at(self.row_len);
            if let Some(dst) = self.row_dst {
                self.copy_segment(dst, row)?;
            }
            data = rest;
            self.next_row();
        }
        while !data.is_empty() {
            let take = (self.row_len - self.col).min(data.len());
            if let Some(dst) = self.row_dst {
                self.copy_segment(dst, &data[..take])?;
            }
            self.col += take;
            data = &data[take..];
            if self.col == self.row_len {
                self.col = 0;
                self.next_row();
            }
        }
        Ok(())
    }

    /// How many of the next `available` whole rows [`Self::copy_run`] can place at once: the
    /// wanted rows left along the last outer axis, when each lands unchanged and contiguous.
    fn run_rows(&self, available: usize) -> usize {
        let Some(last) = self.coord.len().checked_sub(1) else {
            return 0;
        };
        if self.row_dst.is_none()
            || self.order != ByteOrder::Native
            || self.inner_stride != self.elem as isize
        {
            return 0;
        }
        let left = self.outer_want[last].end - self.coord[last];
        available.min(usize::try_from(left).unwrap_or(usize::MAX))
    }

    /// Places `rows` whole rows starting at the current one, all wanted and along the last
    /// outer axis, checking the run's bounds once rather than per row. Why: a 64³ inner chunk
    /// of 2-byte elements is 4096 rows of 128 bytes, and the per-row bookkeeping of
    /// [`Self::write`] cost as much as the copies themselves. `benches/scatter.rs`, 1 GiB of
    /// 64³ inner chunks: 100 ms instead of 168 streamed, 138 instead of 160 into 32 MiB
    /// outputs; 256³ chunks: 99 instead of 109 (BENCHMARKS.md).
    fn copy_run(&mut self, run: &[u8], rows: usize) -> Result<(), SinkError> {
        let last = self.coord.len() - 1;
        let first_dst = self.row_dst.ok_or(SinkError::OutOfBounds)?;
        let stride = self.outer_strides[last];
        let seg = self.inner_want.clone();
        let last_dst = isize::try_from(rows - 1)
            .ok()
            .and_then(|n| n.checked_mul(stride))
            .and_then(|d| offset(first_dst, d))
            .ok_or(SinkError::OutOfBounds)?;
        if first_dst
            .max(last_dst)
            .checked_add(seg.len())
            .is_none_or(|end| end > self.out.len)
        {
            return Err(SinkError::OutOfBounds);
        }
        let streaming = self.out.streaming;
        for (i, row) in run.chunks_exact(self.row_len).enumerate() {
            let src = &row[seg.clone()];
            // `first_dst + i * stride` runs monotonically from the first row's place to the
            // last's, both inside the output (checked above).
            let dst = first_dst.wrapping_add_signed(i as isize * stride);
            // SAFETY: in bounds (above); disjointness is `OutPtr::new`'s contract; the fence
            // for streamed rows is owed by `Drop` once `streamed` is set.
            unsafe {
                let to = self.out.ptr.add(dst);
                if streaming {
                    stream_store::copy(to, src);
                } else {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), to, src.len());
                }
            }
        }
        self.streamed |= streaming;
        self.coord[last] += rows as u64 - 1;
        self.row_dst = Some(last_dst);
        self.next_row();
        Ok(())
    }

    /// Copies the wanted bytes of the segment `[col, col + seg.len())` of the current row.
    fn copy_segment(&mut self, row_dst: usize, seg: &[u8]) -> Result<(), SinkError> {
        let lo = self.inner_want.start.max(self.col);
        let hi = self.inner_want.end.min(self.col + seg.len());
        if lo >= hi {
            return Ok(());
        }
        let src = &seg[lo - self.col..hi - self.col];
        let first = match lo - self.inner_want.start {
            0 => 0,
            skipped => skipped / self.elem,
        };
        if self.inner_stride == self.elem as isize {
            let dst = row_dst + first * self.elem;
            match &self.order {
                ByteOrder::Native if self.out.streaming => {
                    self.streamed = true;
                    self.out.write_streaming(dst, src)?;
                }
                ByteOrder::Native => self.out.write(dst, src)?,
                ByteOrder::Swap(n) => self.out.write_swapped(dst, src, *n)?,
                ByteOrder::Fields(t) => self.out.write_fields(dst, src, self.elem, t)?,
            }
        } else {
            // Element by element (opaque elements can be any width, e.g. a 52-byte `<U13`).
            for (i, e) in src.chunks_exact(self.elem).enumerate() {
                let dst = offset(row_dst, (first + i) as isize * self.inner_stride)
                    .ok_or(SinkError::OutOfBounds)?;
                match &self.order {
                    ByteOrder::Native => self.out.write(dst, e)?,
                    ByteOrder::Swap(n) => self.out.write_swapped(dst, e, *n)?,
                    ByteOrder::Fields(t) => self.out.write_fields(dst, e, self.elem, t)?,
                }
            }
        }
        Ok(())
    }

    /// Checks that the stream had exactly the chunk's size.
    pub fn finish(&self) -> Result<(), SinkError> {
        if self.consumed == self.expected {
            Ok(())
        } else {
            Err(SinkError::TooShort {
                expected: self.expected,
                got: self.consumed,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::placement::c_strides;

    /// Scatters a chunk stream into a fresh output and returns the output.
    fn scatter(
        out_len: usize,
        p: &Placement,
        elem: usize,
        order: ByteOrder,
        transpose: Option<&[usize]>,
        stream: &[u8],
        piece: usize,
    ) -> Result<Vec<u8>, SinkError> {
        // Every case both ways: ordinary stores and streaming ones must give the same bytes.
        let [plain, streamed] = [false, true].map(|streaming| {
            let mut buf = vec![0xEEu8; out_len];
            let out = OutPtr {
                streaming,
                // SAFETY: `buf` outlives `out` and only this thread writes it.
                ..unsafe { OutPtr::new(buf.as_mut_ptr(), buf.len()) }
            };
            let mut s = Scatter::new(&out, p, elem, order.clone(), transpose);
            for c in stream.chunks(piece) {
                s.write(c)?;
            }
            s.finish()?;
            drop(s);
            Ok(buf)
        });
        assert_eq!(plain, streamed);
        plain
    }

    #[test]
    fn long_rows_land_whole_in_any_pieces() {
        // Rows of 200 bytes (more than a cache line, at every alignment) of a 3x200 chunk at
        // column 37 of a 4x300 u8 output; chunk row 0 lands in output row 1.
        let region = [0..4, 0..300];
        let strides = c_strides(&[4, 300], 1);
        let p = Placement::new(&[1, 37], &[3, 200], &region, &strides, 0).unwrap();
        let stream: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
        let mut want = vec![0xEEu8; 1200];
        for r in 0..3 {
            let at = (r + 1) * 300 + 37;
            want[at..at + 200].copy_from_slice(&stream[r * 200..(r + 1) * 200]);
        }
        for piece in [1, 7, 64, 199, 200, 201, 400, 600] {
            let out = scatter(1200, &p, 1, ByteOrder::Native, None, &stream, piece).unwrap();
            assert_eq!(out, want, "piece {piece}");
        }
    }

    #[test]
    fn runs_of_rows_land_like_single_rows() {
        // A 4x5x6 u16 chunk whose wanted part (1..3, 1..4, 2..5) lands in a 3x4x4 output,
        // its middle axis running backwards: runs of whole rows start and stop inside the
        // chunk, and the reference below places each element on its own.
        let (chunk, want) = ([4u64, 5, 6], [1..3u64, 1..4, 2..5]);
        let elem = 2;
        let strides = [32isize, -8, 2];
        let p = Placement {
            chunk_shape: chunk.to_vec(),
            want: want.to_vec(),
            out_offset: 2 * 8 + 2 * 2,
            out_strides: strides.to_vec(),
        };
        let stream: Vec<u8> = (0..4 * 5 * 6 * 2).map(|i| (i % 253) as u8).collect();
        let mut expected = vec![0xEEu8; 96];
        for (i, j, k) in
            (0..4).flat_map(|i| (0..5).flat_map(move |j| (0..6).map(move |k| (i, j, k))))
        {
            if !(want[0].contains(&i) && want[1].contains(&j) && want[2].contains(&k)) {
                continue;
            }
            let at = p.out_offset as isize
                + (i - want[0].start) as isize * strides[0]
                + (j - want[1].start) as isize * strides[1]
                + (k - want[2].start) as isize * strides[2];
            let from = (((i * 5 + j) * 6 + k) as usize) * elem;
            expected[at as usize..at as usize + elem].copy_from_slice(&stream[from..from + elem]);
        }
        for piece in [2, 12, 24, 36, 60, 120, 240] {
            let out = scatter(96, &p, elem, ByteOrder::Native, None, &stream, piece).unwrap();
            assert_eq!(out, expected, "piece {piece}");
        }
    }

    #[test]
    fn edge_chunk_lands_in_the_corner() {
        // Array 5x5 u8 read whole; chunk (1,1) of shape 3x3 has origin (3,3): only 2x2 inside.
        let region = [0..5, 0..5];
        let strides = c_strides(&[5, 5], 1);
        let p = Placement::new(&[3, 3], &[3, 3], &region, &strides, 0).unwrap();
        assert_eq!(p.want, vec![0..2, 0..2]);
        let stream: Vec<u8> = (1..=9).collect();
        for piece in [1, 2, 4, 9] {
            let out = scatter(25, &p, 1, ByteOrder::Native, None, &stream, piece).unwrap();
            assert_eq!(&out[18..20], &[1, 2]);
            assert_eq!(&out[23..25], &[4, 5]);
            assert_eq!(out[0], 0xEE);
        }
    }

    #[test]
    fn big_endian_and_transposed_streams() {
        // 2x3 u16 chunk stored transposed (F order) and big-endian.
        let values: [[u16; 3]; 2] = [[1, 2, 3], [4, 5, 6]];
        let mut stream = Vec::new();
        for j in 0..3 {
            for row in &values {
                stream.extend_from_slice(&row[j].to_be_bytes());
            }
        }
        let p = Placement::whole(&[2, 3], 2);
        let out = scatter(12, &p, 2, ByteOrder::Swap(2), Some(&[1, 0]), &stream, 2).unwrap();
        let got: Vec<u16> = out
            .chunks(2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn wrong_sizes_are_reported() {
        let p = Placement::whole(&[4], 2);
        assert!(matches!(
            scatter(8, &p, 2, ByteOrder::Native, None, &[0; 6], 6),
            Err(SinkError::TooShort { .. })
        ));
        assert!(matches!(
            scatter(8, &p, 2, ByteOrder::Native, None, &[0; 10], 10),
            Err(SinkError::TooLong { .. })
        ));
        assert!(matches!(
            scatter(8, &p, 2, ByteOrder::Native, None, &[0; 3], 3),
            Err(SinkError::Misaligned { .. })
        ));
    }

    #[test]
    fn fill_writes_only_the_wanted_part() {
        let region = [0..4, 0..4];
        let strides = c_strides(&[4, 4], 2);
        let p = Placement::new(&[2, 0], &[2, 2], &region, &strides, 0).unwrap();
        let mut buf = vec![0u8; 32];
        // SAFETY: `buf` outlives `out` and only this thread writes it.
        let out = unsafe { OutPtr::new(buf.as_mut_ptr(), buf.len()) };
        p.fill(&out, &[7, 0]).unwrap();
        let got: Vec<u16> = buf
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, vec![0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 0, 0, 7, 7, 0, 0]);
    }

    #[test]
    fn contiguity_of_whole_chunks() {
        let strides = c_strides(&[4, 6], 1);
        let row_chunk = Placement::new(&[2, 0], &[2, 6], &[0..4, 0..6], &strides, 0).unwrap();
        assert!(row_chunk.is_contiguous_whole(1));
        let col_chunk = Placement::new(&[0, 0], &[4, 3], &[0..4, 0..6], &strides, 0).unwrap();
        assert!(!col_chunk.is_contiguous_whole(1));
    }
}

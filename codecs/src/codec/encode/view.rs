//! A whole chunk's elements as the encoder reads them, in C order: a strided view of the
//! caller's values (a write that covers the chunk is encoded straight from them, never
//! copied into a chunk buffer first) or of a chunk buffer. Every access is bounds-checked.

use std::ops::Range;

/// `shape` elements of `elem` bytes in `memory`, the first at `offset`, `strides` bytes
/// apart along each axis (any sign; 0 repeats an element, as NumPy broadcasting does).
#[derive(Clone, Debug)]
pub struct ChunkView<'a> {
    memory: &'a [u8],
    offset: usize,
    strides: Vec<isize>,
    shape: Vec<u64>,
    elem: usize,
}

/// The error of a view that reaches outside its memory: a bug, never the data's fault.
fn outside() -> String {
    "internal error: a chunk view reaches outside its memory".to_owned()
}

impl<'a> ChunkView<'a> {
    #[must_use]
    pub fn new(
        memory: &'a [u8],
        offset: usize,
        strides: Vec<isize>,
        shape: Vec<u64>,
        elem: usize,
    ) -> Self {
        Self {
            memory,
            offset,
            strides,
            shape,
            elem,
        }
    }

    /// A C-order chunk buffer of `shape`.
    #[must_use]
    pub fn contiguous(chunk: &'a [u8], shape: &[u64], elem: usize) -> Self {
        let strides = crate::layout::placement::c_strides(shape, elem);
        Self::new(chunk, 0, strides, shape.to_vec(), elem)
    }

    #[must_use]
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    #[must_use]
    pub fn elem(&self) -> usize {
        self.elem
    }

    /// Bytes of the elements.
    #[must_use]
    pub fn nbytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem as u64
    }

    /// The elements as one slice of memory, when they lie in C order without gaps.
    #[must_use]
    pub fn as_contiguous(&self) -> Option<&'a [u8]> {
        if self.strides != crate::layout::placement::c_strides(&self.shape, self.elem) {
            return None;
        }
        let len = usize::try_from(self.nbytes()).ok()?;
        self.memory.get(self.offset..self.offset.checked_add(len)?)
    }

    /// The box `within` (chunk coordinates) of this view.
    #[must_use]
    pub fn sub(&self, within: &[Range<u64>]) -> Self {
        let delta: isize = within
            .iter()
            .zip(&self.strides)
            .map(|(r, &s)| r.start as isize * s)
            .sum();
        Self {
            memory: self.memory,
            offset: self.offset.wrapping_add_signed(delta),
            strides: self.strides.clone(),
            shape: within.iter().map(|r| r.end - r.start).collect(),
            elem: self.elem,
        }
    }

    /// Calls `f` with the elements in C order, in runs as long as the memory allows: whole
    /// rows where the last axis is contiguous, single elements otherwise.
    pub fn for_each_run(
        &self,
        mut f: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.shape.contains(&0) {
            return Ok(());
        }
        let ndim = self.shape.len();
        let (row_len, row_step) = match ndim {
            0 => (1, 0),
            _ => (self.shape[ndim - 1] as usize, self.strides[ndim - 1]),
        };
        let contiguous = row_step == self.elem as isize;
        let outer: Vec<Range<u64>> = self.shape[..ndim.saturating_sub(1)]
            .iter()
            .map(|&d| 0..d)
            .collect();
        let mut result = Ok(());
        crate::layout::index::for_each_index(&outer, |coord| {
            if result.is_err() {
                return;
            }
            let delta: isize = coord
                .iter()
                .zip(&self.strides)
                .map(|(&c, &s)| c as isize * s)
                .sum();
            result = (|| {
                let row = self.offset.checked_add_signed(delta).ok_or_else(outside)?;
                if contiguous {
                    let bytes = self
                        .memory
                        .get(row..row + row_len * self.elem)
                        .ok_or_else(outside)?;
                    return f(bytes);
                }
                for k in 0..row_len {
                    let at = row
                        .checked_add_signed(k as isize * row_step)
                        .ok_or_else(outside)?;
                    f(self.memory.get(at..at + self.elem).ok_or_else(outside)?)?;
                }
                Ok(())
            })();
        });
        result
    }

    /// Whether every element is `value`, bit for bit (stops at the first that is not).
    #[must_use]
    pub fn all_equal(&self, value: &[u8]) -> bool {
        let mut all = true;
        let checked = self.for_each_run(|run| {
            if run.chunks_exact(self.elem).all(|e| e == value) {
                Ok(())
            } else {
                all = false;
                Err(String::new()) // stop
            }
        });
        all && checked.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(view: &ChunkView<'_>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        view.for_each_run(|r| {
            out.push(r.to_vec());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn rows_come_in_c_order_and_boxes_cut_them() {
        let data: Vec<u8> = (0..24).collect();
        let v = ChunkView::contiguous(&data, &[4, 6], 1);
        assert_eq!(runs(&v).len(), 4);
        assert_eq!(runs(&v).concat(), data);
        let inner = v.sub(&[2..4, 3..6]);
        assert_eq!(runs(&inner).concat(), [15, 16, 17, 21, 22, 23]);
        assert!(!v.all_equal(&[0]) && ChunkView::contiguous(&[7; 6], &[2, 3], 1).all_equal(&[7]));
        assert_eq!(v.as_contiguous(), Some(&data[..]));
        assert_eq!(inner.as_contiguous(), None);
        // Whole rows of a wider array are one slice.
        assert_eq!(v.sub(&[1..3, 0..6]).as_contiguous(), Some(&data[6..18]));
    }

    #[test]
    fn strided_and_broadcast_views() {
        // A 2x3 view, columns reversed, of 2-byte elements.
        let data: Vec<u8> = (0..12).collect();
        let v = ChunkView::new(&data, 4, vec![6, -2], vec![2, 3], 2);
        assert_eq!(runs(&v).concat(), [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
        // One element repeated (stride 0).
        let b = ChunkView::new(&data[..2], 0, vec![0, 0], vec![2, 2], 2);
        assert_eq!(runs(&b).concat(), [0, 1, 0, 1, 0, 1, 0, 1]);
        assert!(b.all_equal(&[0, 1]));
    }

    #[test]
    fn a_view_outside_its_memory_is_an_error() {
        let data = [0u8; 4];
        let v = ChunkView::new(&data, 0, vec![4, 1], vec![2, 4], 1);
        assert!(v.for_each_run(|_| Ok(())).is_err());
    }
}

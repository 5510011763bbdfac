//! NumPy-style basic selections (integers, step-1 slices, `...`) resolved against an array
//! shape into a rectangular region plus the axes that integers drop.

use std::ops::Range;

use crate::error::{Error, Result};

/// One item of a selection tuple, as Python spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisSelector {
    /// An integer; negative counts from the end. Drops its axis.
    Index(i64),
    /// `start:stop:step` with NumPy's clamping; only `step == 1` is supported.
    Slice {
        start: Option<i64>,
        stop: Option<i64>,
        step: Option<i64>,
    },
    /// `...`: as many full slices as needed.
    Ellipsis,
}

impl AxisSelector {
    pub const FULL: Self = Self::Slice {
        start: None,
        stop: None,
        step: None,
    };
}

/// A resolved selection: one half-open range per array axis, and the output shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub ranges: Vec<Range<u64>>,
    /// Per axis: selected by an integer, so absent from the output.
    pub dropped: Vec<bool>,
    /// The shape handed to the caller: `ranges` lengths without the dropped axes.
    pub out_shape: Vec<u64>,
}

impl Region {
    /// The whole array.
    #[must_use]
    pub fn all(shape: &[u64]) -> Self {
        Self {
            ranges: shape.iter().map(|&d| 0..d).collect(),
            dropped: vec![false; shape.len()],
            out_shape: shape.to_vec(),
        }
    }

    /// Per-axis extents of the region (including dropped axes, as length 1).
    #[must_use]
    pub fn extent(&self) -> Vec<u64> {
        self.ranges.iter().map(|r| r.end - r.start).collect()
    }

    #[must_use]
    pub fn num_elements(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).product()
    }

    /// Resolves `selectors` against `shape` (NumPy basic indexing, step 1 only).
    pub fn resolve(shape: &[u64], selectors: &[AxisSelector]) -> Result<Self> {
        let ellipses = selectors
            .iter()
            .filter(|s| **s == AxisSelector::Ellipsis)
            .count();
        if ellipses > 1 {
            return Err(Error::InvalidSelection(
                "an index can only have a single ellipsis ('...')".into(),
            ));
        }
        let explicit = selectors.len() - ellipses;
        if explicit > shape.len() {
            return Err(Error::InvalidSelection(format!(
                "too many indices for array: array is {}-dimensional, but {explicit} were indexed",
                shape.len()
            )));
        }
        let mut expanded = Vec::with_capacity(shape.len());
        for s in selectors {
            if *s == AxisSelector::Ellipsis {
                expanded.extend(std::iter::repeat_n(
                    AxisSelector::FULL,
                    shape.len() - explicit,
                ));
            } else {
                expanded.push(*s);
            }
        }
        expanded.resize(shape.len(), AxisSelector::FULL);

        let mut ranges = Vec::with_capacity(shape.len());
        let mut dropped = Vec::with_capacity(shape.len());
        let mut out_shape = Vec::with_capacity(shape.len());
        for (axis, (sel, &len)) in expanded.iter().zip(shape).enumerate() {
            match *sel {
                AxisSelector::Index(i) => {
                    let idx = resolve_index(i, len).ok_or_else(|| {
                        Error::InvalidSelection(format!(
                            "index {i} is out of bounds for axis {axis} with size {len}"
                        ))
                    })?;
                    ranges.push(idx..idx + 1);
                    dropped.push(true);
                }
                AxisSelector::Slice { start, stop, step } => {
                    if step.unwrap_or(1) != 1 {
                        return Err(Error::InvalidSelection(format!(
                            "only step-1 slices are supported, got step {} on axis {axis}",
                            step.unwrap_or(1)
                        )));
                    }
                    let start = clamp(start, len, 0);
                    let stop = clamp(stop, len, len).max(start);
                    ranges.push(start..stop);
                    dropped.push(false);
                    out_shape.push(stop - start);
                }
                AxisSelector::Ellipsis => unreachable!("ellipsis expanded above"),
            }
        }
        Ok(Self {
            ranges,
            dropped,
            out_shape,
        })
    }
}

fn resolve_index(i: i64, len: u64) -> Option<u64> {
    let len_i = i128::from(len);
    let i = i128::from(i);
    let idx = if i < 0 { i + len_i } else { i };
    (0..len_i).contains(&idx).then_some(idx as u64)
}

/// NumPy's slice-bound clamping for step 1.
fn clamp(bound: Option<i64>, len: u64, default: u64) -> u64 {
    match bound {
        None => default,
        Some(b) if b < 0 => {
            let from_end = i128::from(len) + i128::from(b);
            from_end.max(0) as u64
        }
        Some(b) => (b as u64).min(len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AxisSelector::{Ellipsis, Index};

    fn slice(start: Option<i64>, stop: Option<i64>) -> AxisSelector {
        AxisSelector::Slice {
            start,
            stop,
            step: None,
        }
    }

    #[test]
    fn integers_drop_axes_and_count_from_the_end() {
        let r = Region::resolve(&[10, 20, 30], &[Index(-1), slice(Some(2), Some(5))]).unwrap();
        assert_eq!(r.ranges, vec![9..10, 2..5, 0..30]);
        assert_eq!(r.out_shape, vec![3, 30]);
    }

    #[test]
    fn slices_clamp_like_numpy() {
        let r = Region::resolve(&[10], &[slice(Some(-100), Some(100))]).unwrap();
        assert_eq!(r.ranges, vec![0..10]);
        let r = Region::resolve(&[10], &[slice(Some(7), Some(3))]).unwrap();
        assert_eq!(r.out_shape, vec![0]);
        let r = Region::resolve(&[10], &[slice(Some(-3), None)]).unwrap();
        assert_eq!(r.ranges, vec![7..10]);
    }

    #[test]
    fn ellipsis_expands_in_the_middle() {
        let r = Region::resolve(&[2, 3, 4, 5], &[Index(1), Ellipsis, Index(0)]).unwrap();
        assert_eq!(r.ranges, vec![1..2, 0..3, 0..4, 0..1]);
        assert_eq!(r.out_shape, vec![3, 4]);
    }

    #[test]
    fn zero_d_arrays_accept_empty_and_ellipsis() {
        assert_eq!(
            Region::resolve(&[], &[]).unwrap().out_shape,
            Vec::<u64>::new()
        );
        assert_eq!(Region::resolve(&[], &[Ellipsis]).unwrap().ranges, vec![]);
    }

    #[test]
    fn bad_selections_are_errors() {
        for sel in [
            vec![Index(10)],
            vec![Index(-11)],
            vec![Index(0), Index(0)],
            vec![Ellipsis, Ellipsis],
            vec![AxisSelector::Slice {
                start: None,
                stop: None,
                step: Some(2),
            }],
            vec![AxisSelector::Slice {
                start: None,
                stop: None,
                step: Some(-1),
            }],
        ] {
            assert!(
                matches!(
                    Region::resolve(&[10], &sel),
                    Err(Error::InvalidSelection(_))
                ),
                "{sel:?}"
            );
        }
        assert!(Region::resolve(&[10], &[Index(i64::MIN)]).is_err());
    }
}

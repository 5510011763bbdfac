//! A selection of any kind, already normalised (bounds resolved, negatives wrapped): the
//! output is the C-order product of *factors*, each an arithmetic progression along one
//! array axis or a list of points over several axes. NumPy basic indexing with steps,
//! orthogonal (`oindex`), coordinate and mask (`vindex`) selections and NumPy's mixed
//! advanced indexing all have this form; dropped and inserted axes are a reshape of it.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::select::selection::Region;

/// One factor of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Factor {
    /// `count` elements of `axis`: `start`, `start + step`, ... (`step` may be negative).
    Step {
        axis: usize,
        start: u64,
        step: i64,
        count: u64,
    },
    /// `coords.len() / axes.len()` points over `axes`, row-major (point, axis).
    Points { axes: Vec<usize>, coords: Vec<u64> },
}

impl Factor {
    /// `count` elements of `axis` from `start`, `step` apart.
    #[must_use]
    pub fn step(axis: usize, start: u64, step: i64, count: u64) -> Self {
        Self::Step {
            axis,
            start,
            step,
            count,
        }
    }

    /// How many output positions the factor spans.
    #[must_use]
    pub fn count(&self) -> u64 {
        match self {
            Self::Step { count, .. } => *count,
            Self::Points { axes, coords } => {
                if axes.is_empty() {
                    0
                } else {
                    (coords.len() / axes.len()) as u64
                }
            }
        }
    }

    /// The array axes the factor selects along.
    #[must_use]
    pub fn axes(&self) -> &[usize] {
        match self {
            Self::Step { axis, .. } => std::slice::from_ref(axis),
            Self::Points { axes, .. } => axes,
        }
    }
}

/// A checked selection: every array axis in exactly one factor, every element in bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    factors: Vec<Factor>,
}

impl Pick {
    /// Checks `factors` against an array of `shape`.
    pub fn new(shape: &[u64], factors: Vec<Factor>) -> Result<Self> {
        let bad = |why: String| Error::InvalidSelection(why);
        let mut seen = vec![false; shape.len()];
        for f in &factors {
            if f.axes().is_empty() {
                return Err(bad("a point factor over no axes".into()));
            }
            for &a in f.axes() {
                match seen.get_mut(a) {
                    Some(s) if !*s => *s = true,
                    Some(_) => return Err(bad(format!("axis {a} is selected twice"))),
                    None => {
                        return Err(bad(format!(
                            "axis {a} is out of range for a {}-d array",
                            shape.len()
                        )))
                    }
                }
            }
            match f {
                Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                } => {
                    let n = shape[*axis];
                    if *step == 0 {
                        return Err(bad("slice step cannot be zero".into()));
                    }
                    if *count > 0 {
                        let last =
                            i128::from(*start) + i128::from(*step) * (i128::from(*count) - 1);
                        if *start >= n || last < 0 || last >= i128::from(n) {
                            return Err(bad(format!(
                                "{count} elements from {start} in steps of {step} leave \
                                 axis {axis} of size {n}"
                            )));
                        }
                    }
                }
                Factor::Points { axes, coords } => {
                    if coords.len() % axes.len() != 0 {
                        return Err(bad(format!(
                            "{} coordinates for points over {} axes",
                            coords.len(),
                            axes.len()
                        )));
                    }
                    for point in coords.chunks_exact(axes.len()) {
                        for (&c, &a) in point.iter().zip(axes) {
                            if c >= shape[a] {
                                return Err(bad(format!(
                                    "index {c} is out of bounds for axis {a} with size {}",
                                    shape[a]
                                )));
                            }
                        }
                    }
                }
            }
        }
        if let Some(a) = seen.iter().position(|s| !s) {
            return Err(bad(format!("axis {a} is not selected")));
        }
        Ok(Self { factors })
    }

    #[must_use]
    pub fn factors(&self) -> &[Factor] {
        &self.factors
    }

    /// The C-order output shape: one length per factor.
    #[must_use]
    pub fn out_shape(&self) -> Vec<u64> {
        self.factors.iter().map(Factor::count).collect()
    }

    /// The same selection as a rectangular region, when it is one: step-1 ranges, one per
    /// axis, in axis order (the fast path of plain slicing).
    #[must_use]
    pub fn as_region(&self) -> Option<Region> {
        let mut ranges: Vec<Range<u64>> = Vec::with_capacity(self.factors.len());
        for (k, f) in self.factors.iter().enumerate() {
            match *f {
                Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                } if axis == k && (step == 1 || count <= 1) => {
                    ranges.push(start..start + count);
                }
                _ => return None,
            }
        }
        let out_shape = ranges.iter().map(|r| r.end - r.start).collect();
        Some(Region {
            dropped: vec![false; ranges.len()],
            ranges,
            out_shape,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_points_are_checked_against_the_shape() {
        Pick::new(
            &[10, 4],
            vec![Factor::step(0, 9, -3, 4), Factor::step(1, 0, 1, 4)],
        )
        .unwrap();
        for bad in [
            vec![Factor::step(0, 9, -3, 5), Factor::step(1, 0, 1, 4)],
            vec![Factor::step(0, 0, 1, 11), Factor::step(1, 0, 1, 4)],
            vec![Factor::step(0, 0, 0, 1), Factor::step(1, 0, 1, 4)],
            vec![Factor::step(0, 0, 1, 1)],
            vec![Factor::step(0, 0, 1, 1), Factor::step(0, 0, 1, 1)],
            vec![Factor::step(0, 0, 1, 1), Factor::step(2, 0, 1, 1)],
            vec![Factor::Points {
                axes: vec![0, 1],
                coords: vec![9, 4],
            }],
            vec![Factor::Points {
                axes: vec![0, 1],
                coords: vec![9, 3, 1],
            }],
        ] {
            assert!(
                matches!(
                    Pick::new(&[10, 4], bad.clone()),
                    Err(Error::InvalidSelection(_))
                ),
                "{bad:?}"
            );
        }
        let p = Pick::new(
            &[10, 4],
            vec![Factor::Points {
                axes: vec![1, 0],
                coords: vec![3, 9, 0, 0],
            }],
        )
        .unwrap();
        assert_eq!(p.out_shape(), vec![2]);
    }

    #[test]
    fn step_one_ranges_in_axis_order_are_regions() {
        let p = Pick::new(
            &[10, 4],
            vec![Factor::step(0, 2, 1, 3), Factor::step(1, 3, -1, 1)],
        )
        .unwrap();
        assert_eq!(p.as_region().unwrap().ranges, vec![2..5, 3..4]);
        let p = Pick::new(
            &[10, 4],
            vec![Factor::step(1, 0, 1, 4), Factor::step(0, 2, 1, 3)],
        )
        .unwrap();
        assert!(p.as_region().is_none());
        let p = Pick::new(
            &[10, 4],
            vec![Factor::step(0, 0, 2, 3), Factor::step(1, 0, 1, 4)],
        )
        .unwrap();
        assert!(p.as_region().is_none());
    }
}

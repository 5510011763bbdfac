//! Where each element of a selection is, in C order: the positions a [`Pick`] selects in an
//! array of given strides, and which element of a value each element of a broadcast takes.
//! The zarr-python pipeline pairs the k-th element of a chunk's selection with the k-th of
//! its output selection (or of the value written); these are those lists.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::select::pick::{Factor, Pick};
use crate::select::selection::Region;

/// The offsets (`sum(coordinate * stride)` over the array axes) of the elements `pick`
/// selects, in the C order of its output.
#[must_use]
pub fn pick_offsets(pick: &Pick, strides: &[i64]) -> Vec<i64> {
    let total: usize = pick.factors().iter().map(|f| f.count() as usize).product();
    let mut out = Vec::with_capacity(total);
    let done: Result<()> = for_each_pick_offset(pick, strides, |o| {
        out.push(o);
        Ok(())
    });
    debug_assert!(done.is_ok());
    out
}

/// Calls `f` with the offset of each element `pick` selects, in the C order of its output,
/// without building the list: the outer factors' offsets are summed once per run of the
/// innermost factor. Stops at the first error of `f`.
pub fn for_each_pick_offset(
    pick: &Pick,
    strides: &[i64],
    mut f: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    let mut per_factor: Vec<Vec<i64>> = pick
        .factors()
        .iter()
        .map(|fac| factor_offsets(fac, strides))
        .collect();
    let Some(inner) = per_factor.pop() else {
        return f(0); // a 0-d pick: one element
    };
    let ranges: Vec<Range<u64>> = per_factor.iter().map(|o| 0..o.len() as u64).collect();
    crate::layout::index::try_for_each_index(&ranges, |k| {
        let base: i64 = k.iter().zip(&per_factor).map(|(&i, o)| o[i as usize]).sum();
        inner.iter().try_for_each(|&o| f(base + o))
    })
}

/// One factor's offsets, in its own order.
pub(crate) fn factor_offsets(factor: &Factor, strides: &[i64]) -> Vec<i64> {
    match factor {
        Factor::Step {
            axis,
            start,
            step,
            count,
        } => (0..*count as i64)
            .map(|k| (*start as i64 + k * step) * strides[*axis])
            .collect(),
        Factor::Points { axes, coords } => coords
            .chunks_exact(axes.len())
            .map(|point| {
                point
                    .iter()
                    .zip(axes)
                    .map(|(&c, &a)| c as i64 * strides[a])
                    .sum()
            })
            .collect(),
    }
}

/// The pick of a region: its ranges as step-1 factors, axis by axis (a dropped axis is a
/// factor of one element, which does not change the C order).
pub fn region_pick(shape: &[u64], region: &Region) -> Result<Pick> {
    let factors = region
        .ranges
        .iter()
        .enumerate()
        .map(|(axis, r)| Factor::Step {
            axis,
            start: r.start,
            step: 1,
            count: r.end.saturating_sub(r.start),
        })
        .collect();
    Pick::new(shape, factors)
}

/// For each element (C order) of an array of shape `to`, the C-order index of the element of
/// an array of shape `from` that NumPy's broadcasting gives it: `from` aligned to the right,
/// its missing and length-1 axes repeated.
pub fn broadcast_index(from: &[u64], to: &[u64]) -> Result<Vec<u64>> {
    let fits = from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1);
    if !fits {
        return Err(Error::InvalidArgument(format!(
            "could not broadcast input array from shape {} into shape {}",
            shape_text(from),
            shape_text(to)
        )));
    }
    // The stride of each `to` axis in `from` (0 where `from` repeats).
    let lead = to.len() - from.len();
    let mut strides = vec![0u64; to.len()];
    let mut step = 1u64;
    for (i, &f) in from.iter().enumerate().rev() {
        if f != 1 {
            strides[lead + i] = step;
        }
        step *= f;
    }
    let total: u64 = to.iter().product();
    let mut out = Vec::with_capacity(total as usize);
    let ranges: Vec<Range<u64>> = to.iter().map(|&n| 0..n).collect();
    for_each_index(&ranges, |c| {
        out.push(c.iter().zip(&strides).map(|(&i, &s)| i * s).sum());
    });
    Ok(out)
}

/// A shape as NumPy prints it: `(3,)`, `(2, 4)`.
pub fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether two shapes list the same lengths once their length-1 axes are left out (their C
/// orders then pair element by element, as NumPy's assignment of a squeezed value does).
#[must_use]
pub fn same_but_ones(a: &[u64], b: &[u64]) -> bool {
    a.iter()
        .filter(|&&n| n != 1)
        .eq(b.iter().filter(|&&n| n != 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_the_output_order() {
        // Rows 3, 1 (a negative step), columns 0 and 2 of a 4x3 array.
        let p = Pick::new(
            &[4, 3],
            vec![Factor::step(0, 3, -2, 2), Factor::step(1, 0, 2, 2)],
        )
        .unwrap();
        assert_eq!(pick_offsets(&p, &[3, 1]), vec![9, 11, 3, 5]);
        // Points over both axes, then nothing else: one offset per point, in list order.
        let p = Pick::new(
            &[4, 3],
            vec![Factor::Points {
                axes: vec![1, 0],
                coords: vec![2, 0, 0, 3],
            }],
        )
        .unwrap();
        assert_eq!(pick_offsets(&p, &[3, 1]), vec![2, 9]);
        // An empty factor selects nothing; a 0-d pick is one element at 0.
        let p = Pick::new(
            &[4, 3],
            vec![Factor::step(0, 0, 1, 0), Factor::step(1, 0, 1, 3)],
        )
        .unwrap();
        assert!(pick_offsets(&p, &[3, 1]).is_empty());
        assert_eq!(pick_offsets(&Pick::new(&[], vec![]).unwrap(), &[]), vec![0]);
    }

    #[test]
    fn regions_become_step_one_picks() {
        let region = Region {
            ranges: vec![1..3, 2..3],
            dropped: vec![false, true],
            out_shape: vec![2],
        };
        let p = region_pick(&[4, 3], &region).unwrap();
        assert_eq!(p.out_shape(), vec![2, 1]);
        assert_eq!(pick_offsets(&p, &[3, 1]), vec![5, 8]);
    }

    #[test]
    fn broadcasting_repeats_missing_and_unit_axes() {
        assert_eq!(broadcast_index(&[], &[2, 2]).unwrap(), vec![0, 0, 0, 0]);
        assert_eq!(
            broadcast_index(&[3], &[2, 3]).unwrap(),
            vec![0, 1, 2, 0, 1, 2]
        );
        assert_eq!(
            broadcast_index(&[2, 1], &[2, 3]).unwrap(),
            vec![0, 0, 0, 1, 1, 1]
        );
        assert_eq!(
            broadcast_index(&[2, 3], &[2, 3]).unwrap(),
            (0..6).collect::<Vec<_>>()
        );
        let err = broadcast_index(&[2], &[3]).unwrap_err().to_string();
        assert!(err.contains("from shape (2,) into shape (3,)"), "{err}");
        assert!(broadcast_index(&[1, 2, 3], &[2, 3]).is_err());
    }

    #[test]
    fn shapes_equal_but_for_unit_axes() {
        assert!(same_but_ones(&[1, 4, 1, 5], &[4, 5]));
        assert!(!same_but_ones(&[4, 5], &[5, 4]));
        assert!(same_but_ones(&[], &[1, 1]));
    }
}

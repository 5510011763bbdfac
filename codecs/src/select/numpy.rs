//! `array[key]` as NumPy reads it, as the engine's pick factors: basic indexing (steps,
//! `None`, integers) and advanced indexing (integer arrays broadcast together, boolean
//! masks as the coordinates of their true elements, boolean scalars), the advanced
//! dimensions in place when the advanced indices are adjacent, else first.

use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::select::key::{expand, int_index, slice_steps, wrap, Indices, KeyItem};
use crate::select::pick::Factor;
use crate::select::positions::shape_text;

/// A basic item's place in the key, its factor (`None` for a new axis) and its output dims.
struct Basic {
    slot: usize,
    factor: Option<Factor>,
    dims: Vec<u64>,
}

/// The advanced items of a key: per index array the axis it indexes, its values and its
/// slot in the key; boolean scalars take part in the broadcast only.
#[derive(Default)]
struct Advanced {
    axes: Vec<usize>,
    arrays: Vec<Indices<u64>>,
    slots: Vec<usize>,
    scalar_shapes: Vec<Vec<usize>>,
}

/// The factors of `array[key]` over an array of `shape`, and the result's shape.
pub fn numpy_pick(shape: &[u64], key: Vec<KeyItem>) -> Result<(Vec<Factor>, Vec<u64>)> {
    let items = expand(shape.len(), key)?;
    let advanced = items.iter().any(KeyItem::is_advanced);
    let mut basic: Vec<Basic> = Vec::new();
    let mut adv = Advanced::default();
    let mut axis = 0;
    for (slot, item) in items.into_iter().enumerate() {
        match item {
            KeyItem::NewAxis => basic.push(Basic {
                slot,
                factor: None,
                dims: vec![1],
            }),
            KeyItem::Slice(s) => {
                let (start, step, count) = slice_steps(&s, shape[axis])?;
                let factor = Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                };
                basic.push(Basic {
                    slot,
                    factor: Some(factor),
                    dims: vec![count],
                });
                axis += 1;
            }
            KeyItem::Int(i) if !advanced => {
                let start = int_index(i, shape[axis], axis)?;
                let factor = Factor::Step {
                    axis,
                    start,
                    step: 1,
                    count: 1,
                };
                basic.push(Basic {
                    slot,
                    factor: Some(factor),
                    dims: vec![],
                });
                axis += 1;
            }
            KeyItem::Bool(b) => {
                adv.scalar_shapes.push(vec![usize::from(b)]);
                adv.slots.push(slot);
            }
            KeyItem::Int(i) => {
                // Among advanced indices an integer is a 0-d index array.
                adv.arrays.push(Indices {
                    shape: vec![],
                    values: vec![int_index(i, shape[axis], axis)?],
                });
                adv.axes.push(axis);
                adv.slots.push(slot);
                axis += 1;
            }
            KeyItem::Array(a) => {
                let values = wrap(&a.values, shape[axis], axis)?;
                adv.arrays.push(Indices {
                    shape: a.shape,
                    values,
                });
                adv.axes.push(axis);
                adv.slots.push(slot);
                axis += 1;
            }
            KeyItem::Mask(m) => {
                check_mask(&m, &shape[axis..], axis)?;
                for (k, coords) in nonzero(&m).into_iter().enumerate() {
                    adv.arrays.push(Indices {
                        shape: vec![coords.len()],
                        values: coords,
                    });
                    adv.axes.push(axis + k);
                    adv.slots.push(slot);
                }
                axis += m.ndim();
            }
            KeyItem::Ellipsis => {
                return Err(Error::Internal("an ellipsis left after expand".into()));
            }
        }
    }
    if !advanced {
        let dims = basic.iter().flat_map(|b| b.dims.iter().copied()).collect();
        return Ok((basic.into_iter().filter_map(|b| b.factor).collect(), dims));
    }
    let (points, bshape) = points(adv.axes, &adv.arrays, &adv.scalar_shapes)?;
    let first = adv.slots[0];
    let mut slots = adv.slots;
    slots.sort_unstable();
    slots.dedup();
    let adjacent = slots[slots.len() - 1] - slots[0] + 1 == slots.len();
    let (before, after): (Vec<Basic>, Vec<Basic>) =
        basic.into_iter().partition(|b| adjacent && b.slot < first);
    let mut dims: Vec<u64> = before.iter().flat_map(|b| b.dims.iter().copied()).collect();
    dims.extend(bshape.iter().map(|&d| d as u64));
    dims.extend(after.iter().flat_map(|b| b.dims.iter().copied()));
    let mut factors: Vec<Factor> = before.into_iter().filter_map(|b| b.factor).collect();
    let no_points = points.is_empty();
    factors.extend(points);
    factors.extend(after.into_iter().filter_map(|b| b.factor));
    if no_points && bshape.contains(&0) {
        // Only boolean scalars, one of them False: nothing is selected.
        if let Some(Factor::Step { axis, .. }) = factors.first() {
            factors[0] = Factor::Step {
                axis: *axis,
                start: 0,
                step: 1,
                count: 0,
            };
        }
    }
    Ok((factors, dims))
}

/// A boolean mask must match the axes it covers, as NumPy requires.
pub(crate) fn check_mask(m: &Indices<bool>, axes: &[u64], first_axis: usize) -> Result<()> {
    for (k, (&len, &n)) in m.shape.iter().zip(axes).enumerate() {
        if len as u64 != n {
            return Err(Error::InvalidSelection(format!(
                "boolean index did not match indexed array along axis {}; size of axis is \
                 {n} but size of corresponding boolean axis is {len}",
                first_axis + k
            )));
        }
    }
    Ok(())
}

/// Per mask axis, the coordinates of its true elements in C order (`numpy.nonzero`).
fn nonzero(m: &Indices<bool>) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); m.ndim()];
    let ranges: Vec<std::ops::Range<u64>> = m.shape.iter().map(|&n| 0..n as u64).collect();
    let mut values = m.values.iter();
    for_each_index(&ranges, |coord| {
        if values.next().copied().unwrap_or(false) {
            for (axis, &c) in coord.iter().enumerate() {
                out[axis].push(c);
            }
        }
    });
    out
}

/// NumPy's broadcast of index array `shapes` (right-aligned; each dim equal or 1), or its
/// error.
fn broadcast(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; ndim];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[ndim - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                let text: Vec<String> = (shapes.iter())
                    .map(|s| shape_text(&s.iter().map(|&d| d as u64).collect::<Vec<_>>()))
                    .collect();
                return Err(Error::InvalidSelection(format!(
                    "shape mismatch: indexing arrays could not be broadcast together with \
                     shapes {}",
                    text.join(" ")
                )));
            }
        }
    }
    Ok(out)
}

/// The factors of broadcast index arrays over `axes` (and the shapes of boolean scalars,
/// which take part in the broadcast without selecting along an axis): one factor of
/// points, or one per axis for an open mesh.
fn points(
    axes: Vec<usize>,
    arrays: &[Indices<u64>],
    scalar_shapes: &[Vec<usize>],
) -> Result<(Vec<Factor>, Vec<usize>)> {
    let shapes: Vec<&[usize]> = (arrays.iter())
        .map(|a| a.shape.as_slice())
        .chain(scalar_shapes.iter().map(Vec::as_slice))
        .collect();
    let bshape = broadcast(&shapes)?;
    if axes.is_empty() {
        return Ok((Vec::new(), bshape));
    }
    if is_open_mesh(arrays, &bshape) {
        let factors = (axes.iter().zip(arrays))
            .map(|(&axis, a)| Factor::Points {
                axes: vec![axis],
                coords: a.values.clone(),
            })
            .collect();
        return Ok((factors, bshape));
    }
    let n: usize = bshape.iter().product();
    let k = axes.len();
    let mut coords = vec![0u64; n * k];
    let ranges: Vec<std::ops::Range<u64>> = bshape.iter().map(|&d| 0..d as u64).collect();
    for (t, a) in arrays.iter().enumerate() {
        // Strides of `a` seen through the broadcast shape (0 along repeated axes).
        let pad = bshape.len() - a.shape.len();
        let mut strides = vec![0usize; bshape.len()];
        let mut stride = 1;
        for (d, &len) in a.shape.iter().enumerate().rev() {
            strides[pad + d] = if len == 1 { 0 } else { stride };
            stride *= len;
        }
        let mut p = 0;
        for_each_index(&ranges, |coord| {
            let at: usize = (coord.iter().zip(&strides))
                .map(|(&c, s)| c as usize * s)
                .sum();
            coords[p * k + t] = a.values[at];
            p += 1;
        });
    }
    Ok((vec![Factor::Points { axes, coords }], bshape))
}

/// Index arrays in `numpy.ix_`'s form (zarr-python's orthogonal chunk selections): array
/// `k` of `m` has `m` dimensions, all of length 1 but the k-th. Their broadcast selects
/// every combination, in C order, so each is a factor of its own axis, and the pick
/// holds the arrays' values, not one point per selected element.
fn is_open_mesh(arrays: &[Indices<u64>], bshape: &[usize]) -> bool {
    let m = arrays.len();
    m > 1
        && bshape.len() == m
        && (arrays.iter().enumerate()).all(|(k, a)| {
            a.ndim() == m && (a.shape.iter().enumerate()).all(|(d, &n)| d == k || n == 1)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::key::SliceItem;

    fn ints(shape: &[usize], values: &[i64]) -> KeyItem {
        KeyItem::Array(Indices {
            shape: shape.to_vec(),
            values: values.to_vec(),
        })
    }

    #[test]
    fn basic_keys_are_steps() {
        let s = KeyItem::Slice(SliceItem {
            start: Some(-1),
            stop: None,
            step: Some(-2),
        });
        let (factors, dims) =
            numpy_pick(&[5, 4], vec![KeyItem::NewAxis, s, KeyItem::Int(-1)]).unwrap();
        assert_eq!(
            factors,
            vec![Factor::step(0, 4, -2, 3), Factor::step(1, 3, 1, 1)]
        );
        assert_eq!(dims, vec![1, 3]);
    }

    #[test]
    fn adjacent_index_arrays_broadcast_in_place() {
        // a[:, [[0], [2]], [1, 3]] over (2, 3, 4): the (2, 2) broadcast stays at axis 1.
        let key = vec![KeyItem::ALL, ints(&[2, 1], &[0, 2]), ints(&[2], &[1, -1])];
        let (factors, dims) = numpy_pick(&[2, 3, 4], key).unwrap();
        assert_eq!(dims, vec![2, 2, 2]);
        let points = Factor::Points {
            axes: vec![1, 2],
            coords: vec![0, 1, 0, 3, 2, 1, 2, 3],
        };
        assert_eq!(factors, vec![Factor::step(0, 0, 1, 2), points]);
    }

    #[test]
    fn separated_index_arrays_go_first() {
        // a[[0, 1], :, 2] over (2, 3, 4): the integer is an index array, not adjacent.
        let key = vec![ints(&[2], &[0, 1]), KeyItem::ALL, KeyItem::Int(2)];
        let (factors, dims) = numpy_pick(&[2, 3, 4], key).unwrap();
        assert_eq!(dims, vec![2, 3]);
        assert!(matches!(&factors[0], Factor::Points { axes, .. } if axes == &[0, 2]));
    }

    #[test]
    fn masks_select_their_true_elements() {
        let mask = KeyItem::Mask(Indices {
            shape: vec![2, 2],
            values: vec![true, false, false, true],
        });
        let (factors, dims) = numpy_pick(&[2, 2], vec![mask]).unwrap();
        assert_eq!(dims, vec![2]);
        let points = Factor::Points {
            axes: vec![0, 1],
            coords: vec![0, 0, 1, 1],
        };
        assert_eq!(factors, vec![points]);
        let short = KeyItem::Mask(Indices {
            shape: vec![3],
            values: vec![true; 3],
        });
        let err = numpy_pick(&[2], vec![short]).unwrap_err().to_string();
        assert!(err.starts_with("boolean index did not match indexed array along axis 0"));
    }

    #[test]
    fn an_open_mesh_is_one_factor_per_axis() {
        use crate::select::pick::Pick;
        use crate::select::positions::pick_offsets;
        // chunk[np.ix_([3, 1], [0, 2, 2])] over (4, 3): the same elements, in the same
        // order, as the broadcast points, held as two small factors.
        let key = vec![ints(&[2, 1], &[3, 1]), ints(&[1, 3], &[0, 2, 2])];
        let (factors, dims) = numpy_pick(&[4, 3], key).unwrap();
        assert_eq!(dims, vec![2, 3]);
        let per_axis = vec![
            Factor::Points {
                axes: vec![0],
                coords: vec![3, 1],
            },
            Factor::Points {
                axes: vec![1],
                coords: vec![0, 2, 2],
            },
        ];
        assert_eq!(factors, per_axis);
        let points = Factor::Points {
            axes: vec![0, 1],
            coords: vec![3, 0, 3, 2, 3, 2, 1, 0, 1, 2, 1, 2],
        };
        let mesh = Pick::new(&[4, 3], factors).unwrap();
        let full = Pick::new(&[4, 3], vec![points]).unwrap();
        assert_eq!(pick_offsets(&mesh, &[3, 1]), pick_offsets(&full, &[3, 1]));
        // Not a mesh (both arrays vary along one axis): broadcast points, as before.
        let key = vec![ints(&[2, 1], &[3, 1]), ints(&[2, 1], &[0, 2])];
        let (factors, _) = numpy_pick(&[4, 3], key).unwrap();
        assert!(matches!(&factors[..], [Factor::Points { axes, .. }] if axes == &[0, 1]));
    }

    #[test]
    fn a_false_scalar_selects_nothing() {
        let (factors, dims) = numpy_pick(&[3], vec![KeyItem::ALL, KeyItem::Bool(false)]).unwrap();
        assert_eq!(dims, vec![3, 0]);
        assert_eq!(factors, vec![Factor::step(0, 0, 1, 0)]);
    }

    #[test]
    fn shapes_that_do_not_broadcast_are_refused() {
        let key = vec![ints(&[2], &[0, 1]), ints(&[3], &[0, 1, 2])];
        let err = numpy_pick(&[4, 4], key).unwrap_err().to_string();
        assert_eq!(
            err,
            "shape mismatch: indexing arrays could not be broadcast together with shapes \
             (2,) (3,)"
        );
    }
}

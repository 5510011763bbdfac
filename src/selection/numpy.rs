//! `array[key]` as NumPy reads it, as a pick: basic indexing (steps, `None`, `...`) and
//! advanced indexing (integer arrays broadcast together, boolean masks), the advanced
//! dimensions in place when the advanced indices are adjacent, else first.

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use zarrpipe_codecs::layout::index::for_each_index;
use zarrpipe_codecs::select::pick::Factor;

use super::items::{expand, int_index, slice_steps, wrap, Indices, Item};

/// A basic item's place in the key, its factor (`None` for a new axis) and its output dims.
struct Basic {
    slot: usize,
    factor: Option<Factor>,
    dims: Vec<u64>,
}

/// The factors of `array[key]` and the result's shape.
pub fn numpy_pick(shape: &[u64], key: &Bound<'_, PyAny>) -> PyResult<(Vec<Factor>, Vec<u64>)> {
    let items = expand(shape.len(), key)?;
    let advanced = items.iter().any(Item::is_advanced);
    let mut basic: Vec<Basic> = Vec::new();
    let mut adv_axes: Vec<usize> = Vec::new();
    let mut adv_arrays: Vec<Indices<u64>> = Vec::new();
    let mut adv_slots: Vec<usize> = Vec::new();
    let mut extra: Vec<Vec<usize>> = Vec::new();
    let mut axis = 0;
    for (slot, item) in items.iter().enumerate() {
        match item {
            Item::NewAxis => basic.push(Basic {
                slot,
                factor: None,
                dims: vec![1],
            }),
            Item::Slice(s) => {
                let (start, step, count) = slice_steps(s, shape[axis])?;
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
            Item::Int(i) if !advanced => {
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
            Item::Bool(b) => {
                extra.push(vec![usize::from(*b)]);
                adv_slots.push(slot);
            }
            Item::Int(i) => {
                // Among advanced indices an integer is a 0-d index array.
                let v = int_index(i, shape[axis], axis)?;
                adv_arrays.push(Indices {
                    shape: vec![],
                    values: vec![v],
                });
                adv_axes.push(axis);
                adv_slots.push(slot);
                axis += 1;
            }
            Item::Array(a) => {
                let values = wrap(&a.values, shape[axis], axis)?;
                adv_arrays.push(Indices {
                    shape: a.shape.clone(),
                    values,
                });
                adv_axes.push(axis);
                adv_slots.push(slot);
                axis += 1;
            }
            Item::Mask(m) => {
                for (k, (&len, &n)) in m.shape.iter().zip(&shape[axis..]).enumerate() {
                    if len as u64 != n {
                        return Err(PyIndexError::new_err(format!(
                            "boolean index did not match indexed array along axis {}; size of \
                             axis is {n} but size of corresponding boolean axis is {len}",
                            axis + k
                        )));
                    }
                }
                for (k, coords) in nonzero(m).into_iter().enumerate() {
                    let n = coords.len();
                    adv_arrays.push(Indices {
                        shape: vec![n],
                        values: coords,
                    });
                    adv_axes.push(axis + k);
                    adv_slots.push(slot);
                }
                axis += m.ndim();
            }
            Item::Ellipsis => unreachable!("expand replaced the ellipsis"),
        }
    }
    if !advanced {
        let dims = basic.iter().flat_map(|b| b.dims.iter().copied()).collect();
        return Ok((basic.into_iter().filter_map(|b| b.factor).collect(), dims));
    }
    let (points, bshape) = points(adv_axes, &adv_arrays, &extra)?;
    let first = adv_slots[0];
    let mut slots = adv_slots.clone();
    slots.sort_unstable();
    slots.dedup();
    let adjacent = slots[slots.len() - 1] - slots[0] + 1 == slots.len();
    let (before, after): (Vec<Basic>, Vec<Basic>) =
        basic.into_iter().partition(|b| adjacent && b.slot < first);
    let mut dims: Vec<u64> = before.iter().flat_map(|b| b.dims.iter().copied()).collect();
    dims.extend(bshape.iter().map(|&d| d as u64));
    dims.extend(after.iter().flat_map(|b| b.dims.iter().copied()));
    let mut factors: Vec<Factor> = before.into_iter().filter_map(|b| b.factor).collect();
    let no_points = points.is_none();
    factors.extend(points);
    factors.extend(after.into_iter().filter_map(|b| b.factor));
    if no_points && bshape.contains(&0) {
        // Only boolean scalars, one of them False: nothing is selected.
        if let Some(Factor::Step { axis, .. }) = factors.first() {
            let axis = *axis;
            factors[0] = Factor::Step {
                axis,
                start: 0,
                step: 1,
                count: 0,
            };
        }
    }
    Ok((factors, dims))
}

/// Per mask axis, the coordinates of its true elements in C order (`numpy.nonzero`).
fn nonzero(m: &Indices<bool>) -> Vec<Vec<u64>> {
    let ndim = m.ndim();
    let mut out = vec![Vec::new(); ndim];
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

/// NumPy's broadcast of `shapes` (right-aligned; each dim equal or 1), or its error.
pub fn broadcast(shapes: &[&[usize]]) -> PyResult<Vec<usize>> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; ndim];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[ndim - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                let text: Vec<String> = shapes.iter().map(|s| tuple_text(s)).collect();
                return Err(PyIndexError::new_err(format!(
                    "shape mismatch: indexing arrays could not be broadcast together with \
                     shapes {}",
                    text.join(" ")
                )));
            }
        }
    }
    Ok(out)
}

/// A shape as Python prints a tuple: `()`, `(3,)`, `(2, 3)`.
fn tuple_text(s: &[usize]) -> String {
    match s {
        [] => "()".into(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            s.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The points of broadcast index arrays over `axes` (and the shapes of boolean scalars,
/// which take part in the broadcast without selecting along an axis).
fn points(
    axes: Vec<usize>,
    arrays: &[Indices<u64>],
    extra: &[Vec<usize>],
) -> PyResult<(Option<Factor>, Vec<usize>)> {
    let shapes: Vec<&[usize]> = arrays
        .iter()
        .map(|a| a.shape.as_slice())
        .chain(extra.iter().map(Vec::as_slice))
        .collect();
    let bshape = broadcast(&shapes)?;
    if axes.is_empty() {
        return Ok((None, bshape));
    }
    let n: usize = bshape.iter().product();
    let k = axes.len();
    let mut coords = vec![0u64; n * k];
    for (t, a) in arrays.iter().enumerate() {
        // Strides of `a` seen through the broadcast shape (0 along repeated axes).
        let pad = bshape.len() - a.shape.len();
        let mut strides = vec![0usize; bshape.len()];
        let mut stride = 1;
        for (d, &len) in a.shape.iter().enumerate().rev() {
            strides[pad + d] = if len == 1 { 0 } else { stride };
            stride *= len;
        }
        let ranges: Vec<std::ops::Range<u64>> = bshape.iter().map(|&d| 0..d as u64).collect();
        let mut p = 0;
        for_each_index(&ranges, |coord| {
            let at: usize = coord
                .iter()
                .zip(&strides)
                .map(|(&c, s)| c as usize * s)
                .sum();
            coords[p * k + t] = a.values[at];
            p += 1;
        });
    }
    Ok((Some(Factor::Points { axes, coords }), bshape))
}

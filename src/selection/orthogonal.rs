//! zarr-python's orthogonal (`oindex`) and block (`blocks`) selections.

use std::ops::Range;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use zarrpipe_codecs::layout::grid::ChunkGrid;
use zarrpipe_codecs::select::pick::Factor;

use super::items::{expand, int_index, slice_steps, wrap, Item};

/// `array.oindex[key]`: per axis an integer (drops the axis), a slice (any step), a 1-d
/// integer array (any order, repeats) or a 1-d boolean mask; `...` and `None` as in NumPy.
pub fn orthogonal_pick(shape: &[u64], key: &Bound<'_, PyAny>) -> PyResult<(Vec<Factor>, Vec<u64>)> {
    let mut factors = Vec::new();
    let mut dims = Vec::new();
    let mut axis = 0;
    for item in expand(shape.len(), key)? {
        let n = match item {
            Item::NewAxis => {
                dims.push(1);
                continue;
            }
            // A boolean scalar consumes no axis: refused before looking one up.
            Item::Bool(_) => return Err(not_1d(0, axis)),
            _ => shape[axis],
        };
        match item {
            Item::Slice(s) => {
                let (start, step, count) = slice_steps(&s, n)?;
                factors.push(Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                });
                dims.push(count);
            }
            Item::Int(i) => {
                let start = int_index(&i, n, axis)?;
                factors.push(Factor::Step {
                    axis,
                    start,
                    step: 1,
                    count: 1,
                });
            }
            Item::Array(a) if a.ndim() == 1 => {
                let coords = wrap(&a.values, n, axis)?;
                dims.push(coords.len() as u64);
                factors.push(Factor::Points {
                    axes: vec![axis],
                    coords,
                });
            }
            Item::Mask(m) if m.ndim() == 1 => {
                if m.shape[0] as u64 != n {
                    return Err(PyIndexError::new_err(format!(
                        "boolean index did not match indexed array along axis {axis}; size of \
                         axis is {n} but size of corresponding boolean axis is {}",
                        m.shape[0]
                    )));
                }
                let coords: Vec<u64> = (0..n).filter(|&i| m.values[i as usize]).collect();
                dims.push(coords.len() as u64);
                factors.push(Factor::Points {
                    axes: vec![axis],
                    coords,
                });
            }
            Item::Array(a) => return Err(not_1d(a.ndim(), axis)),
            Item::Mask(m) => return Err(not_1d(m.ndim(), axis)),
            Item::Bool(_) => return Err(not_1d(0, axis)),
            Item::NewAxis | Item::Ellipsis => unreachable!("handled above / expanded"),
        }
        axis += 1;
    }
    Ok((factors, dims))
}

fn not_1d(ndim: usize, axis: usize) -> PyErr {
    PyIndexError::new_err(format!(
        "orthogonal selection takes 1-d index arrays, got {ndim}-d on axis {axis}"
    ))
}

/// `array.blocks[key]`: integers and step-1 slices over the grid of stored chunks
/// (`blocks`: their shape), as the element ranges they cover (every axis kept).
pub fn block_ranges(
    shape: &[u64],
    blocks: &ChunkGrid,
    key: &Bound<'_, PyAny>,
) -> PyResult<Vec<Range<u64>>> {
    let mut out = Vec::with_capacity(shape.len());
    let counts = blocks.shape();
    for (axis, item) in expand(shape.len(), key)?.into_iter().enumerate() {
        if !matches!(item, Item::Int(_) | Item::Slice(_)) {
            let what = if matches!(item, Item::NewAxis) {
                "None"
            } else {
                "arrays"
            };
            return Err(PyIndexError::new_err(format!(
                "block selections take integers, step-1 slices and '...', not {what}"
            )));
        }
        let (n, nblocks) = (shape[axis], counts[axis]);
        // Where block `b` starts (the array's end for the block past the last).
        let start_of = |b: u64| {
            if b >= nblocks {
                n
            } else {
                blocks.start(axis, b).min(n)
            }
        };
        match item {
            Item::Int(i) => {
                let b = int_index(&i, nblocks, axis)?;
                out.push(start_of(b)..start_of(b + 1));
            }
            Item::Slice(s) => {
                let (start, step, count) = slice_steps(&s, nblocks)?;
                if step != 1 {
                    return Err(PyIndexError::new_err(format!(
                        "block selections take step-1 slices, got step {step}"
                    )));
                }
                out.push(start_of(start)..start_of(start + count));
            }
            _ => unreachable!("refused above"),
        }
    }
    Ok(out)
}

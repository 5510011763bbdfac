//! zarr-python's orthogonal (`oindex`) and block (`blocks`) selections, as the engine's
//! pick factors and element ranges.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::select::key::{expand, int_index, slice_steps, wrap, KeyItem};
use crate::select::numpy::check_mask;
use crate::select::pick::Factor;

/// `array.oindex[key]`: per axis an integer (drops the axis), a slice (any step), a 1-d
/// integer array (any order, repeats) or a 1-d boolean mask; `...` and `None` as in NumPy.
pub fn orthogonal_pick(shape: &[u64], key: Vec<KeyItem>) -> Result<(Vec<Factor>, Vec<u64>)> {
    let mut factors = Vec::new();
    let mut dims = Vec::new();
    let mut axis = 0;
    for item in expand(shape.len(), key)? {
        let n = match item {
            KeyItem::NewAxis => {
                dims.push(1);
                continue;
            }
            // A boolean scalar consumes no axis: refused before looking one up.
            KeyItem::Bool(_) => return Err(not_1d(0, axis)),
            _ => shape[axis],
        };
        match item {
            KeyItem::Slice(s) => {
                let (start, step, count) = slice_steps(&s, n)?;
                factors.push(Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                });
                dims.push(count);
            }
            KeyItem::Int(i) => {
                let start = int_index(i, n, axis)?;
                factors.push(Factor::Step {
                    axis,
                    start,
                    step: 1,
                    count: 1,
                });
            }
            KeyItem::Array(a) if a.ndim() == 1 => {
                let coords = wrap(&a.values, n, axis)?;
                dims.push(coords.len() as u64);
                factors.push(Factor::Points {
                    axes: vec![axis],
                    coords,
                });
            }
            KeyItem::Mask(m) if m.ndim() == 1 => {
                check_mask(&m, &[n], axis)?;
                let coords: Vec<u64> = (0..n).filter(|&i| m.values[i as usize]).collect();
                dims.push(coords.len() as u64);
                factors.push(Factor::Points {
                    axes: vec![axis],
                    coords,
                });
            }
            KeyItem::Array(a) => return Err(not_1d(a.ndim(), axis)),
            KeyItem::Mask(m) => return Err(not_1d(m.ndim(), axis)),
            KeyItem::Bool(_) => return Err(not_1d(0, axis)),
            KeyItem::NewAxis | KeyItem::Ellipsis => {
                return Err(Error::Internal("an ellipsis left after expand".into()));
            }
        }
        axis += 1;
    }
    Ok((factors, dims))
}

fn not_1d(ndim: usize, axis: usize) -> Error {
    Error::InvalidSelection(format!(
        "orthogonal selection takes 1-d index arrays, got {ndim}-d on axis {axis}"
    ))
}

/// `array.blocks[key]`: integers and step-1 slices over the grid of stored chunks
/// (`blocks`), as the element ranges they cover (every axis kept).
pub fn block_ranges(
    shape: &[u64],
    blocks: &ChunkGrid,
    key: Vec<KeyItem>,
) -> Result<Vec<Range<u64>>> {
    let mut out = Vec::with_capacity(shape.len());
    let counts = blocks.shape();
    for (axis, item) in expand(shape.len(), key)?.into_iter().enumerate() {
        // Refused before looking up an axis: `None` consumes none.
        if !matches!(item, KeyItem::Int(_) | KeyItem::Slice(_)) {
            let what = if item == KeyItem::NewAxis {
                "None"
            } else {
                "arrays"
            };
            return Err(Error::InvalidSelection(format!(
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
            KeyItem::Int(i) => {
                let b = int_index(i, nblocks, axis)?;
                out.push(start_of(b)..start_of(b + 1));
            }
            KeyItem::Slice(s) => {
                let (start, step, count) = slice_steps(&s, nblocks)?;
                if step != 1 {
                    return Err(Error::InvalidSelection(format!(
                        "block selections take step-1 slices, got step {step}"
                    )));
                }
                out.push(start_of(start)..start_of(start + count));
            }
            _ => return Err(Error::Internal("a block item checked above".into())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::key::{Indices, SliceItem};

    #[test]
    fn each_axis_is_picked_on_its_own() {
        let key = vec![
            KeyItem::Array(Indices {
                shape: vec![3],
                values: vec![2, 0, 2],
            }),
            KeyItem::Int(-1),
            KeyItem::Mask(Indices {
                shape: vec![3],
                values: vec![true, false, true],
            }),
        ];
        let (factors, dims) = orthogonal_pick(&[3, 4, 3], key).unwrap();
        assert_eq!(dims, vec![3, 2]);
        assert_eq!(
            factors[0],
            Factor::Points {
                axes: vec![0],
                coords: vec![2, 0, 2]
            }
        );
        assert_eq!(
            factors[2],
            Factor::Points {
                axes: vec![2],
                coords: vec![0, 2]
            }
        );
        let two_d = KeyItem::Array(Indices {
            shape: vec![1, 1],
            values: vec![0],
        });
        let err = orthogonal_pick(&[3], vec![two_d]).unwrap_err().to_string();
        assert_eq!(
            err,
            "orthogonal selection takes 1-d index arrays, got 2-d on axis 0"
        );
    }

    #[test]
    fn blocks_cover_whole_chunks() {
        let grid = ChunkGrid::regular(&[10, 4], &[4, 4]);
        let s = KeyItem::Slice(SliceItem {
            start: Some(1),
            stop: None,
            step: None,
        });
        let ranges = block_ranges(&[10, 4], &grid, vec![s, KeyItem::Int(0)]).unwrap();
        assert_eq!(ranges, vec![4..10, 0..4]);
        let err = block_ranges(&[10, 4], &grid, vec![KeyItem::NewAxis]);
        assert!(err.unwrap_err().to_string().ends_with("not None"));
    }
}

//! Python selections into engine requests: `int`, `slice` and `...` (or a tuple of them) parse
//! here into a region; anything else becomes a pick, spelled by `zarrpipe._selection`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};
use zarrpipe_codecs::select::pick::{Factor, Pick};
use zarrpipe_codecs::select::selection::{AxisSelector, Region};

use crate::errors::to_pyerr;

/// Only the basic path parses here; callers send any other key to `numpy_pick` instead.
const SUPPORTED: &str = "a basic selection is integers, slices and '...' (or a tuple of them)";

/// An integer bound, saturated to i64 (slices clamp anyway; huge indices are out of range).
fn bound(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if obj.is_none() {
        return Ok(None);
    }
    let index = obj.call_method0("__index__").map_err(|_| {
        PyTypeError::new_err(format!(
            "slice bounds must be integers or None, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    Ok(Some(match index.extract::<i64>() {
        Ok(v) => v,
        Err(_) if index.gt(0)? => i64::MAX,
        Err(_) => i64::MIN,
    }))
}

fn one(item: &Bound<'_, PyAny>) -> PyResult<AxisSelector> {
    if item.is_instance_of::<PyEllipsis>() {
        return Ok(AxisSelector::Ellipsis);
    }
    if let Ok(slice) = item.cast::<PySlice>() {
        return Ok(AxisSelector::Slice {
            start: bound(&slice.getattr("start")?)?,
            stop: bound(&slice.getattr("stop")?)?,
            step: bound(&slice.getattr("step")?)?,
        });
    }
    // Anything with `__index__` (int, numpy integers) but not bool, which NumPy treats as a mask.
    if !item.is_instance_of::<pyo3::types::PyBool>() && item.hasattr("__index__")? {
        return Ok(AxisSelector::Index(bound(item)?.unwrap_or_default()));
    }
    let type_name = item
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    Err(PyTypeError::new_err(format!(
        "{SUPPORTED}; got {type_name}"
    )))
}

/// Parses a selection object.
pub fn parse(selection: &Bound<'_, PyAny>) -> PyResult<Vec<AxisSelector>> {
    match selection.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().map(|item| one(&item)).collect(),
        Err(_) => Ok(vec![one(selection)?]),
    }
}

/// Parses a chunk index: an int or a tuple of ints, all non-negative.
pub fn chunk_index(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let items: Vec<Bound<'_, PyAny>> = match obj.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => match obj.extract::<Vec<Bound<'_, PyAny>>>() {
            Ok(v) if !obj.hasattr("__index__")? => v,
            _ => vec![obj.clone()],
        },
    };
    items
        .iter()
        .map(|i| {
            let index = i.call_method0("__index__").map_err(|_| {
                PyTypeError::new_err("a chunk index is an integer or a tuple of integers")
            })?;
            index.extract::<u64>().map_err(|_| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "chunk index {index} is out of bounds"
                ))
            })
        })
        .collect()
}

/// A read request: a rectangular region (the fast path of integers and step-1 slices), or a
/// pick of any kind and the shape its result takes.
pub enum Request {
    Region(Region),
    Pick(Pick, Vec<u64>),
}

/// A pick as `zarrpipe._selection` spells it: a list of `("step", axis, start, step, count)`
/// and `("points", axes, coords)` (an `(n, len(axes))` int64 array), checked against `shape`.
pub fn pick_from_py(shape: &[u64], factors: &Bound<'_, PyAny>) -> PyResult<Pick> {
    let mut out = Vec::new();
    for f in factors.try_iter()? {
        let f = f?;
        let kind: String = f.get_item(0)?.extract()?;
        match kind.as_str() {
            "step" => {
                let (_, axis, start, step, count): (String, usize, u64, i64, u64) = f.extract()?;
                out.push(Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                });
            }
            "points" => {
                let axes: Vec<usize> = f.get_item(1)?.extract()?;
                let coords: numpy::PyReadonlyArray2<'_, i64> = f.get_item(2)?.extract()?;
                let view = coords.as_array();
                if view.ncols() != axes.len() {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "points of {} coordinates over {} axes",
                        view.ncols(),
                        axes.len()
                    )));
                }
                let coords = view
                    .iter()
                    .map(|&c| {
                        u64::try_from(c).map_err(|_| {
                            pyo3::exceptions::PyIndexError::new_err(format!(
                                "index {c} is out of bounds"
                            ))
                        })
                    })
                    .collect::<PyResult<Vec<u64>>>()?;
                out.push(Factor::Points { axes, coords });
            }
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown selection factor {other:?}"
                )))
            }
        }
    }
    Pick::new(shape, out).map_err(to_pyerr)
}

/// A read request for a Python selection with NumPy's semantics: integers, step-1
/// slices and `...` parse here into a region; anything else (steps, `None`, index
/// arrays, masks) goes through `zarrpipe._selection.numpy_pick`.
pub fn request(shape: &[u64], selection: Option<&Bound<'_, PyAny>>) -> PyResult<Request> {
    let Some(s) = selection else {
        return Ok(Request::Region(Region::all(shape)));
    };
    if let Ok(selectors) = parse(s) {
        let step_one = selectors.iter().all(|x| match x {
            AxisSelector::Slice { step, .. } => step.unwrap_or(1) == 1,
            _ => true,
        });
        if step_one {
            return Region::resolve(shape, &selectors)
                .map(Request::Region)
                .map_err(to_pyerr);
        }
    }
    let py = s.py();
    let picked = py
        .import("zarrpipe._selection")?
        .getattr("numpy_pick")?
        .call1((PyTuple::new(py, shape)?, s))?;
    pick_request(shape, &picked.get_item(0)?, &picked.get_item(1)?)
}

/// A pick request from its factors and result shape (checked to hold as many elements).
pub fn pick_request(
    array_shape: &[u64],
    factors: &Bound<'_, PyAny>,
    shape: &Bound<'_, PyAny>,
) -> PyResult<Request> {
    let pick = pick_from_py(array_shape, factors)?;
    let shape: Vec<u64> = shape.extract()?;
    let want: u128 = pick.out_shape().iter().map(|&d| u128::from(d)).product();
    if shape.iter().map(|&d| u128::from(d)).product::<u128>() != want {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "result shape {shape:?} for a selection of {want} elements"
        )));
    }
    Ok(Request::Pick(pick, shape))
}

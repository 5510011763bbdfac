//! The fast path: integers, slices and `...` (or a tuple of them) parsed straight into the
//! engine's selectors, which resolve to a region; and chunk indices.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};
use zarrpipe_codecs::select::selection::AxisSelector;

use super::items::slice_bound;

/// Only the basic path parses here; callers send any other key to `numpy_pick` instead.
const SUPPORTED: &str = "a basic selection is integers, slices and '...' (or a tuple of them)";

fn one(item: &Bound<'_, PyAny>) -> PyResult<AxisSelector> {
    if item.is_instance_of::<PyEllipsis>() {
        return Ok(AxisSelector::Ellipsis);
    }
    if let Ok(slice) = item.cast::<PySlice>() {
        return Ok(AxisSelector::Slice {
            start: slice_bound(&slice.getattr("start")?)?,
            stop: slice_bound(&slice.getattr("stop")?)?,
            step: slice_bound(&slice.getattr("step")?)?,
        });
    }
    // Anything with `__index__` (int, numpy integers) but not bool, which NumPy treats as a mask.
    if !item.is_instance_of::<pyo3::types::PyBool>() && item.hasattr("__index__")? {
        return Ok(AxisSelector::Index(slice_bound(item)?.unwrap_or_default()));
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

//! The items of an index key classified as NumPy classifies them (an integer, a slice,
//! `...`, `None`, a boolean scalar, an integer array, a boolean mask) into the engine's
//! `KeyItem`s. NumPy checks each index array's dtype and converts it; what the items select
//! is the engine's (`zarrpipe_codecs::select::key`).

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyEllipsis, PySlice, PyString, PyTuple};
use zarrpipe_codecs::select::key::{Indices, KeyItem, SliceItem};

/// NumPy's message for a key item that is no index.
pub const VALID: &str = "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) \
                         and integer or boolean arrays are valid indices";

/// `item` as an integer or boolean array (an empty sequence is an integer array, as NumPy
/// reads `[]`); any other dtype is not an index.
fn index_array(item: &Bound<'_, PyAny>) -> PyResult<KeyItem> {
    let py = item.py();
    let np = py.import("numpy")?;
    let mut a = np.call_method1("asarray", (item,))?;
    let is_ndarray = item.is_instance(&np.getattr("ndarray")?)?;
    if !is_ndarray && a.getattr("size")?.extract::<usize>()? == 0 {
        a = a.call_method1("astype", (np.getattr("intp")?,))?;
    }
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    let flat = |dtype: &str| -> PyResult<Bound<'_, PyAny>> {
        np.call_method1("ascontiguousarray", (&a, dtype))?
            .call_method0("ravel")
    };
    match kind.as_str() {
        "b" => {
            let values = flat("bool")?.call_method0("tolist")?.extract()?;
            Ok(KeyItem::Mask(Indices { shape, values }))
        }
        // As NumPy does: unsigned indices are taken as int64 (huge ones wrap and are then
        // out of range).
        "i" | "u" => {
            let values = flat("int64")?.call_method0("tolist")?.extract()?;
            Ok(KeyItem::Array(Indices { shape, values }))
        }
        _ => Err(PyIndexError::new_err(VALID)),
    }
}

/// A slice bound (or the basic path's integer) as an `i64` (`None`: left out), saturated
/// beyond it (slices clamp anyway; huge indices are out of range); anything without
/// `__index__` is Python's `TypeError`.
pub(super) fn slice_bound(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if obj.is_none() {
        return Ok(None);
    }
    let index = obj.call_method0("__index__").map_err(|_| {
        PyTypeError::new_err("slice indices must be integers or None or have an __index__ method")
    })?;
    Ok(Some(match index.extract::<i64>() {
        Ok(v) => v,
        Err(_) if index.gt(0)? => i64::MAX,
        Err(_) => i64::MIN,
    }))
}

fn classify(item: &Bound<'_, PyAny>) -> PyResult<KeyItem> {
    let py = item.py();
    if item.is_none() {
        return Ok(KeyItem::NewAxis);
    }
    if item.is_instance_of::<PyEllipsis>() {
        return Ok(KeyItem::Ellipsis);
    }
    if let Ok(s) = item.cast::<PySlice>() {
        return Ok(KeyItem::Slice(SliceItem {
            start: slice_bound(&s.getattr("start")?)?,
            stop: slice_bound(&s.getattr("stop")?)?,
            step: slice_bound(&s.getattr("step")?)?,
        }));
    }
    let np = py.import("numpy")?;
    if item.is_instance_of::<PyBool>() || item.is_instance(&np.getattr("bool_")?)? {
        return Ok(KeyItem::Bool(item.is_truthy()?));
    }
    let is_ndarray = item.is_instance(&np.getattr("ndarray")?)?;
    if is_ndarray && item.getattr("ndim")?.extract::<usize>()? > 0 {
        return index_array(item);
    }
    if let Ok(i) = py.import("operator")?.call_method1("index", (item,)) {
        // Beyond i128 is out of bounds of any axis: saturated, it is refused all the same.
        return Ok(KeyItem::Int(match i.extract::<i128>() {
            Ok(v) => v,
            Err(_) if i.gt(0)? => i128::MAX,
            Err(_) => i128::MIN,
        }));
    }
    let sequence = py.import("collections.abc")?.getattr("Sequence")?;
    if item.is_instance_of::<PyString>()
        || item.is_instance_of::<PyBytes>()
        || !(is_ndarray || item.is_instance(&sequence)?)
    {
        return Err(PyIndexError::new_err(VALID));
    }
    match index_array(item)? {
        KeyItem::Mask(m) if m.ndim() == 0 => {
            Ok(KeyItem::Bool(m.values.first().copied().unwrap_or(false)))
        }
        other => Ok(other),
    }
}

/// The items of `key` (a tuple of items, or one), as NumPy classifies them.
pub fn key_items(key: &Bound<'_, PyAny>) -> PyResult<Vec<KeyItem>> {
    match key.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|k| classify(&k)).collect(),
        Err(_) => Ok(vec![classify(key)?]),
    }
}

//! The items of an index key, classified as NumPy reads them (an integer, a slice, `...`,
//! `None`, a boolean scalar, an integer array, a boolean mask) and with `...` expanded into
//! full slices. NumPy checks each index array's dtype and converts it; the selection logic
//! itself is here.

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyEllipsis, PySlice, PyString, PyTuple};

/// NumPy's message for a key item that is no index.
pub const VALID: &str = "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) \
                         and integer or boolean arrays are valid indices";

/// An index array: its shape and its elements in C order.
pub struct Indices<T> {
    pub shape: Vec<usize>,
    pub values: Vec<T>,
}

impl<T> Indices<T> {
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
}

/// One item of a key.
pub enum Item<'py> {
    NewAxis,
    Ellipsis,
    /// A slice (`None`: the full slice `...` expands into).
    Slice(Option<Bound<'py, PySlice>>),
    /// An integer (any size: an out-of-range one is refused with its value).
    Int(Bound<'py, PyAny>),
    /// `True` or `False`: a new axis of length 1 or 0 that takes part in broadcasting.
    Bool(bool),
    Array(Indices<i64>),
    Mask(Indices<bool>),
}

impl Item<'_> {
    /// How many array axes the item consumes.
    fn axes_used(&self) -> usize {
        match self {
            Self::Slice(_) | Self::Int(_) | Self::Array(_) => 1,
            Self::Mask(m) => m.ndim(),
            Self::NewAxis | Self::Ellipsis | Self::Bool(_) => 0,
        }
    }

    /// Advanced indexing: index arrays, masks and boolean scalars.
    pub fn is_advanced(&self) -> bool {
        matches!(self, Self::Array(_) | Self::Mask(_) | Self::Bool(_))
    }
}

/// `item` as an integer or boolean array (an empty sequence is an integer array, as NumPy
/// reads `[]`); any other dtype is not an index.
fn index_array<'py>(item: &Bound<'py, PyAny>) -> PyResult<Item<'py>> {
    let py = item.py();
    let np = py.import("numpy")?;
    let mut a = np.call_method1("asarray", (item,))?;
    let is_ndarray = item.is_instance(&np.getattr("ndarray")?)?;
    if !is_ndarray && a.getattr("size")?.extract::<usize>()? == 0 {
        a = a.call_method1("astype", (np.getattr("intp")?,))?;
    }
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    let flat = |dtype: &str| -> PyResult<Bound<'py, PyAny>> {
        np.call_method1("ascontiguousarray", (&a, dtype))?
            .call_method0("ravel")
    };
    match kind.as_str() {
        "b" => {
            let values = flat("bool")?.call_method0("tolist")?.extract()?;
            Ok(Item::Mask(Indices { shape, values }))
        }
        // As NumPy does: unsigned indices are taken as int64 (huge ones wrap and are then
        // out of range).
        "i" | "u" => {
            let values = flat("int64")?.call_method0("tolist")?.extract()?;
            Ok(Item::Array(Indices { shape, values }))
        }
        _ => Err(PyIndexError::new_err(VALID)),
    }
}

fn classify<'py>(item: &Bound<'py, PyAny>) -> PyResult<Item<'py>> {
    let py = item.py();
    if item.is_none() {
        return Ok(Item::NewAxis);
    }
    if item.is_instance_of::<PyEllipsis>() {
        return Ok(Item::Ellipsis);
    }
    if let Ok(s) = item.cast::<PySlice>() {
        return Ok(Item::Slice(Some(s.clone())));
    }
    let np = py.import("numpy")?;
    if item.is_instance_of::<PyBool>() || item.is_instance(&np.getattr("bool_")?)? {
        return Ok(Item::Bool(item.is_truthy()?));
    }
    let is_ndarray = item.is_instance(&np.getattr("ndarray")?)?;
    if is_ndarray && item.getattr("ndim")?.extract::<usize>()? > 0 {
        return index_array(item);
    }
    if let Ok(i) = py.import("operator")?.call_method1("index", (item,)) {
        return Ok(Item::Int(i));
    }
    let sequence = py.import("collections.abc")?.getattr("Sequence")?;
    if item.is_instance_of::<PyString>()
        || item.is_instance_of::<PyBytes>()
        || !(is_ndarray || item.is_instance(&sequence)?)
    {
        return Err(PyIndexError::new_err(VALID));
    }
    match index_array(item)? {
        Item::Mask(m) if m.ndim() == 0 => {
            Ok(Item::Bool(m.values.first().copied().unwrap_or(false)))
        }
        other => Ok(other),
    }
}

/// The key's items with its `...` expanded into full slices (trailing full slices for the
/// axes the key leaves out).
pub fn expand<'py>(ndim: usize, key: &Bound<'py, PyAny>) -> PyResult<Vec<Item<'py>>> {
    let items: Vec<Item<'py>> = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|k| classify(&k)).collect::<PyResult<_>>()?,
        Err(_) => vec![classify(key)?],
    };
    let ellipses = items.iter().filter(|i| matches!(i, Item::Ellipsis)).count();
    if ellipses > 1 {
        return Err(PyIndexError::new_err(
            "an index can only have a single ellipsis ('...')",
        ));
    }
    let used: usize = items.iter().map(Item::axes_used).sum();
    if used > ndim {
        return Err(PyIndexError::new_err(format!(
            "too many indices for array: array is {ndim}-dimensional, but {used} were indexed"
        )));
    }
    let full = ndim - used;
    let mut out = Vec::with_capacity(items.len() + full);
    let mut filled = false;
    for item in items {
        if matches!(item, Item::Ellipsis) {
            out.extend((0..full).map(|_| Item::Slice(None)));
            filled = true;
        } else {
            out.push(item);
        }
    }
    if !filled {
        out.extend((0..full).map(|_| Item::Slice(None)));
    }
    Ok(out)
}

/// `(start, step, count)` of slice `s` over an axis of `n` (`slice.indices`: NumPy's
/// clamping; a step of 0 is its `ValueError`, non-integer bounds its `TypeError`).
pub fn slice_steps(s: &Option<Bound<'_, PySlice>>, n: u64) -> PyResult<(u64, i64, u64)> {
    let Some(s) = s else {
        return Ok((0, 1, n));
    };
    let len = isize::try_from(n)
        .map_err(|_| PyIndexError::new_err(format!("an axis of {n} is too long to slice")))?;
    let ix = s.indices(len)?;
    let count = ix.slicelength as u64;
    let start = if count == 0 { 0 } else { ix.start as u64 };
    Ok((start, ix.step as i64, count))
}

/// Integer `i` on an axis of `n`, negative counting from the end.
pub fn int_index(i: &Bound<'_, PyAny>, n: u64, axis: usize) -> PyResult<u64> {
    let out_of_bounds = || {
        PyIndexError::new_err(format!(
            "index {i} is out of bounds for axis {axis} with size {n}"
        ))
    };
    let v: i128 = i.extract().map_err(|_| out_of_bounds())?;
    let n = i128::from(n);
    if !(-n..n).contains(&v) {
        return Err(out_of_bounds());
    }
    Ok((if v < 0 { v + n } else { v }) as u64)
}

/// Index array values on an axis of `n`, negative ones counting from the end.
pub fn wrap(values: &[i64], n: u64, axis: usize) -> PyResult<Vec<u64>> {
    let len = i128::from(n);
    values
        .iter()
        .map(|&v| {
            let w = i128::from(v);
            if !(-len..len).contains(&w) {
                return Err(PyIndexError::new_err(format!(
                    "index {v} is out of bounds for axis {axis} with size {n}"
                )));
            }
            Ok((if w < 0 { w + len } else { w }) as u64)
        })
        .collect()
}

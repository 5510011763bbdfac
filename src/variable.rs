//! Variable-length arrays (strings, bytes) as NumPy arrays: DLPack and the buffer protocol
//! cannot carry them, so reads return NumPy arrays of the dtype zarr-python returns for the
//! same array — `StringDType()` for text (object where NumPy lacks it), object holding
//! `bytes` for byte strings. The engine decodes the chunks in parallel into one flat
//! buffer; here, under the GIL, each element becomes its Python object.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use zarrpipe_codecs::array::variable::{VarData, Variable};

/// The NumPy dtype of a variable-length array's elements.
pub fn dtype<'py>(py: Python<'py>, kind: Variable) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let dtypes = np.getattr("dtypes")?;
    match kind {
        Variable::Utf8 if dtypes.hasattr("StringDType")? => dtypes.getattr("StringDType")?.call0(),
        _ => np.getattr("dtype")?.call1(("O",)),
    }
}

/// The elements of `data` as a NumPy array of `shape`.
pub fn to_numpy<'py>(
    py: Python<'py>,
    data: &VarData,
    kind: Variable,
    shape: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let items = PyList::empty(py);
    for i in 0..data.len() {
        let raw = data.get(i);
        let item = match kind {
            // The engine checked every element is UTF-8 (plugins::vlen); a fill value is too.
            Variable::Utf8 => PyString::new(
                py,
                std::str::from_utf8(raw).map_err(|_| {
                    crate::errors::decode_error_with(format!("element {i} is not valid UTF-8"))
                })?,
            )
            .into_any(),
            Variable::Bytes => PyBytes::new(py, raw).into_any(),
        };
        items.append(item)?;
    }
    let np = py.import("numpy")?;
    let flat = np.call_method1("array", (items, dtype(py, kind)?))?;
    flat.call_method1("reshape", (PyTuple::new(py, shape)?,))
}

/// `value` (anything NumPy broadcasts to `shape`) as variable-length elements in C order:
/// `str` for text, `bytes` for byte strings.
pub fn from_numpy(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    kind: Variable,
    shape: &[u64],
) -> PyResult<VarData> {
    let np = py.import("numpy")?;
    let arr = np.call_method1("asarray", (value, dtype(py, kind)?))?;
    let arr = np.call_method1("broadcast_to", (arr, PyTuple::new(py, shape)?))?;
    let items = arr.call_method0("ravel")?.call_method0("tolist")?;
    let mut out = VarData {
        shape: shape.to_vec(),
        ..VarData::default()
    };
    for item in items.try_iter()? {
        let item = item?;
        out.offsets.push(out.bytes.len());
        match kind {
            Variable::Utf8 => {
                let s = item.cast::<PyString>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "a string array takes str values, not {}",
                        item.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ))
                })?;
                out.bytes.extend_from_slice(s.to_str()?.as_bytes());
            }
            Variable::Bytes => {
                let b = item.cast::<PyBytes>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "a bytes array takes bytes values, not {}",
                        item.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ))
                })?;
                out.bytes.extend_from_slice(b.as_bytes());
            }
        }
    }
    out.offsets.push(out.bytes.len());
    Ok(out)
}

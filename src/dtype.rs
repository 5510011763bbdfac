//! Element types as NumPy, DLPack and the buffer protocol spell them, and the NumPy dtypes
//! of the data types the engine carries opaquely (datetimes, fixed-length strings and
//! bytes, records, small floats: `zarrpipe_codecs::dtype::numpy_type`).

use dlpark::ffi::{DLDataType, DLDataTypeCode};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use zarrpipe_codecs::{ElementKind, ElementType};

/// One cached `numpy.dtype` per element type (native byte order).
static DTYPES: [PyOnceLock<Py<PyArrayDescr>>; ElementType::ALL.len()] =
    [const { PyOnceLock::new() }; ElementType::ALL.len()];

fn index_of(t: ElementType) -> usize {
    ElementType::ALL
        .iter()
        .position(|x| *x == t)
        .unwrap_or_default()
}

/// The native-byte-order `numpy.dtype` of an element type. `bfloat16` needs `ml_dtypes`.
pub fn numpy_dtype(py: Python<'_>, t: ElementType) -> PyResult<Bound<'_, PyArrayDescr>> {
    if let ElementType::Raw { size, .. } = t {
        // Opaque bytes as such; arrays of them give their real dtype (`numpy_dtype_from_json`).
        return PyArrayDescr::new(py, format!("V{size}"));
    }
    let cached = DTYPES[index_of(t)].get_or_try_init(py, || -> PyResult<_> {
        let descr = if t == ElementType::BFloat16 {
            let ml_dtypes = py.import("ml_dtypes").map_err(|_| {
                PyTypeError::new_err(
                    "bfloat16 data needs the ml_dtypes package for a NumPy dtype: pip install ml_dtypes",
                )
            })?;
            PyArrayDescr::new(py, ml_dtypes.getattr("bfloat16")?)?
        } else {
            PyArrayDescr::new(py, t.name())?
        };
        Ok(descr.unbind())
    })?;
    Ok(cached.bind(py).clone())
}

/// The NumPy dtype of `numpy_type`'s JSON spelling: a type string, `"ml_dtypes.<name>"`,
/// or a list of `[name, type]` / `[name, type, shape]` fields.
pub fn numpy_dtype_from_json<'py>(
    py: Python<'py>,
    spelling: &serde_json::Value,
) -> PyResult<Bound<'py, PyArrayDescr>> {
    PyArrayDescr::new(py, dtype_arg(py, spelling)?)
}

fn dtype_arg<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::types::{PyList, PyString, PyTuple};
    match v {
        serde_json::Value::String(s) => match s.strip_prefix("ml_dtypes.") {
            Some(name) => {
                let ml_dtypes = py.import("ml_dtypes").map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{name} data needs the ml_dtypes package for a NumPy dtype: pip install ml_dtypes"
                    ))
                })?;
                ml_dtypes.getattr(name)
            }
            None => Ok(PyString::new(py, s).into_any()),
        },
        serde_json::Value::Array(fields) => {
            let list = PyList::empty(py);
            for f in fields {
                let parts = f.as_array().map(Vec::as_slice).unwrap_or_default();
                let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(parts.len());
                for (i, p) in parts.iter().enumerate() {
                    items.push(match (i, p) {
                        (0, serde_json::Value::String(name)) => PyString::new(py, name).into_any(),
                        (1, t) => dtype_arg(py, t)?,
                        (_, serde_json::Value::Array(shape)) => {
                            let dims: Vec<u64> =
                                shape.iter().filter_map(serde_json::Value::as_u64).collect();
                            PyTuple::new(py, dims)?.into_any()
                        }
                        _ => return Err(PyTypeError::new_err(format!("bad record field {f}"))),
                    });
                }
                list.append(PyTuple::new(py, items)?)?;
            }
            Ok(list.into_any())
        }
        other => Err(PyTypeError::new_err(format!("bad dtype spelling {other}"))),
    }
}

/// `numpy.asarray(value, dtype)`, except that a time array changes byte order through its
/// int64 counts: NumPy copies a generic-unit time (`<m8[2generic]` from `>m8[2generic]`)
/// unswapped.
pub fn as_dtype<'py>(
    value: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let np = value.py().import("numpy")?;
    if !value.is_instance(&np.getattr("ndarray")?)? {
        return np.call_method1("asarray", (value, dtype));
    }
    let array = value;
    let from = array.getattr("dtype")?;
    let times = |d: &Bound<'py, PyAny>| -> PyResult<bool> {
        Ok(matches!(
            d.getattr("kind")?.extract::<String>()?.as_str(),
            "M" | "m"
        ))
    };
    if times(&from)? && times(dtype)? && !from.eq(dtype)? {
        let order = |d: &Bound<'py, PyAny>| -> PyResult<String> {
            let o: String = d.getattr("byteorder")?.extract()?;
            Ok(if o == "=" { String::new() } else { o })
        };
        let (a, b) = (order(&from)?, order(dtype)?);
        let same_unit = from
            .call_method1("newbyteorder", ("=",))?
            .eq(dtype.call_method1("newbyteorder", ("=",))?)?;
        if same_unit && a != b {
            return array
                .call_method1("view", (format!("{a}i8"),))?
                .call_method1("astype", (format!("{b}i8"),))?
                .call_method1("view", (dtype,));
        }
    }
    np.call_method1("asarray", (array, dtype))
}

/// The element type of a NumPy dtype, ignoring byte order (callers normalise it).
pub fn from_numpy_dtype(descr: &Bound<'_, PyArrayDescr>) -> PyResult<ElementType> {
    let size = descr.itemsize();
    let kind = match descr.kind() {
        b'b' => Some(ElementKind::Bool),
        b'i' => Some(ElementKind::Int),
        b'u' => Some(ElementKind::UInt),
        b'f' => Some(ElementKind::Float),
        b'c' => Some(ElementKind::Complex),
        _ if size == 2 && descr.getattr("name")?.extract::<String>()? == "bfloat16" => {
            Some(ElementKind::BFloat)
        }
        _ => None,
    };
    kind.and_then(|k| {
        ElementType::ALL
            .into_iter()
            .find(|t| t.kind() == k && t.size() == size)
    })
    .ok_or_else(|| {
        PyTypeError::new_err(format!(
            "unsupported dtype {descr}: zarrpipe holds bool, (u)int8-64, float16/32/64, bfloat16 and complex64/128"
        ))
    })
}

/// The DLPack type descriptor.
pub fn dlpack_dtype(t: ElementType) -> DLDataType {
    let code = match t.kind() {
        ElementKind::Bool => DLDataTypeCode::BOOL,
        ElementKind::Int => DLDataTypeCode::INT,
        ElementKind::UInt => DLDataTypeCode::UINT,
        ElementKind::Float => DLDataTypeCode::FLOAT,
        ElementKind::BFloat => DLDataTypeCode::BFLOAT,
        ElementKind::Complex => DLDataTypeCode::COMPLEX,
        // Never exported: tensors of opaque elements refuse DLPack before this.
        ElementKind::Raw => DLDataTypeCode::OPAQUEHANDLE,
    };
    #[allow(clippy::cast_possible_truncation)] // at most 128 bits
    DLDataType {
        code,
        bits: (t.size() * 8) as u8,
        lanes: 1,
    }
}

/// The PEP 3118 format string (native order, standard sizes), NUL-terminated.
pub fn buffer_format(t: ElementType) -> PyResult<&'static std::ffi::CStr> {
    Ok(match t {
        ElementType::Bool => c"?",
        ElementType::Int8 => c"b",
        ElementType::Int16 => c"h",
        ElementType::Int32 => c"i",
        ElementType::Int64 => c"q",
        ElementType::UInt8 => c"B",
        ElementType::UInt16 => c"H",
        ElementType::UInt32 => c"I",
        ElementType::UInt64 => c"Q",
        ElementType::Float16 => c"e",
        ElementType::Float32 => c"f",
        ElementType::Float64 => c"d",
        ElementType::Complex64 => c"Zf",
        ElementType::Complex128 => c"Zd",
        ElementType::BFloat16 => {
            return Err(PyBufferError::new_err(
                "bfloat16 has no buffer-protocol format; use buffer(), to_numpy() or __dlpack__",
            ))
        }
        ElementType::Raw { .. } => {
            return Err(PyBufferError::new_err(
                "opaque elements have no buffer-protocol format; use buffer() or to_numpy()",
            ))
        }
    })
}

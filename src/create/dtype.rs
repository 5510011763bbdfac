//! `create_array`'s `dtype` and `fill_value` as the metadata spells them: numbers and bool by
//! name, variable-length strings and bytes by their codec, every other fixed-size type
//! (datetimes, fixed-length strings and bytes, records, ml_dtypes' small floats) as the
//! installed zarr-python writes it (or zarr-python 3.4 when zarr is not installed).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
// ml_dtypes' one-byte floats and sub-byte integers, created as Zarr v3 data types of the
// same name.
use zarrpipe_codecs::dtype::numpy_type::{SMALL_FLOATS, SUB_BYTE_INTS};

/// An ml_dtypes type that Zarr v3 names after it (a small float, a sub-byte integer).
fn ml_dtypes_named(name: &str) -> bool {
    SMALL_FLOATS.contains(&name) || SUB_BYTE_INTS.iter().any(|(n, ..)| *n == name)
}

fn sub_byte_signed(name: &str) -> Option<bool> {
    SUB_BYTE_INTS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|&(_, _, signed)| signed)
}

/// NumPy dtype names the engine creates arrays of.
const NAMES: [&str; 15] = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bfloat16",
];

/// The data type part of the engine's spec.
pub struct DataType<'py> {
    /// A number or bool type by name (`""` for the others).
    pub name: String,
    pub big_endian: bool,
    /// A spelled-out type (`None` for numbers, bool and variable-length types).
    pub data_type: Option<Bound<'py, PyAny>>,
    /// The codec of a variable-length type (`vlen-utf8`, `vlen-bytes`).
    pub object_codec: Option<&'static str>,
    pub fill: Bound<'py, PyAny>,
    /// Bytes per element for guessing chunks (one per variable-length element, as
    /// zarr-python counts).
    pub itemsize: u64,
}

fn name_of(dt: &Bound<'_, PyAny>) -> PyResult<String> {
    dt.getattr("name")?.extract()
}

fn kind_of(dt: &Bound<'_, PyAny>) -> PyResult<String> {
    dt.getattr("kind")?.extract()
}

/// The codec of a variable-length type: `str`, `"string"`, NumPy's `StringDType` are strings
/// (vlen-utf8); `bytes`, `"variable_length_bytes"` byte strings (vlen-bytes); also
/// zarr-python's `VariableLengthUTF8()` / `VariableLengthBytes()`.
fn object_codec(dtype: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let py = dtype.py();
    let builtins = py.import("builtins")?;
    let text = dtype.cast::<PyString>().ok().map(|s| s.to_string());
    if dtype.is(&builtins.getattr("str")?) || text.as_deref() == Some("string") {
        return Ok(Some("vlen-utf8"));
    }
    if dtype.is(&builtins.getattr("bytes")?) || text.as_deref() == Some("variable_length_bytes") {
        return Ok(Some("vlen-bytes"));
    }
    match dtype.get_type().name()?.to_string().as_str() {
        "VariableLengthUTF8" => return Ok(Some("vlen-utf8")),
        "VariableLengthBytes" => return Ok(Some("vlen-bytes")),
        _ => {}
    }
    let dt = py.import("numpy")?.call_method1("dtype", (dtype,))?;
    let itemsize: usize = dt.getattr("itemsize")?.extract()?;
    match kind_of(&dt)?.as_str() {
        "T" => Ok(Some("vlen-utf8")),
        "U" if itemsize == 0 => Ok(Some("vlen-utf8")),
        "S" if itemsize == 0 => Ok(Some("vlen-bytes")),
        "O" => Err(PyTypeError::new_err(
            "dtype object is ambiguous: pass str (variable-length strings) or bytes \
             (variable-length bytes)",
        )),
        _ => Ok(None),
    }
}

/// A fixed-size type beyond numbers and bool, created from its metadata spelling.
fn is_spelled_out(dt: &Bound<'_, PyAny>) -> PyResult<bool> {
    let name = name_of(dt)?;
    let kind = kind_of(dt)?;
    let object: bool = dt.getattr("hasobject")?.extract()?;
    // A type NumPy shows as raw bytes but that is not one (ml_dtypes' int4, uint2...) must
    // not be stored as raw bytes: it would read back as bytes.
    if kind == "V" && !ml_dtypes_named(&name) {
        let void = dt.py().import("numpy")?.getattr("void")?;
        let scalar = dt.getattr("type")?;
        let builtins = dt.py().import("builtins")?;
        if !builtins
            .call_method1("issubclass", (&scalar, void))?
            .is_truthy()?
        {
            return Err(PyTypeError::new_err(format!(
                "zarrpipe cannot create arrays of dtype {name} (a {} type): it has no Zarr \
                 data type zarrpipe writes",
                scalar.getattr("__module__")?
            )));
        }
    }
    Ok(
        ("MmUSV".contains(kind.as_str()) && !object && !NAMES.contains(&name.as_str()))
            || ml_dtypes_named(&name),
    )
}

/// The Zarr v3 spelling of a NumPy dtype (zarr-python 3.4's, for when zarr is not installed).
fn v3_name<'py>(dt: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = dt.py();
    let names = dt.getattr("names")?;
    if !names.is_none() {
        let fields = PyList::empty(py);
        for n in names.try_iter()? {
            let n = n?;
            let field = dt.getattr("fields")?.get_item(&n)?.get_item(0)?;
            let f = PyDict::new(py);
            f.set_item("name", &n)?;
            f.set_item("data_type", v3_name(&field)?)?;
            fields.append(f)?;
        }
        let config = PyDict::new(py);
        config.set_item("fields", fields)?;
        return named("struct", config);
    }
    let kind = kind_of(dt)?;
    let name = name_of(dt)?;
    if kind == "M" || kind == "m" {
        let (unit, scale): (String, u64) = py
            .import("numpy")?
            .call_method1("datetime_data", (dt,))?
            .extract()?;
        let config = PyDict::new(py);
        config.set_item("unit", unit)?;
        config.set_item("scale_factor", scale)?;
        let time = if kind == "M" {
            "numpy.datetime64"
        } else {
            "numpy.timedelta64"
        };
        return named(time, config);
    }
    let spelled = match kind.as_str() {
        "U" => Some("fixed_length_utf32"),
        "S" => Some("null_terminated_bytes"),
        "V" => Some("raw_bytes"),
        _ => None,
    };
    match spelled {
        Some(s) if !ml_dtypes_named(&name) => {
            let config = PyDict::new(py);
            config.set_item("length_bytes", dt.getattr("itemsize")?)?;
            named(s, config)
        }
        _ => Ok(PyString::new(py, &name).into_any()),
    }
}

fn named<'py>(name: &str, config: Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(config.py());
    d.set_item("name", name)?;
    d.set_item("configuration", config)?;
    Ok(d.into_any())
}

/// The Zarr v2 spelling: the type string, or a record's field list.
fn v2_name<'py>(dt: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = dt.py();
    let names = dt.getattr("names")?;
    if names.is_none() {
        return dt.getattr("str");
    }
    let fields = PyList::empty(py);
    for n in names.try_iter()? {
        let n = n?;
        let field = dt.getattr("fields")?.get_item(&n)?.get_item(0)?;
        let sub = field.getattr("subdtype")?;
        if sub.is_none() {
            fields.append(PyList::new(py, [n, v2_name(&field)?])?)?;
        } else {
            let shape = PyList::new(
                py,
                sub.get_item(1)?.try_iter()?.collect::<PyResult<Vec<_>>>()?,
            )?;
            fields.append(PyList::new(
                py,
                [n, v2_name(&sub.get_item(0)?)?, shape.into_any()],
            )?)?;
        }
    }
    Ok(fields.into_any())
}

/// A fill value as zarr-python spells it (for when zarr is not installed).
fn scalar_json<'py>(
    dt: &Bound<'py, PyAny>,
    value: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = dt.py();
    let np = py.import("numpy")?;
    let scalar = match value {
        None => np.call_method1("zeros", (PyTuple::empty(py), dt))?,
        Some(v) => np.call_method1("asarray", (v, dt))?,
    };
    let kind = kind_of(dt)?;
    if kind == "M" || kind == "m" {
        if value.is_none() || np.call_method1("isnat", (&scalar,))?.is_truthy()? {
            return Ok(PyString::new(py, "NaT").into_any());
        }
        let i64t = np.getattr("int64")?;
        return py
            .import("builtins")?
            .getattr("int")?
            .call1((scalar.call_method1("view", (i64t,))?,));
    }
    if kind == "U" {
        return Ok(scalar.str()?.into_any());
    }
    if let Some(signed) = sub_byte_signed(&name_of(dt)?) {
        // A core-integer fill value (the spec): the number.
        let int = np.getattr(if signed { "int8" } else { "uint8" })?;
        return py
            .import("builtins")?
            .getattr("int")?
            .call1((scalar.call_method1("astype", (int,))?,));
    }
    if SMALL_FLOATS.contains(&name_of(dt)?.as_str()) {
        let byte: u8 = scalar
            .call_method1("reshape", (1,))?
            .call_method1("view", (np.getattr("uint8")?,))?
            .get_item(0)?
            .extract()?;
        return Ok(PyString::new(py, &format!("0x{byte:02x}")).into_any());
    }
    let raw = scalar.call_method0("tobytes")?;
    py.import("base64")?
        .call_method1("standard_b64encode", (raw,))?
        .call_method1("decode", ("ascii",))
}

/// (data type, fill value) of a spelled-out type as the installed zarr-python writes them,
/// or as zarr-python 3.4 does when zarr is not installed.
fn spelled_out<'py>(
    dt: &Bound<'py, PyAny>,
    fill_value: Option<&Bound<'py, PyAny>>,
    zarr_format: u8,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let py = dt.py();
    let name = name_of(dt)?;
    if zarr_format == 2 && ml_dtypes_named(&name) {
        return Err(PyTypeError::new_err(format!(
            "{name} has no Zarr v2 data type: create the array with zarr_format=3"
        )));
    }
    let zdt = match py.import("zarr.core.dtype") {
        // Not a zarr-python type (ml_dtypes' small floats): its errors mean "spell it here".
        Ok(m) => match m.call_method1("get_data_type_from_native_dtype", (dt,)) {
            Ok(z) => Some(z),
            Err(e)
                if e.is_instance_of::<PyTypeError>(py) || e.is_instance_of::<PyValueError>(py) =>
            {
                None
            }
            Err(e) => return Err(e),
        },
        Err(_) => None,
    };
    let Some(zdt) = zdt else {
        let name = if zarr_format == 2 {
            v2_name(dt)?
        } else {
            v3_name(dt)?
        };
        return Ok((name, scalar_json(dt, fill_value)?));
    };
    // zarr-python warns that some v3 spellings are not in the spec yet.
    let warnings = py.import("warnings")?;
    let quiet = warnings.call_method0("catch_warnings")?;
    quiet.call_method0("__enter__")?;
    let spelled = (|| -> PyResult<_> {
        warnings.call_method1("simplefilter", ("ignore",))?;
        let kw = PyDict::new(py);
        kw.set_item("zarr_format", zarr_format)?;
        let spelled = zdt.call_method("to_json", (), Some(&kw))?;
        let name = if zarr_format == 2 {
            spelled.get_item("name")?
        } else {
            spelled
        };
        let scalar = match fill_value {
            None => zdt.call_method0("default_scalar")?,
            Some(v) => zdt.call_method1("cast_scalar", (v,))?,
        };
        let fill = zdt.call_method("to_json_scalar", (scalar,), Some(&kw))?;
        Ok((name, fill))
    })();
    quiet.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
    spelled
}

/// `_number`: a JSON number, or NaN / ±Infinity spelled as Zarr does.
fn number<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    let np = py.import("numpy")?;
    if x.is_instance_of::<pyo3::types::PyBool>() || x.is_instance(&np.getattr("bool_")?)? {
        return Ok(pyo3::types::PyBool::new(py, x.is_truthy()?)
            .to_owned()
            .into_any());
    }
    if x.is_instance_of::<pyo3::types::PyInt>() || x.is_instance(&np.getattr("integer")?)? {
        return py.import("builtins")?.getattr("int")?.call1((x,));
    }
    let f: f64 = py
        .import("builtins")?
        .getattr("float")?
        .call1((x,))?
        .extract()?;
    Ok(if f.is_nan() {
        PyString::new(py, "NaN").into_any()
    } else if f.is_infinite() {
        PyString::new(py, if f > 0.0 { "Infinity" } else { "-Infinity" }).into_any()
    } else {
        f.into_pyobject(py)?.into_any()
    })
}

/// A number type's fill value in the spec (`None`: the type's default).
fn fill<'py>(
    py: Python<'py>,
    value: Option<&Bound<'py, PyAny>>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(value) = value else {
        return Ok(py.None().into_bound(py));
    };
    let builtins = py.import("builtins")?;
    if name.starts_with("complex") {
        let c = builtins.getattr("complex")?.call1((value,))?;
        let parts = [number(&c.getattr("real")?)?, number(&c.getattr("imag")?)?];
        return Ok(PyList::new(py, parts)?.into_any());
    }
    if name == "bool" {
        return Ok(pyo3::types::PyBool::new(py, value.is_truthy()?)
            .to_owned()
            .into_any());
    }
    if name.starts_with("int") || name.starts_with("uint") {
        return builtins.getattr("int")?.call1((value,));
    }
    number(&builtins.getattr("float")?.call1((value,))?)
}

/// A variable-length type's fill value: text, or base64 bytes.
fn variable_fill<'py>(
    py: Python<'py>,
    codec: &str,
    value: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(value) = value else {
        return Ok(py.None().into_bound(py));
    };
    let builtins = py.import("builtins")?;
    if codec == "vlen-utf8" {
        return builtins.getattr("str")?.call1((value,));
    }
    let raw = builtins.getattr("bytes")?.call1((value,))?;
    py.import("base64")?
        .call_method1("standard_b64encode", (raw,))?
        .call_method1("decode", ("ascii",))
}

/// `dtype` and `fill_value` as the spec takes them.
pub fn data_type<'py>(
    dtype: &Bound<'py, PyAny>,
    fill_value: Option<&Bound<'py, PyAny>>,
    zarr_format: u8,
) -> PyResult<DataType<'py>> {
    let py = dtype.py();
    let np = py.import("numpy")?;
    if let Some(codec) = object_codec(dtype)? {
        return Ok(DataType {
            name: String::new(),
            big_endian: false,
            data_type: None,
            object_codec: Some(codec),
            fill: variable_fill(py, codec, fill_value)?,
            itemsize: 1,
        });
    }
    let dt = np.call_method1("dtype", (dtype,))?;
    let itemsize: u64 = dt.getattr("itemsize")?.extract()?;
    if is_spelled_out(&dt)? {
        let (spelled, fill) = spelled_out(&dt, fill_value, zarr_format)?;
        return Ok(DataType {
            name: String::new(),
            big_endian: false,
            data_type: Some(spelled),
            object_codec: None,
            fill,
            itemsize,
        });
    }
    let name = name_of(&dt)?;
    if !NAMES.contains(&name.as_str()) {
        return Err(PyTypeError::new_err(format!(
            "zarrpipe cannot create arrays of dtype {} yet",
            dt.str()?
        )));
    }
    let order: String = dt.getattr("byteorder")?.extract()?;
    let big_endian = order == ">" || (order == "=" && cfg!(target_endian = "big"));
    Ok(DataType {
        fill: fill(py, fill_value, &name)?,
        name,
        big_endian,
        data_type: None,
        object_codec: None,
        itemsize,
    })
}

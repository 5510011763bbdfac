//! `create_array`'s `compressors` and `filters` as the spec's JSON codec lists: dicts as
//! given, numcodecs codecs by their config, zarr-python codecs by `to_dict()`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// One codec as JSON: a v3 dict, a numcodecs config, or either kind of codec object.
fn codec<'py>(codec: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = codec.py();
    if let Ok(d) = codec.cast::<PyDict>() {
        return Ok(d.copy()?.into_any());
    }
    if codec.hasattr("get_config")? && codec.hasattr("codec_id")? {
        let config = codec.call_method0("get_config")?;
        return Ok(PyDict::from_sequence(&config.call_method0("items")?)?.into_any());
    }
    if codec.hasattr("to_dict")? {
        let json = py.import("json")?;
        let spec = codec
            .call_method0("to_dict")
            .and_then(|d| json.call_method1("dumps", (d,)))
            .and_then(|text| json.call_method1("loads", (text,)));
        return match spec {
            Ok(spec) => {
                // Fields the user left unset (BloscCodec's typesize and shuffle) report
                // placeholders: zarr-python evolves them from the data type, and so does
                // the engine when they are absent.
                if let Ok(config) = spec.get_item("configuration") {
                    if let Ok(config) = config.cast::<PyDict>() {
                        if let Ok(tunable) = codec.getattr("_tunable_attrs") {
                            for name in tunable.try_iter()? {
                                let name = name?;
                                if config.contains(&name)? {
                                    config.del_item(&name)?;
                                }
                            }
                        }
                    }
                }
                Ok(spec)
            }
            Err(e)
                if e.is_instance_of::<PyTypeError>(py) || e.is_instance_of::<PyValueError>(py) =>
            {
                // Not evolved to a data type yet (BloscCodec() without typesize): the
                // engine fills zarr-python's defaults from the name.
                let kw = PyDict::new(py);
                kw.set_item("omit_fill_value", true)?;
                let name = codec
                    .call_method("to_dict", (), Some(&kw))?
                    .get_item("name")?;
                let d = PyDict::new(py);
                d.set_item("name", name)?;
                Ok(d.into_any())
            }
            Err(e) => Err(e),
        };
    }
    Err(PyTypeError::new_err(format!(
        "{} is not a codec: pass a dict, a numcodecs or zarr codec",
        codec.repr()?
    )))
}

/// A codec list: `"auto"` (None: the engine's default), None (none), one codec, or a list.
pub fn codecs<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    if let Ok(s) = value.cast::<PyString>() {
        if s.to_str()? != "auto" {
            return Err(PyValueError::new_err(format!(
                "codecs must be 'auto', None, a codec or a list, not {}",
                value.repr()?
            )));
        }
        return Ok(py.None().into_bound(py));
    }
    if value.is_none() {
        return Ok(PyList::empty(py).into_any());
    }
    let sequence = py.import("collections.abc")?.getattr("Sequence")?;
    let list = PyList::empty(py);
    if value.is_instance_of::<PyDict>() || !value.is_instance(&sequence)? {
        list.append(codec(value)?)?;
    } else {
        for c in value.try_iter()? {
            list.append(codec(&c?)?)?;
        }
    }
    Ok(list.into_any())
}

//! An `obstore` store object as the URL and options this binding opens. obstore and zarrpipe
//! each link their own copy of the object_store crate, so a store object cannot be shared
//! across the two extensions; its configuration can, and is read from the object.

use std::collections::HashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBool;

/// (URL, object_store options) for an obstore store object.
pub fn url_and_options(store: &Bound<'_, PyAny>) -> PyResult<(String, HashMap<String, String>)> {
    let kind = store.get_type().name()?.to_string();
    let prefix = match optional(store, "prefix")? {
        Some(p) => text(&p)?.trim_matches('/').to_owned(),
        None => String::new(),
    };
    let client = mapping(store, "client_options")?;
    let (scheme, bucket_key, key_prefix) = match kind.as_str() {
        "LocalStore" => return Ok((format!("file:///{prefix}"), HashMap::new())),
        "HTTPStore" => return Ok((text(&store.getattr("url")?)?, client)),
        "S3Store" => ("s3", "bucket", "aws_"),
        "GCSStore" => ("gs", "bucket", "google_"),
        "AzureStore" => ("az", "container_name", "azure_"),
        _ => {
            return Err(PyTypeError::new_err(format!(
                "zarrpipe cannot read obstore's {kind}; use S3/GCS/Azure/HTTP/Local"
            )))
        }
    };
    let mut config = mapping(store, "config")?;
    let Some(bucket) = config.remove(bucket_key) else {
        return Err(PyValueError::new_err(format!(
            "obstore {kind} has no {bucket_key} in its config"
        )));
    };
    // object_store's builders take these keys prefixed: "endpoint" -> "aws_endpoint".
    let mut options: HashMap<String, String> = config
        .into_iter()
        .map(|(k, v)| match k.starts_with(key_prefix) {
            true => (k, v),
            false => (format!("{key_prefix}{k}"), v),
        })
        .collect();
    options.extend(client);
    let url = match prefix.is_empty() {
        true => format!("{scheme}://{bucket}"),
        false => format!("{scheme}://{bucket}/{prefix}"),
    };
    Ok((url, options))
}

/// `getattr(obj, name, None) or None`: a missing, `None` or empty attribute is `None`.
fn optional<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    match obj.getattr(name) {
        Ok(v) if !v.is_none() && v.is_truthy()? => Ok(Some(v)),
        _ => Ok(None),
    }
}

/// A mapping attribute (absent or empty: none) with its values as text.
fn mapping(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<HashMap<String, String>> {
    let Some(m) = optional(obj, name)? else {
        return Ok(HashMap::new());
    };
    m.call_method0("items")?
        .try_iter()?
        .map(|item| {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            Ok((text(&k)?, text(&v)?))
        })
        .collect()
}

/// A configuration value as object_store reads it: booleans as `true`/`false`.
fn text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if value.is_instance_of::<PyBool>() {
        return Ok(if value.extract::<bool>()? {
            "true"
        } else {
            "false"
        }
        .to_owned());
    }
    Ok(value.str()?.to_string())
}

/// The URL and object_store options zarrpipe opens for an obstore store object.
#[pyfunction]
pub fn _obstore_location(store: &Bound<'_, PyAny>) -> PyResult<(String, HashMap<String, String>)> {
    url_and_options(store)
}

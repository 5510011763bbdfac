//! The one mapping from engine errors to Python exceptions, and the exception tree.
//!
//! Built-in exceptions where one fits (`FileNotFoundError`, `IndexError`, `MemoryError`...);
//! otherwise a subclass of `zarrpipe.ZarrpipeError`, so callers can catch specific cases.

use std::io::ErrorKind;

use pyo3::exceptions::{
    PyException, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyMemoryError, PyOSError,
    PyPermissionError, PyTimeoutError, PyUserWarning, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{create_exception, PyErr};
use zarrpipe_codecs::Error;

create_exception!(
    zarrpipe,
    ZarrpipeError,
    PyException,
    concat!(
        "Base class of zarrpipe's own errors.\n",
        "\n",
        "zarrpipe raises Python's built-in exceptions where one fits (`FileNotFoundError`,\n",
        "`IndexError`, `ValueError`, `TypeError`, `PermissionError`, `FileExistsError`,\n",
        "`MemoryError`, `OSError`, `TimeoutError`, `BufferError`) and a subclass of this one\n",
        "otherwise.",
    )
);
create_exception!(
    zarrpipe,
    MetadataError,
    ZarrpipeError,
    "Array or group metadata that does not parse or breaks the Zarr spec."
);
create_exception!(
    zarrpipe,
    UnsupportedError,
    ZarrpipeError,
    "Valid Zarr that zarrpipe cannot read: a codec or data type it does not support."
);

create_exception!(
    zarrpipe,
    WriteConflictError,
    ZarrpipeError,
    concat!(
        "A write of part of a chunk or shard that other writers kept changing under it: every\n",
        "conditional write to the object store failed, up to the retry limit. Nothing of this\n",
        "chunk was written; the others that were are whole.",
    )
);
create_exception!(
    zarrpipe,
    UnconditionalWriteWarning,
    PyUserWarning,
    concat!(
        "An object store that cannot write conditionally was written unconditionally (the\n",
        "store was opened with conditional_writes=\"warn\"): a concurrent writer of the same chunk\n",
        "or shard may have lost an update.",
    )
);

/// Warns, once per call, when writes to `store` went unconditionally.
pub fn warn_unconditional(py: Python<'_>, store: &zarrpipe_codecs::store::Store) -> PyResult<()> {
    let Some(remote) = store.remote() else {
        return Ok(());
    };
    let n = remote.wrote_unconditionally();
    if n > 0 {
        let msg = format!(
            "{n} write(s) to {} went unconditionally: the store cannot write conditionally, so \
             another writer of the same chunk or shard may have lost an update",
            remote.url()
        );
        let msg = std::ffi::CString::new(msg).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<UnconditionalWriteWarning>(), &msg, 1)?;
    }
    Ok(())
}

// `DecodeError` is also a `ValueError`, as numcodecs' and zarr-python's errors for bad data
// are, so code written against zarr-python keeps catching it. `create_exception!` takes one
// base, so these two classes are made at run time.
static DECODE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CHECKSUM_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn new_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: Bound<'py, PyTuple>,
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "zarrpipe")?;
    namespace.set_item("__doc__", doc)?;
    let class = py.get_type::<PyType>().call1((name, bases, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn decode_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let class = DECODE_ERROR.get_or_try_init(py, || {
        let bases = PyTuple::new(
            py,
            [
                py.get_type::<ZarrpipeError>(),
                py.get_type::<PyValueError>(),
            ],
        )?;
        new_class(
            py,
            "DecodeError",
            bases,
            concat!(
                "A chunk's bytes do not decode to what the array's metadata promises (corrupt or\n",
                "truncated data). The message names the chunk's key. It is also a `ValueError`, as\n",
                "numcodecs' and zarr-python's errors for bad data are.",
            ),
        )
    })?;
    Ok(class.bind(py))
}

fn checksum_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let class = CHECKSUM_ERROR.get_or_try_init(py, || {
        let bases = PyTuple::new(py, [decode_error(py)?.clone()])?;
        new_class(
            py,
            "ChecksumError",
            bases,
            concat!(
                "A checksum does not match the data it guards (crc32c of a chunk or a shard index,\n",
                "numcodecs' adler32, fletcher32, crc32, crc32c or jenkins_lookup3).",
            ),
        )
    })?;
    Ok(class.bind(py))
}

/// An instance of one of the run-time classes above (a plain `ZarrpipeError` if the class
/// could not be made, which only a broken interpreter does).
fn raise(class: fn(Python<'_>) -> PyResult<&Bound<'_, PyType>>, msg: String) -> PyErr {
    Python::attach(|py| match class(py) {
        Ok(t) => PyErr::from_type(t.clone(), msg),
        Err(_) => ZarrpipeError::new_err(msg),
    })
}

/// A `zarrpipe.DecodeError` with `msg`.
pub fn decode_error_with(msg: String) -> PyErr {
    raise(decode_error, msg)
}

/// What a binding call fails with: an engine error (raised as `to_pyerr` assigns) or a
/// Python exception (raised as it is). `?` converts both, so a call that mixes engine and
/// Python work needs no `.map_err`; pyo3 raises it as the `PyErr` it converts into.
#[derive(Debug)]
pub enum BindError {
    Engine(Error),
    Python(PyErr),
}

/// The result of a binding call (see [`BindError`]).
pub type BindResult<T> = Result<T, BindError>;

impl From<Error> for BindError {
    fn from(err: Error) -> Self {
        Self::Engine(err)
    }
}

impl From<PyErr> for BindError {
    fn from(err: PyErr) -> Self {
        Self::Python(err)
    }
}

impl<'py> From<pyo3::CastIntoError<'py>> for BindError {
    fn from(err: pyo3::CastIntoError<'py>) -> Self {
        Self::Python(err.into())
    }
}

impl<'a, 'py> From<pyo3::CastError<'a, 'py>> for BindError {
    fn from(err: pyo3::CastError<'a, 'py>) -> Self {
        Self::Python(err.into())
    }
}

impl From<BindError> for PyErr {
    fn from(err: BindError) -> Self {
        match err {
            BindError::Engine(e) => to_pyerr(e),
            BindError::Python(e) => e,
        }
    }
}

/// Converts an engine error into the Python exception docs/architecture.md ("Errors") assigns to
/// it.
pub fn to_pyerr(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::NotFound(_) => PyFileNotFoundError::new_err(msg),
        Error::InvalidSelection(_) => PyIndexError::new_err(msg),
        Error::InvalidArgument(_) => PyValueError::new_err(msg),
        Error::Unsupported(_) => UnsupportedError::new_err(msg),
        Error::Metadata { .. } => MetadataError::new_err(msg),
        Error::Corrupt { .. } => raise(decode_error, msg),
        Error::Checksum { .. } => raise(checksum_error, msg),
        Error::Encode { .. } => PyValueError::new_err(msg),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        Error::ReadOnly(_) => PyPermissionError::new_err(msg),
        Error::Exists(_) => PyFileExistsError::new_err(msg),
        Error::Conflict(_) => WriteConflictError::new_err(msg),
        // Another thread's Ctrl-C stopped this call too.
        Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err(msg),
        // Its awaiting task was cancelled (nobody sees this but the executor's future).
        Error::Cancelled => Python::attach(|py| {
            match py
                .import("asyncio")
                .and_then(|m| m.getattr("CancelledError"))
                .and_then(|t| Ok(t.cast_into::<PyType>()?))
            {
                Ok(t) => PyErr::from_type(t, msg),
                Err(e) => e,
            }
        }),
        Error::Storage { ref source, .. } => match source.kind() {
            ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            ErrorKind::TimedOut => PyTimeoutError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        _ => ZarrpipeError::new_err(msg),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ZarrpipeError", py.get_type::<ZarrpipeError>())?;
    m.add("DecodeError", decode_error(py)?)?;
    m.add("ChecksumError", checksum_error(py)?)?;
    m.add("MetadataError", py.get_type::<MetadataError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("WriteConflictError", py.get_type::<WriteConflictError>())?;
    m.add(
        "UnconditionalWriteWarning",
        py.get_type::<UnconditionalWriteWarning>(),
    )?;
    Ok(())
}

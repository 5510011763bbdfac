//! The one mapping from engine errors to Python exceptions, and the exception tree.
//!
//! Built-in exceptions where one fits (`FileNotFoundError`, `IndexError`, `MemoryError`...);
//! otherwise a subclass of `zarrpipe.ZarrpipeError`, so callers can catch specific cases.

use std::io::ErrorKind;

use pyo3::exceptions::{
    PyException, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyMemoryError, PyOSError,
    PyPermissionError, PyTimeoutError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::{create_exception, PyErr};
use zarrpipe_codecs::Error;

create_exception!(
    zarrpipe,
    ZarrpipeError,
    PyException,
    "Base class of zarrpipe's own errors."
);
create_exception!(
    zarrpipe,
    DecodeError,
    ZarrpipeError,
    "A chunk's bytes do not decode to what the array's metadata promises (corrupt or truncated data)."
);
create_exception!(
    zarrpipe,
    ChecksumError,
    DecodeError,
    "A crc32c checksum does not match the data it guards."
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

/// Converts an engine error into the Python exception DESIGN.md assigns to it.
pub fn to_pyerr(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::NotFound(_) => PyFileNotFoundError::new_err(msg),
        Error::InvalidSelection(_) => PyIndexError::new_err(msg),
        Error::InvalidArgument(_) => PyValueError::new_err(msg),
        Error::Unsupported(_) => UnsupportedError::new_err(msg),
        Error::Metadata { .. } => MetadataError::new_err(msg),
        Error::Corrupt { .. } => DecodeError::new_err(msg),
        Error::Checksum { .. } => ChecksumError::new_err(msg),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        Error::ReadOnly(_) => PyPermissionError::new_err(msg),
        Error::Exists(_) => PyFileExistsError::new_err(msg),
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
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add("ChecksumError", py.get_type::<ChecksumError>())?;
    m.add("MetadataError", py.get_type::<MetadataError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    Ok(())
}

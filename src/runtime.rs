//! The one path every long call takes: release the GIL, run on zarrpipe's rayon pool,
//! turn a panic into an error (a panic never crosses into Python), map the error.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use zarrpipe_codecs::process::pool;
use zarrpipe_codecs::{Error, Result};

use crate::errors::to_pyerr;

/// Runs `f` detached from the interpreter, on the decoding pool.
pub fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T> + Send) -> PyResult<T> {
    py.detach(|| pool::install(|| guarded(f)).and_then(|r| r))
        .map_err(to_pyerr)
}

/// Like [`run`], but on the calling thread when `here` (work with no parallel loop in it,
/// see `pool::run_here`).
pub fn run_maybe_here<T: Send>(
    py: Python<'_>,
    here: bool,
    f: impl FnOnce() -> Result<T> + Send,
) -> PyResult<T> {
    if here {
        py.detach(|| pool::run_here(|| guarded(f)))
            .map_err(to_pyerr)
    } else {
        run(py, f)
    }
}

/// `f`'s result, or its panic as an error.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::Internal(what))
    })
}

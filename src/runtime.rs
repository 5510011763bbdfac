//! The one path every long call takes: release the GIL, run on zarrpipe's rayon pool,
//! notice Ctrl-C while waiting, turn a panic into an error (a panic never crosses into
//! Python), map the error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use pyo3::prelude::*;
use zarrpipe_codecs::process::{interrupt, pool};
use zarrpipe_codecs::{Error, Result};

use crate::errors::BindResult;

/// How often a waiting main thread looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `f` detached from the interpreter, on the decoding pool. On Python's main thread
/// (the one signals reach) the wait checks for Ctrl-C every [`SIGNAL_POLL`]: on one, the
/// engine stops at its next chunk (a write keeps what it stored, every key whole) and the
/// signal's exception (`KeyboardInterrupt`) is raised once it has.
pub fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T> + Send) -> BindResult<T> {
    // An awaited call's stop flag goes with it to the pool (see `async_call`).
    let flag = interrupt::call_flag();
    let f = move || interrupt::with_call_flag(flag, || guarded(f));
    if !on_main_thread(py) {
        return Ok(py.detach(|| pool::install(f).and_then(|r| r))?);
    }
    let mut signal: Option<PyErr> = None;
    let result = py.detach(|| {
        let poll = || {
            if signal.is_none() {
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    interrupt::request();
                    signal = Some(e);
                }
            }
        };
        pool::install_polling(f, SIGNAL_POLL, poll).and_then(|r| r)
    });
    if let Some(e) = signal {
        interrupt::clear();
        return Err(e.into());
    }
    Ok(result?)
}

/// Whether this is Python's main thread, where signal handlers run.
fn on_main_thread(py: Python<'_>) -> bool {
    let Ok(threading) = py.import("threading") else {
        return false;
    };
    match (
        threading.call_method0("main_thread"),
        threading.call_method0("current_thread"),
    ) {
        (Ok(main), Ok(current)) => main.is(&current),
        _ => false,
    }
}

/// Like [`run`], but on the calling thread when `here` (work with no parallel loop in it,
/// see `pool::run_here`).
pub fn run_maybe_here<T: Send>(
    py: Python<'_>,
    here: bool,
    f: impl FnOnce() -> Result<T> + Send,
) -> BindResult<T> {
    if here {
        Ok(py.detach(|| pool::run_here(|| guarded(f)))?)
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

//! `read_async` and `write_async`: a coroutine that runs the blocking call on asyncio's
//! default executor and, when its task is cancelled, stops the call at its next chunk (the
//! engine's per-call stop, `zarrpipe_codecs::process::interrupt`), instead of letting it run
//! to the end unseen. Nothing starts until the coroutine is first awaited, as with a
//! coroutine function.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zarrpipe_codecs::process::interrupt;

/// The blocking call, run on the executor's thread as a call with its own stop flag.
#[pyclass(frozen, module = "zarrpipe")]
struct StoppableCall {
    call: Py<PyAny>,
    args: Py<PyTuple>,
    stop: Arc<AtomicBool>,
}

#[pymethods]
impl StoppableCall {
    fn __call__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        interrupt::with_call_flag(Some(self.stop.clone()), || {
            self.call
                .bind(py)
                .call1(self.args.bind(py))
                .map(Bound::unbind)
        })
    }
}

/// Stops the call when the future that waits for it is cancelled.
#[pyclass(frozen, module = "zarrpipe")]
struct StopOnCancel {
    stop: Arc<AtomicBool>,
}

#[pymethods]
impl StopOnCancel {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.stop.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// An awaitable call: `await arr.read_async(...)`. It is a coroutine as asyncio sees one
/// (`send`, `throw`, `close`, `__await__`), so `asyncio.create_task` and `gather` take it.
#[pyclass(module = "zarrpipe", name = "AsyncCall")]
pub struct AsyncCall {
    call: Option<(Py<PyAny>, Py<PyTuple>)>,
    stop: Arc<AtomicBool>,
    /// The executor future's iterator, once started.
    waiting: Option<Py<PyAny>>,
    future: Option<Py<PyAny>>,
}

impl AsyncCall {
    /// `call(*args)`, run on the executor when awaited.
    pub fn new(call: Bound<'_, PyAny>, args: Bound<'_, PyTuple>) -> Self {
        Self {
            call: Some((call.unbind(), args.unbind())),
            stop: Arc::new(AtomicBool::new(false)),
            waiting: None,
            future: None,
        }
    }

    /// Submits the call to the running loop's default executor (in the caller's context).
    fn start<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(w) = &self.waiting {
            return Ok(w.bind(py).clone());
        }
        let Some((call, args)) = self.call.take() else {
            return Err(PyRuntimeError::new_err(
                "cannot reuse an already awaited call",
            ));
        };
        let asyncio = py.import("asyncio")?;
        let event_loop = asyncio.call_method0("get_running_loop")?;
        let context = py.import("contextvars")?.call_method0("copy_context")?;
        let stoppable = Py::new(
            py,
            StoppableCall {
                call,
                args,
                stop: self.stop.clone(),
            },
        )?;
        let future = event_loop.call_method1(
            "run_in_executor",
            (py.None(), context.getattr("run")?, stoppable),
        )?;
        future.call_method1(
            "add_done_callback",
            (Py::new(
                py,
                StopOnCancel {
                    stop: self.stop.clone(),
                },
            )?,),
        )?;
        let waiting = future.call_method0("__await__")?;
        self.future = Some(future.unbind());
        self.waiting = Some(waiting.clone().unbind());
        Ok(waiting)
    }
}

#[pymethods]
impl AsyncCall {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.send(py, py.None().into_bound(py))
    }

    /// Advances the call (asyncio's step): the first starts it.
    fn send<'py>(
        &mut self,
        py: Python<'py>,
        value: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let waiting = self.start(py)?;
        let step = waiting.call_method1("send", (value,));
        if step.is_err() {
            // Finished (StopIteration carries the result) or failed: never resumed again.
            self.waiting = None;
            self.future = None;
        }
        step
    }

    /// Raises `typ` into the call; a `CancelledError` stops the engine's work too.
    #[pyo3(signature = (typ, val = None, tb = None))]
    fn throw<'py>(
        &mut self,
        py: Python<'py>,
        typ: Bound<'py, PyAny>,
        val: Option<Bound<'py, PyAny>>,
        tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cancelled = py.import("asyncio")?.getattr("CancelledError")?;
        let exc = match &val {
            Some(v) if !v.is_none() => v.clone(),
            _ => typ.clone(),
        };
        let val = val.filter(|v| !v.is_none());
        let tb = tb.filter(|t| !t.is_none());
        if exc.is_instance(&cancelled)? || exc.is(&cancelled) {
            self.stop.store(true, Ordering::Relaxed);
        }
        match &self.waiting {
            // Only the arguments given: the three-argument form is deprecated.
            Some(w) => match (val, tb) {
                (None, None) => w.bind(py).call_method1("throw", (typ,)),
                (val, None) => w.bind(py).call_method1("throw", (typ, val)),
                (val, tb) => w.bind(py).call_method1("throw", (typ, val, tb)),
            },
            None => {
                self.call = None;
                let err = if exc.is_instance_of::<pyo3::exceptions::PyBaseException>() {
                    PyErr::from_value(exc)
                } else {
                    PyErr::from_value(typ.call0()?)
                };
                Err(err)
            }
        }
    }

    /// Closes the call: work in flight is stopped at its next chunk.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.call = None;
        if let Some(f) = self.future.take() {
            f.bind(py).call_method0("cancel")?;
        }
        Ok(())
    }
}

//! `Array`'s writes: the value broadcast to the selection as NumPy does, then written with
//! the GIL released through the engine's per-key protocol.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zarrpipe_codecs::write::pick::PickValues;
use zarrpipe_codecs::write::SrcPtr;

use crate::async_call::AsyncCall;
use crate::errors::BindResult;
use crate::numpy_layout::numpy_layout;
use crate::runtime::run;
use crate::variable;

use super::{array_dtype, Array};
use crate::selection::{request, Request};

impl Array {
    /// Writes `value` (broadcast like NumPy) into a selection of any kind.
    pub fn write_selection(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        let request = request(&self.array.info.shape, selection)?;
        self.write_request(py, request, value)
    }

    /// `value` as a read-only NumPy array of the array's dtype broadcast to `shape`.
    fn broadcast_value<'py>(
        &self,
        value: &Bound<'py, PyAny>,
        shape: &[u64],
    ) -> PyResult<Bound<'py, PyUntypedArray>> {
        let py = value.py();
        let np = py.import("numpy")?;
        let dtype = array_dtype(py, &self.array)?;
        let value = crate::dtype::as_dtype(value, &dtype)?;
        let value = np.call_method1("broadcast_to", (value, PyTuple::new(py, shape)?))?;
        Ok(value.cast::<PyUntypedArray>()?.clone())
    }

    pub(super) fn write_request(
        &self,
        py: Python<'_>,
        request: Request,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        let written = self.write_request_unwarned(py, request, value);
        crate::errors::warn_unconditional(py, self.array.store())?;
        written
    }

    fn write_request_unwarned(
        &self,
        py: Python<'_>,
        request: Request,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        let array = self.array.clone();
        let cache = self.cache.clone();
        let write_empty = self.write_empty_chunks;
        // Every write path (`arr[...] =`, `oindex`/`vindex` writes) passes here, so a
        // variable-length array never reaches the fixed-size paths below.
        if let Some(kind) = self.array.info.variable {
            // Strings and bytes, in C order of the selection's result.
            return match request {
                Request::Region(region) => {
                    let data = variable::from_numpy(py, value, kind, &region.out_shape)?;
                    run(py, move || {
                        array.write_variable(&region, &data, write_empty)
                    })
                }
                Request::Pick(pick, shape) => {
                    let data = variable::from_numpy(py, value, kind, &shape)?;
                    run(py, move || {
                        let values = PickValues::Variable(&data);
                        array.write_pick(&pick, values, write_empty, cache.as_deref())
                    })
                }
            };
        }
        let region = match request {
            Request::Region(region) => region,
            Request::Pick(pick, shape) => {
                // The values in C order of the selection's result (a copy only when the
                // value is broadcast or not C-contiguous).
                let value = self.broadcast_value(value, &shape)?;
                let value = py
                    .import("numpy")?
                    .call_method1("ascontiguousarray", (value,))?
                    .cast::<PyUntypedArray>()?
                    .clone();
                let (ptr, layout) = numpy_layout(&value, false)?;
                // SAFETY: `value` is a C-contiguous array we hold until the write returns;
                // nothing else can see it (a fresh copy or the caller's read-only view).
                let src =
                    unsafe { SrcPtr::new(ptr.wrapping_add(layout.base), layout.len - layout.base) };
                run(py, move || {
                    let values = PickValues::Fixed(&src);
                    array.write_pick(&pick, values, write_empty, cache.as_deref())
                })?;
                drop(value);
                return Ok(());
            }
        };
        let value = self.broadcast_value(value, &region.out_shape)?;
        let (ptr, layout) = numpy_layout(&value, false)?;
        // Strides per array axis: an integer-selected axis has one element (stride 0).
        let mut kept = layout.strides.iter();
        let strides: Vec<isize> = region
            .dropped
            .iter()
            .map(|&d| {
                if d {
                    0
                } else {
                    kept.next().copied().unwrap_or(0)
                }
            })
            .collect();
        // SAFETY: `value` is alive and unchanged while we run detached (we hold the only
        // reference to this broadcast view, and NumPy made it read-only).
        let src = unsafe { SrcPtr::new(ptr, layout.len) };
        let base = layout.base;
        run(py, move || {
            let items = array.plan_write(&region, &strides, base)?;
            array
                .write_chunks(&items, &src, None, write_empty, cache.as_deref())
                .map(|_| ())
        })?;
        drop(value);
        Ok(())
    }
}

// The Python methods that write.
#[pymethods]
impl Array {
    /// Writes `value` to `key` selected as `kind`.
    fn _write_as(
        &self,
        py: Python<'_>,
        kind: &str,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        let request = self.kind_request(kind, key)?;
        self.write_request(py, request, value)
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        selection: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        self.write_selection(py, Some(selection), value)
    }

    /// Writes values into a selection.
    ///
    /// Chunks the write covers are encoded from the new values alone; others are read,
    /// updated and re-encoded as one step no other writer of that chunk (or shard)
    /// interleaves with (see `Store`), in parallel, each stored as soon as it is encoded.
    /// Local chunk files are replaced atomically (by rename), object-store values with one
    /// PUT each (conditional for a value updated in part: on a conflict the update starts
    /// over from the value that won); chunks left all fill value are deleted unless
    /// `write_empty_chunks` (on object stores a chunk updated in part is stored instead,
    /// as no conditional delete exists). The store's chunk cache
    /// forgets the chunks written. A position selected twice (an index array with
    /// repeats) keeps the last value, as in NumPy.
    ///
    /// Args:
    ///     selection: As for `read`: any kind NumPy's basic and advanced indexing takes;
    ///         None writes everything.
    ///     value: A scalar or an array, broadcast like NumPy to the selection's shape and
    ///         converted to the array's dtype (as NumPy's `astype` does).
    ///
    /// Raises:
    ///     PermissionError: The store is read-only.
    ///     ValueError: `value` does not broadcast to the selection, or does not convert;
    ///         a slice step of 0.
    ///     IndexError: An index out of range, an item that is no index, or index arrays
    ///         that do not broadcast (see the class for every invalid selection).
    ///     TypeError: Slice bounds that are not integers.
    ///     DecodeError: A chunk the write must update does not decode.
    ///     OSError: The store fails.
    #[pyo3(signature = (selection, value))]
    fn write(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        self.write_selection(py, selection, value)
    }

    /// `write` on asyncio's default executor: awaiting it never blocks the event loop.
    /// Cancelling the awaiting task stops the write before its next chunk: the chunks it
    /// stored are whole, the others keep their old values.
    ///
    /// Args:
    ///     selection: As for `write`.
    ///     value: As for `write`.
    ///
    /// Raises:
    ///     PermissionError: See `write`, which raises the same exceptions.
    #[pyo3(signature = (selection, value))]
    fn write_async(
        slf: &Bound<'_, Self>,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<AsyncCall> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        Ok(AsyncCall::new(
            slf.getattr("write")?,
            PyTuple::new(py, [selection, value.clone()])?,
        ))
    }
}

//! `Array`'s reads: a selection parsed under the GIL, read with the GIL released, into a
//! fresh Tensor (or a NumPy array for strings and bytes) or into the caller's buffer.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::async_call::AsyncCall;
use zarrpipe_codecs::memory::out::OutPtr;
use zarrpipe_codecs::read::ChunkData;
use zarrpipe_codecs::select::pick::Pick;

use crate::numpy_layout::numpy_layout;
use crate::runtime::{run, run_maybe_here};
use crate::tensor::Tensor;
use crate::variable;
use zarrpipe_codecs::array::variable::Variable;

use super::{array_dtype, array_tensor, Array};
use crate::selection::{self, request, Request};

impl Array {
    /// Reads a Python selection: parse under the GIL, read detached. A Tensor, or for a
    /// variable-length array (strings, bytes) a NumPy array.
    pub fn read_selection(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let request = request(&self.array.info.shape, selection)?;
        self.read_any(py, request)
    }

    /// Reads a request for indexing: a writable NumPy array that owns the fresh read's
    /// buffer (no copy); a 0-d result as a NumPy scalar when `scalar`.
    pub(super) fn read_numpy<'py>(
        &self,
        py: Python<'py>,
        request: Request,
        scalar: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let out = self.read_any(py, request)?.into_bound(py);
        let array = match out.cast::<Tensor>() {
            Ok(t) => t.get().into_numpy(py)?,
            Err(_) => out,
        };
        if scalar && array.getattr("ndim")?.extract::<usize>()? == 0 {
            return array.get_item(PyTuple::empty(py));
        }
        Ok(array)
    }

    /// Reads a request: a Tensor, or for a variable-length array a NumPy array of objects.
    pub(super) fn read_any(&self, py: Python<'_>, request: Request) -> PyResult<Py<PyAny>> {
        if let Some(kind) = self.array.info.variable {
            return Ok(self.read_variable(py, request, kind)?.unbind());
        }
        Ok(Py::new(py, self.read_request(py, request)?)?.into_any())
    }

    /// A selection of a variable-length array as a NumPy array of objects (strings, bytes):
    /// a region reads just its elements; any other selection reads the box that spans it
    /// once, and the engine takes the selection's elements from there.
    fn read_variable<'py>(
        &self,
        py: Python<'py>,
        request: Request,
        kind: Variable,
    ) -> PyResult<Bound<'py, PyAny>> {
        let array = self.array.clone();
        match request {
            Request::Region(region) => {
                let read = region.clone();
                let data = run(py, move || array.read_variable(&read))?;
                variable::to_numpy(py, &data, kind, &region.out_shape)
            }
            Request::Pick(pick, shape) => {
                let data = run(py, move || array.read_variable_pick(&pick))?;
                variable::to_numpy(py, &data, kind, &shape)
            }
        }
    }

    /// Reads a request into a fresh, unique Tensor.
    pub(super) fn read_request(&self, py: Python<'_>, request: Request) -> PyResult<Tensor> {
        let array = self.array.clone();
        let cache = self.cache.clone();
        let (bytes, out_shape) = match request {
            Request::Region(region) => {
                let out_shape = region.out_shape.clone();
                let here = array.reads_region_sequentially(&region);
                let bytes = run_maybe_here(py, here, move || {
                    array.read_region(&region, cache.as_deref())
                })?;
                (bytes, out_shape)
            }
            Request::Pick(pick, shape) => {
                let bytes = run(py, move || array.read_pick(&pick, cache.as_deref()))?;
                (bytes, shape)
            }
        };
        array_tensor(py, &self.array, bytes, &out_shape)
    }

    /// Decodes a selection into the caller's NumPy array (any strides, writable).
    pub fn read_selection_into(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request = request(&self.array.info.shape, selection)?;
        self.read_request_into(py, request, out)
    }

    /// Decodes a request into the caller's buffer: a region at any strides; a pick straight
    /// into a C-contiguous buffer, else read fresh and copied in.
    pub(super) fn read_request_into(
        &self,
        py: Python<'_>,
        request: Request,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let region = match request {
            Request::Region(region) => region,
            Request::Pick(pick, shape) => return self.read_pick_into(py, pick, &shape, out),
        };
        let want = array_dtype(py, &self.array)?;
        let target = writable_view(py, out, &want, &region.out_shape)?;
        if !target.getattr("dtype")?.eq(&want)? {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "out has dtype {}, the array's is {}",
                target.getattr("dtype")?,
                want
            )));
        }
        let target = target.cast::<PyUntypedArray>()?.clone();
        let (ptr, layout) = numpy_layout(&target, true)?;
        // SAFETY: `target` (a view of the caller's buffer) stays alive while we run
        // detached; the engine checks the layout and the plan before writing.
        let out_ptr = unsafe { OutPtr::new(ptr, layout.len) };
        let array = self.array.clone();
        let cache = self.cache.clone();
        let here = array.reads_region_sequentially(&region);
        run_maybe_here(py, here, move || {
            array.read_region_into(&region, &out_ptr, &layout, cache.as_deref())
        })?;
        drop(target);
        Ok(())
    }

    fn read_pick_into(
        &self,
        py: Python<'_>,
        pick: Pick,
        shape: &[u64],
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let want = array_dtype(py, &self.array)?;
        let target = writable_view(py, out, &want, shape)?;
        let dims: Vec<u64> = target.getattr("shape")?.extract()?;
        if dims != shape || !target.getattr("dtype")?.eq(&want)? {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "out has shape {dims:?} and dtype {}; the selection needs {shape:?} and {want}",
                target.getattr("dtype")?
            )));
        }
        let contiguous: bool = target
            .getattr("flags")?
            .getattr("c_contiguous")?
            .extract()?;
        if !contiguous {
            let fresh = self.read_request(py, Request::Pick(pick, shape.to_vec()))?;
            py.import("numpy")?
                .call_method1("copyto", (&target, Py::new(py, fresh)?))?;
            return Ok(());
        }
        let target = target.cast::<PyUntypedArray>()?.clone();
        let (ptr, layout) = numpy_layout(&target, true)?;
        // SAFETY: `target` (a view of the caller's C-contiguous buffer) stays alive while we
        // run detached; the engine checks its size and the plan before writing.
        let out_ptr = unsafe { OutPtr::new(ptr, layout.len) };
        let array = self.array.clone();
        let cache = self.cache.clone();
        run(py, move || {
            array.read_pick_into(&pick, &out_ptr, cache.as_deref())
        })?;
        drop(target);
        Ok(())
    }

    pub fn read_chunk_list(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let indices: Vec<Vec<u64>> = indices
            .try_iter()?
            .map(|i| selection::chunk_index(&i?))
            .collect::<PyResult<_>>()?;
        let array = self.array.clone();
        if let Some(kind) = self.array.info.variable {
            let chunks = run(py, move || array.read_variable_chunks(&indices))?;
            return chunks
                .iter()
                .map(|c| Ok(variable::to_numpy(py, c, kind, &c.shape)?.unbind()))
                .collect();
        }
        let cache = self.cache.clone();
        let here = array.reads_sequentially(&indices);
        let chunks = run_maybe_here(py, here, move || {
            array.read_chunks(&indices, cache.as_deref())
        })?;
        chunks
            .into_iter()
            .map(|ChunkData { bytes, shape, .. }| {
                Ok(Py::new(py, array_tensor(py, &self.array, bytes, &shape)?)?.into_any())
            })
            .collect()
    }
}

/// `out` as a NumPy array sharing its memory, refused unless it is writable and on the CPU:
/// a NumPy array, a CPU `__dlpack__` tensor (torch), or a raw buffer (`bytearray`, an
/// untyped memoryview), which is viewed as `dtype` elements of `shape` when its size fits.
fn writable_view<'py>(
    py: Python<'py>,
    out: &Bound<'py, PyAny>,
    dtype: &Bound<'py, numpy::PyArrayDescr>,
    shape: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let view = if out.is_instance(&np.getattr("ndarray")?)? {
        out.clone()
    } else if out.hasattr("__dlpack__")? && !out.is_instance_of::<pyo3::types::PyMemoryView>() {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("copy", false)?;
        np.getattr("from_dlpack")?.call((out,), Some(&kwargs))?
    } else if let Ok(mv) = pyo3::types::PyMemoryView::from(out) {
        let raw = np.call_method1("asarray", (mv,))?;
        let untyped = raw
            .getattr("dtype")?
            .getattr("itemsize")?
            .extract::<usize>()?
            == 1
            && !raw.getattr("dtype")?.eq(dtype)?;
        if untyped
            && raw
                .getattr("flags")?
                .getattr("c_contiguous")?
                .extract::<bool>()?
        {
            raw.call_method1("view", (dtype,))?
                .call_method1("reshape", (PyTuple::new(py, shape)?,))?
        } else {
            raw
        }
    } else if out.hasattr("__dlpack__")? {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("copy", false)?;
        np.getattr("from_dlpack")?.call((out,), Some(&kwargs))?
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "out must be a NumPy array, a writable buffer or a CPU __dlpack__ tensor, not {}",
            out.get_type().name()?
        )));
    };
    if !view
        .getattr("flags")?
        .getattr("writeable")?
        .extract::<bool>()?
    {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "out is read-only; read_into needs a writable buffer",
        ));
    }
    Ok(view)
}

// The Python methods that read.
#[pymethods]
impl Array {
    /// `arr[key]`: a writable NumPy array of the selection (the fresh read's buffer, handed
    /// over without a copy), or a NumPy scalar where zarr-python gives one.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        selection: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(&self.array.info.shape, Some(selection))?;
        let scalar = !python_ints_only(selection, self.array.info.shape.len());
        self.read_numpy(py, request, scalar)
    }

    /// Reads `key` selected as `kind` (`"numpy"`, `"orthogonal"`, `"block"`) into a fresh
    /// Tensor (for strings and bytes, a NumPy array of objects): the engine adapter's door.
    fn _read_as(&self, py: Python<'_>, kind: &str, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let request = self.kind_request(kind, key)?;
        self.read_any(py, request)
    }

    /// Reads `key` selected as `kind` into `out` (see `read_into`).
    fn _read_into_as(
        &self,
        py: Python<'_>,
        kind: &str,
        key: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request = self.kind_request(kind, key)?;
        self.read_request_into(py, request, out)
    }

    /// Reads a selection into a fresh Tensor (a NumPy array of `str` / `bytes` for a
    /// variable-length array; see the class).
    ///
    /// The chunks it touches are fetched and decoded in parallel, each straight into one
    /// output buffer allocated for this call; missing chunks read as the fill value.
    ///
    /// Args:
    ///     selection: As for `arr[...]`; None (the default) reads everything.
    ///
    /// Returns:
    ///     A Tensor that nobody else holds (so `into_dlpack()` succeeds on it), even
    ///     when a chunk cache supplied the chunks.
    ///
    /// Raises:
    ///     IndexError: An index out of range, too many indices, an item that is no index,
    ///         index arrays that do not broadcast (see the class).
    ///     ValueError: A slice step of 0.
    ///     TypeError: Slice bounds that are not integers.
    ///     DecodeError: A chunk does not decode (ChecksumError for a crc32c mismatch).
    ///     MemoryError: The output cannot be allocated.
    ///     OSError: An object store fails (TimeoutError when it does not answer).
    #[pyo3(signature = (selection = None))]
    fn read(&self, py: Python<'_>, selection: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        self.read_selection(py, selection)
    }

    /// Decodes a selection straight into a buffer you own.
    ///
    /// Reading into one buffer again and again allocates nothing.
    ///
    /// Args:
    ///     selection: As for `read`; None reads everything.
    ///     out: A writable NumPy array of the selection's shape and the array's dtype
    ///         (any strides), a CPU tensor with `__dlpack__` (torch), or a writable
    ///         buffer (buffer protocol) of exactly the selection's size in bytes.
    ///
    /// Raises:
    ///     ValueError: `out` has the wrong shape or size, or is read-only.
    ///     TypeError: `out` has the wrong dtype, or is neither an array nor a buffer.
    ///     IndexError: See `read`, which raises the same exceptions for the selection and
    ///         the data.
    #[pyo3(signature = (selection, out))]
    fn read_into(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.read_selection_into(py, selection, out)
    }

    /// `read` on asyncio's default executor: awaiting it never blocks the event loop.
    /// Nothing starts until it is awaited; cancelling the awaiting task stops the read at
    /// its next chunk (the executor's thread is free again within a chunk's time).
    ///
    /// Args:
    ///     selection: As for `read`.
    ///
    /// Returns:
    ///     What `read` returns.
    ///
    /// Raises:
    ///     IndexError: See `read`, which raises the same exceptions.
    #[pyo3(signature = (selection = None))]
    fn read_async(
        slf: &Bound<'_, Self>,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<AsyncCall> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        Ok(AsyncCall::new(
            slf.getattr("read")?,
            PyTuple::new(py, [selection])?,
        ))
    }

    /// Reads one chunk of the `chunks` grid (an inner chunk, for a sharded array).
    ///
    /// Args:
    ///     index: The chunk's position in the grid, one integer per axis (an integer alone
    ///         for a 1-D array).
    ///
    /// Returns:
    ///     A Tensor of the chunk's shape, trimmed at the array's edge. A chunk the cache
    ///     holds comes back sharing the cache's memory.
    ///
    /// Raises:
    ///     IndexError: The index is outside `chunk_grid_shape`.
    ///     DecodeError: The chunk does not decode.
    ///     OSError: An object store fails.
    fn read_chunk(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let list = PyList::new(py, [index])?;
        let mut tensors = self.read_chunk_list(py, list.as_any())?;
        Ok(tensors.remove(0))
    }

    /// Reads several chunks, decoded in parallel (NumPy arrays for a variable-length
    /// array).
    ///
    /// Args:
    ///     indices: Chunk positions in the grid, as for `read_chunk`.
    ///
    /// Returns:
    ///     One Tensor per index, in order.
    ///
    /// Raises:
    ///     IndexError: An index is outside `chunk_grid_shape`.
    ///     DecodeError: A chunk does not decode.
    ///     OSError: An object store fails.
    fn read_chunks(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyAny>>> {
        self.read_chunk_list(py, indices)
    }
}

/// Whether `key` is only Python `int`s, one per axis: zarr-python reads such a key on its
/// orthogonal path and hands back a 0-d array where its basic path gives a scalar.
fn python_ints_only(key: &Bound<'_, PyAny>, ndim: usize) -> bool {
    let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    ndim > 0
        && items.len() == ndim
        && items
            .iter()
            .all(|i| i.is_instance_of::<pyo3::types::PyInt>())
}

//! `zarrpipe.Array`: an open array's metadata, its reads (into fresh Tensors or the
//! caller's buffer) and its writes.

use std::sync::Arc;

use bytes::Bytes;
use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::memory::out::OutPtr;
use zarrpipe_codecs::read::cache::ChunkCache;
use zarrpipe_codecs::read::ChunkData;
use zarrpipe_codecs::select::pick::{Factor, Pick};
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::write::SrcPtr;

use crate::dtype::{numpy_dtype, numpy_dtype_from_json};
use crate::errors::to_pyerr;
use crate::pipeline::numpy_layout;
use crate::runtime::{run, run_maybe_here};
use crate::selection;
use crate::store::Store;
use crate::tensor::Tensor;
use crate::variable;
use zarrpipe_codecs::array::variable::Variable;

#[pyclass(frozen, module = "zarrpipe", name = "Array")]
pub struct Array {
    array: Arc<EngineArray>,
    cache: Option<Arc<ChunkCache>>,
    /// Store chunks that end up all fill value (else they are deleted), as zarr-python's
    /// `write_empty_chunks`.
    write_empty_chunks: bool,
    /// What re-opens the array after pickling: its store, and the metadata it was opened
    /// with when the caller gave it (else it is read from the store again).
    origin: Option<(Py<Store>, Option<String>)>,
}

/// A read request: a rectangular region (the fast path of integers and step-1 slices), or a
/// pick of any kind and the shape its result takes.
pub enum Request {
    Region(Region),
    Pick(Pick, Vec<u64>),
}

/// A pick as `zarrpipe._selection` spells it: a list of `("step", axis, start, step, count)`
/// and `("points", axes, coords)` (an `(n, len(axes))` int64 array), checked against `shape`.
fn pick_from_py(shape: &[u64], factors: &Bound<'_, PyAny>) -> PyResult<Pick> {
    let mut out = Vec::new();
    for f in factors.try_iter()? {
        let f = f?;
        let kind: String = f.get_item(0)?.extract()?;
        match kind.as_str() {
            "step" => {
                let (_, axis, start, step, count): (String, usize, u64, i64, u64) = f.extract()?;
                out.push(Factor::Step {
                    axis,
                    start,
                    step,
                    count,
                });
            }
            "points" => {
                let axes: Vec<usize> = f.get_item(1)?.extract()?;
                let coords: numpy::PyReadonlyArray2<'_, i64> = f.get_item(2)?.extract()?;
                let view = coords.as_array();
                if view.ncols() != axes.len() {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "points of {} coordinates over {} axes",
                        view.ncols(),
                        axes.len()
                    )));
                }
                let coords = view
                    .iter()
                    .map(|&c| {
                        u64::try_from(c).map_err(|_| {
                            pyo3::exceptions::PyIndexError::new_err(format!(
                                "index {c} is out of bounds"
                            ))
                        })
                    })
                    .collect::<PyResult<Vec<u64>>>()?;
                out.push(Factor::Points { axes, coords });
            }
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown selection factor {other:?}"
                )))
            }
        }
    }
    Pick::new(shape, out).map_err(to_pyerr)
}

/// The NumPy dtype of an engine array's elements: its real type for the types the engine
/// carries opaquely (datetimes, strings, records...), else its element type's.
pub fn array_dtype<'py>(
    py: Python<'py>,
    array: &EngineArray,
) -> PyResult<Bound<'py, numpy::PyArrayDescr>> {
    match &array.info.numpy_type {
        Some(t) => numpy_dtype_from_json(py, &t.numpy),
        None => numpy_dtype(py, array.info.dtype),
    }
}

/// A tensor of an engine array's elements (see [`array_dtype`]).
pub fn array_tensor(
    py: Python<'_>,
    array: &EngineArray,
    bytes: Bytes,
    shape: &[u64],
) -> PyResult<Tensor> {
    let descr = match &array.info.numpy_type {
        Some(t) => Some(numpy_dtype_from_json(py, &t.numpy)?.unbind()),
        None => None,
    };
    Ok(Tensor::with_descr(
        bytes,
        shape.iter().map(|&d| d as usize).collect(),
        array.info.dtype,
        descr,
    )
    .recycled())
}

impl Array {
    pub fn new(
        array: Arc<EngineArray>,
        cache: Option<Arc<ChunkCache>>,
        write_empty_chunks: bool,
        origin: Option<(Py<Store>, Option<String>)>,
    ) -> Self {
        Self {
            array,
            cache,
            write_empty_chunks,
            origin,
        }
    }

    /// The engine's array.
    pub(crate) fn engine(&self) -> &Arc<EngineArray> {
        &self.array
    }

    /// The chunk cache the array reads through (its store's), if any.
    pub(crate) fn cache(&self) -> Option<&Arc<ChunkCache>> {
        self.cache.as_ref()
    }

    /// A read request for a Python selection with NumPy's semantics: integers, step-1
    /// slices and `...` parse here into a region; anything else (steps, `None`, index
    /// arrays, masks) goes through `zarrpipe._selection.numpy_pick`.
    fn request(&self, selection: Option<&Bound<'_, PyAny>>) -> PyResult<Request> {
        let shape = &self.array.info.shape;
        let Some(s) = selection else {
            return Ok(Request::Region(Region::all(shape)));
        };
        if let Ok(selectors) = selection::parse(s) {
            let step_one = selectors.iter().all(|x| match x {
                AxisSelector::Slice { step, .. } => step.unwrap_or(1) == 1,
                _ => true,
            });
            if step_one {
                return Region::resolve(shape, &selectors)
                    .map(Request::Region)
                    .map_err(to_pyerr);
            }
        }
        let py = s.py();
        let picked = py
            .import("zarrpipe._selection")?
            .getattr("numpy_pick")?
            .call1((PyTuple::new(py, shape)?, s))?;
        self.pick_request(&picked.get_item(0)?, &picked.get_item(1)?)
    }

    /// A pick request from its factors and result shape (checked to hold as many elements).
    fn pick_request(
        &self,
        factors: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let pick = pick_from_py(&self.array.info.shape, factors)?;
        let shape: Vec<u64> = shape.extract()?;
        let want: u128 = pick.out_shape().iter().map(|&d| u128::from(d)).product();
        if shape.iter().map(|&d| u128::from(d)).product::<u128>() != want {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "result shape {shape:?} for a selection of {want} elements"
            )));
        }
        Ok(Request::Pick(pick, shape))
    }

    /// Reads a Python selection: parse under the GIL, read detached. A Tensor, or for a
    /// variable-length array (strings, bytes) a NumPy array.
    pub fn read_selection(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if let Some(kind) = self.array.info.variable {
            return Ok(self.read_variable(py, selection, kind)?.unbind());
        }
        let request = self.request(selection)?;
        Ok(Py::new(py, self.read_request(py, request)?)?.into_any())
    }

    /// A selection of a variable-length array as a NumPy array. Integers and step-1 slices
    /// read just their region; any other selection reads the box that spans it and NumPy
    /// takes the selection from there.
    fn read_variable<'py>(
        &self,
        py: Python<'py>,
        selection: Option<&Bound<'py, PyAny>>,
        kind: Variable,
    ) -> PyResult<Bound<'py, PyAny>> {
        let shape = &self.array.info.shape;
        let basic = match selection {
            None => Some(Region::all(shape)),
            Some(s) => selection::parse(s)
                .ok()
                .filter(|sel| {
                    sel.iter().all(|x| match x {
                        AxisSelector::Slice { step, .. } => step.unwrap_or(1) == 1,
                        _ => true,
                    })
                })
                .map(|sel| Region::resolve(shape, &sel))
                .transpose()
                .map_err(to_pyerr)?,
        };
        let (region, rest) = match (basic, selection) {
            (Some(region), _) => (region, None),
            (None, Some(s)) => {
                // Steps, `None`, index arrays, masks: the box that spans the selection is
                // read, NumPy takes the selection from it.
                let helpers = py.import("zarrpipe._selection")?;
                let pick = helpers
                    .getattr("numpy_pick")?
                    .call1((PyTuple::new(py, shape)?, s))?;
                let corner = helpers.getattr("pick_box")?.call1((&pick, shape.len()))?;
                let selectors = selection::parse(&corner)?;
                let region = Region::resolve(shape, &selectors).map_err(to_pyerr)?;
                (region, Some((helpers, pick, corner)))
            }
            (None, None) => unreachable!("no selection is the whole array"),
        };
        let array = self.array.clone();
        let read = region.clone();
        let data = run(py, move || array.read_variable(&read))?;
        let out = variable::to_numpy(py, &data, kind, &region.out_shape)?;
        match rest {
            Some((helpers, pick, corner)) => {
                helpers.getattr("take_pick")?.call1((out, pick, corner))
            }
            None => Ok(out),
        }
    }

    /// Reads a request into a fresh, unique Tensor.
    fn read_request(&self, py: Python<'_>, request: Request) -> PyResult<Tensor> {
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
        let request = self.request(selection)?;
        self.read_request_into(py, request, out)
    }

    /// Decodes a request into the caller's buffer: a region at any strides; a pick straight
    /// into a C-contiguous buffer, else read fresh and copied in.
    fn read_request_into(
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

    /// Writes `value` (broadcast like NumPy) into a selection of any kind.
    pub fn write_selection(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request = self.request(selection)?;
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
        let value = np.call_method1("asarray", (value, &dtype))?;
        let value = np.call_method1("broadcast_to", (value, PyTuple::new(py, shape)?))?;
        Ok(value.cast::<PyUntypedArray>()?.clone())
    }

    fn write_request(
        &self,
        py: Python<'_>,
        request: Request,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let written = self.write_request_unwarned(py, request, value);
        crate::errors::warn_unconditional(py, self.array.store())?;
        written
    }

    fn write_request_unwarned(
        &self,
        py: Python<'_>,
        request: Request,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let array = self.array.clone();
        let cache = self.cache.clone();
        let write_empty = self.write_empty_chunks;
        // Every write path (`arr[...] =`, `oindex`/`vindex` writes) passes here, so a
        // variable-length array never reaches the fixed-size paths below.
        if let Some(kind) = self.array.info.variable {
            let Request::Region(region) = request else {
                return Err(to_pyerr(zarrpipe_codecs::Error::Unsupported(
                    "writes to variable-length arrays take integers and step-1 slices".into(),
                )));
            };
            let data = variable::from_numpy(py, value, kind, &region.out_shape)?;
            return run(py, move || {
                array.write_variable(&region, &data, write_empty)
            });
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
                    array.write_pick(&pick, &src, write_empty, cache.as_deref())
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

#[pymethods]
impl Array {
    /// The array's path in its store (`""` for an array at the root).
    #[getter]
    fn path(&self) -> &str {
        self.array.info.path.trim_start_matches('/')
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.array.info.shape)
    }

    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.array.info.variable {
            Some(kind) => variable::dtype(py, kind),
            None => Ok(array_dtype(py, &self.array)?.into_any()),
        }
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.array.info.shape.len()
    }

    #[getter]
    fn size(&self) -> u64 {
        self.array.info.shape.iter().product()
    }

    #[getter]
    fn nbytes(&self) -> u64 {
        self.size() * self.array.info.dtype.size() as u64
    }

    /// The read granularity: inner chunks of a sharded array, like zarr-python's `chunks`.
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.array.info.chunks)
    }

    /// The shard shape of a sharded array, else None.
    #[getter]
    fn shards<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.array
            .info
            .shards
            .as_ref()
            .map(|s| PyTuple::new(py, s))
            .transpose()
    }

    /// Number of chunks along each axis.
    #[getter]
    fn chunk_grid_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.array.chunk_grid_shape())
    }

    #[getter]
    fn fill_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let np = py.import("numpy")?;
        if let Some(kind) = self.array.info.variable {
            return Ok(match kind {
                Variable::Utf8 => pyo3::types::PyString::new(
                    py,
                    &String::from_utf8_lossy(&self.array.info.fill_value),
                )
                .into_any(),
                Variable::Bytes => PyBytes::new(py, &self.array.info.fill_value).into_any(),
            });
        }
        let raw = PyBytes::new(py, &self.array.info.fill_value);
        let dtype = array_dtype(py, &self.array)?;
        np.call_method1("frombuffer", (raw, dtype))?.get_item(0)
    }

    #[getter]
    fn zarr_format(&self) -> u8 {
        self.array.info.zarr_format
    }

    #[getter]
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (&self.array.info.attributes,))
    }

    #[getter]
    fn dimension_names<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.array
            .info
            .dimension_names
            .as_ref()
            .map(|names| PyTuple::new(py, names))
            .transpose()
    }

    /// Why zarrs' codecs decode this array's chunks instead of zarrpipe's own (None if
    /// zarrpipe's).
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.array.fallback_reason()
    }

    /// Whether writes store chunks that are all fill value (else they are deleted).
    #[getter]
    fn write_empty_chunks(&self) -> bool {
        self.write_empty_chunks
    }

    fn __len__(&self) -> PyResult<usize> {
        self.array
            .info
            .shape
            .first()
            .map(|&d| d as usize)
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-d array"))
    }

    /// Pickles as "open the array at this path of this store" (the store pickles as its
    /// location and options), so arrays travel to DataLoader workers, forked or spawned.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let Some((store, metadata)) = &self.origin else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "cannot pickle an Array that was not opened with Store.open_array or \
                 Store.create_array",
            ));
        };
        let reopen = py.import("zarrpipe._pickle")?.getattr("open_array")?;
        let args = (
            store.clone_ref(py),
            self.path(),
            metadata.clone(),
            self.write_empty_chunks,
        );
        PyTuple::new(py, [reopen, args.into_pyobject(py)?.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let i = &self.array.info;
        let dtype = self
            .dtype(py)
            .map_or_else(|_| i.dtype.to_string(), |d| d.to_string());
        format!(
            "<zarrpipe.Array {:?} shape={:?} dtype={} chunks={:?}{} zarr_format={}>",
            self.path(),
            i.shape,
            dtype,
            i.chunks,
            i.shards
                .as_ref()
                .map(|s| format!(" shards={s:?}"))
                .unwrap_or_default(),
            i.zarr_format
        )
    }

    fn __getitem__(&self, py: Python<'_>, selection: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.read_selection(py, Some(selection))
    }

    /// Orthogonal selections: `arr.oindex[idx, :, ::2]`.
    #[getter]
    fn oindex<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("zarrpipe._selection")?
            .getattr("OIndex")?
            .call1((slf,))
    }

    /// Coordinate and mask selections: `arr.vindex[rows, cols]`, `arr.vindex[mask]`.
    #[getter]
    fn vindex<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("zarrpipe._selection")?
            .getattr("VIndex")?
            .call1((slf,))
    }

    /// Block selections over the stored chunk grid (shards): `arr.blocks[0, 1:3]`.
    #[getter]
    fn blocks<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("zarrpipe._selection")?
            .getattr("BlockIndex")?
            .call1((slf,))
    }

    /// Reads a pick of `zarrpipe._selection` into a fresh Tensor of `shape`.
    fn _read_pick(
        &self,
        py: Python<'_>,
        factors: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
    ) -> PyResult<Tensor> {
        let request = self.pick_request(factors, shape)?;
        self.read_request(py, request)
    }

    /// Reads a pick of `zarrpipe._selection` into `out` (see `read_into`).
    fn _read_pick_into(
        &self,
        py: Python<'_>,
        factors: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request = self.pick_request(factors, shape)?;
        self.read_request_into(py, request, out)
    }

    /// Writes `value` to a pick made by `zarrpipe._selection` (`oindex`/`vindex` writes).
    fn _write_pick(
        &self,
        py: Python<'_>,
        factors: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request = self.pick_request(factors, shape)?;
        self.write_request(py, request, value)
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        selection: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.write_selection(py, Some(selection), value)
    }

    /// Reads a selection (default: everything) into a fresh Tensor.
    #[pyo3(signature = (selection = None))]
    fn read(&self, py: Python<'_>, selection: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        self.read_selection(py, selection)
    }

    /// Decodes a selection straight into `out`: a writable NumPy array (any strides), or
    /// anything with the buffer protocol or a CPU `__dlpack__` (a torch tensor), of the
    /// selection's shape and the array's dtype.
    #[pyo3(signature = (selection, out))]
    fn read_into(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.read_selection_into(py, selection, out)
    }

    /// Writes `value` into a selection (None: everything), broadcasting like NumPy.
    #[pyo3(signature = (selection, value))]
    fn write(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.write_selection(py, selection, value)
    }

    /// `await arr.read_async(selection)`: `read` on a worker thread (the event loop runs on).
    #[pyo3(signature = (selection = None))]
    fn read_async<'py>(
        slf: &Bound<'py, Self>,
        selection: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        py.import("asyncio")?
            .call_method1("to_thread", (slf.getattr("read")?, selection))
    }

    /// `await arr.write_async(selection, value)`: `write` on a worker thread.
    #[pyo3(signature = (selection, value))]
    fn write_async<'py>(
        slf: &Bound<'py, Self>,
        selection: Option<&Bound<'py, PyAny>>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        py.import("asyncio")?
            .call_method1("to_thread", (slf.getattr("write")?, selection, value))
    }

    /// Reads one chunk of the `chunks` grid (trimmed at the array's edge).
    fn read_chunk(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let list = PyList::new(py, [index])?;
        let mut tensors = self.read_chunk_list(py, list.as_any())?;
        Ok(tensors.remove(0))
    }

    /// Reads several chunks in parallel, one Tensor each.
    fn read_chunks(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyAny>>> {
        self.read_chunk_list(py, indices)
    }

    /// The store key of the object holding chunk `index` of the `chunks` grid (its shard,
    /// for a sharded array).
    fn chunk_key(&self, index: &Bound<'_, PyAny>) -> PyResult<String> {
        self.array
            .stored_key_of_chunk(&selection::chunk_index(index)?)
            .map_err(to_pyerr)
    }
}

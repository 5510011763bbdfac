//! `zarrpipe.Array`: an open array's metadata, its reads (into fresh Tensors or the
//! caller's buffer) and its writes.

use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::read::cache::ChunkCache;

use crate::async_call::AsyncCall;
use crate::attributes::{AttrState, Attributes};
use crate::dtype::{numpy_dtype, numpy_dtype_from_json};
use crate::errors::BindResult;
use crate::selection::{self, kind_request, request, Kind, Request};
use crate::tensor::Tensor;
use crate::variable;
use zarrpipe_codecs::array::variable::Variable;

mod read;
mod views;
mod write;

#[pyclass(frozen, module = "zarrpipe", name = "Array")]
pub struct Array {
    array: Arc<EngineArray>,
    cache: Option<Arc<ChunkCache>>,
    /// Store chunks that end up all fill value (else they are deleted), as zarr-python's
    /// `write_empty_chunks`.
    write_empty_chunks: bool,
    /// What re-opens the array after pickling: its store (opaque here, only handed back to
    /// the unpickler), and the metadata it was opened with when the caller gave it (else it
    /// is read from the store again).
    origin: Option<(Py<PyAny>, Option<String>)>,
    /// `attrs`, made on first use and shared by every `attrs` object of this array.
    attrs: std::sync::OnceLock<Arc<AttrState>>,
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
        origin: Option<(Py<PyAny>, Option<String>)>,
    ) -> Self {
        Self {
            array,
            cache,
            write_empty_chunks,
            origin,
            attrs: std::sync::OnceLock::new(),
        }
    }

    /// The engine's array.
    pub(crate) fn engine(&self) -> &Arc<EngineArray> {
        &self.array
    }

    /// The request for `key` selected as `kind` (blocks: of the stored chunk grid).
    pub(crate) fn kind_request(&self, kind: &str, key: &Bound<'_, PyAny>) -> BindResult<Request> {
        kind_request(
            &self.array.info.shape,
            &Kind::named(kind, self.array.grid())?,
            key,
        )
    }

    /// The chunk cache the array reads through (its store's), if any.
    pub(crate) fn cache(&self) -> Option<&Arc<ChunkCache>> {
        self.cache.as_ref()
    }
}

/// NotImplementedError for a one-shape property of a rectilinear grid, as zarr-python's.
fn not_regular(what: &str, instead: &str) -> PyErr {
    pyo3::exceptions::PyNotImplementedError::new_err(format!(
        "The `{what}` attribute is only defined for arrays using regular chunk grids. This \
         array has a rectilinear chunk grid. Use `{instead}` for general access."
    ))
}

/// Per axis, a tuple of sizes.
fn sizes_tuple<'py>(py: Python<'py>, sizes: &[Vec<u64>]) -> PyResult<Bound<'py, PyTuple>> {
    let axes = sizes
        .iter()
        .map(|s| PyTuple::new(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, axes)
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
    /// A rectilinear grid has no one chunk shape: NotImplementedError, as zarr-python.
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if self.array.read_grid().regular_shape().is_none() {
            return Err(not_regular("chunks", "read_chunk_sizes"));
        }
        PyTuple::new(py, &self.array.info.chunks)
    }

    /// The shard shape of a sharded array, else None (NotImplementedError for
    /// rectilinear shards, as zarr-python).
    #[getter]
    fn shards<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        if self.array.info.shards.is_some() && self.array.grid().regular_shape().is_none() {
            return Err(not_regular("shards", "write_chunk_sizes"));
        }
        self.array
            .info
            .shards
            .as_ref()
            .map(|s| PyTuple::new(py, s))
            .transpose()
    }

    /// The data sizes of the `chunks` grid's chunks along each axis, clipped to the
    /// array's end (zarr-python's `read_chunk_sizes`; dask's `chunks`).
    #[getter]
    fn read_chunk_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        sizes_tuple(py, &self.array.read_grid().clipped_sizes())
    }

    /// The data sizes of the stored chunks (shards) along each axis, clipped to the
    /// array's end (zarr-python's `write_chunk_sizes`).
    #[getter]
    fn write_chunk_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        sizes_tuple(py, &self.array.grid().clipped_sizes())
    }

    /// Number of chunks along each axis.
    #[getter]
    fn chunk_grid_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.array.chunk_grid_shape())
    }

    /// The fill value: a NumPy scalar of the array's dtype (str or bytes for variable-length
    /// data), or None for a v2 array whose metadata says `"fill_value": null`, as
    /// zarr-python gives (its missing chunks still read as zeros).
    #[getter]
    fn fill_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.array.info.zarr_format == 2
            && self.array.metadata_json().get("fill_value") == Some(&serde_json::Value::Null)
        {
            return Ok(py.None().into_bound(py));
        }
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

    /// The array's attributes: a mutable mapping whose changes are written at once.
    #[getter]
    fn attrs(&self) -> Attributes {
        let state = self.attrs.get_or_init(|| {
            let i = &self.array.info;
            AttrState::from_json(
                self.array.store().clone(),
                i.path.clone(),
                i.zarr_format,
                &i.attributes,
            )
        });
        Attributes::new(state.clone())
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

    /// The metadata document (v3 `zarr.json` or v2 `.zarray`), as a dict.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (self.array.metadata_json().to_string(),))
    }

    /// How many chunks the array has (inner chunks, for a sharded array), as
    /// zarr-python's `nchunks`.
    #[getter]
    fn nchunks(&self) -> u64 {
        self.array.chunk_grid_shape().iter().product()
    }

    /// How many chunks are stored, as zarr-python's `nchunks_initialized` counts them: every
    /// chunk of a stored shard counts. Lists the array's keys.
    #[getter]
    fn nchunks_initialized(&self, py: Python<'_>) -> BindResult<u64> {
        if self.array.info.shards.is_some() && self.array.grid().regular_shape().is_none() {
            // Shards of a rectilinear grid hold different numbers of inner chunks.
            let array = self.array.clone();
            return crate::runtime::run(py, move || array.stored_inner_chunks());
        }
        let per_shard: u64 = match &self.array.info.shards {
            Some(shards) => shards
                .iter()
                .zip(&self.array.info.chunks)
                .map(|(s, c)| s / c.max(&1))
                .product(),
            None => 1,
        };
        Ok(self.nshards_initialized(py)? * per_shard)
    }

    /// How many values the storage grid has: shards of a sharded array, else chunks.
    #[getter]
    fn nshards(&self) -> u64 {
        self.array.stored_chunk_count()
    }

    /// How many of them are stored (the others read as the fill value). Lists the array's
    /// keys.
    #[getter]
    fn nshards_initialized(&self, py: Python<'_>) -> PyResult<u64> {
        let array = self.array.clone();
        Ok(crate::runtime::run(py, move || array.stored())?.0)
    }

    /// Bytes stored under the array's path: chunks and metadata. Lists the array's keys.
    fn nbytes_stored(&self, py: Python<'_>) -> PyResult<u64> {
        let array = self.array.clone();
        Ok(crate::runtime::run(py, move || array.stored())?.2)
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
        // The store's bound method pickles as (getattr, (store, "_reopen_array")).
        let reopen = store.bind(py).getattr("_reopen_array")?;
        let args = (self.path(), metadata.clone(), self.write_empty_chunks);
        PyTuple::new(py, [reopen, args.into_pyobject(py)?.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let i = &self.array.info;
        let dtype = self
            .dtype(py)
            .map_or_else(|_| i.dtype.to_string(), |d| d.to_string());
        let chunks = match self.array.read_grid().regular_shape() {
            Some(c) => format!("{c:?}"),
            None => "rectilinear".to_owned(),
        };
        format!(
            "<zarrpipe.Array {:?} shape={:?} dtype={} chunks={}{} zarr_format={}>",
            self.path(),
            i.shape,
            dtype,
            chunks,
            match (&i.shards, self.array.grid().regular_shape()) {
                (Some(s), Some(_)) => format!(" shards={s:?}"),
                (Some(_), None) => " shards=rectilinear".to_owned(),
                (None, _) => String::new(),
            },
            i.zarr_format
        )
    }

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

    /// Orthogonal selections: `arr.oindex[idx, :, ::2]`.
    #[getter]
    fn oindex(slf: &Bound<'_, Self>) -> views::OIndex {
        views::OIndex::new(slf)
    }

    /// Coordinate and mask selections: `arr.vindex[rows, cols]`, `arr.vindex[mask]`.
    #[getter]
    fn vindex(slf: &Bound<'_, Self>) -> views::VIndex {
        views::VIndex::new(slf)
    }

    /// Block selections over the stored chunk grid (shards): `arr.blocks[0, 1:3]`.
    #[getter]
    fn blocks(slf: &Bound<'_, Self>) -> views::BlockIndex {
        views::BlockIndex::new(slf)
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
    ) -> BindResult<()> {
        self.write_selection(py, selection, value)
    }

    /// `await arr.read_async(selection)`: `read` on asyncio's default executor (the event
    /// loop runs on); cancelling the awaiting task stops the read at its next chunk.
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

    /// `await arr.write_async(selection, value)`: `write` on asyncio's default executor;
    /// cancelling the awaiting task stops the write before its next chunk (every chunk it
    /// stored is whole).
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
    fn chunk_key(&self, index: &Bound<'_, PyAny>) -> BindResult<String> {
        Ok(self
            .array
            .stored_key_of_chunk(&selection::chunk_index(index)?)?)
    }
}

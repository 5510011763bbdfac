//! `zarrpipe.Array`: an open array's metadata, its reads (into fresh Tensors or the
//! caller's buffer) and its writes.

use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::read::cache::ChunkCache;

use crate::attributes::{AttrState, Attributes};
use crate::dtype::{numpy_dtype, numpy_dtype_from_json};
use crate::errors::BindResult;
use crate::selection::{self, kind_request, Kind, Request};
use crate::tensor::Tensor;
use crate::variable;
use zarrpipe_codecs::array::variable::Variable;

mod read;
mod views;
mod write;

/// An open Zarr array (v2 or v3): its metadata, read once, and its reads and writes.
///
/// Get one from `Store.open_array` or `Store.create_array`. Indexing (`arr[...]`, `oindex`,
/// `vindex`, `blocks`) returns what zarr-python's returns: a writable NumPy array that owns
/// the read's fresh buffer (handed over without a copy), or a NumPy scalar where
/// zarr-python gives one. `read`, `read_chunk(s)` and `Store.read` return fresh Tensors
/// that the caller owns (the two DLPack doors). Writes encode in Rust with the GIL
/// released. An Array pickles as its store and path (and the metadata it was opened with,
/// when given): unpickling opens it again.
///
/// Arrays of variable-length strings and bytes (v3 `string` / `variable_length_bytes`, v2
/// `|O` with `vlen-utf8` / `vlen-bytes`) cannot travel as Tensors: their reads return NumPy
/// arrays of the dtype zarr-python returns (`StringDType()` for text, object holding
/// `bytes` for byte strings), decoded in parallel in Rust.
///
/// A selection (`arr[...]`, `read`, `write`, `read_into`, `Store.read`) is anything NumPy
/// indexes with, with NumPy's result: integers (each drops its axis), slices of any step,
/// negative too (clamped like NumPy's), `...`, `None` (a new axis), integer arrays (any
/// order, repeats) and boolean masks (advanced indexing, broadcast and placed as NumPy
/// places it), or a tuple of them; `None` as the whole selection of `read`/`write`
/// selects everything. `oindex`, `vindex` and `blocks` give zarr-python's orthogonal,
/// coordinate and block selections. Each selection reads only the chunks it touches, and
/// each kind also writes. Invalid selections raise NumPy's exceptions: `IndexError` for
/// an index out of range, too many indices, a second `...`, an item that is no index (a
/// float, a string) or index arrays that do not broadcast; `ValueError` for a slice step
/// of 0; `TypeError` for slice bounds that are not integers. Strings and bytes take
/// every kind of selection, in reads and writes alike.
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

#[pymethods]
impl Array {
    /// The array's path in its store (`""` for an array at the root).
    #[getter]
    fn path(&self) -> &str {
        self.array.info.path.trim_start_matches('/')
    }

    /// The array's shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.array.info.shape)
    }

    /// The element type, in native byte order (whatever order the store keeps; a
    /// record keeps its fields' orders); `StringDType()` / object for variable-length
    /// strings / bytes.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.array.info.variable {
            Some(kind) => variable::dtype(py, kind),
            None => Ok(array_dtype(py, &self.array)?.into_any()),
        }
    }

    /// The number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.array.info.shape.len()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> u64 {
        self.array.info.shape.iter().product()
    }

    /// The size of the whole array decoded, in bytes.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.size() * self.array.info.dtype.size() as u64
    }

    /// The read granularity: the chunk shape, or the inner chunk shape of a sharded
    /// array (zarr-python's `chunks`). Raises NotImplementedError for a rectilinear grid
    /// (chunks of different sizes), as zarr-python does: see `read_chunk_sizes`.
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if self.array.read_grid().regular_shape().is_none() {
            return Err(not_regular("chunks", "read_chunk_sizes"));
        }
        PyTuple::new(py, &self.array.info.chunks)
    }

    /// The shard shape of a sharded array, else None. Raises NotImplementedError for
    /// shards of different sizes (a rectilinear grid): see `write_chunk_sizes`.
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

    /// Per axis, the size of each chunk of the `chunks` grid (inner chunks of a sharded
    /// array), clipped at the array's end: zarr-python's `read_chunk_sizes`, dask's
    /// `chunks`. Defined for regular and rectilinear grids.
    #[getter]
    fn read_chunk_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        sizes_tuple(py, &self.array.read_grid().clipped_sizes())
    }

    /// Per axis, the size of each stored chunk (shard), clipped at the array's end:
    /// zarr-python's `write_chunk_sizes`.
    #[getter]
    fn write_chunk_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        sizes_tuple(py, &self.array.grid().clipped_sizes())
    }

    /// Number of chunks (of `chunks`) along each axis.
    #[getter]
    fn chunk_grid_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.array.chunk_grid_shape())
    }

    /// The fill value (what unwritten chunks read as), as a NumPy scalar; None for a v2
    /// array whose metadata says `"fill_value": null` (as zarr-python gives; its missing
    /// chunks read as zeros).
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

    /// The Zarr format version of the stored metadata.
    #[getter]
    fn zarr_format(&self) -> u8 {
        self.array.info.zarr_format
    }

    /// The array's user attributes: a mutable mapping; every change is written at once
    /// (see `Attributes`).
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

    /// The Zarr v3 dimension names, or None when the metadata has none.
    #[getter]
    fn dimension_names<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.array
            .info
            .dimension_names
            .as_ref()
            .map(|names| PyTuple::new(py, names))
            .transpose()
    }

    /// The metadata document (v3 `zarr.json`, or v2 `.zarray`) as a dict.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (self.array.metadata_json().to_string(),))
    }

    /// How many chunks the array has (inner chunks of a sharded array), as
    /// zarr-python's `nchunks`.
    #[getter]
    fn nchunks(&self) -> u64 {
        self.array.chunk_grid_shape().iter().product()
    }

    /// How many chunks are stored, as zarr-python counts them (every chunk of a stored
    /// shard counts). Lists the array's keys.
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

    /// How many of them are stored; the others read as the fill value. Lists the
    /// array's keys.
    #[getter]
    fn nshards_initialized(&self, py: Python<'_>) -> PyResult<u64> {
        let array = self.array.clone();
        Ok(crate::runtime::run(py, move || array.stored())?.0)
    }

    /// Bytes stored under the array's path, chunks and metadata. Lists the array's
    /// keys.
    ///
    /// Returns:
    ///     The number of bytes, as zarr-python's `nbytes_stored()`.
    fn nbytes_stored(&self, py: Python<'_>) -> PyResult<u64> {
        let array = self.array.clone();
        Ok(crate::runtime::run(py, move || array.stored())?.2)
    }

    /// Why the `zarrs` crate's codecs decode this array's chunks instead of zarrpipe's
    /// own (None when zarrpipe's own decoder does).
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

    /// Orthogonal selections: per axis an integer, a slice, a 1-d integer array (any
    /// order, repeats) or a 1-d boolean mask; `arr.oindex[[3, 1], :, ::2]`. Reads and
    /// writes (`arr.oindex[[3, 1], :] = v`).
    #[getter]
    fn oindex(slf: &Bound<'_, Self>) -> views::OIndex {
        views::OIndex::new(slf)
    }

    /// Coordinate selections: integer arrays broadcast together, or one boolean mask of
    /// the array's shape; `arr.vindex[rows, cols]`, `arr.vindex[mask]`. Reads and writes;
    /// a position selected twice keeps the last value, as in NumPy.
    #[getter]
    fn vindex(slf: &Bound<'_, Self>) -> views::VIndex {
        views::VIndex::new(slf)
    }

    /// Block selections over the stored chunk grid (the shards of a sharded array):
    /// integers and step-1 slices of blocks; `arr.blocks[0, 1:3]`. Reads and writes.
    #[getter]
    fn blocks(slf: &Bound<'_, Self>) -> views::BlockIndex {
        views::BlockIndex::new(slf)
    }

    /// The store key of the object holding a chunk.
    ///
    /// Args:
    ///     index: The chunk's position in the `chunks` grid.
    ///
    /// Returns:
    ///     The key (e.g. `"temperature/c/0/1"`), relative to the store root: the shard's
    ///     key for a sharded array.
    ///
    /// Raises:
    ///     IndexError: The index is outside `chunk_grid_shape`.
    fn chunk_key(&self, index: &Bound<'_, PyAny>) -> BindResult<String> {
        Ok(self
            .array
            .stored_key_of_chunk(&selection::chunk_index(index)?)?)
    }
}

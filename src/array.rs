//! `zarrpipe.Array`: an open array's metadata and its read methods.

use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use zarrpipe_codecs::array::ArrayReader;
use zarrpipe_codecs::cache::ChunkCache;
use zarrpipe_codecs::read::ChunkData;
use zarrpipe_codecs::selection::Region;
use zarrpipe_codecs::ElementType;

use crate::dtype::numpy_dtype;
use crate::errors::to_pyerr;
use crate::runtime::run;
use crate::selection;
use crate::tensor::Tensor;

#[pyclass(frozen, module = "zarrpipe", name = "Array")]
pub struct Array {
    reader: Arc<ArrayReader>,
    cache: Option<Arc<ChunkCache>>,
}

pub fn tensor(bytes: Bytes, shape: &[u64], dtype: ElementType) -> Tensor {
    Tensor::new(bytes, shape.iter().map(|&d| d as usize).collect(), dtype)
}

impl Array {
    pub fn new(reader: Arc<ArrayReader>, cache: Option<Arc<ChunkCache>>) -> Self {
        Self { reader, cache }
    }

    /// Reads a Python selection: parse under the GIL, read detached.
    pub fn read_selection(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        let selectors = match selection {
            Some(s) => selection::parse(s)?,
            None => Vec::new(),
        };
        let region = Region::resolve(&self.reader.info.shape, &selectors).map_err(to_pyerr)?;
        let out_shape = region.out_shape.clone();
        let reader = self.reader.clone();
        let cache = self.cache.clone();
        let bytes = run(py, move || reader.read_region(&region, cache.as_deref()))?;
        Ok(tensor(bytes, &out_shape, self.reader.info.dtype))
    }

    pub fn read_chunk_list(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Tensor>> {
        let indices: Vec<Vec<u64>> = indices
            .try_iter()?
            .map(|i| selection::chunk_index(&i?))
            .collect::<PyResult<_>>()?;
        let reader = self.reader.clone();
        let cache = self.cache.clone();
        let chunks = run(py, move || reader.read_chunks(&indices, cache.as_deref()))?;
        let dtype = self.reader.info.dtype;
        Ok(chunks
            .into_iter()
            .map(|ChunkData { bytes, shape, .. }| tensor(bytes, &shape, dtype))
            .collect())
    }
}

#[pymethods]
impl Array {
    /// The array's path in its store (`""` for an array at the root).
    #[getter]
    fn path(&self) -> &str {
        self.reader.info.path.trim_start_matches('/')
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.reader.info.shape)
    }

    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, numpy::PyArrayDescr>> {
        numpy_dtype(py, self.reader.info.dtype)
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.reader.info.shape.len()
    }

    #[getter]
    fn size(&self) -> u64 {
        self.reader.info.shape.iter().product()
    }

    #[getter]
    fn nbytes(&self) -> u64 {
        self.size() * self.reader.info.dtype.size() as u64
    }

    /// The read granularity: inner chunks of a sharded array, like zarr-python's `chunks`.
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.reader.info.chunks)
    }

    /// The shard shape of a sharded array, else None.
    #[getter]
    fn shards<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.reader
            .info
            .shards
            .as_ref()
            .map(|s| PyTuple::new(py, s))
            .transpose()
    }

    /// Number of chunks along each axis.
    #[getter]
    fn chunk_grid_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.reader.chunk_grid_shape())
    }

    #[getter]
    fn fill_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let np = py.import("numpy")?;
        let raw = PyBytes::new(py, &self.reader.info.fill_value);
        let dtype = numpy_dtype(py, self.reader.info.dtype)?;
        np.call_method1("frombuffer", (raw, dtype))?.get_item(0)
    }

    #[getter]
    fn zarr_format(&self) -> u8 {
        self.reader.info.zarr_format
    }

    #[getter]
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (&self.reader.info.attributes,))
    }

    #[getter]
    fn dimension_names<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.reader
            .info
            .dimension_names
            .as_ref()
            .map(|names| PyTuple::new(py, names))
            .transpose()
    }

    /// Why zarrs' decoder reads this array instead of zarrpipe's own (None if zarrpipe's).
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.reader.fallback_reason()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.reader
            .info
            .shape
            .first()
            .map(|&d| d as usize)
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-d array"))
    }

    fn __repr__(&self) -> String {
        let i = &self.reader.info;
        format!(
            "<zarrpipe.Array {:?} shape={:?} dtype={} chunks={:?}{} zarr_format={}>",
            self.path(),
            i.shape,
            i.dtype,
            i.chunks,
            i.shards
                .as_ref()
                .map(|s| format!(" shards={s:?}"))
                .unwrap_or_default(),
            i.zarr_format
        )
    }

    fn __getitem__(&self, py: Python<'_>, selection: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.read_selection(py, Some(selection))
    }

    /// Reads a selection (default: everything) into a fresh Tensor.
    #[pyo3(signature = (selection = None))]
    fn read(&self, py: Python<'_>, selection: Option<&Bound<'_, PyAny>>) -> PyResult<Tensor> {
        self.read_selection(py, selection)
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

    /// Reads one chunk of the `chunks` grid (trimmed at the array's edge).
    fn read_chunk(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let list = PyList::new(py, [index])?;
        let mut tensors = self.read_chunk_list(py, list.as_any())?;
        Ok(tensors.remove(0))
    }

    /// Reads several chunks in parallel, one Tensor each.
    fn read_chunks(&self, py: Python<'_>, indices: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
        self.read_chunk_list(py, indices)
    }

    /// The store key of the object holding chunk `index` of the `chunks` grid (its shard,
    /// for a sharded array).
    fn chunk_key(&self, index: &Bound<'_, PyAny>) -> PyResult<String> {
        self.reader
            .stored_key_of_chunk(&selection::chunk_index(index)?)
            .map_err(to_pyerr)
    }
}

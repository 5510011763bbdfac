//! `zarrpipe.Store`: a Zarr store, the arrays opened in it and its chunk cache.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrpipe_codecs::array::ArrayReader;
use zarrpipe_codecs::cache::ChunkCache;
use zarrpipe_codecs::hierarchy;
use zarrpipe_codecs::store::{node_path, Store as EngineStore};

use crate::array::Array;
use crate::errors::to_pyerr;
use crate::runtime::run;
use crate::tensor::Tensor;

#[pyclass(frozen, module = "zarrpipe", name = "Store")]
pub struct Store {
    store: Arc<EngineStore>,
    cache: Option<Arc<ChunkCache>>,
    /// Arrays opened by path, so repeated `read(path, ...)` calls skip the metadata.
    arrays: Mutex<HashMap<String, Arc<ArrayReader>>>,
}

impl Store {
    fn reader(&self, py: Python<'_>, path: &str, refresh: bool) -> PyResult<Arc<ArrayReader>> {
        self.reader_with(py, path, refresh, None)
    }

    fn reader_with(
        &self,
        py: Python<'_>,
        path: &str,
        refresh: bool,
        metadata: Option<String>,
    ) -> PyResult<Arc<ArrayReader>> {
        let node = node_path(path).map_err(to_pyerr)?;
        if !refresh && metadata.is_none() {
            if let Some(r) = self
                .arrays
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&node)
            {
                return Ok(r.clone());
            }
        }
        let store = self.store.clone();
        let reader = Arc::new(run(py, move || match metadata {
            Some(json) => ArrayReader::with_metadata(store, &node, &json),
            None => ArrayReader::open(store, &node),
        })?);
        if let Some(cache) = &self.cache {
            cache.forget_array(&reader.info.path);
        }
        self.arrays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(reader.info.path.clone(), reader.clone());
        Ok(reader)
    }

    fn array(&self, py: Python<'_>, path: &str, refresh: bool) -> PyResult<Array> {
        Ok(Array::new(
            self.reader(py, path, refresh)?,
            self.cache.clone(),
        ))
    }
}

#[pymethods]
impl Store {
    /// Opens a local directory store. `cache_bytes` > 0 enables a decoded-chunk cache of
    /// that many bytes (least recently used chunks are evicted first).
    #[new]
    #[pyo3(signature = (path, *, cache_bytes = 0))]
    fn new(py: Python<'_>, path: PathBuf, cache_bytes: usize) -> PyResult<Self> {
        let store = py
            .detach(|| EngineStore::open_local(&path))
            .map_err(to_pyerr)?;
        Ok(Self {
            store: Arc::new(store),
            cache: (cache_bytes > 0).then(|| Arc::new(ChunkCache::new(cache_bytes))),
            arrays: Mutex::new(HashMap::new()),
        })
    }

    fn __repr__(&self) -> String {
        format!("<zarrpipe.Store {:?}>", self.store.description())
    }

    /// Opens the array at `path` (`""` is an array at the store root), reading its metadata,
    /// or taking it from `metadata` (the JSON of zarr.json / .zarray, as str or dict).
    #[pyo3(signature = (path = "", *, metadata = None))]
    fn open_array(
        &self,
        py: Python<'_>,
        path: &str,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Array> {
        let json = match metadata {
            None => None,
            Some(m) if m.is_instance_of::<pyo3::types::PyString>() => Some(m.extract::<String>()?),
            Some(m) => Some(
                py.import("json")?
                    .call_method1("dumps", (m,))?
                    .extract::<String>()?,
            ),
        };
        Ok(Array::new(
            self.reader_with(py, path, true, json)?,
            self.cache.clone(),
        ))
    }

    /// Reads a selection of the array at `path` into a fresh Tensor.
    #[pyo3(signature = (path, selection = None))]
    fn read(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        self.array(py, path, false)?.read_selection(py, selection)
    }

    /// Reads whole chunks of the array at `path`, one Tensor each, decoded in parallel.
    fn read_chunks(
        &self,
        py: Python<'_>,
        path: &str,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Tensor>> {
        self.array(py, path, false)?.read_chunk_list(py, indices)
    }

    /// Every array and group in the store: a list of (path, "array" | "group").
    fn list(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str)>> {
        let store = self.store.clone();
        let nodes = run(py, move || hierarchy::list(&store))?;
        Ok(nodes.into_iter().map(|(p, k)| (p, k.name())).collect())
    }

    /// Chunk cache counters: hits, misses, entries, bytes, capacity (all 0 without a cache).
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.cache.as_ref().map(|c| c.stats()).unwrap_or_default();
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("entries", s.entries)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("capacity", s.capacity)?;
        Ok(d)
    }

    /// Empties the chunk cache (for data that changed on disk).
    fn clear_cache(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }
}

/// Sets how many threads decode (the default is the number of CPUs, or
/// the `ZARRPIPE_NUM_THREADS` environment variable).
#[pyfunction]
pub fn set_num_threads(n: usize) -> PyResult<()> {
    zarrpipe_codecs::pool::set_num_threads(n).map_err(to_pyerr)
}

/// How many threads decode.
#[pyfunction]
pub fn get_num_threads() -> usize {
    zarrpipe_codecs::pool::num_threads()
}

//! `zarrpipe.Store`: a Zarr store, the arrays and groups opened in it and its chunk cache;
//! `zarrpipe.Group` (`group`) and `zarrpipe.open` (`open`). Where a location is and what each
//! of zarr-python's modes does are the engine's (`store/open_mode.rs`).

pub mod group;
pub mod open;

use group::Group;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::hierarchy::listing as hierarchy;
use zarrpipe_codecs::read::cache::ChunkCache;
use zarrpipe_codecs::store::open_mode::Mode;
use zarrpipe_codecs::store::remote::RemoteSettings;
use zarrpipe_codecs::store::{key_prefix, node_path, Store as EngineStore};

use crate::array::Array;
use crate::errors::BindResult;

use crate::runtime::run;

#[pyclass(frozen, module = "zarrpipe", name = "Store")]
pub struct Store {
    store: Arc<EngineStore>,
    cache: Option<Arc<ChunkCache>>,
    /// Arrays opened by path, so repeated `read(path, ...)` calls skip the metadata.
    arrays: Mutex<HashMap<String, Arc<EngineArray>>>,
    /// The process that opened the store: a forked child does not use `arrays`, whose lock
    /// a parent thread may have held at the fork (see `zarrpipe_codecs::process::fork`).
    pid: u32,
    /// The constructor's arguments, to open the same store again after pickling.
    reopen: Reopen,
}

/// What `Store(...)` was given (a local path made absolute, so that a spawned process
/// with another working directory opens the same directory).
struct Reopen {
    location: String,
    mode: Mode,
    cache_bytes: usize,
    options: HashMap<String, String>,
    timeout: f64,
    retries: usize,
    concurrency: usize,
    durable: bool,
    conditional_writes: String,
}

impl Store {
    /// The table of opened arrays, or None in a forked child.
    fn arrays(&self) -> Option<std::sync::MutexGuard<'_, HashMap<String, Arc<EngineArray>>>> {
        if zarrpipe_codecs::process::fork::forked(self.pid) {
            return None;
        }
        Some(self.arrays.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The engine's store (the pipeline reads object stores through it).
    pub(crate) fn engine(&self) -> &Arc<EngineStore> {
        &self.store
    }

    fn reader(&self, py: Python<'_>, path: &str, refresh: bool) -> BindResult<Arc<EngineArray>> {
        self.reader_with(py, path, refresh, None)
    }

    fn reader_with(
        &self,
        py: Python<'_>,
        path: &str,
        refresh: bool,
        metadata: Option<String>,
    ) -> BindResult<Arc<EngineArray>> {
        let node = node_path(path)?;
        if !refresh && metadata.is_none() {
            if let Some(r) = self.arrays().and_then(|a| a.get(&node).cloned()) {
                return Ok(r);
            }
        }
        let store = self.store.clone();
        let reader = Arc::new(run(py, move || match metadata {
            Some(json) => EngineArray::with_metadata(store, &node, &json),
            None => EngineArray::open(store, &node),
        })?);
        if let Some(cache) = &self.cache {
            cache.forget_prefix(&key_prefix(&reader.info.path));
        }
        if let Some(mut arrays) = self.arrays() {
            arrays.insert(reader.info.path.clone(), reader.clone());
        }
        Ok(reader)
    }

    /// A transient array for the store's own by-path calls (never handed to Python).
    fn array(&self, py: Python<'_>, path: &str, refresh: bool) -> PyResult<Array> {
        Ok(Array::new(
            self.reader(py, path, refresh)?,
            self.cache.clone(),
            false,
            None,
        ))
    }

    /// Remembers a just-created array (its cached chunks, if any, are stale).
    fn remember(&self, array: EngineArray) -> Arc<EngineArray> {
        let array = Arc::new(array);
        if let Some(cache) = &self.cache {
            cache.forget_prefix(&key_prefix(&array.info.path));
        }
        if let Some(mut arrays) = self.arrays() {
            arrays.insert(array.info.path.clone(), array.clone());
        }
        array
    }
}

/// A codec-list argument of `create_array` that tells "not given" (zarr-python's `"auto"`:
/// its default codecs) from an explicit `None` (no codecs).
pub enum CodecsArg<'py> {
    Auto,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for CodecsArg<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self::Given(obj.to_owned()))
    }
}

impl<'py> CodecsArg<'py> {
    fn or_auto(self, py: Python<'py>) -> Bound<'py, PyAny> {
        match self {
            Self::Auto => pyo3::types::PyString::new(py, "auto").into_any(),
            Self::Given(obj) => obj,
        }
    }
}

#[pymethods]
impl Store {
    /// Opens a store: a local directory (a path, or a `file://` URL), or an object store
    /// URL (`s3://bucket/prefix`, `gs://`, `az://`, `http(s)://`). `options` are
    /// object_store's settings (`aws_endpoint`, `aws_region`, `aws_skip_signature`,
    /// `allow_http`...; credentials otherwise come from the environment). `timeout`
    /// (seconds per request), `retries` and `concurrency` (requests in flight per read)
    /// apply to object stores. `cache_bytes` > 0 enables a decoded-chunk cache of that size.
    /// `mode`, as zarr-python's: "r" (read-only, writes raise PermissionError; must exist),
    /// "r+" (read and write; must exist), "a" (read and write; created by the first write),
    /// "w" (deletes everything in the store now, then as "a"), "w-" (FileExistsError unless
    /// the store is empty). Opening never creates anything. The default is "a", except for
    /// http(s):// stores ("r"). `durable`: local writes are
    /// forced to disk (`fsync`) before they count as done. `conditional_writes`: what a
    /// write of part of a chunk does on an object store that cannot write conditionally:
    /// "require" raises UnsupportedError, "warn" writes unconditionally and warns.
    #[new]
    #[pyo3(signature = (path, *, mode = None, cache_bytes = 0, options = None, timeout = 30.0, retries = 3, concurrency = 32, durable = false, conditional_writes = "require"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        mode: Option<&str>,
        cache_bytes: usize,
        options: Option<HashMap<String, String>>,
        timeout: f64,
        retries: usize,
        concurrency: usize,
        durable: bool,
        conditional_writes: &str,
    ) -> BindResult<Self> {
        let location: String = py
            .import("os")?
            .call_method1("fspath", (path,))?
            .extract()?;
        if !(timeout.is_finite() && timeout > 0.0) || concurrency == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "timeout must be a positive number of seconds and concurrency at least 1",
            )
            .into());
        }
        let unconditional_writes = match conditional_writes {
            "require" => false,
            "warn" => true,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "conditional_writes must be \"require\" or \"warn\", not {other:?}"
                ))
                .into())
            }
        };
        let settings = RemoteSettings {
            timeout: Duration::from_secs_f64(timeout),
            retries,
            concurrency,
            unconditional_writes,
        };
        let options = options.unwrap_or_default();
        let reopen_location = if location.contains("://") {
            location.clone()
        } else {
            py.import("os")?
                .getattr("path")?
                .call_method1("abspath", (&location,))?
                .extract()?
        };
        let reopen_options = options.clone();
        let options: Vec<(String, String)> = options.into_iter().collect();
        let mode = match mode {
            None => Mode::default_for(&location),
            Some(m) => Mode::parse(m)?,
        };
        // Opening may delete ("w") or list ("w-") a whole store: a long call like any other.
        let store = run(py, || {
            EngineStore::open_with_mode(&location, mode, &options, settings, durable)
        })?;
        Ok(Self {
            store: Arc::new(store),
            cache: (cache_bytes > 0).then(|| Arc::new(ChunkCache::new(cache_bytes))),
            arrays: Mutex::new(HashMap::new()),
            pid: std::process::id(),
            reopen: Reopen {
                location: reopen_location,
                mode,
                cache_bytes,
                options: reopen_options,
                timeout,
                retries,
                concurrency,
                durable,
                conditional_writes: conditional_writes.to_owned(),
            },
        })
    }

    /// Pickles as the constructor's arguments (options included, so credentials given as
    /// options travel with it): the copy opens the same location with an empty cache.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let r = &self.reopen;
        let kwargs = PyDict::new(py);
        // A copy never deletes or refuses what is there: "w" and "w-" reopen as "a".
        kwargs.set_item("mode", r.mode.reopened().name())?;
        kwargs.set_item("cache_bytes", r.cache_bytes)?;
        kwargs.set_item("options", &r.options)?;
        kwargs.set_item("timeout", r.timeout)?;
        kwargs.set_item("retries", r.retries)?;
        kwargs.set_item("concurrency", r.concurrency)?;
        kwargs.set_item("durable", r.durable)?;
        kwargs.set_item("conditional_writes", &r.conditional_writes)?;
        // A bound classmethod pickles as (getattr, (Store, "_reopen")): nothing above the
        // binding is needed to unpickle.
        let reopen = py.get_type::<Self>().getattr("_reopen")?;
        let args = PyTuple::new(
            py,
            [
                r.location.clone().into_pyobject(py)?.into_any(),
                kwargs.into_any(),
            ],
        )?;
        PyTuple::new(py, [reopen, args.into_any()])
    }

    /// Unpickling: the store opened again from its constructor's arguments.
    #[classmethod]
    fn _reopen<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        location: &Bound<'py, PyAny>,
        kwargs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyAny>> {
        cls.call((location,), Some(kwargs))
    }

    /// Unpickling an array: the array at `path` opened again in this (unpickled) store.
    fn _reopen_array(
        slf: &Bound<'_, Self>,
        path: &str,
        metadata: Option<&Bound<'_, PyAny>>,
        write_empty_chunks: bool,
    ) -> PyResult<Array> {
        Self::open_array(slf, path, metadata, write_empty_chunks)
    }

    /// A store over the same location as an `obstore` store object (S3Store, GCSStore,
    /// AzureStore, HTTPStore, LocalStore), with its configuration.
    #[staticmethod]
    #[pyo3(signature = (store, **kwargs))]
    fn from_obstore<'py>(
        py: Python<'py>,
        store: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (url, options) = crate::obstore::url_and_options(store)?;
        let kwargs = kwargs
            .cloned()
            .unwrap_or_else(|| pyo3::types::PyDict::new(py));
        kwargs.set_item("options", options)?;
        let cls = py.get_type::<Store>();
        cls.call((url,), Some(&kwargs))
    }

    /// Requests made so far, for object stores: gets, heads, lists and bytes received.
    fn request_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if let Some(r) = self.store.remote() {
            use std::sync::atomic::Ordering::Relaxed;
            d.set_item("gets", r.counts.gets.load(Relaxed))?;
            d.set_item("puts", r.counts.puts.load(Relaxed))?;
            d.set_item("deletes", r.counts.deletes.load(Relaxed))?;
            d.set_item("heads", r.counts.heads.load(Relaxed))?;
            d.set_item("lists", r.counts.lists.load(Relaxed))?;
            d.set_item("bytes", r.counts.bytes.load(Relaxed))?;
        }
        Ok(d)
    }

    /// `await store.read_async(path, selection)`: `read` on asyncio's default executor, so
    /// the event loop keeps running while the data is fetched and decoded; cancelling the
    /// awaiting task stops the read at its next chunk.
    #[pyo3(signature = (path, selection = None))]
    fn read_async(
        slf: &Bound<'_, Self>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::async_call::AsyncCall> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        let args = PyTuple::new(
            py,
            [pyo3::types::PyString::new(py, path).into_any(), selection],
        )?;
        Ok(crate::async_call::AsyncCall::new(
            slf.getattr("read")?,
            args,
        ))
    }

    fn __repr__(&self) -> String {
        format!("<zarrpipe.Store {:?}>", self.store.description())
    }

    /// Opens the array at `path` (`""` is an array at the store root), reading its metadata,
    /// or taking it from `metadata` (the JSON of zarr.json / .zarray, as str or dict).
    #[pyo3(signature = (path = "", *, metadata = None, write_empty_chunks = false))]
    pub(crate) fn open_array(
        slf: &Bound<'_, Self>,
        path: &str,
        metadata: Option<&Bound<'_, PyAny>>,
        write_empty_chunks: bool,
    ) -> PyResult<Array> {
        let py = slf.py();
        let this = slf.get();
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
            this.reader_with(py, path, true, json.clone())?,
            this.cache.clone(),
            write_empty_chunks,
            Some((slf.clone().into_any().unbind(), json)),
        ))
    }

    /// Whether writes are refused (`mode="r"`, or a store that cannot take writes).
    #[getter]
    fn read_only(&self) -> bool {
        self.store.is_read_only()
    }

    /// Whether local writes are forced to disk before they count as done (`durable=True`).
    #[getter]
    fn durable(&self) -> bool {
        self.store.is_durable()
    }

    /// Creates an array at `path` and returns it, writing the metadata zarr-python writes
    /// for the same arguments. `chunks` are the read chunks (inner chunks when `shards` is
    /// given); `compressors` and `filters` are v3 codec dicts
    /// (`{"name": "zstd", "configuration": {"level": 3}}`), numcodecs configs
    /// (`{"id": "zstd", "level": 3}`) or zarr-python / numcodecs codec objects, `"auto"`
    /// being zarr-python's default (zstd level 0) and None none. An existing array or
    /// group at `path` is FileExistsError unless `overwrite`.
    #[pyo3(signature = (path, *, shape, dtype, chunks = None, shards = None, compressors = CodecsArg::Auto, filters = CodecsArg::Auto, fill_value = None, attributes = None, dimension_names = None, zarr_format = 3, write_empty_chunks = false, overwrite = false))]
    #[pyo3(
        text_signature = "($self, path, *, shape, dtype, chunks=None, shards=None, compressors='auto', filters='auto', fill_value=None, attributes=None, dimension_names=None, zarr_format=3, write_empty_chunks=False, overwrite=False)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn create_array<'py>(
        slf: &Bound<'py, Self>,
        path: &str,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        chunks: Option<&Bound<'py, PyAny>>,
        shards: Option<&Bound<'py, PyAny>>,
        compressors: CodecsArg<'py>,
        filters: CodecsArg<'py>,
        fill_value: Option<&Bound<'_, PyAny>>,
        attributes: Option<&Bound<'_, PyAny>>,
        dimension_names: Option<&Bound<'_, PyAny>>,
        zarr_format: u8,
        write_empty_chunks: bool,
        overwrite: bool,
    ) -> BindResult<Array> {
        let py = slf.py();
        let this = slf.get();
        let compressors = compressors.or_auto(py);
        let filters = filters.or_auto(py);
        let spec_json = crate::create::array_spec_json(&crate::create::Args {
            shape,
            dtype,
            chunks,
            shards,
            compressors: &compressors,
            filters: &filters,
            fill_value,
            attributes,
            dimension_names,
            zarr_format,
        })?;
        let spec = zarrpipe_codecs::array::create::ArraySpec::from_json(&spec_json)?;
        let store = this.store.clone();
        let owned_path = path.to_owned();
        let array = run(py, move || {
            zarrpipe_codecs::array::create::create_array(&store, &owned_path, &spec, overwrite)
        })?;
        Ok(Array::new(
            this.remember(array),
            this.cache.clone(),
            write_empty_chunks,
            Some((slf.clone().into_any().unbind(), None)),
        ))
    }

    /// Creates a group at `path` (and any missing parent groups) and returns it; an
    /// existing group is kept, its attributes replaced when `attributes` is given.
    #[pyo3(signature = (path = "", attributes = None, *, zarr_format = 3))]
    pub(crate) fn create_group(
        slf: &Bound<'_, Self>,
        path: &str,
        attributes: Option<&Bound<'_, PyAny>>,
        zarr_format: u8,
    ) -> BindResult<Group> {
        group::create(slf, path, attributes, zarr_format)
    }

    /// Opens the group at `path` (`""`: the root group). `use_consolidated`: None reads
    /// its consolidated metadata when it has some (as zarr-python does), True requires
    /// it, False ignores it (members are then listed from the store).
    #[pyo3(signature = (path = "", *, use_consolidated = None))]
    pub(crate) fn open_group(
        slf: &Bound<'_, Self>,
        path: &str,
        use_consolidated: Option<bool>,
    ) -> BindResult<Group> {
        group::open(slf, path, use_consolidated)
    }

    /// Writes the consolidated metadata of the group at `path` (every array and group
    /// below it, as `zarr.consolidate_metadata` writes it) and returns the group, opened
    /// with it.
    #[pyo3(signature = (path = ""))]
    fn consolidate(slf: &Bound<'_, Self>, path: &str) -> BindResult<Group> {
        group::consolidate(slf, path)
    }

    /// The mode the store was opened with.
    #[getter]
    fn mode(&self) -> &'static str {
        self.reopen.mode.name()
    }

    /// Writes `value` into a selection of the array at `path`, broadcasting like NumPy.
    #[pyo3(signature = (path, selection, value))]
    fn write(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        self.array(py, path, false)?
            .write_selection(py, selection, value)
    }

    /// Decodes a selection of the array at `path` straight into `out` (see `Array.read_into`).
    #[pyo3(signature = (path, selection, out))]
    fn read_into(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.array(py, path, false)?
            .read_selection_into(py, selection, out)
    }

    /// Reads a selection of the array at `path` into a fresh Tensor.
    #[pyo3(signature = (path, selection = None))]
    fn read(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.array(py, path, false)?.read_selection(py, selection)
    }

    /// Reads whole chunks of the array at `path`, one Tensor each, decoded in parallel.
    fn read_chunks(
        &self,
        py: Python<'_>,
        path: &str,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyAny>>> {
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
pub fn set_num_threads(n: usize) -> BindResult<()> {
    Ok(zarrpipe_codecs::process::pool::set_num_threads(n)?)
}

/// How many threads decode.
#[pyfunction]
pub fn get_num_threads() -> usize {
    zarrpipe_codecs::process::pool::num_threads()
}

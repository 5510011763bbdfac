//! `zarrpipe.Store`: a Zarr store, the arrays and groups opened in it and its chunk cache;
//! `zarrpipe.Group` (`group`) and `zarrpipe.open` (`open`). Where a location is and what each
//! of zarr-python's modes does are the engine's (`store/open_mode.rs`).

mod data;
pub mod group;
mod nodes;
pub mod open;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::read::cache::ChunkCache;
use zarrpipe_codecs::store::open_mode::Mode;
use zarrpipe_codecs::store::remote::RemoteSettings;
use zarrpipe_codecs::store::{key_prefix, node_path, Store as EngineStore};

use crate::array::Array;
use crate::errors::BindResult;

use crate::runtime::run;

/// A Zarr store (v2 or v3): a local directory or an object store.
///
/// A Store opens arrays (`open_array`, `create_array`), reads and writes them by path
/// (`read`, `write`, ...), and holds the optional decoded-chunk cache its arrays share.
///
/// A Store pickles as the arguments it was opened with (a local path made absolute;
/// `options`, and so any credentials given there, included): unpickling opens the same
/// location again, with an empty cache. That is how stores reach DataLoader workers,
/// forked or spawned.
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

    /// A Store over the location an `obstore` store object points at.
    ///
    /// obstore and zarrpipe each link their own object_store crate, so the configuration is
    /// shared, not the connection.
    ///
    /// Args:
    ///     store: An obstore `S3Store`, `GCSStore`, `AzureStore`, `HTTPStore` or
    ///         `LocalStore`; its bucket, prefix, config and client options are used.
    ///     **kwargs: Other `Store` arguments (`mode`, `cache_bytes`, `timeout`, ...).
    ///
    /// Returns:
    ///     A Store over the same location.
    ///
    /// Raises:
    ///     TypeError: Another kind of obstore store.
    ///     ValueError: The store's config has no bucket (container).
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

    /// What the store has asked its object store for so far.
    ///
    /// Returns:
    ///     For object stores, counts of `gets`, `puts`, `deletes`, `heads` and `lists`,
    ///     and the `bytes` received; empty for local stores.
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

    fn __repr__(&self) -> String {
        format!("<zarrpipe.Store {:?}>", self.store.description())
    }

    /// Whether writes are refused (`mode="r"`, and http(s):// stores by default).
    #[getter]
    fn read_only(&self) -> bool {
        self.store.is_read_only()
    }

    /// Whether local writes are forced to disk before they count as done.
    #[getter]
    fn durable(&self) -> bool {
        self.store.is_durable()
    }

    /// The mode the store was opened with.
    #[getter]
    fn mode(&self) -> &'static str {
        self.reopen.mode.name()
    }

    /// The chunk cache's counters.
    ///
    /// Returns:
    ///     `hits`, `misses`, `entries`, `bytes` (held now) and `capacity` (`cache_bytes`);
    ///     all 0 without a cache.
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

    /// Empties the chunk cache (Tensors it served keep their memory).
    fn clear_cache(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }
}

/// Sets how many threads decode and encode (one pool per process).
///
/// The default is the CPU count, or `ZARRPIPE_NUM_THREADS` when set. A process forked after
/// reading builds a fresh pool.
///
/// Args:
///     n: The number of threads, at least 1.
///
/// Raises:
///     ValueError: `n` is 0.
#[pyfunction]
pub fn set_num_threads(n: usize) -> BindResult<()> {
    Ok(zarrpipe_codecs::process::pool::set_num_threads(n)?)
}

/// How many threads decode and encode.
///
/// Returns:
///     The size of the pool.
#[pyfunction]
pub fn get_num_threads() -> usize {
    zarrpipe_codecs::process::pool::num_threads()
}

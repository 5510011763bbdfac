//! `zarrpipe.open`: the array or group at a path, with zarr-python's modes. Opening never
//! creates anything: mode "a" on a missing path gives a group that its first write creates;
//! "w" and "w-" create (an array when `shape` is given, else a group), as zarr.open does.

use pyo3::exceptions::{PyFileExistsError, PyFileNotFoundError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrpipe_codecs::hierarchy::listing::NodeKind;
use zarrpipe_codecs::hierarchy::node::read_node;
use zarrpipe_codecs::store::{key_prefix, node_path};

use super::group::Group;
use super::Store;
use crate::errors::BindResult;
use crate::runtime::run;
use zarrpipe_codecs::store::open_mode::Mode;

/// `Store(...)`'s keyword arguments; the other keywords of `open` create an array.
const STORE_ARGS: &[&str] = &[
    "cache_bytes",
    "options",
    "timeout",
    "retries",
    "concurrency",
    "durable",
    "conditional_writes",
];

/// Opens the array or group at `path`, as `zarr.open` does.
///
/// Opening never creates anything on disk or in a bucket in modes "r", "r+" and "a".
///
/// Args:
///     store: A `Store`, a local path or an object store URL.
///     mode: `"r"` and `"r+"`: what is at `path` must exist (read-only / read-write);
///         `"a"`: a missing path gives an empty `Group` that its first write (an attribute,
///         a member) creates; `"w"`: deletes what is at `path`, then creates; `"w-"`:
///         FileExistsError if anything is at `path`, then creates.
///     path: The node's path in the store (`""`: the root).
///     zarr_format: The format of what is created (default 3).
///     use_consolidated: As in `Store.open_group`.
///     **kwargs: `Store`'s keyword arguments (`options`, `cache_bytes`, `timeout`, ...)
///         when `store` is a location; `shape`, `dtype` and `Store.create_array`'s other
///         arguments to create an array where `"w"`, `"w-"` or `"a"` create.
///
/// Returns:
///     An `Array` or a `Group`.
///
/// Raises:
///     FileNotFoundError: Nothing at `path` with `mode="r"` or `"r+"`.
///     FileExistsError: Something at `path` with `mode="w-"`.
///     TypeError: Array arguments without `shape`.
#[pyfunction]
#[pyo3(signature = (store, *, mode = "a", path = "", zarr_format = None, use_consolidated = None, **kwargs))]
pub fn open<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyAny>,
    mode: &str,
    path: &str,
    zarr_format: Option<u8>,
    use_consolidated: Option<bool>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> BindResult<Bound<'py, PyAny>> {
    let mode = Mode::parse(mode)?;
    let node = node_path(path)?;
    let at_root = node == "/";
    let store_kwargs = PyDict::new(py);
    let array_kwargs = PyDict::new(py);
    if let Some(k) = kwargs {
        for (key, value) in k.iter() {
            let name: String = key.extract()?;
            let into = if STORE_ARGS.contains(&name.as_str()) {
                &store_kwargs
            } else {
                &array_kwargs
            };
            into.set_item(name, value)?;
        }
    }
    // A Store given as such was opened with its own mode: "w" and "w-" apply to the node.
    let given_store = store.is_instance_of::<Store>();
    let store: Bound<'py, Store> = match store.cast::<Store>() {
        Ok(s) => {
            if !store_kwargs.is_empty() {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "Store keyword arguments (options, cache_bytes...) apply when the store is \
                     given as a path or URL, not as a Store",
                )
                .into());
            }
            s.clone()
        }
        Err(_) => {
            // The store itself is opened with the mode when the node is its root; below
            // the root, "w" and "w-" apply to the node only.
            let store_mode = match mode {
                Mode::Read | Mode::ReadWrite | Mode::Append => mode,
                _ if at_root => mode,
                _ => Mode::Append,
            };
            store_kwargs.set_item("mode", store_mode.name())?;
            py.get_type::<Store>()
                .call((store,), Some(&store_kwargs))?
                .cast_into::<Store>()?
        }
    };
    let engine = store.get().engine().clone();
    if given_store || !at_root {
        match mode {
            Mode::Write => {
                let e = engine.clone();
                let prefix = key_prefix(&node);
                run(py, move || e.delete_prefix(&prefix))?;
            }
            Mode::WriteNew => {
                let e = engine.clone();
                let prefix = key_prefix(&node);
                if !run(py, move || e.is_empty_under(&prefix))? {
                    return Err(PyFileExistsError::new_err(format!(
                        "something is already at {path:?} in {} (mode=\"w-\")",
                        engine.description()
                    ))
                    .into());
                }
            }
            _ => {}
        }
    }
    let e = engine.clone();
    let at = node.clone();
    let found = run(py, move || {
        read_node(&e, &at, use_consolidated != Some(false))
    })?;
    let create_array = array_kwargs.contains("shape")?;
    if !create_array && !array_kwargs.is_empty() {
        let names: Vec<String> = array_kwargs.keys().extract()?;
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "open() got unexpected keyword arguments {names:?} (array arguments apply with shape=..., when open creates an array)"
        )).into());
    }
    match found {
        Some(n) if n.kind == NodeKind::Array => Ok(Store::open_array(&store, path, None, false)?
            .into_pyobject(py)?
            .into_any()),
        Some(n) => Ok(Py::new(py, Group::from_node(&store, node, n))?
            .into_bound(py)
            .into_any()),
        None if mode.must_exist() => Err(PyFileNotFoundError::new_err(format!(
            "no array or group at {path:?} in {} (mode={:?} opens what exists)",
            engine.description(),
            mode.name()
        ))
        .into()),
        None if create_array => {
            if let Some(f) = zarr_format {
                array_kwargs.set_item("zarr_format", f)?;
            }
            Ok(store.call_method("create_array", (path,), Some(&array_kwargs))?)
        }
        None if mode == Mode::Append => Ok(Py::new(
            py,
            Group::unstored(&store, node, zarr_format.unwrap_or(3)),
        )?
        .into_bound(py)
        .into_any()),
        None => Ok(Py::new(
            py,
            Store::create_group(&store, path, None, zarr_format.unwrap_or(3))?,
        )?
        .into_bound(py)
        .into_any()),
    }
}

//! `Array.attrs` and `Group.attrs`: a mutable mapping over a node's attributes, as
//! zarr-python's `Attributes`. Reads come from the metadata the node was opened with (and
//! this node's own changes since); every change is written at once by the engine
//! (`zarrpipe_codecs::hierarchy::attributes`), as one atomic read-modify-write of the
//! metadata document, so concurrent writers of different attributes all keep theirs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::{Map, Value};
use zarrpipe_codecs::hierarchy::attributes::{change, Change};
use zarrpipe_codecs::store::Store as EngineStore;

use crate::runtime::run;

/// The attributes of one open node, shared by every `attrs` object handed out for it.
pub struct AttrState {
    store: Arc<EngineStore>,
    node: String,
    zarr_format: u8,
    /// A group opened (mode "a") before it was stored: the first change creates it.
    unstored_group: AtomicBool,
    map: Mutex<Map<String, Value>>,
}

impl AttrState {
    pub fn new(
        store: Arc<EngineStore>,
        node: String,
        zarr_format: u8,
        attributes: Map<String, Value>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            node,
            zarr_format,
            unstored_group: AtomicBool::new(false),
            map: Mutex::new(attributes),
        })
    }

    /// The attributes of a group not stored yet (created by the first change).
    pub fn unstored_group(store: Arc<EngineStore>, node: String, zarr_format: u8) -> Arc<Self> {
        let state = Self::new(store, node, zarr_format, Map::new());
        state.unstored_group.store(true, Ordering::Release);
        state
    }

    /// From the JSON text of an attributes object (an engine array's).
    pub fn from_json(
        store: Arc<EngineStore>,
        node: String,
        zarr_format: u8,
        json: &str,
    ) -> Arc<Self> {
        let map = match serde_json::from_str(json) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        Self::new(store, node, zarr_format, map)
    }

    /// Marks the group stored (something created it).
    pub fn stored(&self) {
        self.unstored_group.store(false, Ordering::Release);
    }

    pub fn is_unstored_group(&self) -> bool {
        self.unstored_group.load(Ordering::Acquire)
    }

    fn snapshot(&self) -> std::sync::MutexGuard<'_, Map<String, Value>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `what` and keeps the attributes as stored now.
    fn apply(&self, py: Python<'_>, what: Change) -> PyResult<()> {
        let store = self.store.clone();
        let node = self.node.clone();
        let format = self.zarr_format;
        let unstored = self.is_unstored_group();
        let now = run(py, move || {
            if unstored {
                // Created first (a group another writer made meanwhile keeps its
                // attributes), then changed as any stored node is.
                zarrpipe_codecs::array::create::create_group(&store, &node, None, format)?;
            }
            change(&store, &node, format, &what)
        })?;
        self.stored();
        *self.snapshot() = now;
        Ok(())
    }
}

/// A Python value as JSON, as zarr-python stores attributes (NumPy scalars and arrays as
/// their Python values). NaN and infinities are refused: JSON has none.
fn to_json(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyMapping, PySequence, PyString};
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(i.into());
        }
        return value.extract::<u64>().map(Value::from).map_err(|_| {
            PyValueError::new_err(format!("attribute value {value} does not fit in 64 bits"))
        });
    }
    if value.is_instance_of::<PyFloat>() {
        let f: f64 = value.extract()?;
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| {
                PyValueError::new_err(format!("attribute values must be JSON, which has no {f}"))
            });
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(m) = value.cast::<PyMapping>() {
        let mut out = Map::new();
        for item in m.items()?.iter() {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let Ok(k) = k.extract::<String>() else {
                return Err(PyTypeError::new_err(format!(
                    "attribute keys must be str, not {}",
                    k.get_type().name()?
                )));
            };
            out.insert(k, to_json(&v)?);
        }
        return Ok(Value::Object(out));
    }
    if value.hasattr("tolist")? && !value.is_instance_of::<pyo3::types::PyBytes>() {
        return to_json(&value.call_method0("tolist")?);
    }
    if let Ok(seq) = value.cast::<PySequence>() {
        if !value.is_instance_of::<pyo3::types::PyBytes>() {
            let items: Vec<Value> = seq
                .try_iter()?
                .map(|i| to_json(&i?))
                .collect::<PyResult<_>>()?;
            return Ok(Value::Array(items));
        }
    }
    Err(PyTypeError::new_err(format!(
        "attribute values must be JSON (dict, list, str, int, float, bool, None), not {}",
        value.get_type().name()?
    )))
}

fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .call_method1("loads", (value.to_string(),))
}

/// A Python mapping as a JSON object of attributes (see [`to_json`]).
pub(crate) fn to_object(value: &Bound<'_, PyAny>) -> PyResult<Map<String, Value>> {
    match to_json(value)? {
        Value::Object(m) => Ok(m),
        _ => Err(PyTypeError::new_err(
            "attributes must be a mapping of str keys",
        )),
    }
}

/// The user attributes of an array or a group, as zarr-python's `Attributes`.
///
/// Reads come from the metadata read when the node was opened (and this node's changes
/// since). Every change (`attrs[k] = v`, `del attrs[k]`, `update`, `put`, `pop`, `clear`)
/// is written at once, as one atomic read-modify-write of the node's metadata document
/// (v3 `zarr.json`, v2 `.zattrs`), under the same protection as chunk writes: two writers
/// changing different attributes both keep theirs. Values must be JSON: dicts with str
/// keys, lists, str, int, float (not NaN or infinite), bool, None; NumPy values are stored
/// as their Python values. Registered as a `collections.abc.MutableMapping`.
#[pyclass(frozen, mapping, module = "zarrpipe", name = "Attributes")]
pub struct Attributes {
    state: Arc<AttrState>,
}

impl Attributes {
    pub fn new(state: Arc<AttrState>) -> Self {
        Self { state }
    }
}

#[pymethods]
impl Attributes {
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        let map = self.state.snapshot();
        match map.get(key) {
            Some(v) => to_py(py, v),
            None => Err(PyKeyError::new_err(key.to_owned())),
        }
    }

    /// Sets one attribute and writes it.
    fn __setitem__(&self, py: Python<'_>, key: String, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = to_json(value)?;
        self.state.apply(py, Change::Set(key, value))
    }

    /// Removes one attribute and writes the change.
    fn __delitem__(&self, py: Python<'_>, key: String) -> PyResult<()> {
        if !self.state.snapshot().contains_key(&key) {
            return Err(PyKeyError::new_err(key));
        }
        self.state.apply(py, Change::Remove(key))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> bool {
        key.extract::<String>()
            .is_ok_and(|k| self.state.snapshot().contains_key(&k))
    }

    fn __len__(&self) -> usize {
        self.state.snapshot().len()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.keys(py)?.into_any().try_iter()?.into_any())
    }

    /// The attribute names.
    ///
    /// Returns:
    ///     The names, in stored order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.state.snapshot().keys())
    }

    /// The attribute values.
    ///
    /// Returns:
    ///     The values, in stored order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<Bound<'py, PyAny>> = self
            .state
            .snapshot()
            .values()
            .map(|v| to_py(py, v))
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// The attributes as pairs.
    ///
    /// Returns:
    ///     (name, value) pairs, in stored order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<(String, Bound<'py, PyAny>)> = self
            .state
            .snapshot()
            .iter()
            .map(|(k, v)| Ok((k.clone(), to_py(py, v)?)))
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// The value of `key`, or `default`.
    ///
    /// Args:
    ///     key: The attribute's name.
    ///     default: What a missing attribute gives.
    ///
    /// Returns:
    ///     The value, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.state.snapshot().get(key) {
            Some(v) => to_py(py, v),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// Sets every attribute given, keeping the others, in one write.
    ///
    /// Args:
    ///     other: A mapping of attributes.
    ///     **kwargs: More attributes.
    #[pyo3(signature = (other = None, **kwargs))]
    fn update(
        &self,
        py: Python<'_>,
        other: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let all = PyDict::new(py);
        if let Some(o) = other {
            all.call_method1("update", (o,))?;
        }
        if let Some(k) = kwargs {
            all.update(k.as_mapping())?;
        }
        let map = to_object(all.as_any())?;
        self.state.apply(py, Change::Update(map))
    }

    /// Replaces all attributes with `d`, in one write.
    ///
    /// Args:
    ///     d: The new attributes.
    fn put(&self, py: Python<'_>, d: &Bound<'_, PyAny>) -> PyResult<()> {
        let all = PyDict::new(py);
        all.call_method1("update", (d,))?;
        let map = to_object(all.as_any())?;
        self.state.apply(py, Change::Replace(map))
    }

    /// Removes every attribute, in one write.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.state.apply(py, Change::Replace(Map::new()))
    }

    /// Removes `key` (written at once) and returns its value.
    ///
    /// Args:
    ///     key: The attribute's name.
    ///     *default: What to return when `key` is missing (else KeyError).
    ///
    /// Returns:
    ///     The removed value, or the default.
    #[pyo3(signature = (key, *default))]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: String,
        default: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let current = self.state.snapshot().get(&key).cloned();
        match current {
            Some(v) => {
                self.state.apply(py, Change::Remove(key))?;
                to_py(py, &v)
            }
            None if !default.is_empty() => default.get_item(0),
            None => Err(PyKeyError::new_err(key)),
        }
    }

    /// The value of `key`, set to `default` (and written) first if it is missing.
    ///
    /// Args:
    ///     key: The attribute's name.
    ///     default: The value to set when missing.
    ///
    /// Returns:
    ///     The value.
    #[pyo3(signature = (key, default = None))]
    fn setdefault<'py>(
        &self,
        py: Python<'py>,
        key: String,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(v) = self.state.snapshot().get(&key).cloned() {
            return to_py(py, &v);
        }
        let default = default.unwrap_or_else(|| py.None().into_bound(py));
        self.__setitem__(py, key, &default)?;
        Ok(default)
    }

    /// The attributes as a plain dict.
    ///
    /// Returns:
    ///     A new dict (changing it changes nothing stored).
    fn asdict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &Value::Object(self.state.snapshot().clone()))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(o) = other.cast::<Self>() {
            return Ok(*self.state.snapshot() == *o.get().state.snapshot());
        }
        self.asdict(py)?.eq(other)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.asdict(py)?.repr()?.to_string())
    }
}

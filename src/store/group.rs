//! `zarrpipe.Group`: a group of a store, with zarr-python's `Group` names, and the store's
//! calls that open, create and consolidate groups. Its members come
//! from its consolidated metadata when it was opened with some (no LIST, and the members it
//! lists, as zarr-python shows), else from the store (`hierarchy::members`).

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyFileNotFoundError, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use zarrpipe_codecs::hierarchy::consolidated::{self, Consolidated};
use zarrpipe_codecs::hierarchy::listing::NodeKind;
use zarrpipe_codecs::hierarchy::members;
use zarrpipe_codecs::hierarchy::node::{read_node, Node};
use zarrpipe_codecs::store::node_path;

use super::Store;
use crate::attributes::{to_object, AttrState, Attributes};
use crate::errors::BindResult;
use crate::runtime::run;

/// A Zarr group (v2 or v3), with zarr-python's `Group` names.
///
/// Get one from `Store.open_group`, `Store.create_group` or `zarrpipe.open`. Members are
/// opened on access: `group["a/b"]` is an `Array` or a `Group`. A group opened with
/// consolidated metadata lists the members that metadata lists (as zarr-python does),
/// without listing the store; once it creates a member, it lists the store. A Group
/// pickles as its store and path.
#[pyclass(frozen, module = "zarrpipe", name = "Group")]
pub struct Group {
    store: Py<Store>,
    /// The node path (`"/"`, `"/a/b"`).
    node: String,
    zarr_format: u8,
    attrs: Arc<AttrState>,
    /// The members as consolidated metadata lists them; dropped when this group creates a
    /// member, so that it shows what it created.
    consolidated: Mutex<Option<Arc<Consolidated>>>,
}

impl Group {
    /// A group from its stored metadata.
    pub fn from_node(store: &Bound<'_, Store>, node_path: String, node: Node) -> Self {
        Self::with(
            store,
            node_path,
            node.zarr_format,
            node.attributes,
            node.consolidated.map(Arc::new),
        )
    }

    fn with(
        store: &Bound<'_, Store>,
        node_path: String,
        zarr_format: u8,
        attributes: serde_json::Map<String, serde_json::Value>,
        consolidated: Option<Arc<Consolidated>>,
    ) -> Self {
        let engine = store.get().engine().clone();
        Self {
            store: store.clone().unbind(),
            attrs: AttrState::new(engine, node_path.clone(), zarr_format, attributes),
            node: node_path,
            zarr_format,
            consolidated: Mutex::new(consolidated),
        }
    }

    /// A group opened with mode "a" where nothing is stored yet: its first write (a member,
    /// an attribute) creates it.
    pub fn unstored(store: &Bound<'_, Store>, node_path: String, zarr_format: u8) -> Self {
        let engine = store.get().engine().clone();
        Self {
            attrs: AttrState::unstored_group(engine, node_path.clone(), zarr_format),
            ..Self::with(store, node_path, zarr_format, serde_json::Map::new(), None)
        }
    }

    fn consolidated(&self) -> Option<Arc<Consolidated>> {
        self.consolidated
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The store path of the member `name` (`"a"` or `"a/b"`), checked.
    fn member_path(&self, name: &str) -> BindResult<String> {
        let rel = node_path(name)?;
        if rel == "/" {
            return Err(PyKeyError::new_err("a member name must not be empty").into());
        }
        Ok(format!("{}{}", self.node.trim_end_matches('/'), rel))
    }

    /// The member at `rel` (a path below this group) described by `node`, opened: arrays
    /// from the metadata already read (no second GET).
    fn open_node(&self, py: Python<'_>, rel: &str, node: &Node) -> PyResult<Py<PyAny>> {
        let path = self.member_path(rel)?;
        let store = self.store.bind(py);
        Ok(match node.kind {
            NodeKind::Array => {
                let json = PyString::new(py, &node.document.to_string());
                Store::open_array(store, &path, Some(json.as_any()), false)?
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
            NodeKind::Group => {
                // Below a consolidated group, its consolidated metadata is the member's.
                let consolidated = match self.consolidated() {
                    Some(c) => Some(Arc::new(c.under(rel.trim_matches('/')))),
                    None => node.consolidated.clone().map(Arc::new),
                };
                let g = Self::with(
                    store,
                    path,
                    node.zarr_format,
                    node.attributes.clone(),
                    consolidated,
                );
                Py::new(py, g)?.into_any()
            }
        })
    }

    /// The member at `name`, opened, or None when there is none.
    fn open_member(&self, py: Python<'_>, name: &str) -> PyResult<Option<Py<PyAny>>> {
        let path = self.member_path(name)?;
        let node = match self.consolidated() {
            Some(c) => c.get(name.trim_matches('/')).cloned(),
            None => {
                let engine = self.store.bind(py).get().engine().clone();
                run(py, move || read_node(&engine, &path, true))?
            }
        };
        node.map(|n| self.open_node(py, name, &n)).transpose()
    }

    /// The direct children, with their metadata.
    fn child_nodes(&self, py: Python<'_>) -> BindResult<Vec<(String, Node)>> {
        if let Some(c) = self.consolidated() {
            return Ok(c
                .members
                .iter()
                .filter(|(p, _)| !p.contains('/'))
                .map(|(p, n)| (p.clone(), n.clone()))
                .collect());
        }
        if self.attrs.is_unstored_group() {
            return Ok(Vec::new());
        }
        let engine = self.store.bind(py).get().engine().clone();
        let node = self.node.clone();
        run(py, move || members::children(&engine, &node))
    }

    /// The direct children, as (name, kind).
    fn children(&self, py: Python<'_>) -> PyResult<Vec<(String, NodeKind)>> {
        Ok(self
            .child_nodes(py)?
            .into_iter()
            .map(|(name, n)| (name, n.kind))
            .collect())
    }

    /// Every member to `max_depth` levels below this group (None: all), by relative path.
    fn walk(
        &self,
        py: Python<'_>,
        max_depth: Option<usize>,
        base: &str,
        out: &mut Vec<(String, Py<PyAny>)>,
    ) -> PyResult<()> {
        for (name, node) in self.child_nodes(py)? {
            let member = self.open_node(py, &name, &node)?;
            let rel = if base.is_empty() {
                name.clone()
            } else {
                format!("{base}/{name}")
            };
            out.push((rel.clone(), member.clone_ref(py)));
            if max_depth != Some(0) {
                if let Ok(g) = member.bind(py).cast::<Self>() {
                    g.get().walk(py, max_depth.map(|d| d - 1), &rel, out)?;
                }
            }
        }
        Ok(())
    }

    /// Lines of `tree()` for this group's members, indented by `prefix`.
    fn tree_lines(
        &self,
        py: Python<'_>,
        prefix: &str,
        level: Option<usize>,
        out: &mut Vec<String>,
    ) -> PyResult<()> {
        let children = self.child_nodes(py)?;
        let n = children.len();
        for (i, (name, node)) in children.into_iter().enumerate() {
            let last = i + 1 == n;
            let member = self.open_node(py, &name, &node)?;
            let member = member.bind(py);
            let (branch, next) = if last {
                ("└── ", "    ")
            } else {
                ("├── ", "│   ")
            };
            if let Ok(g) = member.cast::<Self>() {
                out.push(format!("{prefix}{branch}{name}"));
                if level != Some(1) {
                    g.get().tree_lines(
                        py,
                        &format!("{prefix}{next}"),
                        level.map(|l| l - 1),
                        out,
                    )?;
                }
            } else {
                let shape: Vec<u64> = member.getattr("shape")?.extract()?;
                let dtype = member.getattr("dtype")?.str()?.to_string();
                let shape = match shape.as_slice() {
                    [one] => format!("({one},)"),
                    s => format!(
                        "({})",
                        s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                    ),
                };
                out.push(format!("{prefix}{branch}{name} {shape} {dtype}"));
            }
        }
        Ok(())
    }

    fn forget_consolidated(&self) {
        *self
            .consolidated
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[pymethods]
impl Group {
    /// The group's path in its store (`""` for the root).
    #[getter]
    fn path(&self) -> &str {
        self.node.trim_matches('/')
    }

    /// `"/"` followed by the path.
    #[getter]
    fn name(&self) -> String {
        format!("/{}", self.path())
    }

    /// The last component of the path.
    #[getter]
    fn basename(&self) -> &str {
        self.path().rsplit('/').next().unwrap_or("")
    }

    /// The store the group is in.
    #[getter]
    fn store(&self, py: Python<'_>) -> Py<Store> {
        self.store.clone_ref(py)
    }

    /// The group's Zarr format.
    #[getter]
    fn zarr_format(&self) -> u8 {
        self.zarr_format
    }

    /// Whether its store refuses writes.
    #[getter]
    fn read_only(&self, py: Python<'_>) -> bool {
        self.store.bind(py).get().engine().is_read_only()
    }

    /// The group's user attributes (see `Attributes`).
    #[getter]
    fn attrs(&self) -> Attributes {
        Attributes::new(self.attrs.clone())
    }

    /// The member at `key` (a name or an `"a/b"` path): an Array or a Group.
    fn __getitem__(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        self.open_member(py, key)?
            .ok_or_else(|| PyKeyError::new_err(key.to_owned()))
    }

    /// A member, or `default`.
    ///
    /// Args:
    ///     key: A member's name or path.
    ///     default: What a missing member gives.
    ///
    /// Returns:
    ///     The member, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        Ok(self
            .open_member(py, key)?
            .or(default)
            .unwrap_or_else(|| py.None()))
    }

    fn __contains__(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        if let Some(c) = self.consolidated() {
            return Ok(c.get(key).is_some());
        }
        let path = self.member_path(key)?;
        let engine = self.store.bind(py).get().engine().clone();
        Ok(run(py, move || read_node(&engine, &path, false))?.is_some())
    }

    /// The names of the direct members.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.keys(py)?.into_pyobject(py)?.try_iter()?.into_any())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.children(py)?.len())
    }

    /// The names of the direct members.
    ///
    /// Returns:
    ///     The names, sorted.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.children(py)?.into_iter().map(|(n, _)| n).collect())
    }

    /// The members, opened.
    ///
    /// Args:
    ///     max_depth: How many levels below the direct members to include (0: the direct
    ///         members only; None: the whole sub-hierarchy).
    ///
    /// Returns:
    ///     (name, member) pairs, deeper members named by their path relative to this
    ///     group.
    #[pyo3(signature = (max_depth = Some(0)), text_signature = "($self, max_depth=0)")]
    fn members(
        &self,
        py: Python<'_>,
        max_depth: Option<usize>,
    ) -> PyResult<Vec<(String, Py<PyAny>)>> {
        let mut out = Vec::new();
        self.walk(py, max_depth, "", &mut out)?;
        Ok(out)
    }

    /// The direct member arrays.
    ///
    /// Returns:
    ///     (name, Array) pairs, sorted by name.
    fn arrays(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyAny>)>> {
        self.of_kind(py, NodeKind::Array)
    }

    /// The direct member groups.
    ///
    /// Returns:
    ///     (name, Group) pairs, sorted by name.
    fn groups(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyAny>)>> {
        self.of_kind(py, NodeKind::Group)
    }

    /// The names of the direct member arrays.
    ///
    /// Returns:
    ///     The names, sorted.
    fn array_keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .children(py)?
            .into_iter()
            .filter(|(_, k)| *k == NodeKind::Array)
            .map(|(n, _)| n)
            .collect())
    }

    /// The names of the direct member groups.
    ///
    /// Returns:
    ///     The names, sorted.
    fn group_keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .children(py)?
            .into_iter()
            .filter(|(_, k)| *k == NodeKind::Group)
            .map(|(n, _)| n)
            .collect())
    }

    /// Creates an array in this group.
    ///
    /// Args:
    ///     name: Its name (or a path below this group).
    ///     **kwargs: `Store.create_array`'s arguments; the group's Zarr format unless
    ///         `zarr_format` is given.
    ///
    /// Returns:
    ///     The new array.
    #[pyo3(signature = (name, **kwargs))]
    fn create_array<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let path = self.member_path(name)?;
        let kwargs = kwargs.cloned().unwrap_or_else(|| PyDict::new(py));
        if !kwargs.contains("zarr_format")? {
            kwargs.set_item("zarr_format", self.zarr_format)?;
        }
        let array = self
            .store
            .bind(py)
            .call_method("create_array", (path,), Some(&kwargs))?;
        self.attrs.stored();
        self.forget_consolidated();
        Ok(array)
    }

    /// Creates a group in this group (an existing one is kept, its attributes replaced
    /// when `attributes` is given).
    ///
    /// Args:
    ///     name: Its name (or a path below this group).
    ///     attributes: Its user attributes.
    ///     zarr_format: Its format; this group's by default.
    ///
    /// Returns:
    ///     The group.
    #[pyo3(signature = (name, attributes = None, *, zarr_format = None))]
    fn create_group(
        &self,
        py: Python<'_>,
        name: &str,
        attributes: Option<&Bound<'_, PyAny>>,
        zarr_format: Option<u8>,
    ) -> PyResult<Self> {
        let path = self.member_path(name)?;
        let group = Store::create_group(
            self.store.bind(py),
            &path,
            attributes,
            zarr_format.unwrap_or(self.zarr_format),
        )?;
        self.attrs.stored();
        self.forget_consolidated();
        Ok(group)
    }

    /// The member group `name`, created if missing.
    ///
    /// Args:
    ///     name: Its name (or a path below this group).
    ///
    /// Returns:
    ///     The group.
    ///
    /// Raises:
    ///     TypeError: An array is there.
    fn require_group(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        match self.open_member(py, name)? {
            Some(m) if m.bind(py).is_instance_of::<Self>() => Ok(m),
            Some(_) => Err(PyTypeError::new_err(format!(
                "{name:?} is an array, not a group"
            ))),
            None => Ok(Py::new(py, self.create_group(py, name, None, None)?)?.into_any()),
        }
    }

    /// The hierarchy below this group as text, one member per line.
    ///
    /// Args:
    ///     level: How many levels to show (None: all).
    ///
    /// Returns:
    ///     The tree: groups by name, arrays with their shape and dtype.
    #[pyo3(signature = (level = None))]
    fn tree(&self, py: Python<'_>, level: Option<usize>) -> PyResult<String> {
        let mut lines = vec![if self.path().is_empty() {
            "/".to_owned()
        } else {
            self.basename().to_owned()
        }];
        self.tree_lines(py, "", level, &mut lines)?;
        Ok(lines.join("\n"))
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let open = self.store.bind(py).getattr("open_group")?;
        let args = PyTuple::new(py, [self.path()])?;
        PyTuple::new(py, [open, args.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let store = self.store.bind(py).repr()?.to_string();
        Ok(format!(
            "<zarrpipe.Group {:?} in {store} zarr_format={}>",
            self.path(),
            self.zarr_format
        ))
    }
}

impl Group {
    fn of_kind(&self, py: Python<'_>, kind: NodeKind) -> PyResult<Vec<(String, Py<PyAny>)>> {
        let mut out = Vec::new();
        for (name, node) in self.child_nodes(py)? {
            if node.kind == kind {
                out.push((name.clone(), self.open_node(py, &name, &node)?));
            }
        }
        Ok(out)
    }
}

/// `Store.create_group`.
pub(super) fn create(
    slf: &Bound<'_, Store>,
    path: &str,
    attributes: Option<&Bound<'_, PyAny>>,
    zarr_format: u8,
) -> BindResult<Group> {
    let py = slf.py();
    let attrs = attributes
        .map(|a| Ok::<_, PyErr>(serde_json::Value::Object(to_object(a)?).to_string()))
        .transpose()?;
    let store = slf.get().store.clone();
    let node = node_path(path)?;
    let at = node.clone();
    let created = run(py, move || {
        zarrpipe_codecs::array::create::create_group(&store, &at, attrs.as_deref(), zarr_format)?;
        read_node(&store, &at, true)
    })?;
    match created {
        Some(n) => Ok(Group::from_node(slf, node, n)),
        None => Err(PyFileNotFoundError::new_err(format!(
            "the group at {path:?} was deleted as it was created"
        ))
        .into()),
    }
}

/// `Store.open_group`.
pub(super) fn open(
    slf: &Bound<'_, Store>,
    path: &str,
    use_consolidated: Option<bool>,
) -> BindResult<Group> {
    let store = slf.get().store.clone();
    let description = store.description().to_owned();
    let node = node_path(path)?;
    let at = node.clone();
    let consolidated = use_consolidated != Some(false);
    match run(slf.py(), move || read_node(&store, &at, consolidated))? {
        Some(n) if n.kind == NodeKind::Group => {
            if use_consolidated == Some(true) && n.consolidated.is_none() {
                return Err(PyValueError::new_err(format!(
                    "the group at {path:?} has no consolidated metadata (use_consolidated=True)"
                ))
                .into());
            }
            Ok(Group::from_node(slf, node, n))
        }
        Some(_) => Err(PyFileNotFoundError::new_err(format!(
            "no group at {path:?} in {description}: an array is there (open it with open_array)"
        ))
        .into()),
        None => Err(
            PyFileNotFoundError::new_err(format!("no group at {path:?} in {description}")).into(),
        ),
    }
}

/// `Store.consolidate`.
pub(super) fn consolidate(slf: &Bound<'_, Store>, path: &str) -> BindResult<Group> {
    let store = slf.get().store.clone();
    let node = node_path(path)?;
    run(slf.py(), move || consolidated::consolidate(&store, &node))?;
    open(slf, path, Some(true))
}

//! What is in a store: which paths hold arrays and which hold groups.

use std::path::Path;

use serde_json::Value;
use zarrs::storage::StoreKey;

use crate::error::{Error, Result};
use crate::store::Store;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeKind {
    Array,
    Group,
}

impl NodeKind {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Array => "array",
            Self::Group => "group",
        }
    }
}

fn prefix(node: &str) -> String {
    let p = node.trim_matches('/');
    if p.is_empty() {
        String::new()
    } else {
        format!("{p}/")
    }
}

/// What the node at `node` (a node path) is, from its metadata files.
#[must_use]
pub fn node_kind(store: &Store, node: &str) -> Option<NodeKind> {
    let prefix = prefix(node);
    let get = |name: &str| {
        StoreKey::new(format!("{prefix}{name}"))
            .ok()
            .and_then(|key| store.zarrs().get(&key).ok().flatten())
    };
    if let Some(bytes) = get("zarr.json") {
        let json: Value = serde_json::from_slice(&bytes).ok()?;
        return match json.get("node_type")?.as_str()? {
            "array" => Some(NodeKind::Array),
            "group" => Some(NodeKind::Group),
            _ => None,
        };
    }
    if get(".zarray").is_some() {
        return Some(NodeKind::Array);
    }
    get(".zgroup").map(|_| NodeKind::Group)
}

/// Every array and group in the store, as (path, kind), sorted by path. Paths are relative
/// to the root, `""` being the root itself. When the root group has consolidated metadata,
/// that is the list (one GET, no LIST), as zarr-python's `members(max_depth=None)` gives.
pub fn list(store: &Store) -> Result<Vec<(String, NodeKind)>> {
    if let Some(root) = crate::hierarchy::node::read_node(store, "/", true)? {
        if let Some(consolidated) = root.consolidated {
            let mut found = vec![(String::new(), root.kind)];
            found.extend(
                consolidated
                    .members
                    .iter()
                    .map(|(p, n)| (p.clone(), n.kind)),
            );
            found.sort();
            return Ok(found);
        }
    }
    list_under(store, "/")
}

/// Every array and group at or below `node` (a node path), as stored (consolidated
/// metadata is not used), as (path relative to the root, kind), sorted by path.
pub fn list_under(store: &Store, node: &str) -> Result<Vec<(String, NodeKind)>> {
    let base = node.trim_matches('/');
    let mut found = Vec::new();
    match store.local_root() {
        Some(root) => walk_local(store, root, base, &mut found)?,
        None => {
            use zarrs::storage::ListableStorageTraits;
            let keys = store
                .zarrs()
                .list_prefix(&crate::store::store_prefix(base)?)
                .map_err(|e| crate::store::zarrs_storage_error(node, &e))?;
            let mut dirs: Vec<String> = keys
                .iter()
                .filter_map(|k| {
                    let k = k.as_str();
                    ["zarr.json", ".zarray", ".zgroup"]
                        .iter()
                        .find_map(|m| k.strip_suffix(m))
                        .filter(|d| d.is_empty() || d.ends_with('/'))
                        .map(|d| d.trim_end_matches('/').to_owned())
                })
                .collect();
            dirs.sort();
            dirs.dedup();
            for dir in dirs {
                if let Some(kind) = node_kind(store, &format!("/{dir}")) {
                    found.push((dir, kind));
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Walks directories, not descending into arrays (their chunks can number millions).
fn walk_local(
    store: &Store,
    root: &Path,
    rel: &str,
    found: &mut Vec<(String, NodeKind)>,
) -> Result<()> {
    let kind = node_kind(store, &format!("/{rel}"));
    if let Some(kind) = kind {
        found.push((rel.to_owned(), kind));
        if kind == NodeKind::Array {
            return Ok(());
        }
    }
    let dir = root.join(rel);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        // A store (or node) not created yet holds nothing.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && found.is_empty() => return Ok(()),
        Err(e) => return Err(Error::storage(&dir.display().to_string(), e)),
    };
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_dir || name.starts_with('.') {
            continue;
        }
        let child = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        walk_local(store, root, &child, found)?;
    }
    Ok(())
}

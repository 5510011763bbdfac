//! A group's direct children as stored: subdirectories of a local group, one LIST with a
//! delimiter on an object store (so no chunk key is listed), and each child's metadata. Directories without metadata are not nodes (zarr-python 3 has no
//! implicit groups).

use std::io::ErrorKind;

use crate::error::{Error, Result};
use crate::hierarchy::node::{read_node, Node};
use crate::store::{key_prefix, Store};

/// The children of the group at `node` (a node path), with their metadata (one GET each
/// for v3), sorted by name.
pub fn children(store: &Store, node: &str) -> Result<Vec<(String, Node)>> {
    let prefix = key_prefix(node);
    let names: Vec<String> = if let Some(root) = store.local_root() {
        let dir = root.join(prefix.trim_end_matches('/'));
        match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| !n.starts_with('.'))
                .collect(),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Vec::new()
            }
            Err(e) => return Err(Error::storage(&dir.display().to_string(), e)),
        }
    } else if let Some(remote) = store.remote() {
        let (r, p) = (remote.clone(), prefix.clone());
        remote.block_on(async move { r.list_dirs(&p).await })?
    } else {
        use zarrs::storage::ListableStorageTraits;
        store
            .zarrs()
            .list_dir(&crate::store::store_prefix(&prefix)?)
            .map_err(|e| crate::store::zarrs_storage_error(node, &e))?
            .prefixes()
            .iter()
            .filter_map(|d| {
                d.as_str()
                    .strip_prefix(&prefix)
                    .map(|n| n.trim_end_matches('/').to_owned())
            })
            .collect()
    };
    let mut found = Vec::new();
    for name in names {
        if let Some(child) = read_node(store, &format!("/{prefix}{name}"), false)? {
            found.push((name, child));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

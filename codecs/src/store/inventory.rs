//! What is stored under a prefix, value by value, with sizes: for `nchunks_initialized`,
//! `nbytes_stored` and `zarrpipe info`. Local directories are walked; object stores listed
//! once; lock files of writers in progress are not values.

use std::io::ErrorKind;
use std::path::Path;

use crate::error::{Error, Result};
use crate::store::{store_prefix, zarrs_storage_error, Backend, Store};

impl Store {
    /// Every value under `prefix` (`""`: the whole store) as (key, size in bytes).
    pub fn stored_values(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let mut out = match &self.backend {
            Backend::Local(root) => {
                let mut out = Vec::new();
                walk(root, prefix.trim_matches('/'), &mut out)?;
                out
            }
            Backend::Remote(remote) => {
                let (r, p) = (remote.clone(), prefix.to_owned());
                remote.block_on(async move { r.list_sizes(&p).await })?
            }
            Backend::Memory(_) | Backend::Zarrs => {
                use zarrs::storage::{ListableStorageTraits, ReadableStorageTraits};
                let zarrs = self.zarrs();
                let keys = zarrs
                    .list_prefix(&store_prefix(prefix)?)
                    .map_err(|e| zarrs_storage_error(prefix, &e))?;
                keys.into_iter()
                    .map(|k| {
                        let size = zarrs
                            .size_key(&k)
                            .map_err(|e| zarrs_storage_error(k.as_str(), &e))?
                            .unwrap_or(0);
                        Ok((k.as_str().to_owned(), size))
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        };
        out.retain(|(k, _)| !k.ends_with(".__lock"));
        out.sort();
        Ok(out)
    }
}

fn walk(root: &Path, rel: &str, out: &mut Vec<(String, u64)>) -> Result<()> {
    let dir = root.join(rel);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(())
        }
        Err(e) => return Err(Error::storage(&dir.display().to_string(), e)),
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let key = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            walk(root, &key, out)?;
        } else {
            out.push((key, meta.len()));
        }
    }
    Ok(())
}

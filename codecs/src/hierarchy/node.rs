//! One node's metadata as stored: its kind, Zarr format, attributes, the document an array
//! opens from, and a group's consolidated metadata. Reads as few keys as it can, which is
//! what a walk of a remote hierarchy costs: a v3 node is one GET (`zarr.json`), a v2 group
//! with consolidated metadata two (`zarr.json` missing, then `.zmetadata`).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::hierarchy::consolidated::Consolidated;
use crate::hierarchy::listing::NodeKind;
use crate::hierarchy::METADATA_LIMIT;
use crate::store::{key_prefix, Store};

/// A node's stored metadata.
#[derive(Clone, Debug)]
pub struct Node {
    pub kind: NodeKind,
    pub zarr_format: u8,
    pub attributes: Map<String, Value>,
    /// What `Array::with_metadata` opens: the v3 `zarr.json`, or a v2 `.zarray` with the
    /// `.zattrs` merged in as `"attributes"`. For groups, the group document.
    pub document: Value,
    /// A group's consolidated metadata, when it has some (and it was asked for).
    pub consolidated: Option<Consolidated>,
}

/// A metadata document as zarr-python writes it (indented by 2).
pub(crate) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Reads the JSON document at `key`; `None` when the key does not exist.
pub fn read_json(store: &Store, key: &str) -> Result<Option<Value>> {
    let Some(bytes) = store.read(key, METADATA_LIMIT)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::Metadata {
            path: key.to_owned(),
            reason: format!("not valid JSON: {e}"),
        })
}

fn object(value: Option<Value>, key: &str) -> Result<Map<String, Value>> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(Error::Metadata {
            path: key.to_owned(),
            reason: format!("attributes must be a JSON object, not {other}"),
        }),
    }
}

/// The node at `node` (a node path such as `"/a/b"`), or `None` if no metadata is stored
/// there. With `use_consolidated`, a group's consolidated metadata is read too (and a v2
/// group is read from its `.zmetadata` when it has one).
pub fn read_node(store: &Store, node: &str, use_consolidated: bool) -> Result<Option<Node>> {
    let prefix = key_prefix(node);
    let key = |name: &str| format!("{prefix}{name}");
    if let Some(doc) = read_json(store, &key("zarr.json"))? {
        return v3_node(doc, &key("zarr.json"), use_consolidated).map(Some);
    }
    if use_consolidated {
        if let Some(zmetadata) = read_json(store, &key(".zmetadata"))? {
            let consolidated = Consolidated::from_v2(&zmetadata, &key(".zmetadata"))?;
            if let Some(group) = consolidated.v2_root.clone() {
                return Ok(Some(Node {
                    kind: NodeKind::Group,
                    zarr_format: 2,
                    attributes: consolidated.v2_root_attributes.clone(),
                    document: group,
                    consolidated: Some(consolidated),
                }));
            }
        }
    }
    if let Some(mut zarray) = read_json(store, &key(".zarray"))? {
        let attributes = object(read_json(store, &key(".zattrs"))?, &key(".zattrs"))?;
        if let Value::Object(m) = &mut zarray {
            m.insert("attributes".into(), Value::Object(attributes.clone()));
        }
        return Ok(Some(Node {
            kind: NodeKind::Array,
            zarr_format: 2,
            attributes,
            document: zarray,
            consolidated: None,
        }));
    }
    if let Some(zgroup) = read_json(store, &key(".zgroup"))? {
        let attributes = object(read_json(store, &key(".zattrs"))?, &key(".zattrs"))?;
        return Ok(Some(Node {
            kind: NodeKind::Group,
            zarr_format: 2,
            attributes,
            document: zgroup,
            consolidated: None,
        }));
    }
    Ok(None)
}

/// A node from its v3 `zarr.json`.
pub(crate) fn v3_node(doc: Value, key: &str, use_consolidated: bool) -> Result<Node> {
    let bad = |reason: String| Error::Metadata {
        path: key.to_owned(),
        reason,
    };
    let kind = match doc.get("node_type").and_then(Value::as_str) {
        Some("array") => NodeKind::Array,
        Some("group") => NodeKind::Group,
        other => {
            return Err(bad(format!(
                "node_type must be \"array\" or \"group\", not {other:?}"
            )))
        }
    };
    let attributes = object(doc.get("attributes").cloned(), key)?;
    let consolidated = match (kind, use_consolidated) {
        (NodeKind::Group, true) => Consolidated::from_v3(&doc, key)?,
        _ => None,
    };
    Ok(Node {
        kind,
        zarr_format: 3,
        attributes,
        document: doc,
        consolidated,
    })
}

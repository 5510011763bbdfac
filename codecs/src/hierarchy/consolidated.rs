//! Consolidated metadata: every node of a hierarchy stored with its root group, so that
//! opening and walking it costs one or two GETs and no LIST. Read from v3
//! `zarr.json["consolidated_metadata"]` (zarr-python's flat form, or nested) and v2
//! `.zmetadata`; written as `zarr.consolidate_metadata` writes them. As in zarr-python, a
//! group opened with consolidated metadata shows the members it lists, even when the store
//! has changed since.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::hierarchy::listing::NodeKind;
use crate::hierarchy::members;
use crate::hierarchy::node::{pretty, read_node, v3_node, Node};
use crate::store::{key_prefix, Made, Store};

/// The consolidated metadata of one group.
#[derive(Clone, Debug, Default)]
pub struct Consolidated {
    /// Every node below the group, by its path relative to the group (`"a"`, `"a/b"`).
    pub members: BTreeMap<String, Node>,
    /// v2: the group's own `.zgroup` as `.zmetadata` holds it.
    pub v2_root: Option<Value>,
    /// v2: the group's own `.zattrs` as `.zmetadata` holds it.
    pub v2_root_attributes: Map<String, Value>,
}

impl Consolidated {
    /// From a v3 group document; `None` when it carries no consolidated metadata.
    pub fn from_v3(doc: &Value, key: &str) -> Result<Option<Self>> {
        let Some(cm) = doc.get("consolidated_metadata").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let bad = |reason: String| Error::Metadata {
            path: key.to_owned(),
            reason: format!("consolidated_metadata: {reason}"),
        };
        match cm.get("kind").and_then(Value::as_str) {
            Some("inline") => {}
            other => {
                return Err(bad(format!(
                    "kind {other:?} is not supported (only \"inline\")"
                )))
            }
        }
        let Some(metadata) = cm.get("metadata").and_then(Value::as_object) else {
            return Err(bad("\"metadata\" must be an object".into()));
        };
        let mut out = Self::default();
        out.add_v3(metadata, "", key)?;
        Ok(Some(out))
    }

    /// Adds the members of a v3 `metadata` object, their paths under `base`; a member
    /// group's own (nested) consolidated metadata adds its members too.
    fn add_v3(&mut self, metadata: &Map<String, Value>, base: &str, key: &str) -> Result<()> {
        for (name, doc) in metadata {
            let path = join(base, name.trim_matches('/'));
            check_member_path(&path, key)?;
            let node = if doc.get("zarr_format").and_then(Value::as_u64) == Some(2) {
                v2_member(doc.clone(), &path, key)?
            } else {
                v3_node(doc.clone(), key, false)?
            };
            if let Some(nested) = doc
                .get("consolidated_metadata")
                .and_then(|c| c.get("metadata"))
                .and_then(Value::as_object)
            {
                self.add_v3(nested, &path, key)?;
            }
            self.members.insert(path, node);
        }
        Ok(())
    }

    /// From a v2 `.zmetadata` document.
    pub fn from_v2(doc: &Value, key: &str) -> Result<Self> {
        let Some(metadata) = doc.get("metadata").and_then(Value::as_object) else {
            return Err(Error::Metadata {
                path: key.to_owned(),
                reason: "\"metadata\" must be an object".into(),
            });
        };
        let mut out = Self::default();
        let attrs = |dir: &str| -> Map<String, Value> {
            metadata
                .get(&join(dir, ".zattrs"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        for (name, doc) in metadata {
            let (dir, file) = match name.rsplit_once('/') {
                Some((dir, file)) => (dir, file),
                None => ("", name.as_str()),
            };
            let kind = match file {
                ".zarray" => NodeKind::Array,
                ".zgroup" => NodeKind::Group,
                _ => continue,
            };
            let attributes = attrs(dir);
            if dir.is_empty() {
                if kind == NodeKind::Group {
                    out.v2_root = Some(doc.clone());
                    out.v2_root_attributes = attributes;
                }
                continue;
            }
            check_member_path(dir, key)?;
            let mut document = doc.clone();
            if let (NodeKind::Array, Value::Object(m)) = (kind, &mut document) {
                m.insert("attributes".into(), Value::Object(attributes.clone()));
            }
            out.members.insert(
                dir.to_owned(),
                Node {
                    kind,
                    zarr_format: 2,
                    attributes,
                    document,
                    consolidated: None,
                },
            );
        }
        Ok(out)
    }

    /// The member at `path` (relative to the group).
    #[must_use]
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.members.get(path.trim_matches('/'))
    }

    /// The consolidated metadata of the member group at `path`: its members, re-rooted.
    #[must_use]
    pub fn under(&self, path: &str) -> Self {
        let prefix = format!("{}/", path.trim_matches('/'));
        Self {
            members: self
                .members
                .iter()
                .filter_map(|(p, n)| {
                    p.strip_prefix(&prefix)
                        .map(|rest| (rest.to_owned(), n.clone()))
                })
                .collect(),
            v2_root: None,
            v2_root_attributes: Map::new(),
        }
    }

    /// The group's direct children, sorted by name.
    #[must_use]
    pub fn children(&self) -> Vec<(String, NodeKind)> {
        self.members
            .iter()
            .filter(|(p, _)| !p.contains('/'))
            .map(|(p, n)| (p.clone(), n.kind))
            .collect()
    }
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}/{name}")
    }
}

/// Member paths are store paths under the group: no `..`, `.` or empty components.
fn check_member_path(path: &str, key: &str) -> Result<()> {
    crate::store::node_path(path)
        .map(|_| ())
        .map_err(|_| Error::Metadata {
            path: key.to_owned(),
            reason: format!("consolidated member {path:?} is not a valid node path"),
        })
}

/// A v2 node given as one document inside v3 consolidated metadata (zarr-python accepts it).
fn v2_member(doc: Value, path: &str, key: &str) -> Result<Node> {
    let kind = if doc.get("shape").is_some() {
        NodeKind::Array
    } else {
        NodeKind::Group
    };
    let attributes = match doc.get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(Error::Metadata {
                path: key.to_owned(),
                reason: format!("attributes of consolidated member {path:?} must be an object"),
            })
        }
    };
    Ok(Node {
        kind,
        zarr_format: 2,
        attributes,
        document: doc,
        consolidated: None,
    })
}

/// Writes the consolidated metadata of the group at `node` (a node path), as
/// `zarr.consolidate_metadata` does: v3 into the group's `zarr.json` (every member by its
/// path, member groups with empty consolidated metadata of their own), v2 as `.zmetadata`.
pub fn consolidate(store: &Store, node: &str) -> Result<()> {
    store.check_writable()?;
    let group = read_node(store, node, false)?
        .ok_or_else(|| Error::NotFound(format!("no group at {node} in {}", store.description())))?;
    if group.kind != NodeKind::Group {
        return Err(Error::InvalidArgument(format!(
            "{node} in {} is an array; consolidate a group",
            store.description()
        )));
    }
    let base = key_prefix(node);
    let mut members: Vec<(String, Node)> = Vec::new();
    collect(store, node, "", &mut members)?;
    // zarr-python's order: shallow before deep, then by name.
    members.sort_by(|(a, _), (b, _)| {
        (a.matches('/').count(), a.to_lowercase()).cmp(&(b.matches('/').count(), b.to_lowercase()))
    });
    match group.zarr_format {
        3 => consolidate_v3(store, &base, &members),
        _ => consolidate_v2(store, &base, &group, &members),
    }
}

/// Every node below the group at `node`, by path relative to the group that is being
/// consolidated (`rel`): each group's children from one directory read or delimited LIST,
/// so chunk keys are never listed.
fn collect(store: &Store, node: &str, rel: &str, out: &mut Vec<(String, Node)>) -> Result<()> {
    for (name, child) in members::children(store, node)? {
        let path = join(rel, &name);
        if child.kind == NodeKind::Group {
            let below = format!("{}/{name}", node.trim_end_matches('/'));
            collect(store, &below, &path, out)?;
        }
        out.push((path, child));
    }
    Ok(())
}

fn consolidate_v3(store: &Store, base: &str, members: &[(String, Node)]) -> Result<()> {
    let mut metadata = Map::new();
    for (rel, member) in members {
        let mut doc = member.document.clone();
        if member.kind == NodeKind::Group {
            if let Value::Object(m) = &mut doc {
                m.insert("consolidated_metadata".into(), empty_consolidated());
                // zarr-python's order of group keys (`node_type` last).
                if let Some(t) = m.shift_remove("node_type") {
                    m.insert("node_type".into(), t);
                }
            }
        }
        metadata.insert(rel.clone(), doc);
    }
    let key = format!("{base}zarr.json");
    let consolidated = json!({"kind": "inline", "must_understand": false, "metadata": metadata});
    store.update(
        &key,
        crate::hierarchy::METADATA_LIMIT,
        &mut |prior, sink| {
            let Some(bytes) = prior.encoded else {
                return Err(Error::NotFound(format!("{key} was deleted")));
            };
            let mut doc: Value = serde_json::from_slice(bytes).map_err(|e| Error::Metadata {
                path: key.clone(),
                reason: format!("not valid JSON: {e}"),
            })?;
            let Value::Object(m) = &mut doc else {
                return Err(Error::Metadata {
                    path: key.clone(),
                    reason: "not a JSON object".into(),
                });
            };
            let node_type = m.shift_remove("node_type");
            m.insert("consolidated_metadata".into(), consolidated.clone());
            if let Some(t) = node_type {
                m.insert("node_type".into(), t);
            }
            sink.put(pretty(&doc).as_bytes())
                .map_err(|e| Error::storage(&key, e))?;
            Ok(Made::Stored)
        },
    )?;
    Ok(())
}

fn consolidate_v2(
    store: &Store,
    base: &str,
    group: &Node,
    members: &[(String, Node)],
) -> Result<()> {
    let mut metadata = Map::new();
    metadata.insert(".zgroup".into(), group.document.clone());
    metadata.insert(".zattrs".into(), Value::Object(group.attributes.clone()));
    for (rel, member) in members {
        match member.kind {
            NodeKind::Array => {
                let mut zarray = member.document.clone();
                if let Value::Object(m) = &mut zarray {
                    m.shift_remove("attributes");
                }
                metadata.insert(format!("{rel}/.zarray"), zarray);
            }
            NodeKind::Group => {
                metadata.insert(format!("{rel}/.zgroup"), member.document.clone());
            }
        }
        metadata.insert(
            format!("{rel}/.zattrs"),
            Value::Object(member.attributes.clone()),
        );
    }
    let doc = json!({"metadata": metadata, "zarr_consolidated_format": 1});
    let key = format!("{base}.zmetadata");
    store.put_many(&[(key.as_str(), Some(pretty(&doc).as_bytes()))])
}

fn empty_consolidated() -> Value {
    json!({"kind": "inline", "must_understand": false, "metadata": {}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> Value {
        json!({"zarr_format": 3, "node_type": "group", "attributes": {}})
    }

    fn array() -> Value {
        json!({"zarr_format": 3, "node_type": "array", "shape": [2], "attributes": {"a": 1}})
    }

    #[test]
    fn v3_flat_and_nested_forms_list_the_same_members() {
        let mut sub = group();
        sub["consolidated_metadata"] = json!({"kind": "inline", "metadata": {"x": array()}});
        let flat = json!({"consolidated_metadata": {"kind": "inline", "metadata": {
            "sub": group(), "sub/x": array(), "y": array()}}});
        let nested = json!({"consolidated_metadata": {"kind": "inline", "metadata": {
            "sub": sub, "y": array()}}});
        for doc in [flat, nested] {
            let c = Consolidated::from_v3(&doc, "zarr.json").unwrap().unwrap();
            let paths: Vec<&str> = c.members.keys().map(String::as_str).collect();
            assert_eq!(paths, ["sub", "sub/x", "y"]);
            assert_eq!(
                c.children(),
                [
                    ("sub".into(), NodeKind::Group),
                    ("y".into(), NodeKind::Array)
                ]
            );
            let under = c.under("sub");
            assert_eq!(under.children(), [("x".into(), NodeKind::Array)]);
            assert_eq!(under.get("x").unwrap().attributes["a"], 1);
        }
    }

    #[test]
    fn hostile_consolidated_metadata_is_a_metadata_error() {
        for cm in [
            json!({"kind": "elsewhere", "metadata": {}}),
            json!({"kind": "inline", "metadata": 3}),
            json!({"kind": "inline", "metadata": {"../up": array()}}),
            json!({"kind": "inline", "metadata": {"a": {"zarr_format": 3, "node_type": "x"}}}),
        ] {
            let doc = json!({ "consolidated_metadata": cm });
            assert!(matches!(
                Consolidated::from_v3(&doc, "zarr.json"),
                Err(Error::Metadata { .. })
            ));
        }
        let no = json!({"consolidated_metadata": null});
        assert!(Consolidated::from_v3(&no, "zarr.json").unwrap().is_none());
    }

    #[test]
    fn v2_zmetadata_gives_members_with_their_attributes() {
        let doc = json!({"metadata": {
            ".zgroup": {"zarr_format": 2}, ".zattrs": {"t": "root"},
            "a/.zarray": {"zarr_format": 2, "shape": [3]}, "a/.zattrs": {"u": "m"},
            "g/.zgroup": {"zarr_format": 2},
        }, "zarr_consolidated_format": 1});
        let c = Consolidated::from_v2(&doc, ".zmetadata").unwrap();
        assert_eq!(c.v2_root_attributes["t"], "root");
        let a = c.get("a").unwrap();
        assert_eq!(a.kind, NodeKind::Array);
        assert_eq!(a.document["attributes"]["u"], "m");
        assert_eq!(c.get("g").unwrap().kind, NodeKind::Group);
    }
}

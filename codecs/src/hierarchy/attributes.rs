//! Attribute changes, written as chunk writes are: one read-modify-write of the node's
//! metadata document (v3 `zarr.json`, v2 `.zattrs`) that no other writer interleaves with,
//! so two writers setting different attributes both keep theirs.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::hierarchy::node::pretty;
use crate::hierarchy::METADATA_LIMIT;
use crate::store::{key_prefix, Made, Store};

/// What to do to a node's attributes.
#[derive(Clone, Debug)]
pub enum Change {
    /// Set one attribute.
    Set(String, Value),
    /// Remove one attribute (nothing if it is not there).
    Remove(String),
    /// Set every attribute given, keeping the others.
    Update(Map<String, Value>),
    /// Replace all attributes.
    Replace(Map<String, Value>),
}

impl Change {
    /// Applies the change to `attrs`.
    pub fn apply(&self, attrs: &mut Map<String, Value>) {
        match self {
            Self::Set(k, v) => {
                attrs.insert(k.clone(), v.clone());
            }
            Self::Remove(k) => {
                attrs.shift_remove(k);
            }
            Self::Update(m) => attrs.extend(m.iter().map(|(k, v)| (k.clone(), v.clone()))),
            Self::Replace(m) => *attrs = m.clone(),
        }
    }
}

/// Applies `change` to the attributes of the node at `node` (a node path) stored in Zarr
/// format `zarr_format`, and returns them as stored now (other writers' changes included).
pub fn change(
    store: &Store,
    node: &str,
    zarr_format: u8,
    change: &Change,
) -> Result<Map<String, Value>> {
    store.check_writable()?;
    let prefix = key_prefix(node);
    let key = match zarr_format {
        2 => format!("{prefix}.zattrs"),
        _ => format!("{prefix}zarr.json"),
    };
    let mut now = Map::new();
    store.update(&key, METADATA_LIMIT, &mut |prior, sink| {
        let parse = |bytes: &[u8]| -> Result<Value> {
            serde_json::from_slice(bytes).map_err(|e| Error::Metadata {
                path: key.clone(),
                reason: format!("not valid JSON: {e}"),
            })
        };
        let doc = match (prior.encoded, zarr_format) {
            (Some(bytes), 2) => {
                let mut attrs = as_object(parse(bytes)?, &key)?;
                change.apply(&mut attrs);
                now = attrs.clone();
                Value::Object(attrs)
            }
            (None, 2) => {
                let mut attrs = Map::new();
                change.apply(&mut attrs);
                now = attrs.clone();
                Value::Object(attrs)
            }
            (Some(bytes), _) => {
                let mut doc = as_object(parse(bytes)?, &key)?;
                let mut attrs = match doc.get("attributes") {
                    None | Some(Value::Null) => Map::new(),
                    Some(v) => as_object(v.clone(), &key)?,
                };
                change.apply(&mut attrs);
                now = attrs.clone();
                if doc.contains_key("attributes") {
                    doc["attributes"] = Value::Object(attrs);
                } else {
                    // zarr-python writes `attributes` first.
                    let mut first = Map::new();
                    first.insert("attributes".into(), Value::Object(attrs));
                    first.extend(doc);
                    doc = first;
                }
                Value::Object(doc)
            }
            (None, _) => {
                return Err(Error::NotFound(format!(
                    "no array or group at {node} in {} (deleted since it was opened?)",
                    store.description()
                )))
            }
        };
        sink.put(pretty(&doc).as_bytes())
            .map_err(|e| Error::storage(&key, e))?;
        Ok(Made::Stored)
    })?;
    Ok(now)
}

fn as_object(v: Value, key: &str) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(Error::Metadata {
            path: key.to_owned(),
            reason: format!("expected a JSON object, found {other}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Store::in_memory([
            (
                "zarr.json".to_owned(),
                br#"{"zarr_format": 3, "node_type": "group", "attributes": {"k": 1}}"#.to_vec(),
            ),
            (".zattrs".to_owned(), br#"{"old": true}"#.to_vec()),
        ])
    }

    #[test]
    fn changes_are_applied_to_what_is_stored() {
        let s = store();
        let now = change(&s, "/", 3, &Change::Set("x".into(), Value::from(2))).unwrap();
        assert_eq!(Value::Object(now), serde_json::json!({"k": 1, "x": 2}));
        let now = change(&s, "/", 3, &Change::Remove("k".into())).unwrap();
        assert_eq!(Value::Object(now), serde_json::json!({"x": 2}));
        let doc: Value =
            serde_json::from_slice(&s.read("zarr.json", 1 << 20).unwrap().unwrap()).unwrap();
        assert_eq!(doc["node_type"], "group");
        assert_eq!(doc["attributes"], serde_json::json!({"x": 2}));
        let now = change(&s, "/", 2, &Change::Update(Map::new())).unwrap();
        assert_eq!(Value::Object(now), serde_json::json!({"old": true}));
    }

    #[test]
    fn a_deleted_v3_node_is_not_found() {
        let s = Store::in_memory([]);
        assert!(matches!(
            change(&s, "/gone", 3, &Change::Set("x".into(), Value::Null)),
            Err(Error::NotFound(_))
        ));
    }
}

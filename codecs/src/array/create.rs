//! Creating arrays and groups: the metadata zarr-python writes for the same arguments
//! (v2 `.zarray` + `.zattrs`, v3 `zarr.json`; zarr-python's default codecs; parent groups
//! created where missing), checked by parsing it back through zarrs before anything is
//! written.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#array-metadata>,
//! <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#metadata>.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::array::v2_document::v2_documents;
use crate::array::Array;
use crate::dtype::{ElementKind, ElementType};
use crate::error::{Error, Result};
use crate::hierarchy::listing::{node_kind, NodeKind};
use crate::hierarchy::node::pretty;
use crate::layout::grid::{AxisSpec, ChunkGrid};
use crate::store::{key_prefix, node_path, Store};

/// What to create (zarr-python's `create_array` arguments, normalised to JSON).
#[derive(Clone, Debug)]
pub struct ArraySpec {
    pub shape: Vec<u64>,
    pub dtype: ElementType,
    /// The data type as the metadata spells it, for types beyond numbers and bool
    /// (`"<M8[ns]"`, `{"name": "fixed_length_utf32", ...}`: see `numpy_type`); `None`:
    /// `dtype`'s own name.
    pub data_type: Option<Value>,
    /// The NumPy dtype had `>`: v2 stores it big-endian (`">i4"`); v3 stores little-endian,
    /// as zarr-python does.
    pub big_endian: bool,
    /// The read chunk shape (inner chunks when sharded); for a rectilinear grid without
    /// shards, its largest edges (`grid` holds them all).
    pub chunks: Vec<u64>,
    /// The shard shape; for rectilinear shards, their largest edges.
    pub shards: Option<Vec<u64>>,
    /// The storage grid's axes when it is rectilinear (the chunks', or the shards' when
    /// sharded): explicit edges on some axis.
    pub grid: Option<Vec<AxisSpec>>,
    /// `None`: zarr-python's default (zstd level 0). v3 codec dicts
    /// (`{"name": ..., "configuration": ...}`) or v2 numcodecs configs (`{"id": ...}`).
    pub compressors: Option<Vec<Value>>,
    /// `None`: no filters.
    pub filters: Option<Vec<Value>>,
    /// Variable-length strings (`"vlen-utf8"`) or bytes (`"vlen-bytes"`): the codec that
    /// serialises them (v3) or the object-codec filter (v2); `dtype` is then unused.
    pub object_codec: Option<String>,
    /// JSON as the metadata spells it (`"NaN"`, `[re, im]`...); `None`: zero.
    pub fill_value: Option<Value>,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<Vec<Option<String>>>,
    pub zarr_format: u8,
}

impl ArraySpec {
    /// A spec from JSON: `{"shape", "dtype" (a name such as "int16"), "big_endian",
    /// "chunks", "shards", "compressors", "filters", "fill_value", "attributes",
    /// "dimension_names", "zarr_format"}`; absent optional fields take their defaults.
    pub fn from_json(text: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidArgument(format!("array spec: {why}"));
        let v: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let shape_of = |field: &str| -> Result<Option<Vec<u64>>> {
            match v.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => serde_json::from_value(x.clone())
                    .map(Some)
                    .map_err(|_| bad(format!("{field} must be non-negative integers, got {x}"))),
            }
        };
        // A chunk or shard argument: one edge per axis, or on some axis a list of edges.
        let axes_of = |field: &str| -> Result<Option<Vec<AxisSpec>>> {
            let Some(Value::Array(items)) = v.get(field).filter(|x| !x.is_null()) else {
                return shape_of(field)
                    .map(|s| s.map(|s| s.into_iter().map(AxisSpec::Regular).collect()));
            };
            let axis = |x: &Value| -> Option<AxisSpec> {
                match x {
                    Value::Array(edges) => edges
                        .iter()
                        .map(Value::as_u64)
                        .collect::<Option<_>>()
                        .map(AxisSpec::Edges),
                    other => other.as_u64().map(AxisSpec::Regular),
                }
            };
            items
                .iter()
                .map(axis)
                .collect::<Option<_>>()
                .map(Some)
                .ok_or_else(|| {
                    bad(format!(
                        "{field} must be non-negative integers or lists of them, got {}",
                        v[field]
                    ))
                })
        };
        let largest = |axes: &[AxisSpec]| -> Vec<u64> {
            axes.iter()
                .map(|a| match a {
                    AxisSpec::Regular(c) => *c,
                    AxisSpec::Edges(e) => e.iter().copied().max().unwrap_or(0),
                })
                .collect()
        };
        let explicit = |axes: &[AxisSpec]| axes.iter().any(|a| matches!(a, AxisSpec::Edges(_)));
        let chunk_axes = axes_of("chunks")?.ok_or_else(|| bad("chunks is required".into()))?;
        let shard_axes = axes_of("shards")?;
        if shard_axes.is_some() && explicit(&chunk_axes) {
            return Err(bad(
                "with shards, chunks is the one inner chunk shape: give the edges to shards".into(),
            ));
        }
        let grid = match &shard_axes {
            Some(s) if explicit(s) => Some(s.clone()),
            None if explicit(&chunk_axes) => Some(chunk_axes.clone()),
            _ => None,
        };
        let list_of = |field: &str| -> Result<Option<Vec<Value>>> {
            match v.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(a)) => Ok(Some(a.clone())),
                Some(x) => Err(bad(format!("{field} must be a list, got {x}"))),
            }
        };
        let dtype_name = v.get("dtype").and_then(Value::as_str).unwrap_or_default();
        let zarr_format = v
            .get("zarr_format")
            .and_then(Value::as_u64)
            .map_or(3, |f| u8::try_from(f).unwrap_or(0));
        let fill_value = v.get("fill_value").filter(|f| !f.is_null()).cloned();
        let data_type = v.get("data_type").filter(|d| !d.is_null()).cloned();
        let object_codec = match v.get("object_codec").and_then(Value::as_str) {
            None => None,
            Some(c @ ("vlen-utf8" | "vlen-bytes")) => Some(c.to_owned()),
            Some(other) => return Err(bad(format!("unknown object codec {other:?}"))),
        };
        let dtype = match &data_type {
            // Never used as an element: variable-length arrays read and write whole chunks.
            _ if object_codec.is_some() => ElementType::UInt8,
            // The engine element of a spelled-out type is its stand-in's.
            Some(dt) => {
                let field = if zarr_format == 2 {
                    "dtype"
                } else {
                    "data_type"
                };
                let mut probe = json!({"zarr_format": zarr_format, "fill_value": fill_value});
                probe[field] = dt.clone();
                match crate::dtype::numpy_type::stand_in(&mut probe) {
                    Ok(Some(t)) => t.elem,
                    Ok(None) => {
                        return Err(Error::Unsupported(format!(
                            "zarrpipe cannot create arrays of data type {dt}"
                        )))
                    }
                    Err(why) => return Err(bad(why)),
                }
            }
            None => ElementType::from_name(dtype_name).ok_or_else(|| {
                Error::Unsupported(format!(
                    "zarrpipe cannot create arrays of data type {dtype_name:?} yet"
                ))
            })?,
        };
        Ok(Self {
            shape: shape_of("shape")?.ok_or_else(|| bad("shape is required".into()))?,
            dtype,
            data_type,
            big_endian: v
                .get("big_endian")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            chunks: largest(&chunk_axes),
            shards: shard_axes.as_deref().map(largest),
            grid,
            compressors: list_of("compressors")?,
            filters: list_of("filters")?,
            object_codec,
            fill_value,
            attributes: match v.get("attributes") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(x) => return Err(bad(format!("attributes must be a dict, got {x}"))),
            },
            dimension_names: match v.get("dimension_names") {
                None | Some(Value::Null) => None,
                Some(x) => Some(serde_json::from_value(x.clone()).map_err(|_| {
                    bad(format!("dimension_names must be strings or None, got {x}"))
                })?),
            },
            zarr_format,
        })
    }
}

/// Creates the array at `path` and returns it open. An existing node there is an error
/// unless `overwrite`, which deletes it first (everything under `path`).
pub fn create_array(
    store: &Arc<Store>,
    path: &str,
    spec: &ArraySpec,
    overwrite: bool,
) -> Result<Array> {
    store.check_writable()?;
    let node = node_path(path)?;
    let docs = match spec.zarr_format {
        2 => v2_documents(spec)?,
        3 => vec![("zarr.json", pretty(&v3_document(spec)?))],
        other => {
            return Err(Error::InvalidArgument(format!(
                "zarr_format must be 2 or 3, not {other}"
            )))
        }
    };
    // Check the metadata parses as the array we mean before writing anything.
    let main = &docs[0].1;
    let mut check: Value =
        serde_json::from_str(main).map_err(|e| Error::Internal(e.to_string()))?;
    if spec.zarr_format == 2 {
        check["attributes"] = Value::Object(spec.attributes.clone());
    }
    Array::with_metadata(Arc::new(Store::in_memory([])), "/", &check.to_string()).map_err(|e| {
        match e {
            Error::Metadata { reason, .. } => {
                Error::InvalidArgument(format!("these arguments give invalid metadata: {reason}"))
            }
            other => other,
        }
    })?;
    prepare_node(store, &node, overwrite)?;
    let mut ops = parent_groups(store, &node, spec.zarr_format);
    let prefix = key_prefix(&node);
    ops.extend(
        docs.into_iter()
            .map(|(name, text)| (format!("{prefix}{name}"), text)),
    );
    put(store, &ops)?;
    Array::open(store.clone(), &node)
}

/// Creates a group at `path` (and any missing parents); an existing group keeps its
/// attributes unless `attributes_json` (a JSON object) is given.
pub fn create_group(
    store: &Arc<Store>,
    path: &str,
    attributes_json: Option<&str>,
    zarr_format: u8,
) -> Result<()> {
    store.check_writable()?;
    let attributes: Option<Map<String, Value>> = match attributes_json {
        None => None,
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(m)) => Some(m),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "group attributes must be a JSON object, got {text}"
                )))
            }
        },
    };
    let node_path_ = node_path(path)?;
    if attributes.is_none() && node_kind(store, &node_path_) == Some(NodeKind::Group) {
        return Ok(());
    }
    let node = node_path(path)?;
    if node_kind(store, &node) == Some(NodeKind::Array) {
        return Err(Error::Exists(format!(
            "{node} in {} is an array",
            store.description()
        )));
    }
    let attrs = attributes.unwrap_or_default();
    let mut ops = parent_groups(store, &node, zarr_format);
    let prefix = key_prefix(&node);
    ops.extend(group_documents(&prefix, &attrs, zarr_format)?);
    put(store, &ops)
}

fn put(store: &Store, ops: &[(String, String)]) -> Result<()> {
    let refs: Vec<(&str, Option<&[u8]>)> = ops
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_bytes())))
        .collect();
    store.put_many(&refs)
}

/// Refuses an existing node at `node`, or deletes it when `overwrite`.
fn prepare_node(store: &Store, node: &str, overwrite: bool) -> Result<()> {
    let Some(kind) = node_kind(store, node) else {
        return Ok(());
    };
    if !overwrite {
        return Err(Error::Exists(format!(
            "{} {node} already exists in {}; pass overwrite=True to replace it",
            kind.name(),
            store.description()
        )));
    }
    store.delete_prefix(&key_prefix(node))
}

/// Group metadata for every parent of `node` that has none, as zarr-python writes them.
fn parent_groups(store: &Store, node: &str, zarr_format: u8) -> Vec<(String, String)> {
    let parts: Vec<&str> = node
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let mut ops = Vec::new();
    for depth in 0..parts.len() {
        let parent = format!("/{}", parts[..depth].join("/"));
        if node_kind(store, &parent).is_none() {
            if let Ok(docs) = group_documents(&key_prefix(&parent), &Map::new(), zarr_format) {
                ops.extend(docs);
            }
        }
    }
    ops
}

fn group_documents(
    prefix: &str,
    attributes: &Map<String, Value>,
    zarr_format: u8,
) -> Result<Vec<(String, String)>> {
    match zarr_format {
        3 => Ok(vec![(
            format!("{prefix}zarr.json"),
            pretty(&json!({
                "attributes": attributes,
                "zarr_format": 3,
                "node_type": "group",
            })),
        )]),
        2 => Ok(vec![
            (
                format!("{prefix}.zgroup"),
                pretty(&json!({"zarr_format": 2})),
            ),
            (
                format!("{prefix}.zattrs"),
                pretty(&Value::Object(attributes.clone())),
            ),
        ]),
        other => Err(Error::InvalidArgument(format!(
            "zarr_format must be 2 or 3, not {other}"
        ))),
    }
}

pub(super) fn check_shapes(spec: &ArraySpec) -> Result<()> {
    let bad = |why: String| Err(Error::InvalidArgument(why));
    let n = spec.shape.len();
    if spec.chunks.len() != n {
        return bad(format!(
            "chunks {:?} must have one entry per dimension of shape {:?}",
            spec.chunks, spec.shape
        ));
    }
    if spec.chunks.contains(&0) {
        return bad(format!(
            "chunk sizes must be positive, got {:?}",
            spec.chunks
        ));
    }
    if let Some(axes) = &spec.grid {
        if spec.zarr_format == 2 {
            return bad("zarr_format 2 cannot store a rectilinear chunk grid".into());
        }
        ChunkGrid::from_edges(&spec.shape, axes).map_err(Error::InvalidArgument)?;
        if spec.shards.is_some() {
            for (a, (axis, &c)) in axes.iter().zip(&spec.chunks).enumerate() {
                let edges = match axis {
                    AxisSpec::Regular(e) => std::slice::from_ref(e),
                    AxisSpec::Edges(e) => e.as_slice(),
                };
                if let Some(e) = edges.iter().find(|&&e| e % c != 0) {
                    return bad(format!(
                        "shard edge {e} along axis {a} is not a multiple of the chunk edge {c}"
                    ));
                }
            }
        }
    } else if let Some(shards) = &spec.shards {
        if shards.len() != n
            || shards
                .iter()
                .zip(&spec.chunks)
                .any(|(s, c)| *s == 0 || s % c != 0)
        {
            return bad(format!(
                "shards {shards:?} must be positive multiples of chunks {:?}",
                spec.chunks
            ));
        }
        if spec.zarr_format == 2 {
            return bad("zarr_format 2 has no sharding".into());
        }
    }
    if let Some(names) = &spec.dimension_names {
        if names.len() != n {
            return bad(format!(
                "{} dimension names for {n} dimensions",
                names.len()
            ));
        }
        if spec.zarr_format == 2 {
            return bad("zarr_format 2 has no dimension names".into());
        }
    }
    Ok(())
}

/// The bytes codec, as zarr-python writes it: no endian for types without a byte order
/// (one-byte types, bytes), else little endian whatever the NumPy byte order (a
/// v3 data type has none; zarr-python's default serializer is always little-endian).
fn bytes_codec(spec: &ArraySpec) -> Value {
    // Records: zarr-python 3.4 writes (and expects) an endian, 3.1 ignores it.
    let record = spec
        .data_type
        .as_ref()
        .and_then(|d| d.get("name"))
        .and_then(Value::as_str)
        .is_some_and(|n| matches!(n, "struct" | "structured"));
    if spec.dtype.swap_unit() == 1 && !record {
        json!({"name": "bytes"})
    } else {
        json!({"name": "bytes", "configuration": {"endian": "little"}})
    }
}

/// A v3 codec given as a v3 dict or a numcodecs config, with zarr-python's defaults filled.
fn v3_codec(c: &Value, spec: &ArraySpec) -> Result<Value> {
    let Some(obj) = c.as_object() else {
        return Err(Error::InvalidArgument(format!(
            "a codec is a dict such as {{\"name\": \"zstd\", \"configuration\": {{\"level\": 3}}}}, not {c}"
        )));
    };
    if let Some(id) = obj.get("id").and_then(Value::as_str) {
        // A numcodecs config: zarr-python stores it under its numcodecs.* name.
        let mut config = obj.clone();
        config.remove("id");
        return Ok(json!({"name": format!("numcodecs.{id}"), "configuration": config}));
    }
    let name = obj.get("name").and_then(Value::as_str).ok_or_else(|| {
        Error::InvalidArgument(format!("codec {c} has neither \"name\" nor \"id\""))
    })?;
    let mut config = obj
        .get("configuration")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut default = |k: &str, v: Value| {
        config.entry(k.to_owned()).or_insert(v);
    };
    match name {
        "zstd" => {
            default("level", json!(0));
            default("checksum", json!(false));
        }
        "gzip" => default("level", json!(5)),
        "blosc" => {
            let size = spec.dtype.size();
            default("typesize", json!(size));
            default("cname", json!("zstd"));
            default("clevel", json!(5));
            default(
                "shuffle",
                json!(if size == 1 { "bitshuffle" } else { "shuffle" }),
            );
            default("blocksize", json!(0));
        }
        _ => {}
    }
    Ok(if config.is_empty() {
        json!({"name": name})
    } else {
        json!({"name": name, "configuration": config})
    })
}

fn v3_document(spec: &ArraySpec) -> Result<Value> {
    check_shapes(spec)?;
    let compressors = match &spec.compressors {
        None => vec![json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}})],
        Some(list) => list
            .iter()
            .map(|c| v3_codec(c, spec))
            .collect::<Result<_>>()?,
    };
    let filters = match &spec.filters {
        None => Vec::new(),
        Some(list) => list
            .iter()
            .map(|c| v3_codec(c, spec))
            .collect::<Result<_>>()?,
    };
    let mut chain: Vec<Value> = filters;
    chain.push(match &spec.object_codec {
        Some(codec) => json!({"name": codec, "configuration": {}}),
        None => bytes_codec(spec),
    });
    chain.extend(compressors);
    let (grid, codecs) = match &spec.shards {
        None => (&spec.chunks, chain),
        Some(shards) => (
            shards,
            vec![json!({
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": spec.chunks,
                    "codecs": chain,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "end",
                }
            })],
        ),
    };
    let mut doc = json!({
        "shape": spec.shape,
        "data_type": match spec.object_codec.as_deref() {
            Some("vlen-bytes") => json!("variable_length_bytes"),
            Some(_) => json!("string"),
            None => spec.data_type.clone().unwrap_or_else(|| json!(spec.dtype.name())),
        },
        "chunk_grid": match &spec.grid {
            Some(axes) => ChunkGrid::from_edges(&spec.shape, axes)
                .map_err(Error::InvalidArgument)?
                .to_metadata(),
            None => json!({"name": "regular", "configuration": {"chunk_shape": grid}}),
        },
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_or_zero(spec),
        "codecs": codecs,
        "attributes": spec.attributes,
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    });
    if let Some(names) = &spec.dimension_names {
        doc["dimension_names"] = json!(names);
    }
    Ok(doc)
}

pub(super) fn fill_or_zero(spec: &ArraySpec) -> Value {
    if spec.object_codec.is_some() {
        // The empty string (strings), or the empty bytes in base64 (bytes): also "".
        return spec.fill_value.clone().unwrap_or_else(|| json!(""));
    }
    spec.fill_value
        .clone()
        .unwrap_or_else(|| match spec.dtype.kind() {
            ElementKind::Bool => json!(false),
            ElementKind::Float | ElementKind::BFloat => json!(0.0),
            ElementKind::Complex => json!([0.0, 0.0]),
            ElementKind::Int | ElementKind::UInt => json!(0),
            ElementKind::Raw => json!(vec![0u8; spec.dtype.size()]),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(zarr_format: u8) -> ArraySpec {
        ArraySpec {
            shape: vec![10, 20],
            dtype: ElementType::Int16,
            data_type: None,
            big_endian: false,
            chunks: vec![5, 5],
            shards: None,
            grid: None,
            compressors: None,
            filters: None,
            object_codec: None,
            fill_value: None,
            attributes: Map::new(),
            dimension_names: None,
            zarr_format,
        }
    }

    #[test]
    fn v3_defaults_are_zarr_pythons() {
        let doc = v3_document(&spec(3)).unwrap();
        assert_eq!(
            doc["codecs"],
            json!([
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 0, "checksum": false}},
            ])
        );
        assert_eq!(doc["fill_value"], json!(0));
        let mut big = spec(3);
        big.big_endian = true;
        assert_eq!(
            v3_document(&big).unwrap()["codecs"][0],
            json!({"name": "bytes", "configuration": {"endian": "little"}}),
            "zarr-python writes v3 arrays little-endian whatever the NumPy byte order"
        );
        assert_eq!(doc["chunk_key_encoding"]["configuration"]["separator"], "/");
        assert!(doc.get("dimension_names").is_none());
    }

    #[test]
    fn sharded_v3_nests_the_chain() {
        let mut s = spec(3);
        s.shards = Some(vec![10, 10]);
        s.compressors = Some(vec![json!({"name": "blosc"})]);
        let doc = v3_document(&s).unwrap();
        assert_eq!(
            doc["chunk_grid"]["configuration"]["chunk_shape"],
            json!([10, 10])
        );
        let inner = &doc["codecs"][0]["configuration"];
        assert_eq!(inner["chunk_shape"], json!([5, 5]));
        assert_eq!(inner["codecs"][1]["configuration"]["typesize"], json!(2));
        assert_eq!(
            inner["codecs"][1]["configuration"]["shuffle"],
            json!("shuffle")
        );
        assert_eq!(inner["index_codecs"][1], json!({"name": "crc32c"}));
    }

    #[test]
    fn v2_defaults_and_spellings() {
        let mut s = spec(2);
        s.big_endian = true;
        s.dtype = ElementType::Float64;
        let docs = v2_documents(&s).unwrap();
        let zarray: Value = serde_json::from_str(&docs[0].1).unwrap();
        assert_eq!(zarray["dtype"], ">f8");
        assert_eq!(zarray["compressor"], json!({"id": "zstd", "level": 0}));
        assert_eq!(zarray["filters"], Value::Null);
        assert_eq!(docs[1].0, ".zattrs");
        s.compressors = Some(vec![json!({"id": "zstd", "level": 2, "checksum": false})]);
        let zarray: Value = serde_json::from_str(&v2_documents(&s).unwrap()[0].1).unwrap();
        assert_eq!(zarray["compressor"], json!({"id": "zstd", "level": 2}));
        s.compressors = Some(vec![json!({"id": "zstd", "level": 2, "checksum": true})]);
        let zarray: Value = serde_json::from_str(&v2_documents(&s).unwrap()[0].1).unwrap();
        assert_eq!(zarray["compressor"]["checksum"], json!(true));
        s.compressors = Some(vec![json!({"name": "zstd"})]);
        assert!(
            v2_documents(&s).is_err(),
            "v3 codec dicts are refused for v2"
        );
    }

    #[test]
    fn bad_shapes_are_refused() {
        let mut s = spec(3);
        s.chunks = vec![5];
        assert!(v3_document(&s).is_err());
        let mut s = spec(3);
        s.shards = Some(vec![7, 10]);
        assert!(v3_document(&s).is_err());
    }

    #[test]
    fn created_arrays_open_and_parents_are_groups() {
        let store = Arc::new(Store::in_memory([]));
        let a = create_array(&store, "a/b", &spec(3), false).unwrap();
        assert_eq!(a.info.shape, vec![10, 20]);
        assert_eq!(node_kind(&store, "/a"), Some(NodeKind::Group));
        assert_eq!(node_kind(&store, "/"), Some(NodeKind::Group));
        assert!(matches!(
            create_array(&store, "a/b", &spec(3), false),
            Err(Error::Exists(_))
        ));
        create_array(&store, "a/b", &spec(2), true).unwrap();
        assert_eq!(
            Array::open(store.clone(), "a/b").unwrap().info.zarr_format,
            2
        );
    }
}

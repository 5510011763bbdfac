//! An array's metadata document on its way in: read and checked before zarrs parses it
//! (a rectilinear grid's edge lists are counted first), repaired where zarr-python reads
//! what zarrs refuses (a v2 `fill_value: null` of complex numbers, a v2 string array's
//! numeric fill value), a type zarrs lacks swapped for its stand-in, and open failures told
//! apart (not found, a group, bad metadata, unsupported).

use serde_json::Value;
use zarrs::array::{ArrayCreateError, ArrayMetadata, ArrayMetadataOptions};
use zarrs::config::MetadataConvertVersion;
use zarrs::metadata::v3::ArrayMetadataV3;
use zarrs::plugin::PluginCreateError;
use zarrs::storage::StorageError;

use crate::array::ZarrsArray;
use crate::codec::chain::ChunkChain;
use crate::dtype::numpy_type::{stand_in, NumpyType};
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::store::Store;

pub(super) fn v3_metadata(zarrs: &ZarrsArray) -> Option<ArrayMetadataV3> {
    match zarrs.metadata_opt(
        &ArrayMetadataOptions::default()
            .with_metadata_convert_version(MetadataConvertVersion::V3)
            .with_convert_aliased_extension_names(true),
    ) {
        ArrayMetadata::V3(mut m) => {
            if matches!(zarrs.metadata(), ArrayMetadata::V2(_)) {
                drop_bytes_before_zfpy(&mut m);
            }
            Some(m)
        }
        ArrayMetadata::V2(_) => None,
    }
}

/// numcodecs' zfpy is a v2 compressor but an array-to-bytes codec. zarrs' v2-to-v3
/// conversion knows that only with its zfp feature, which zarrpipe leaves off (zfp-rs codes
/// zfp, `codec/plugins/zfp/`): without it the conversion puts the `bytes` codec every other
/// compressor follows before zfpy, a chain of two array-to-bytes codecs. That `bytes` goes.
fn drop_bytes_before_zfpy(m: &mut ArrayMetadataV3) {
    let zfpy = m.codecs.iter().position(|c| c.name() == "numcodecs.zfpy");
    if let Some(at) = zfpy.filter(|&at| at > 0 && m.codecs[at - 1].name() == "bytes") {
        m.codecs.remove(at - 1);
    }
}

/// The data type as the array's metadata spells it (`"<U13"`, `{"name": "string"}`...).
pub(super) fn data_type_spelling(zarrs: &ZarrsArray) -> String {
    match zarrs.metadata() {
        ArrayMetadata::V2(m) => serde_json::to_string(&m.dtype),
        ArrayMetadata::V3(m) => serde_json::to_string(&m.data_type),
    }
    .unwrap_or_else(|_| zarrs.data_type().to_string())
}

/// Parses array metadata JSON (v2 or v3). A v2 `fill_value: null` means the data type's
/// default (zarr-python's reading); zarrs rejects it for complex types, so it is spelled out.
pub fn parse_metadata(json: &str) -> std::result::Result<ArrayMetadata, String> {
    parse_metadata_typed(json).map(|(m, _)| m)
}

/// Whether metadata JSON has a data type that opens through a stand-in (`numpy_type`).
pub(super) fn has_stand_in(json: &str) -> bool {
    serde_json::from_str::<Value>(json)
        .ok()
        .is_some_and(|mut v| {
            let before = v.clone();
            matches!(stand_in(&mut v), Ok(Some(_))) || v != before
        })
}

/// [`parse_metadata`], with a data type zarrs lacks replaced by its stand-in, and that type.
pub(super) fn parse_metadata_typed(
    json: &str,
) -> std::result::Result<(ArrayMetadata, Option<NumpyType>), String> {
    let mut value: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let numpy_type = stand_in(&mut value)?;
    if value.get("zarr_format").and_then(Value::as_u64) == Some(2)
        && value.get("fill_value").is_some_and(Value::is_null)
        && value
            .get("dtype")
            .and_then(Value::as_str)
            .is_some_and(|d| d.contains('c'))
    {
        value["fill_value"] = serde_json::json!([0.0, 0.0]);
    }
    let metadata = serde_json::from_value(value).map_err(|e| e.to_string())?;
    Ok((metadata, numpy_type))
}

/// The metadata document of the array at `node` as stored: v3 `zarr.json`, else v2
/// (`.zarray` with `.zattrs` merged in as `"attributes"`).
pub(super) fn metadata_json(store: &Store, node: &str) -> Option<String> {
    match crate::hierarchy::node::read_node(store, node, false) {
        Ok(Some(n)) if n.kind == crate::hierarchy::listing::NodeKind::Array => {
            Some(n.document.to_string())
        }
        _ => None,
    }
}

/// A v2 string array (vlen-utf8) with a numeric fill value reads its missing chunks as that
/// number's text, as zarr-python reads them (zarrs reads them as ""): the fill value is made
/// that text. Returns whether it changed `json`.
pub(super) fn v2_string_fill(json: &mut Value) -> bool {
    let utf8 = json.get("zarr_format").and_then(Value::as_u64) == Some(2)
        && json
            .get("filters")
            .and_then(Value::as_array)
            .is_some_and(|f| {
                f.iter()
                    .any(|c| c.get("id").and_then(Value::as_str) == Some("vlen-utf8"))
            });
    match json.get("fill_value") {
        Some(Value::Number(n)) if utf8 => {
            let text = n.to_string();
            json["fill_value"] = Value::String(text);
            true
        }
        _ => false,
    }
}

/// zarrs' `Array::open`, with a v3 document's chunk grid checked before zarrs expands it
/// (one read of `zarr.json`, as zarrs' own open makes). `Err` is a grid that breaks its
/// spec; zarrs' own failures are the inner result.
pub(super) fn open_checked(
    store: &Store,
    node: &str,
) -> Result<std::result::Result<ZarrsArray, ArrayCreateError>> {
    use zarrs::array::AdditionalFieldUnsupportedError;
    use zarrs::config::MetadataRetrieveVersion;
    use zarrs::node::{meta_key_v3, NodePath};
    let storage = store.zarrs();
    let key = match NodePath::new(node) {
        Ok(path) => meta_key_v3(&path),
        Err(_) => return Ok(ZarrsArray::open(storage, node)),
    };
    let bytes = match storage.get(&key) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Ok(ZarrsArray::open_opt(
                storage,
                node,
                &MetadataRetrieveVersion::V2,
            ))
        }
        Err(e) => return Ok(Err(e.into())),
    };
    if let Ok(doc) = serde_json::from_slice::<Value>(&bytes) {
        check_document_grid(&doc).map_err(|reason| Error::Metadata {
            path: node.to_owned(),
            reason,
        })?;
    }
    let metadata: ArrayMetadataV3 = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => return Ok(Err(StorageError::InvalidMetadata(key, e.to_string()).into())),
    };
    // What zarrs' open refuses besides: a field the reader must understand.
    if let Some((name, field)) = metadata
        .additional_fields
        .iter()
        .find(|(_, f)| f.must_understand())
    {
        return Ok(Err(ArrayCreateError::AdditionalFieldUnsupportedError(
            AdditionalFieldUnsupportedError::new(name.clone(), field.as_value().clone()),
        )));
    }
    Ok(ZarrsArray::new_with_metadata(
        storage,
        node,
        ArrayMetadata::V3(metadata),
    ))
}

/// A sharded array's shards must each hold whole inner chunks: on a rectilinear grid every
/// edge is checked (a regular grid's one shape was checked with the chain).
pub(super) fn check_shard_edges(
    grid: &ChunkGrid,
    chain: &ChunkChain,
) -> std::result::Result<(), String> {
    let Some(spec) = chain.plain_sharding() else {
        return Ok(());
    };
    for (a, &inner) in spec.inner_shape.iter().enumerate() {
        if let Some(e) = grid.distinct_edges(a).into_iter().find(|e| e % inner != 0) {
            return Err(format!(
                "shard edge {e} along axis {a} is not a multiple of the inner chunk edge {inner}"
            ));
        }
    }
    Ok(())
}

/// Checks a document's rectilinear chunk grid before zarrs expands its edge lists (a
/// run-length pair may stand for more edges than memory holds).
pub(super) fn check_document_grid(doc: &Value) -> std::result::Result<(), String> {
    let Some(grid) = doc.get("chunk_grid") else {
        return Ok(());
    };
    let shape: Vec<u64> = doc
        .get("shape")
        .and_then(Value::as_array)
        .map(|s| s.iter().map(|v| v.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default();
    ChunkGrid::from_metadata(grid, &shape).map(|_| ())
}

/// Maps an open failure to "not found", "bad metadata" or "unsupported".
pub(super) fn open_error(store: &Store, node: &str, err: ArrayCreateError) -> Error {
    let meta = |reason: String| Error::Metadata {
        path: node.to_owned(),
        reason,
    };
    let not_found = || {
        if is_group(store, node) {
            Error::NotFound(format!(
                "{node} in {} is a group, not an array",
                store.description()
            ))
        } else {
            Error::NotFound(format!("no array at {node} in {}", store.description()))
        }
    };
    match err {
        ArrayCreateError::MissingMetadata => not_found(),
        ArrayCreateError::StorageError(StorageError::InvalidMetadata(key, reason)) => {
            if is_group(store, node) {
                not_found()
            } else {
                meta(format!("{key}: {reason}"))
            }
        }
        ArrayCreateError::StorageError(e) => crate::store::zarrs_storage_error(node, &e),
        // zarrs cannot tell a codec configuration it does not know from an invalid one (e.g.
        // zarr-python's numcodecs.zlib): for codecs, "unsupported" is the honest answer.
        e @ ArrayCreateError::CodecsCreateError(_) => {
            Error::Unsupported(format!("array {node}: {e}"))
        }
        ArrayCreateError::DataTypeCreateError(PluginCreateError::Unsupported(e))
        | ArrayCreateError::StorageTransformersCreateError(PluginCreateError::Unsupported(e))
        | ArrayCreateError::ChunkGridCreateError(PluginCreateError::Unsupported(e))
        | ArrayCreateError::ChunkKeyEncodingCreateError(PluginCreateError::Unsupported(e)) => {
            Error::Unsupported(format!("array {node}: {e}"))
        }
        e @ (ArrayCreateError::UnsupportedZarrV2Array(_)
        | ArrayCreateError::AdditionalFieldUnsupportedError(_)) => {
            Error::Unsupported(format!("array {node}: {e}"))
        }
        e => meta(e.to_string()),
    }
}

/// Whether `node` holds group metadata (v3 `zarr.json` with `node_type: group`, or v2 `.zgroup`).
fn is_group(store: &Store, node: &str) -> bool {
    crate::hierarchy::listing::node_kind(store, node)
        == Some(crate::hierarchy::listing::NodeKind::Group)
}

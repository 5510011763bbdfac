//! Opening an array: metadata through zarrs, then the plan for decoding it (zarrpipe's own
//! decoder when it knows the codec chain, zarrs' otherwise).

use std::sync::Arc;

use serde_json::Value;
use zarrs::array::{Array, ArrayCreateError, ArrayMetadata, ArrayMetadataOptions};
use zarrs::config::MetadataConvertVersion;
use zarrs::plugin::PluginCreateError;
use zarrs::storage::{ReadableListableStorageTraits, StorageError};

use crate::buffer::checked_nbytes;
use crate::decode::chain::{ChainError, ChunkChain};
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::store::{node_path, Store};

pub type ZarrsArray = Array<dyn ReadableListableStorageTraits>;

/// What a user sees of an array.
#[derive(Clone, Debug)]
pub struct ArrayInfo {
    /// Node path, `"/"` for an array at the store root.
    pub path: String,
    pub shape: Vec<u64>,
    pub dtype: ElementType,
    /// The read granularity: inner chunks for a sharded array (zarr-python's `chunks`).
    pub chunks: Vec<u64>,
    /// The stored chunk (shard) shape of a sharded array.
    pub shards: Option<Vec<u64>>,
    /// One element, native-endian.
    pub fill_value: Vec<u8>,
    pub zarr_format: u8,
    /// User attributes as JSON text.
    pub attributes: String,
    pub dimension_names: Option<Vec<Option<String>>>,
}

/// How chunks of this array are decoded.
pub(crate) enum Decoder {
    /// zarrpipe's streaming decoder, with the chain and the regular grid's chunk shape.
    Own {
        chain: Arc<ChunkChain>,
        grid_chunk: Vec<u64>,
    },
    /// zarrs' decoder, for codecs, data types or grids zarrpipe does not handle itself.
    Zarrs { reason: String },
}

/// An open array, ready to read.
pub struct ArrayReader {
    pub(crate) store: Arc<Store>,
    pub(crate) array: ZarrsArray,
    pub(crate) decoder: Decoder,
    pub info: ArrayInfo,
}

impl ArrayReader {
    /// Opens the array at `path` (relative to the store root; `""` is the root itself).
    pub fn open(store: Arc<Store>, path: &str) -> Result<Self> {
        crate::harden::install();
        let node = node_path(path)?;
        let array = match ZarrsArray::open(store.zarrs(), &node) {
            Ok(array) => array,
            Err(ArrayCreateError::InvalidFillValueMetadata { .. }) => {
                // zarrs rejects some v2 `fill_value: null` (complex); read it as zarr-python does.
                let json = v2_metadata_json(&store, &node).ok_or_else(|| Error::Metadata {
                    path: node.clone(),
                    reason: "invalid fill value".into(),
                })?;
                return Self::with_metadata(store, &node, &json);
            }
            Err(e) => return Err(open_error(&store, &node, e)),
        };
        Self::from_zarrs(store, node, array)
    }

    /// An array at `path` described by `metadata_json` (zarr.json or .zarray content)
    /// instead of the metadata in the store: for callers that already hold the metadata.
    pub fn with_metadata(store: Arc<Store>, path: &str, metadata_json: &str) -> Result<Self> {
        crate::harden::install();
        let node = node_path(path)?;
        let metadata = parse_metadata(metadata_json).map_err(|reason| Error::Metadata {
            path: node.clone(),
            reason,
        })?;
        let array = ZarrsArray::new_with_metadata(store.zarrs(), &node, metadata)
            .map_err(|e| open_error(&store, &node, e))?;
        Self::from_zarrs(store, node, array)
    }

    fn from_zarrs(store: Arc<Store>, node: String, array: ZarrsArray) -> Result<Self> {
        let dtype = ElementType::from_zarrs(array.data_type())?;
        let v3 = match array.metadata_opt(
            &ArrayMetadataOptions::default()
                .with_metadata_convert_version(MetadataConvertVersion::V3)
                .with_convert_aliased_extension_names(true),
        ) {
            ArrayMetadata::V3(m) => m,
            ArrayMetadata::V2(_) => {
                return Err(Error::Unsupported(format!(
                    "cannot convert the v2 metadata of {node}"
                )))
            }
        };
        let shape = array.shape().to_vec();
        let grid_chunk =
            regular_chunk_shape(&serde_json::to_value(&v3.chunk_grid).unwrap_or(Value::Null));
        let decoder = match &grid_chunk {
            Some(chunk) if chunk.len() == shape.len() => {
                match ChunkChain::parse(&v3.codecs, chunk, dtype) {
                    Ok(chain) => Decoder::Own {
                        chain: Arc::new(chain),
                        grid_chunk: chunk.clone(),
                    },
                    Err(ChainError::Unsupported(reason)) => Decoder::Zarrs { reason },
                    Err(ChainError::Invalid(reason)) => {
                        return Err(Error::Metadata { path: node, reason })
                    }
                }
            }
            _ => Decoder::Zarrs {
                reason: "chunk grid is not regular".into(),
            },
        };
        if let Decoder::Own { grid_chunk, .. } = &decoder {
            // A chunk must at least be addressable; reads of its parts are checked later.
            checked_nbytes(grid_chunk, dtype.size()).map_err(|_| Error::Metadata {
                path: node.clone(),
                reason: format!("chunk shape {grid_chunk:?} is too large to address"),
            })?;
        }
        let (chunks, shards) = match &decoder {
            Decoder::Own { chain, grid_chunk } => match chain.plain_sharding() {
                Some(s) => (s.inner_shape.clone(), Some(grid_chunk.clone())),
                None => (grid_chunk.clone(), None),
            },
            Decoder::Zarrs { .. } => {
                use zarrs::array::ArrayShardedExt;
                let outer = grid_chunk.clone().unwrap_or_else(|| shape.clone());
                match array.subchunk_shape() {
                    Some(inner) if array.is_sharded() => {
                        (inner.iter().map(|d| d.get()).collect(), Some(outer))
                    }
                    _ => (outer, None),
                }
            }
        };
        let (zarr_format, dimension_names) = match array.metadata() {
            ArrayMetadata::V2(_) => (2, None),
            ArrayMetadata::V3(m) => (3, m.dimension_names.clone()),
        };
        let info = ArrayInfo {
            path: node,
            shape,
            dtype,
            chunks,
            shards,
            fill_value: array.fill_value().as_ne_bytes().to_vec(),
            zarr_format,
            attributes: serde_json::to_string(array.attributes()).unwrap_or_else(|_| "{}".into()),
            dimension_names,
        };
        Ok(Self {
            store,
            array,
            decoder,
            info,
        })
    }

    /// Why zarrs decodes this array instead of zarrpipe (`None` when zarrpipe does).
    #[must_use]
    pub fn fallback_reason(&self) -> Option<&str> {
        match &self.decoder {
            Decoder::Own { .. } => None,
            Decoder::Zarrs { reason } => Some(reason),
        }
    }

    /// The store key of the stored chunk (shard) at `index` of the storage grid.
    #[must_use]
    pub fn chunk_key(&self, index: &[u64]) -> String {
        self.array.chunk_key(index).to_string()
    }

    /// The store key of the object holding chunk `index` of the `chunks` grid (its shard,
    /// for a sharded array). An index outside the grid is a selection error.
    pub fn stored_key_of_chunk(&self, index: &[u64]) -> Result<String> {
        let region = self.chunk_region(index)?;
        let origin: Vec<u64> = region.ranges.iter().map(|r| r.start).collect();
        let stored = self
            .array
            .chunk_grid()
            .chunk_indices(&origin)
            .ok()
            .flatten()
            .ok_or_else(|| {
                Error::InvalidSelection(format!("no stored chunk holds chunk {index:?}"))
            })?;
        Ok(self.chunk_key(&stored))
    }
}

/// Parses array metadata JSON (v2 or v3). A v2 `fill_value: null` means the data type's
/// default (zarr-python's reading); zarrs rejects it for complex types, so it is spelled out.
pub fn parse_metadata(json: &str) -> Result<ArrayMetadata, String> {
    let mut value: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    if value.get("zarr_format").and_then(Value::as_u64) == Some(2)
        && value.get("fill_value").is_some_and(Value::is_null)
        && value
            .get("dtype")
            .and_then(Value::as_str)
            .is_some_and(|d| d.contains('c'))
    {
        value["fill_value"] = serde_json::json!([0.0, 0.0]);
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// The .zarray (with .zattrs) of a v2 array, as one JSON document.
fn v2_metadata_json(store: &Store, node: &str) -> Option<String> {
    use zarrs::storage::StoreKey;
    let prefix = node.trim_matches('/');
    let key = |name: &str| {
        StoreKey::new(if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        })
        .ok()
    };
    let get = |name: &str| store.zarrs().get(&key(name)?).ok().flatten();
    let mut meta: Value = serde_json::from_slice(&get(".zarray")?).ok()?;
    if let Some(attrs) = get(".zattrs").and_then(|a| serde_json::from_slice::<Value>(&a).ok()) {
        meta["attributes"] = attrs;
    }
    Some(meta.to_string())
}

fn regular_chunk_shape(grid: &Value) -> Option<Vec<u64>> {
    if grid.get("name")?.as_str()? != "regular" {
        return None;
    }
    grid.get("configuration")?
        .get("chunk_shape")?
        .as_array()?
        .iter()
        .map(|v| v.as_u64().filter(|&d| d > 0))
        .collect()
}

/// Maps an open failure to "not found", "bad metadata" or "unsupported".
fn open_error(store: &Store, node: &str, err: ArrayCreateError) -> Error {
    let meta = |reason: String| Error::Metadata {
        path: node.to_owned(),
        reason,
    };
    match err {
        ArrayCreateError::MissingMetadata => {
            if is_group(store, node) {
                Error::NotFound(format!(
                    "{node} in {} is a group, not an array",
                    store.description()
                ))
            } else {
                Error::NotFound(format!("no array at {node} in {}", store.description()))
            }
        }
        ArrayCreateError::StorageError(StorageError::InvalidMetadata(key, reason)) => {
            if is_group(store, node) {
                Error::NotFound(format!(
                    "{node} in {} is a group, not an array",
                    store.description()
                ))
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
pub(crate) fn is_group(store: &Store, node: &str) -> bool {
    crate::hierarchy::node_kind(store, node) == Some(crate::hierarchy::NodeKind::Group)
}

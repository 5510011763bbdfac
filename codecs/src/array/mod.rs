//! The engine array: an array's metadata parsed once, and everything a read or a write
//! needs from it — shape, data type, fill value, the chunk grid, the codec chain
//! (zarrpipe's own decoder where it knows the codecs, zarrs' for the rest), the order
//! shards lay out their inner chunks when written, and the reason, if any, this array must
//! be handed to zarr-python instead. `Store`/`Array`, the zarr-python pipeline and the
//! engine adapter all read and write through it. Uses `codec`, `store`, `layout`,
//! `select`, `dtype` and `memory`; never `read` or `write`, which build on it.

mod build;
pub mod chunk_guess;
pub mod create;
mod metadata;
mod v2_document;
pub mod variable;

use std::sync::Arc;

use serde_json::Value;
use zarrs::array::{Array as ZarrsArrayOf, ArrayCreateError, ArrayMetadata};
use zarrs::storage::{ReadableListableStorageTraits, StorageError};

pub use crate::array::metadata::parse_metadata;
use crate::array::metadata::{
    check_document_grid, has_stand_in, metadata_json, open_checked, open_error,
    parse_metadata_typed, v2_string_fill,
};
use crate::array::variable::Variable;
use crate::codec::chain::ChunkChain;
use crate::codec::encode::Encoder;
use crate::dtype::numpy_type::NumpyType;
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::shard_order::ShardOrder;
use crate::select::selection::Region;
use crate::store::{node_path, Store};

pub type ZarrsArray = ZarrsArrayOf<dyn ReadableListableStorageTraits>;

/// Why the fixed-size paths refuse a variable-length array.
const VARIABLE: &str =
    "variable-length elements (strings, bytes) are read and written by read_variable / write_variable";

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
    /// The real data type when the engine carries it as opaque elements or as `int64`
    /// (datetimes, fixed-length strings and bytes, records, small floats): its NumPy dtype.
    pub numpy_type: Option<NumpyType>,
    /// Variable-length elements (strings, bytes): read and written by `variable`, never
    /// by the fixed-size paths (whose `chain()` refuses such an array).
    pub variable: Option<Variable>,
}

/// An open array, ready to read and write.
pub struct Array {
    pub(crate) store: Arc<Store>,
    pub(crate) zarrs: ZarrsArray,
    pub info: ArrayInfo,
    /// The storage grid: where each stored chunk (shard) starts and its shape.
    pub(crate) grid: ChunkGrid,
    /// The `chunks` grid reads work in: inner chunks of a sharded array, else `grid`.
    pub(crate) read_grid: ChunkGrid,
    /// How stored chunks decode and encode, or why this array cannot be read here.
    chain: std::result::Result<Arc<ChunkChain>, String>,
    /// zarrpipe's own encoder for this array's chunks, when it has one (else zarrs').
    pub(crate) encoder: Option<Encoder>,
    /// The order a written shard lays out its inner chunks.
    pub(crate) shard_order: ShardOrder,
    /// The metadata document as stored, for a type zarrs holds as a stand-in (datetimes,
    /// fixed-length bytes, records...): zarrs' own metadata names the stand-in.
    stored_document: Option<Value>,
}

impl Array {
    /// Opens the array at `path` (relative to the store root; `""` is the root itself).
    pub fn open(store: Arc<Store>, path: &str) -> Result<Self> {
        crate::codec::harden::install();
        let node = node_path(path)?;
        let zarrs = match open_checked(&store, &node)? {
            Ok(array) => array,
            Err(ArrayCreateError::InvalidFillValueMetadata { .. }) => {
                // zarrs rejects some v2 `fill_value: null` (complex); read it as zarr-python does.
                let json = metadata_json(&store, &node).ok_or_else(|| Error::Metadata {
                    path: node.clone(),
                    reason: "invalid fill value".into(),
                })?;
                return Self::with_metadata(store, &node, &json);
            }
            Err(
                e @ (ArrayCreateError::DataTypeCreateError(_)
                | ArrayCreateError::UnsupportedZarrV2Array(_)
                | ArrayCreateError::StorageError(StorageError::InvalidMetadata(..))),
            ) => {
                // A data type zarrs lacks (e.g. v2 `<M8[ns]`, `|S7`, records): the stand-in
                // of `numpy_type` may open it.
                return match metadata_json(&store, &node) {
                    Some(json) if has_stand_in(&json) => Self::with_metadata(store, &node, &json),
                    _ => Err(open_error(&store, &node, e)),
                };
            }
            Err(e) => return Err(open_error(&store, &node, e)),
        };
        // A type zarrs opens in its own way (v3 datetimes, raw bits, UTF-32) is opened
        // again through its stand-in, so that it reads as zarr-python reads it.
        let mut json = serde_json::to_value(zarrs.metadata()).unwrap_or(Value::Null);
        if let ArrayMetadata::V2(_) = zarrs.metadata() {
            json["attributes"] = Value::Object(zarrs.attributes().clone());
        }
        if has_stand_in(&json.to_string()) || v2_string_fill(&mut json) {
            return Self::with_metadata(store, &node, &json.to_string());
        }
        Self::from_zarrs(store, node, zarrs, None)
    }

    /// The array at `path` described by `metadata_json` (zarr.json or .zarray content)
    /// instead of the metadata in the store: for callers that already hold the metadata.
    pub fn with_metadata(store: Arc<Store>, path: &str, metadata_json: &str) -> Result<Self> {
        crate::codec::harden::install();
        let node = node_path(path)?;
        // Parsed once: repaired (a v2 string fill value), and kept for a stand-in type.
        let mut doc = serde_json::from_str::<Value>(metadata_json).ok();
        let mut fixed = None;
        if let Some(d) = doc.as_mut() {
            if v2_string_fill(d) {
                fixed = Some(d.to_string());
            }
        }
        let metadata_json = fixed.as_deref().unwrap_or(metadata_json);
        if let Some(d) = &doc {
            check_document_grid(d).map_err(|reason| Error::Metadata {
                path: node.clone(),
                reason,
            })?;
        }
        let (metadata, numpy_type) =
            parse_metadata_typed(metadata_json).map_err(|reason| Error::Metadata {
                path: node.clone(),
                reason,
            })?;
        let zarrs = ZarrsArray::new_with_metadata(store.zarrs(), &node, metadata)
            .map_err(|e| open_error(&store, &node, e))?;
        let stand_in = numpy_type.is_some();
        let mut array = Self::from_zarrs(store, node, zarrs, numpy_type)?;
        if stand_in {
            if let Some(Value::Object(m)) = &mut doc {
                if array.info.zarr_format == 2 {
                    // A v2 document comes with its .zattrs merged in; .zarray has none.
                    m.shift_remove("attributes");
                }
            }
            array.stored_document = doc;
        }
        Ok(array)
    }

    /// An array whose chunk bytes the caller supplies (and stores) itself, described by
    /// `metadata_json`: zarr-python's pipeline over a store zarrpipe cannot reach.
    pub fn detached(metadata_json: &str) -> Result<Self> {
        Self::with_metadata(Arc::new(Store::in_memory([])), "/", metadata_json)
    }

    /// Writes shards with their inner chunks in `order` (zarr-python's
    /// `subchunk_write_order`).
    #[must_use]
    pub fn with_shard_order(mut self, order: ShardOrder) -> Self {
        self.shard_order = order;
        self
    }

    /// The codec chain of stored chunks, or `Unsupported` with the reason this array must be
    /// read elsewhere (zarr-python).
    pub fn chain(&self) -> Result<&Arc<ChunkChain>> {
        self.chain
            .as_ref()
            .map_err(|reason| Error::Unsupported(format!("array {}: {reason}", self.info.path)))
    }

    /// Why zarrpipe cannot read or write this array at all (`None` when it can).
    #[must_use]
    pub fn unsupported_reason(&self) -> Option<&str> {
        self.chain.as_ref().err().map(String::as_str)
    }

    /// Why zarrs' codecs decode (part of) this array's chunks instead of zarrpipe's own
    /// (`None` when zarrpipe decodes every codec itself).
    #[must_use]
    pub fn fallback_reason(&self) -> Option<&str> {
        match &self.chain {
            Ok(chain) => chain.zarrs_reason(),
            Err(reason) => Some(reason),
        }
    }

    /// The storage grid (of shards, for a sharded array).
    #[must_use]
    pub fn grid(&self) -> &ChunkGrid {
        &self.grid
    }

    /// Refuses a stored chunk shape a caller gives for the chunk at `key` (zarr-python's
    /// pipeline says each chunk's shape) unless it has the array's axes, none empty. Not
    /// checked against the grid: zarr-python grows a rectilinear grid in place (`resize`,
    /// `append`) without telling the pipeline; decoders check every chunk's size anyway.
    pub fn check_chunk_shape(&self, shape: &[u64], key: &str) -> Result<()> {
        if shape.len() == self.info.shape.len() && !shape.contains(&0) {
            Ok(())
        } else {
            Err(Error::InvalidSelection(format!(
                "chunk {key:?}: shape {shape:?} is not a chunk shape of a {}-dimensional array",
                self.info.shape.len()
            )))
        }
    }

    /// The `chunks` grid: inner chunks of a sharded array, else the storage grid.
    #[must_use]
    pub fn read_grid(&self) -> &ChunkGrid {
        &self.read_grid
    }

    /// The array's metadata document as zarrs holds it (v3 `zarr.json`, or v2 `.zarray`).
    #[must_use]
    pub fn metadata_json(&self) -> Value {
        match &self.stored_document {
            Some(doc) => doc.clone(),
            None => serde_json::to_value(self.zarrs.metadata()).unwrap_or(Value::Null),
        }
    }

    /// The number of stored chunks (shards) in the storage grid.
    #[must_use]
    pub fn stored_chunk_count(&self) -> u64 {
        self.grid.shape().iter().product()
    }

    /// What the array stores: (how many chunk or shard values, their bytes, and every
    /// byte under the array's prefix, metadata included).
    pub fn stored(&self) -> Result<(u64, u64, u64)> {
        let values = self
            .store
            .stored_values(&crate::store::key_prefix(&self.info.path))?;
        let total = values.iter().map(|(_, n)| n).sum();
        let chunks: Vec<&(String, u64)> = values
            .iter()
            .filter(|(k, _)| {
                let name = k.rsplit('/').next().unwrap_or(k);
                !name.starts_with('.') && name != "zarr.json"
            })
            .collect();
        Ok((
            chunks.len() as u64,
            chunks.iter().map(|(_, n)| n).sum(),
            total,
        ))
    }

    /// How many inner chunks the stored shards hold, as zarr-python's
    /// `nchunks_initialized` counts them (shards of a rectilinear grid hold different
    /// numbers). Lists the array's keys.
    pub fn stored_inner_chunks(&self) -> Result<u64> {
        let values = self
            .store
            .stored_values(&crate::store::key_prefix(&self.info.path))?;
        let keys: std::collections::HashSet<&str> = values
            .iter()
            .map(|(k, _)| k.trim_start_matches('/'))
            .collect();
        let counts: Vec<std::ops::Range<u64>> = self.grid.shape().iter().map(|&n| 0..n).collect();
        let mut total = 0u64;
        crate::layout::index::for_each_index(&counts, |index| {
            if keys.contains(self.chunk_key(index).trim_start_matches('/')) {
                let shard = self.grid.chunk_shape(index);
                total += (shard.iter().zip(&self.info.chunks))
                    .map(|(s, c)| s / c.max(&1))
                    .product::<u64>();
            }
        });
        Ok(total)
    }

    /// The store the array lives in.
    #[must_use]
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The store key of the stored chunk (shard) at `index` of the storage grid.
    #[must_use]
    pub fn chunk_key(&self, index: &[u64]) -> String {
        self.zarrs.chunk_key(index).to_string()
    }

    /// The number of chunks along each axis of the `chunks` grid (inner chunks of shards).
    #[must_use]
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.read_grid.shape()
    }

    /// The in-bounds region of chunk `index` of the `chunks` grid.
    pub fn chunk_region(&self, index: &[u64]) -> Result<Region> {
        let grid = self.chunk_grid_shape();
        if index.len() != grid.len() || index.iter().zip(&grid).any(|(i, g)| i >= g) {
            return Err(Error::InvalidSelection(format!(
                "chunk index {index:?} is out of bounds for a chunk grid of shape {grid:?}"
            )));
        }
        let g = &self.read_grid;
        let ranges: Vec<std::ops::Range<u64>> = index
            .iter()
            .zip(&self.info.shape)
            .enumerate()
            .map(|(a, (&i, &s))| g.start(a, i)..(g.start(a, i) + g.edge(a, i)).min(s))
            .collect();
        let out_shape = ranges.iter().map(|r| r.end - r.start).collect();
        Ok(Region {
            dropped: vec![false; ranges.len()],
            ranges,
            out_shape,
        })
    }

    /// The store key of the object holding chunk `index` of the `chunks` grid (its shard,
    /// for a sharded array). An index outside the grid is a selection error.
    pub fn stored_key_of_chunk(&self, index: &[u64]) -> Result<String> {
        let region = self.chunk_region(index)?;
        let stored: Vec<u64> = region
            .ranges
            .iter()
            .enumerate()
            .map(|(a, r)| self.grid.chunk_at(a, r.start))
            .collect();
        Ok(self.chunk_key(&stored))
    }
}

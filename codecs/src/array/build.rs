//! Building an [`Array`] from the array zarrs parsed, in named steps: the element type, the
//! stored chunk grid, the codec chain (or why zarrpipe cannot decode it), the chunks reads
//! work in, and what a user sees of the array.

use std::sync::Arc;

use serde_json::Value;
use zarrs::array::ArrayMetadata;
use zarrs::metadata::v3::ArrayMetadataV3;

use crate::array::metadata::{check_shard_edges, data_type_spelling, v3_metadata};
use crate::array::variable::Variable;
use crate::array::{Array, ArrayInfo, ZarrsArray, VARIABLE};
use crate::codec::chain::{ChainError, ChunkChain, ZarrsTypes};
use crate::codec::encode::Encoder;
use crate::dtype::numpy_type::NumpyType;
use crate::dtype::ElementType;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::shard_order::ShardOrder;
use crate::memory::buffer::checked_nbytes;
use crate::store::Store;

/// The codec chain, or the reason zarr-python must decode this array's chunks.
type Chain = std::result::Result<Arc<ChunkChain>, String>;

impl Array {
    pub(super) fn from_zarrs(
        store: Arc<Store>,
        node: String,
        zarrs: ZarrsArray,
        numpy_type: Option<NumpyType>,
    ) -> Result<Self> {
        let variable = Variable::of(zarrs.data_type(), zarrs.metadata());
        let dtype = element_type(&zarrs, numpy_type.as_ref(), variable, &node)?;
        let v3 = v3_metadata(&zarrs).ok_or_else(|| {
            Error::Unsupported(format!("cannot convert the v2 metadata of {node}"))
        })?;
        let shape = zarrs.shape().to_vec();
        let (grid, chain) = match stored_grid(&v3, &shape, &node)? {
            Ok(grid) => {
                check_addressable(&grid, dtype, &node)?;
                let chain = match variable {
                    Some(_) => Err(VARIABLE.to_owned()),
                    None => codec_chain(&zarrs, &v3, &grid, dtype, numpy_type.as_ref(), &node)?,
                };
                (grid, chain)
            }
            Err(reason) => (ChunkGrid::regular(&shape, &shape), Err(reason)),
        };
        let encoder = match &chain {
            Ok(c) if numpy_type.is_none() => Encoder::parse(&v3.codecs, c),
            _ => None,
        };
        let (chunks, shards) = read_chunks(&zarrs, &chain, &grid);
        let read_grid = match &shards {
            // Every shard edge is a multiple of the inner edge: inner chunks tile the array.
            Some(_) => ChunkGrid::regular(&shape, &chunks),
            None => grid.clone(),
        };
        let (zarr_format, dimension_names) = match zarrs.metadata() {
            ArrayMetadata::V2(_) => (2, None),
            ArrayMetadata::V3(m) => (3, m.dimension_names.clone()),
        };
        let info = ArrayInfo {
            path: node,
            shape,
            dtype,
            chunks,
            shards,
            fill_value: fill_value(&zarrs, numpy_type.as_ref()),
            zarr_format,
            attributes: serde_json::to_string(zarrs.attributes()).unwrap_or_else(|_| "{}".into()),
            dimension_names,
            numpy_type,
            variable,
        };
        Ok(Self {
            store,
            zarrs,
            info,
            grid,
            read_grid,
            chain,
            encoder,
            shard_order: ShardOrder::C,
            stored_document: None,
        })
    }
}

/// The element type reads and writes copy: the NumPy type zarrs lacks, else zarrs' own
/// (a placeholder for variable-length data, whose chain refuses fixed-size reads).
fn element_type(
    zarrs: &ZarrsArray,
    numpy_type: Option<&NumpyType>,
    variable: Option<Variable>,
    node: &str,
) -> Result<ElementType> {
    match (numpy_type, variable) {
        (Some(t), _) => Ok(t.elem),
        (None, Some(_)) => Ok(ElementType::UInt8),
        (None, None) => ElementType::from_zarrs(zarrs.data_type()).map_err(|_| {
            Error::Unsupported(format!(
                "array {node}: data type {} is not a fixed-size type zarrpipe reads",
                data_type_spelling(zarrs)
            ))
        }),
    }
}

/// The stored chunk grid, or (inner `Err`) why zarrpipe does not know it.
fn stored_grid(
    v3: &ArrayMetadataV3,
    shape: &[u64],
    node: &str,
) -> Result<std::result::Result<ChunkGrid, String>> {
    let grid_json = serde_json::to_value(&v3.chunk_grid).unwrap_or(Value::Null);
    let grid = ChunkGrid::from_metadata(&grid_json, shape).map_err(|reason| Error::Metadata {
        path: node.to_owned(),
        reason,
    })?;
    Ok(grid.ok_or_else(|| format!("chunk grid {grid_json} is not one zarrpipe knows")))
}

/// A chunk must at least be addressable; reads of its parts are checked later.
fn check_addressable(grid: &ChunkGrid, dtype: ElementType, node: &str) -> Result<()> {
    let chunk = grid.max_chunk_shape();
    checked_nbytes(&chunk, dtype.size()).map_err(|_| Error::Metadata {
        path: node.to_owned(),
        reason: format!("chunk shape {chunk:?} is too large to address"),
    })?;
    Ok(())
}

/// The chain that decodes and encodes chunks of `grid`; metadata that can never be valid
/// (a chain that contradicts itself, shards that do not tile) is an error.
fn codec_chain(
    zarrs: &ZarrsArray,
    v3: &ArrayMetadataV3,
    grid: &ChunkGrid,
    dtype: ElementType,
    numpy_type: Option<&NumpyType>,
    node: &str,
) -> Result<Chain> {
    let invalid = |reason| Error::Metadata {
        path: node.to_owned(),
        reason,
    };
    let chunk = grid.max_chunk_shape();
    let types = ZarrsTypes {
        data_type: zarrs.data_type().clone(),
        fill_value: zarrs.fill_value().clone(),
    };
    let swaps = numpy_type.and_then(|t| t.field_swaps.as_ref());
    let built = ChunkChain::build(&v3.codecs, &chunk, dtype, &types).and_then(|c| match swaps {
        Some(swaps) => c.with_field_swaps(swaps),
        None => Ok(c),
    });
    let chain = match built {
        Ok(chain) => chain,
        Err(ChainError::Unsupported(reason)) => return Ok(Err(reason)),
        Err(ChainError::Invalid(reason)) => return Err(invalid(reason)),
    };
    check_shard_edges(grid, &chain).map_err(invalid)?;
    Ok(Ok(Arc::new(chain)))
}

/// The chunks reads work in (inner chunks of a sharded array) and the stored shard shape
/// (`None`: not sharded). A rectilinear grid has no one chunk shape: its largest stands in
/// (the binding says the grid is rectilinear and gives its sizes instead).
fn read_chunks(
    zarrs: &ZarrsArray,
    chain: &Chain,
    grid: &ChunkGrid,
) -> (Vec<u64>, Option<Vec<u64>>) {
    use zarrs::array::ArrayShardedExt;
    let stored_shape = grid.max_chunk_shape();
    if let Some(s) = chain.as_ref().ok().and_then(|c| c.plain_sharding()) {
        return (s.inner_shape.clone(), Some(stored_shape));
    }
    // Sharding that zarrs decodes (inner codecs ours lacks) still has shards; with other
    // codecs around it there are none, as zarr-python says.
    match zarrs.subchunk_shape() {
        Some(inner) if zarrs.is_exclusively_sharded() => {
            (inner.iter().map(|d| d.get()).collect(), Some(stored_shape))
        }
        _ => (stored_shape, None),
    }
}

/// One element of the fill value, native-endian, as the caller's values spell it.
fn fill_value(zarrs: &ZarrsArray, numpy_type: Option<&NumpyType>) -> Vec<u8> {
    let mut fill = zarrs.fill_value().as_ne_bytes().to_vec();
    if let Some(sub) = numpy_type.and_then(|t| t.sub_byte) {
        sub.to_numpy(&mut fill);
    }
    fill
}

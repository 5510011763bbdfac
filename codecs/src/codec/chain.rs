//! The codec chains zarrpipe decodes itself, parsed from Zarr v3 codec metadata (v2 arrays
//! arrive here converted by zarrs). A chain (or the inner chain of a shard) with a codec not
//! listed here is decoded by zarrs' codec chain, a whole chunk at a time, and placed like any
//! other chunk, so every chunk goes through the same fetch, cache and placement path.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs> and the
//! sharding codec, <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/>.

use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::Value;
use zarrs::array::{CodecChain, DataType, FillValue};
use zarrs::metadata::v3::MetadataV3;

use crate::codec::decode::scatter::Scatter;
use crate::codec::decode::ChunkTarget;
use crate::dtype::ElementType;
use crate::dtype::{ByteOrder, FieldSwaps};
use crate::layout::placement::Placement;

/// A bytes-to-bytes codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BytesCodec {
    Zstd,
    Gzip,
    Zlib,
    Blosc,
    Crc32c,
}

/// How a chunk's array becomes bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayToBytes {
    /// The `bytes` codec: raw elements in a byte order.
    Bytes(ByteOrder),
    /// `sharding_indexed`: inner chunks plus an index.
    Sharding(Box<Sharding>),
    /// A chain with codecs zarrpipe does not decode itself: zarrs decodes whole chunks.
    Zarrs(Box<ZarrsChain>),
}

/// A codec chain decoded (and encoded) by zarrs, for chunks of one shape.
#[derive(Clone, Debug)]
pub struct ZarrsChain {
    pub codecs: Arc<CodecChain>,
    pub shape: Vec<NonZeroU64>,
    pub data_type: DataType,
    pub fill_value: FillValue,
    /// Why zarrpipe's own decoder does not handle it.
    pub reason: String,
}

impl PartialEq for ZarrsChain {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.codecs, &other.codecs) && self.shape == other.shape
    }
}

impl Eq for ZarrsChain {}

/// The data type and fill value zarrs needs to decode a chain it handles.
#[derive(Clone, Debug)]
pub struct ZarrsTypes {
    pub data_type: DataType,
    pub fill_value: FillValue,
}

/// A whole chunk codec chain: `transpose`, then an array-to-bytes codec, then bytes codecs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkChain {
    /// The stream's axis `k` is chunk axis `transpose[k]`.
    pub transpose: Option<Vec<usize>>,
    pub array_to_bytes: ArrayToBytes,
    /// In encoding order; decoding runs them last to first.
    pub bytes_codecs: Vec<BytesCodec>,
}

/// The `sharding_indexed` configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sharding {
    pub inner_shape: Vec<u64>,
    pub inner: ChunkChain,
    pub index_order: ByteOrder,
    pub index_crc32c: bool,
    pub index_at_end: bool,
}

impl Sharding {
    /// Inner chunks per shard along each axis.
    #[must_use]
    pub fn grid(&self, shard_shape: &[u64]) -> Vec<u64> {
        shard_shape
            .iter()
            .zip(&self.inner_shape)
            .map(|(s, i)| s / i)
            .collect()
    }

    /// Encoded size of the index for `n` inner chunks.
    #[must_use]
    pub fn index_len(&self, n: u64) -> u64 {
        16 * n + if self.index_crc32c { 4 } else { 0 }
    }
}

/// Why a chain is not one zarrpipe decodes itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// Valid, but not a chain zarrpipe decodes (zarrs may).
    Unsupported(String),
    /// Breaks the spec: no decoder should try it.
    Invalid(String),
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported(why) | Self::Invalid(why) => f.write_str(why),
        }
    }
}

fn invalid(why: impl Into<String>) -> ChainError {
    ChainError::Invalid(why.into())
}

fn unsupported(why: impl Into<String>) -> ChainError {
    ChainError::Unsupported(why.into())
}

fn byte_order(endian: Option<&str>, dtype: ElementType) -> Result<ByteOrder, ChainError> {
    let swap_width = dtype.swap_unit();
    let native_little = cfg!(target_endian = "little");
    match endian {
        _ if swap_width == 1 => Ok(ByteOrder::Native),
        None => Err(invalid(
            "the bytes codec needs an endian for multi-byte types",
        )),
        Some("little") if native_little => Ok(ByteOrder::Native),
        Some("big") if !native_little => Ok(ByteOrder::Native),
        Some("little" | "big") => Ok(ByteOrder::Swap(swap_width)),
        Some(other) => Err(invalid(format!("unknown endian {other:?}"))),
    }
}

pub(crate) fn config(meta: &MetadataV3) -> Value {
    serde_json::to_value(meta)
        .ok()
        .and_then(|v| v.get("configuration").cloned())
        .unwrap_or(Value::Null)
}

fn parse_order(config: &Value, ndim: usize) -> Result<Vec<usize>, ChainError> {
    let order: Vec<usize> = config
        .get("order")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("transpose without an order list"))?
        .iter()
        .map(|v| v.as_u64().map(|x| x as usize))
        .collect::<Option<_>>()
        .ok_or_else(|| invalid("transpose order must be integers"))?;
    let mut seen = vec![false; ndim];
    if order.len() != ndim
        || order
            .iter()
            .any(|&a| a >= ndim || std::mem::replace(&mut seen[a], true))
    {
        return Err(invalid(format!(
            "transpose order {order:?} is not a permutation of {ndim} axes"
        )));
    }
    Ok(order)
}

fn parse_shape(config: &Value, field: &str) -> Result<Vec<u64>, ChainError> {
    config
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(format!("sharding without {field}")))?
        .iter()
        .map(|v| v.as_u64().filter(|&x| x > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| invalid(format!("sharding {field} must be positive integers")))
}

pub(crate) fn parse_codecs(config: &Value, field: &str) -> Result<Vec<MetadataV3>, ChainError> {
    let list = config
        .get(field)
        .cloned()
        .ok_or_else(|| invalid(format!("sharding without {field}")))?;
    serde_json::from_value(list).map_err(|e| invalid(format!("sharding {field}: {e}")))
}

impl ChunkChain {
    /// Parses `codecs` for chunks of `chunk_shape` holding `dtype`, as a chain zarrpipe
    /// decodes itself, or `Unsupported`.
    pub fn parse(
        codecs: &[MetadataV3],
        chunk_shape: &[u64],
        dtype: ElementType,
    ) -> Result<Self, ChainError> {
        Self::parse_with(codecs, chunk_shape, dtype, None)
    }

    /// Like [`Self::parse`], but a chain (or a shard's inner chain) zarrpipe does not decode
    /// itself becomes a [`ZarrsChain`]; `Unsupported` only when zarrs cannot decode it either.
    pub fn build(
        codecs: &[MetadataV3],
        chunk_shape: &[u64],
        dtype: ElementType,
        zarrs: &ZarrsTypes,
    ) -> Result<Self, ChainError> {
        Self::parse_with(codecs, chunk_shape, dtype, Some(zarrs))
    }

    fn parse_with(
        codecs: &[MetadataV3],
        chunk_shape: &[u64],
        dtype: ElementType,
        zarrs: Option<&ZarrsTypes>,
    ) -> Result<Self, ChainError> {
        match Self::parse_own(codecs, chunk_shape, dtype, zarrs) {
            Err(ChainError::Unsupported(reason)) => match zarrs {
                Some(types) => Self::zarrs(codecs, chunk_shape, types, reason),
                None => Err(ChainError::Unsupported(reason)),
            },
            other => other,
        }
    }

    fn zarrs(
        codecs: &[MetadataV3],
        chunk_shape: &[u64],
        types: &ZarrsTypes,
        reason: String,
    ) -> Result<Self, ChainError> {
        let chain = CodecChain::from_metadata(codecs)
            .map_err(|e| unsupported(format!("{reason}; zarrs cannot decode it either: {e}")))?;
        let shape = chunk_shape
            .iter()
            .map(|&d| NonZeroU64::new(d))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid(format!("chunk shape {chunk_shape:?} has a zero")))?;
        Ok(Self {
            transpose: None,
            array_to_bytes: ArrayToBytes::Zarrs(Box::new(ZarrsChain {
                codecs: Arc::new(chain),
                shape,
                data_type: types.data_type.clone(),
                fill_value: types.fill_value.clone(),
                reason,
            })),
            bytes_codecs: Vec::new(),
        })
    }

    /// Why zarrs decodes (part of) this chain, if it does.
    #[must_use]
    pub fn zarrs_reason(&self) -> Option<&str> {
        match &self.array_to_bytes {
            ArrayToBytes::Zarrs(z) => Some(&z.reason),
            ArrayToBytes::Sharding(s) => s.inner.zarrs_reason(),
            ArrayToBytes::Bytes(_) => None,
        }
    }

    fn parse_own(
        codecs: &[MetadataV3],
        chunk_shape: &[u64],
        dtype: ElementType,
        zarrs: Option<&ZarrsTypes>,
    ) -> Result<Self, ChainError> {
        let ndim = chunk_shape.len();
        let mut transpose: Option<Vec<usize>> = None;
        let mut array_to_bytes = None;
        let mut bytes_codecs = Vec::new();
        for meta in codecs {
            let name = meta.name();
            let cfg = config(meta);
            match name {
                "transpose" if array_to_bytes.is_none() => {
                    let order = parse_order(&cfg, ndim)?;
                    // Composing t1 then t2: stream axis k is chunk axis t1[t2[k]].
                    transpose = Some(match transpose {
                        None => order,
                        Some(first) => order.iter().map(|&k| first[k]).collect(),
                    });
                }
                "bytes" | "endian" if array_to_bytes.is_none() => {
                    let endian = cfg.get("endian").and_then(Value::as_str);
                    array_to_bytes = Some(ArrayToBytes::Bytes(byte_order(endian, dtype)?));
                }
                "sharding_indexed" if array_to_bytes.is_none() => {
                    if transpose.is_some() {
                        return Err(unsupported("transpose before sharding"));
                    }
                    array_to_bytes = Some(ArrayToBytes::Sharding(Box::new(Sharding::parse(
                        &cfg,
                        chunk_shape,
                        dtype,
                        zarrs,
                    )?)));
                }
                _ if array_to_bytes.is_some() => bytes_codecs.push(match name {
                    "zstd" | "numcodecs.zstd" => BytesCodec::Zstd,
                    "gzip" | "numcodecs.gzip" => BytesCodec::Gzip,
                    "zlib" | "numcodecs.zlib" => BytesCodec::Zlib,
                    "blosc" | "numcodecs.blosc" => BytesCodec::Blosc,
                    "crc32c" => BytesCodec::Crc32c,
                    other => return Err(unsupported(format!("codec {other:?}"))),
                }),
                other => return Err(unsupported(format!("codec {other:?} in this position"))),
            }
        }
        let array_to_bytes = array_to_bytes.ok_or_else(|| invalid("no array-to-bytes codec"))?;
        Ok(Self {
            transpose: transpose.filter(|t| t.iter().enumerate().any(|(k, &a)| k != a)),
            array_to_bytes,
            bytes_codecs,
        })
    }

    /// The byte order of a chain that stores elements as they are (no compression, no
    /// checksum): such chunks can be copied straight from the file into place.
    #[must_use]
    pub fn raw_order(&self) -> Option<ByteOrder> {
        match &self.array_to_bytes {
            ArrayToBytes::Bytes(order) if self.bytes_codecs.is_empty() => Some(order.clone()),
            _ => None,
        }
    }

    /// True when a chunk decodes on one thread without rayon: zarrpipe's own decoders all
    /// the way down (zarrs' codecs may run parallel loops) and no blosc (which threads a
    /// lone chunk's blocks).
    #[must_use]
    pub fn decodes_sequentially(&self) -> bool {
        !self.bytes_codecs.contains(&BytesCodec::Blosc)
            && match &self.array_to_bytes {
                ArrayToBytes::Bytes(_) => true,
                ArrayToBytes::Sharding(s) => s.inner.decodes_sequentially(),
                ArrayToBytes::Zarrs(_) => false,
            }
    }

    /// The byte order of a chain that is `bytes` (with any `transpose`) and `zstd` alone:
    /// its chunks can be decoded from a file piece by piece.
    #[must_use]
    pub fn zstd_only_order(&self) -> Option<ByteOrder> {
        match (&self.array_to_bytes, self.bytes_codecs.as_slice()) {
            (ArrayToBytes::Bytes(order), [BytesCodec::Zstd]) => Some(order.clone()),
            _ => None,
        }
    }

    /// A sink placing this chain's decoded byte stream (elements in `order`, axes in the
    /// chain's transpose order) into `target`.
    #[must_use]
    pub fn scatter<'o>(
        &self,
        target: &ChunkTarget<'o>,
        placement: &Placement,
        order: ByteOrder,
    ) -> Scatter<'o> {
        Scatter::new(
            target.out,
            placement,
            target.elem,
            order,
            self.transpose.as_deref(),
        )
    }

    /// This chain for records stored in the other byte order: its `bytes` codec (inside any
    /// sharding) reverses the spans `swaps` of every element. Chains that zarrs decodes are
    /// `Unsupported`: zarrs carries records as opaque bytes and would not swap them.
    pub fn with_field_swaps(mut self, swaps: &FieldSwaps) -> Result<Self, ChainError> {
        self.array_to_bytes = match self.array_to_bytes {
            ArrayToBytes::Bytes(_) => ArrayToBytes::Bytes(ByteOrder::Fields(swaps.clone())),
            ArrayToBytes::Sharding(mut s) => {
                s.inner = s.inner.with_field_swaps(swaps)?;
                ArrayToBytes::Sharding(s)
            }
            ArrayToBytes::Zarrs(z) => {
                return Err(unsupported(format!(
                    "records stored in the other byte order with codecs zarrs decodes ({}): \
                     zarrpipe swaps record fields in its own decoder only",
                    z.reason
                )))
            }
        };
        Ok(self)
    }

    /// The sharding codec, when it is the whole chain (so shards can be read by byte range).
    #[must_use]
    pub fn plain_sharding(&self) -> Option<&Sharding> {
        match &self.array_to_bytes {
            ArrayToBytes::Sharding(s) if self.bytes_codecs.is_empty() => Some(s),
            _ => None,
        }
    }
}

impl Sharding {
    fn parse(
        cfg: &Value,
        shard_shape: &[u64],
        dtype: ElementType,
        zarrs: Option<&ZarrsTypes>,
    ) -> Result<Self, ChainError> {
        let inner_shape = parse_shape(cfg, "chunk_shape")?;
        if inner_shape.len() != shard_shape.len()
            || shard_shape
                .iter()
                .zip(&inner_shape)
                .any(|(s, i)| s % i != 0)
        {
            return Err(invalid(format!(
                "inner chunk shape {inner_shape:?} does not divide shard shape {shard_shape:?}"
            )));
        }
        let inner =
            ChunkChain::parse_with(&parse_codecs(cfg, "codecs")?, &inner_shape, dtype, zarrs)?;
        let index_at_end = match cfg.get("index_location").and_then(Value::as_str) {
            None | Some("end") => true,
            Some("start") => false,
            Some(other) => return Err(invalid(format!("index_location {other:?}"))),
        };
        // The index is a uint64 array of shape (..grid, 2): only bytes (+ crc32c) is handled.
        let index_codecs = parse_codecs(cfg, "index_codecs")?;
        let mut index_grid = inner_shape.clone();
        index_grid.push(2);
        let index_chain = ChunkChain::parse(&index_codecs, &index_grid, ElementType::UInt64)?;
        let index_order = match (&index_chain.array_to_bytes, index_chain.transpose.is_some()) {
            (ArrayToBytes::Bytes(order), false) => order.clone(),
            _ => {
                return Err(unsupported(
                    "shard index codecs other than bytes and crc32c",
                ))
            }
        };
        let index_crc32c = match index_chain.bytes_codecs.as_slice() {
            [] => false,
            [BytesCodec::Crc32c] => true,
            _ => {
                return Err(unsupported(
                    "shard index codecs other than bytes and crc32c",
                ))
            }
        };
        Ok(Self {
            inner_shape,
            inner,
            index_order,
            index_crc32c,
            index_at_end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codecs(json: &str) -> Vec<MetadataV3> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn plain_zstd_chain() {
        let c = ChunkChain::parse(
            &codecs(r#"[{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":0,"checksum":false}}]"#),
            &[4, 4],
            ElementType::UInt16,
        )
        .unwrap();
        assert_eq!(c.array_to_bytes, ArrayToBytes::Bytes(ByteOrder::Native));
        assert_eq!(c.bytes_codecs, vec![BytesCodec::Zstd]);
        assert!(c.transpose.is_none());
    }

    #[test]
    fn big_endian_complex_swaps_halves() {
        let c = ChunkChain::parse(
            &codecs(r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#),
            &[4],
            ElementType::Complex128,
        )
        .unwrap();
        assert_eq!(c.array_to_bytes, ArrayToBytes::Bytes(ByteOrder::Swap(8)));
    }

    #[test]
    fn sharding_with_checksummed_index() {
        let c = ChunkChain::parse(
            &codecs(
                r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,2],
                "codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":1}}],
                "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],
                "index_location":"start"}}]"#,
            ),
            &[4, 6],
            ElementType::Float32,
        )
        .unwrap();
        let s = c.plain_sharding().unwrap();
        assert_eq!(s.grid(&[4, 6]), vec![2, 3]);
        assert!(s.index_crc32c && !s.index_at_end);
        assert_eq!(s.inner.bytes_codecs, vec![BytesCodec::Gzip]);
        assert_eq!(s.index_len(6), 100);
    }

    #[test]
    fn unknown_codecs_are_left_to_zarrs() {
        assert!(ChunkChain::parse(
            &codecs(r#"[{"name":"bytes","configuration":{"endian":"little"}},{"name":"numcodecs.pcodec"}]"#),
            &[4],
            ElementType::Int32,
        )
        .is_err());
        assert!(ChunkChain::parse(
            &codecs(r#"[{"name":"transpose","configuration":{"order":[0,0]}},{"name":"bytes","configuration":{"endian":"little"}}]"#),
            &[4, 4],
            ElementType::Int8,
        )
        .is_err());
    }
}

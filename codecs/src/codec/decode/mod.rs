//! zarrpipe's own chunk decoder for the common codec chains: chunks stream from their
//! encoded bytes straight into the output buffer with bounded memory, and every size,
//! offset and checksum in the data is checked before it is trusted.

pub mod arriving;
pub mod bytes_codecs;
pub mod scatter;
pub mod sharding;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::codec::chain::{ArrayToBytes, ChunkChain, ZarrsChain};
use crate::codec::decode::scatter::Scatter;
use crate::dtype::ByteOrder;
use crate::layout::placement::Placement;
use crate::memory::out::OutPtr;
use bytes_codecs::{decode_full_stages, decode_stream, DecodeError};

use crate::error::{Error, Result};

/// Where decoded chunks go: the output buffer, the element size and the fill value.
pub struct ChunkTarget<'a> {
    pub out: &'a OutPtr,
    pub elem: usize,
    /// One element's native-endian bytes, written where data is missing.
    pub fill: &'a [u8],
    /// Threads one chunk may use inside its codec (blosc): more than 1 only when a read is
    /// a single chunk, so the pool's threads are not busy with other chunks.
    pub threads: usize,
}

impl DecodeError {
    /// Names the chunk the error is about.
    #[must_use]
    pub fn at(self, key: &str) -> Error {
        match self {
            Self::Corrupt(reason) => Error::corrupt(key, reason),
            Self::Checksum { stored, computed } => Error::Checksum {
                key: key.to_owned(),
                detail: format!(": crc32c stored {stored:#010x}, computed {computed:#010x}"),
            },
            Self::ChecksumFailed(detail) => Error::Checksum {
                key: key.to_owned(),
                detail: format!(": {detail}"),
            },
            Self::OutOfMemory(bytes) => Error::OutOfMemory {
                bytes: bytes as u128,
                what: format!("decoding chunk {key:?}"),
            },
        }
    }
}

/// Decodes one chunk's encoded bytes and writes the wanted part where `placement` says.
pub fn decode_chunk(
    chain: &ChunkChain,
    encoded: &[u8],
    placement: &Placement,
    target: &ChunkTarget<'_>,
    key: &str,
) -> Result<()> {
    match &chain.array_to_bytes {
        ArrayToBytes::Bytes(order) => {
            let mut sink = chain.scatter(target, placement, order.clone());
            decode_stream(&chain.bytes_codecs, encoded, &mut sink, target.threads)
                .map_err(|e| e.at(key))?;
            sink.finish().map_err(|e| DecodeError::from(e).at(key))
        }
        ArrayToBytes::Sharding(spec) => {
            // Bytes codecs around a whole shard are rare; undo them in memory first.
            let shard_bytes = placement.chunk_bytes(target.elem);
            let limit = shard_bytes + shard_bytes / 8 + (1 << 20);
            let shard =
                decode_full_stages(&chain.bytes_codecs, encoded, limit).map_err(|e| e.at(key))?;
            sharding::decode_shard(
                spec,
                &crate::store::ranged::InMemory(&shard),
                placement,
                target,
                key,
            )
        }
        ArrayToBytes::Zarrs(chain) => {
            let decoded =
                decode_with_zarrs(chain, &placement.chunk_shape, encoded).map_err(|e| e.at(key))?;
            let mut sink =
                Scatter::new(target.out, placement, target.elem, ByteOrder::Native, None);
            sink.write(&decoded)
                .map_err(|e| DecodeError::from(e).at(key))?;
            sink.finish().map_err(|e| DecodeError::from(e).at(key))
        }
    }
}

/// A whole chunk of `shape` through zarrs' codec chain: native-endian elements in C order.
/// zarrs' bytes codecs are zarrpipe's bounded ones (`harden`); a panic in another of its
/// codecs on corrupt data becomes an error.
fn decode_with_zarrs(
    chain: &ZarrsChain,
    shape: &[u64],
    encoded: &[u8],
) -> Result<Vec<u8>, DecodeError> {
    use zarrs::array::{ArrayToBytesCodecTraits, CodecError, CodecOptions};
    let options = CodecOptions::default().with_concurrent_target(1);
    // The chunk's own shape (chunks of a rectilinear grid differ), else the chain's.
    let shape: Vec<std::num::NonZeroU64> = shape
        .iter()
        .map(|&d| std::num::NonZeroU64::new(d))
        .collect::<Option<_>>()
        .unwrap_or_else(|| chain.shape.clone());
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        chain.codecs.decode(
            std::borrow::Cow::Borrowed(encoded),
            &shape,
            &chain.data_type,
            &chain.fill_value,
            &options,
        )
    }))
    .map_err(|_| DecodeError::Corrupt("zarrs panicked while decoding this chunk".into()))?
    .map_err(|e| match e {
        CodecError::InvalidChecksum => DecodeError::ChecksumFailed("checksum mismatch".into()),
        other => DecodeError::Corrupt(other.to_string()),
    })?;
    let fixed = decoded
        .into_fixed()
        .map_err(|_| DecodeError::Corrupt("decodes to variable-length data".into()))?;
    Ok(fixed.into_owned())
}

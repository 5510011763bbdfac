//! numcodecs' `vlen-utf8` and `vlen-bytes` (v3 `vlen-utf8` / `vlen-bytes`, v2 filters of
//! the same ids) with a decoder that checks every length against the chunk: zarrs' own
//! slices the chunk at the lengths it reads, so a length past the end panics. zarrs keeps
//! encoding and metadata.
//!
//! The format: a little-endian u32 element count, then per element a little-endian u32
//! byte length and the bytes. Spec:
//! <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/vlen-utf8>.

use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayBytesOffsets, ArrayBytesRaw, ArrayCodecTraits, ArrayToBytesCodecTraits,
    BytesRepresentation, Codec, CodecError, CodecOptions, RecommendedConcurrency,
};
use zarrs::array::codec::{VlenBytesCodec, VlenUtf8Codec};
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs::plugin::PluginCreateError;

use crate::codec::wrapper::whole_input_wrapper;

/// A vlen codec: zarrs' for everything but decoding.
#[derive(Debug)]
pub struct BoundedVlen {
    inner: Arc<dyn ArrayToBytesCodecTraits>,
    /// `vlen-utf8`: every element must be valid UTF-8.
    utf8: bool,
}

pub fn create_utf8(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    create(config, true)
}

pub fn create_bytes(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    create(config, false)
}

fn create(config: &Map<String, Value>, utf8: bool) -> Result<Codec, PluginCreateError> {
    if !config.is_empty() {
        return Err(super::bad_config(
            if utf8 { "vlen-utf8" } else { "vlen-bytes" },
            format!(
                "takes no configuration, got {}",
                Value::Object(config.clone())
            ),
        ));
    }
    let inner: Arc<dyn ArrayToBytesCodecTraits> = if utf8 {
        Arc::new(VlenUtf8Codec::new())
    } else {
        Arc::new(VlenBytesCodec::new())
    };
    Ok(Codec::ArrayToBytes(Arc::new(BoundedVlen { inner, utf8 })))
}

/// Splits an encoded chunk of `n` elements into their bytes and `n + 1` offsets.
///
/// # Errors
/// A chunk whose header does not say `n`, whose lengths run past its end, or (with
/// `utf8`) an element that is not UTF-8.
pub fn decode(src: &[u8], n: usize, utf8: bool) -> Result<(Vec<u8>, Vec<usize>), CodecError> {
    let name = if utf8 { "vlen-utf8" } else { "vlen-bytes" };
    let bad = |why: String| CodecError::Other(format!("{name}: {why}"));
    let word = |at: usize| -> Option<usize> {
        let b = src.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    // Every element takes at least its 4-byte length: a chunk too short for `n` of them is
    // refused before anything is allocated for them.
    let header = n
        .checked_add(1)
        .and_then(|k| k.checked_mul(4))
        .filter(|&h| h <= src.len())
        .ok_or_else(|| {
            bad(format!(
                "{} bytes cannot hold {n} elements (truncated chunk?)",
                src.len()
            ))
        })?;
    let count = word(0).unwrap_or(usize::MAX);
    if count != n {
        return Err(bad(format!(
            "the chunk says {count} elements, its shape holds {n}"
        )));
    }
    let mut bytes = Vec::with_capacity(src.len() - header);
    let mut offsets = Vec::with_capacity(n + 1);
    let mut at = 4;
    for i in 0..n {
        let len = word(at).ok_or_else(|| bad(format!("element {i}: truncated length")))?;
        at += 4;
        let item = at
            .checked_add(len)
            .and_then(|end| src.get(at..end))
            .ok_or_else(|| {
                bad(format!(
                    "element {i} claims {len} bytes, {} are left in the chunk",
                    src.len() - at
                ))
            })?;
        if utf8 && std::str::from_utf8(item).is_err() {
            return Err(bad(format!("element {i} is not valid UTF-8")));
        }
        offsets.push(bytes.len());
        bytes.extend_from_slice(item);
        at += len;
    }
    offsets.push(bytes.len());
    // Bytes after the last element are ignored, as numcodecs ignores them: refusing them
    // would fail chunks zarr-python reads.
    Ok((bytes, offsets))
}

whole_input_wrapper!(BoundedVlen, inner);

impl ArrayCodecTraits for BoundedVlen {
    fn recommended_concurrency(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(shape, data_type)
    }
}

impl ArrayToBytesCodecTraits for BoundedVlen {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToBytesCodecTraits> {
        self
    }

    fn encoded_representation(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<BytesRepresentation, CodecError> {
        self.inner
            .encoded_representation(shape, data_type, fill_value)
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner
            .encode(bytes, shape, data_type, fill_value, options)
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytesRaw<'a>,
        shape: &[NonZeroU64],
        _data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let n = shape
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(usize::try_from(d.get()).ok()?))
            .ok_or_else(|| CodecError::Other("vlen: chunk shape too large".into()))?;
        let (data, offsets) = decode(&bytes, n, self.utf8)?;
        let offsets =
            ArrayBytesOffsets::new(offsets).map_err(|e| CodecError::Other(format!("vlen: {e}")))?;
        ArrayBytes::new_vlen(data, offsets).map_err(|e| CodecError::Other(format!("vlen: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(items: &[&[u8]]) -> Vec<u8> {
        let mut out = (items.len() as u32).to_le_bytes().to_vec();
        for i in items {
            out.extend((i.len() as u32).to_le_bytes());
            out.extend_from_slice(i);
        }
        out
    }

    #[test]
    fn round_trip_and_hostile_chunks() {
        let ok = encode(&[b"ab", b"", "é".as_bytes()]);
        let (bytes, offsets) = decode(&ok, 3, true).unwrap();
        assert_eq!(bytes, b"ab\xc3\xa9");
        assert_eq!(offsets, vec![0, 2, 2, 4]);
        // Truncated, a length past the end, a wrong count, bad UTF-8, a count no chunk of
        // this size can hold.
        assert!(decode(&ok[..ok.len() - 1], 3, true).is_err());
        let mut long = ok.clone();
        long[4] = 0xff;
        assert!(decode(&long, 3, true).is_err());
        assert!(decode(&ok, 2, true).is_err());
        let mut extra = ok.clone();
        extra.push(0);
        assert_eq!(
            decode(&extra, 3, true).unwrap().1,
            offsets,
            "trailing bytes are ignored"
        );
        let bad_utf8 = encode(&[b"\xff"]);
        assert!(decode(&bad_utf8, 1, true).is_err());
        assert!(decode(&bad_utf8, 1, false).is_ok());
        assert!(decode(&[0xff; 8], usize::MAX / 2, false).is_err());
    }
}

//! numcodecs' `packbits` filter: a bool chunk as one byte holding the number of padding bits,
//! then the values packed eight to a byte, most significant bit first (`np.packbits`).
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/filter/packbits.html> (v3 name
//! `numcodecs.packbits`: a uint8 array of shape `[1 + ceil(n / 8)]`). zarrs' own `packbits`
//! is a different, array-to-bytes codec of zarr-extensions; the two do not share a name.

use std::num::NonZeroU64;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::metadata::ChunkShape;
use zarrs::plugin::PluginCreateError;

use super::array_codec::{ArrayCodec, Transform};
use crate::ElementType;

#[derive(Debug)]
pub struct PackBits;

/// Builds the codec (it has no configuration).
pub fn create(_config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    Ok(ArrayCodec::codec(PackBits))
}

fn bool_only(decoded: ElementType) -> Result<(), CodecError> {
    if decoded == ElementType::Bool {
        Ok(())
    } else {
        Err(CodecError::Other(format!(
            "numcodecs.packbits: needs a bool array, not {decoded}"
        )))
    }
}

impl Transform for PackBits {
    fn name_v3(&self) -> &'static str {
        "numcodecs.packbits"
    }

    fn name_v2(&self) -> Option<&'static str> {
        Some("packbits")
    }

    fn configuration(&self) -> Map<String, Value> {
        Map::new()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        bool_only(decoded)?;
        Ok(ElementType::UInt8)
    }

    fn encoded_shape(&self, decoded: &[NonZeroU64]) -> Result<ChunkShape, CodecError> {
        let n = decoded
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.get()))
            .ok_or_else(|| CodecError::Other("packbits: chunk too large".into()))?;
        let packed = NonZeroU64::new(1 + n.div_ceil(8)).unwrap_or(NonZeroU64::MIN);
        Ok(vec![packed])
    }

    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        bool_only(decoded)?;
        let mut out = vec![0u8; 1 + n.div_ceil(8)];
        out[0] = ((8 - n % 8) % 8) as u8;
        for (i, &b) in bytes.iter().take(n).enumerate() {
            if b != 0 {
                out[1 + i / 8] |= 0x80 >> (i % 8);
            }
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        bool_only(decoded)?;
        let padding = (8 - n % 8) % 8;
        if bytes.len() != 1 + n.div_ceil(8) || usize::from(bytes[0]) != padding {
            return Err(CodecError::Other(format!(
                "numcodecs.packbits: {} bytes with {} padding bits do not hold {n} values",
                bytes.len(),
                bytes.first().copied().unwrap_or(0)
            )));
        }
        Ok((0..n)
            .map(|i| (bytes[1 + i / 8] >> (7 - i % 8)) & 1)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numcodecs() {
        // numcodecs.PackBits().encode(np.array([1, 0, 0, 1, 1, 1, 0, 1, 1, 0], bool)).tobytes()
        let a = [1u8, 0, 0, 1, 1, 1, 0, 1, 1, 0];
        let enc = PackBits.encode(&a, ElementType::Bool, 10).unwrap();
        assert_eq!(enc, b"\x06\x9d\x80");
        assert_eq!(PackBits.decode(&enc, ElementType::Bool, 10).unwrap(), a);
        assert!(PackBits.decode(&enc[..2], ElementType::Bool, 10).is_err());
        assert!(PackBits
            .decode(b"\x05\x9d\x80", ElementType::Bool, 10)
            .is_err());
        assert!(PackBits.decode(&[], ElementType::Bool, 10).is_err());
    }
}

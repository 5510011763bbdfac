//! numcodecs' `pcodec` (Pco) serializer, decoded into exactly the elements zarrs expects.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/compression/pcodec.html> (v3 name
//! `numcodecs.pcodec`, <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/numcodecs.pcodec>).
//! zarrs' decoder calls `pco::standalone::simple_decompress`, which decodes every chunk of the
//! file whatever their counts claim (a few bytes of a constant-valued chunk can claim 2^24
//! elements, and a file may hold many). Here pco decodes into a buffer of the chunk's element
//! count and the file must end exactly there. Encoding and metadata stay zarrs'.

use std::mem::MaybeUninit;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError, CodecTraitsV3};
use zarrs::array::codec::PcodecCodec;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::plugin::PluginCreateError;

use super::bounded_a2b::BoundedArrayToBytes;
use crate::ElementType;

/// Builds zarrs' pcodec codec from numcodecs' configuration and wraps it.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let metadata =
        MetadataV3::new_with_configuration("numcodecs.pcodec", Configuration::from(config.clone()));
    match PcodecCodec::create(&metadata)? {
        Codec::ArrayToBytes(inner) => Ok(BoundedArrayToBytes::codec(inner, Box::new(decode_chunk))),
        other => Ok(other),
    }
}

fn decode_typed<T: pco::data_types::Number>(src: &[u8], n: usize) -> Result<Vec<u8>, CodecError> {
    let mut dst: Vec<MaybeUninit<T>> = Vec::new();
    dst.try_reserve_exact(n)
        .map_err(|_| CodecError::Other(format!("pcodec: cannot allocate {n} elements")))?;
    // SAFETY: MaybeUninit<T> needs no initialisation; the capacity is n.
    unsafe { dst.set_len(n) };
    let progress = pco::standalone::simple_decompress_into_uninit(src, &mut dst)
        .map_err(|e| CodecError::Other(format!("pcodec: {e}")))?;
    if !progress.finished || progress.n_processed != n {
        return Err(CodecError::Other(format!(
            "pcodec: stream holds {} elements, expected {n}",
            if progress.finished {
                progress.n_processed.to_string()
            } else {
                "more".to_owned()
            }
        )));
    }
    // SAFETY: pco initialised all n elements (n_processed == n); T is a plain number type
    // without padding, so its n * size_of::<T>() bytes may be read as u8.
    let bytes = unsafe {
        std::slice::from_raw_parts(dst.as_ptr().cast::<u8>(), n * std::mem::size_of::<T>())
    };
    Ok(bytes.to_vec())
}

fn decode_chunk(src: &[u8], t: ElementType, shape: &[u64]) -> Result<Vec<u8>, CodecError> {
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
        .ok_or_else(|| CodecError::Other("pcodec: chunk too large".into()))?;
    decode(src, t, n)
}

/// Decodes a standalone Pco file of exactly `n` elements of `t`.
pub fn decode(src: &[u8], t: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
    use ElementType as E;
    match t {
        E::UInt16 => decode_typed::<u16>(src, n),
        E::UInt32 => decode_typed::<u32>(src, n),
        E::UInt64 => decode_typed::<u64>(src, n),
        E::Int16 => decode_typed::<i16>(src, n),
        E::Int32 => decode_typed::<i32>(src, n),
        E::Int64 => decode_typed::<i64>(src, n),
        E::Float16 => decode_typed::<half::f16>(src, n),
        E::Float32 => decode_typed::<f32>(src, n),
        E::Float64 => decode_typed::<f64>(src, n),
        other => Err(CodecError::Other(format!(
            "pcodec: unsupported data type {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_counts_only() {
        let values: Vec<i32> = (0..1000).map(|i| i * 7 - 300).collect();
        let file = pco::standalone::simple_compress(&values, &pco::ChunkConfig::default()).unwrap();
        let want: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(decode(&file, ElementType::Int32, 1000).unwrap(), want);
        assert!(decode(&file, ElementType::Int32, 999).is_err());
        assert!(decode(&file, ElementType::Int32, 1001).is_err());
        assert!(decode(&file[..file.len() / 2], ElementType::Int32, 1000).is_err());
        assert!(decode(b"\x00\x01\x02", ElementType::Int32, 1000).is_err());
        // A few bytes claiming 2^24 constant elements (pco's largest chunk) cost one chunk.
        let big =
            pco::standalone::simple_compress(&vec![5u16; 1 << 20], &pco::ChunkConfig::default())
                .unwrap();
        assert!(big.len() < 1 << 10);
        assert!(decode(&big, ElementType::UInt16, 16).is_err());
    }
}

//! zfp, coded in pure Rust by zfp-rs: numcodecs' `zfpy` (v2 id `zfpy`, v3 `numcodecs.zfpy`: a
//! zfp stream behind zfp's full header) and zarrs' `zfp` (`zfp`, `zarrs.zfp`: no header, the
//! mode in the metadata), encoded as zarrs encodes them and decoded held to the chunk.
//!
//! Specs: <https://numcodecs.readthedocs.io/en/stable/compression/zfpy.html>,
//! <https://codec.zarrs.dev/array_to_bytes/zfp>, zfp's stream format
//! <https://zfp.readthedocs.io/en/release1.0.1/>.
//!
//! Why not zarrs' codecs: they compile zfp's C source (cmake, and bindgen with libclang, at
//! build time), and their decoders trust the stream: zfpy's took the field's size from the
//! header and wrote past a buffer sized from the chunk, and C's bit stream reads past a
//! truncated stream's end. zfp-rs writes the C library's bytes bit for bit (checked against
//! zarrs' encoder for every mode, type and 1 to 4 dimensions; `tests.rs` keeps fixtures), never
//! panics and bounds every read; `decode.rs` holds a stream to its chunk. Chunks are decoded
//! one per pool thread already, so zfp-rs runs serially (its `rayon` feature is off).

mod config;
mod decode;
mod encode;
#[cfg(test)]
mod round_trips;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayBytesRaw, ArrayCodecTraits, ArrayToBytesCodecTraits, BytesRepresentation, Codec,
    CodecError, CodecMetadataOptions, CodecOptions, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, PluginCreateError, ZarrVersion};
use zfp_rs::ZfpScalarType;

use super::array_codec::expect_len;
use super::{bad_config, element_type};
use crate::ElementType;
use config::Mode;
use decode::Params;

/// numcodecs' `zfpy`, from its configuration (numcodecs' defaults filled in).
pub fn create_zfpy(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let mode = config::parse_zfpy(config).map_err(|e| bad_config("zfpy", e))?;
    Ok(ZfpCodec::codec(mode, true))
}

/// zarrs' `zfp`, from its configuration.
pub fn create_zfp(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let mode = config::parse_zfp(config).map_err(|e| bad_config("zfp", e))?;
    Ok(ZfpCodec::codec(mode, false))
}

/// An error of either codec (both say `zfp:`, as zfp's own messages do).
fn error(why: impl std::fmt::Display) -> CodecError {
    CodecError::Other(format!("zfp: {why}"))
}

fn unsupported(t: ElementType) -> CodecError {
    error(format!(
        "unsupported data type {t} (zfp codes integers and floats)"
    ))
}

/// The zfp type chunks of `t` are coded as, or `None` for types zfp cannot code.
fn zfp_type(t: ElementType) -> Option<ZfpScalarType> {
    use ElementType as E;
    Some(match t {
        E::Int8 | E::UInt8 | E::Int16 | E::UInt16 | E::Int32 | E::UInt32 => ZfpScalarType::I32,
        E::Int64 | E::UInt64 => ZfpScalarType::I64,
        E::Float32 => ZfpScalarType::F32,
        E::Float64 => ZfpScalarType::F64,
        _ => return None,
    })
}

/// zfp's dimensions `[nx, ny, nz, nw]` of a C-order chunk shape: x is the last (fastest)
/// axis, unused ones are 0.
fn zfp_dims(shape: &[u64]) -> Result<[usize; 4], CodecError> {
    if shape.is_empty() || shape.len() > 4 {
        return Err(error(format!(
            "{} dimensions (zfp codes 1 to 4)",
            shape.len()
        )));
    }
    let mut dims = [0usize; 4];
    for (d, &s) in dims.iter_mut().zip(shape.iter().rev()) {
        *d = usize::try_from(s)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| error(format!("chunk shape {shape:?}")))?;
    }
    Ok(dims)
}

/// zfpy (`header`) or zfp in one mode.
#[derive(Clone, Copy, Debug)]
pub struct ZfpCodec {
    mode: Mode,
    header: bool,
}

impl ZfpCodec {
    fn codec(mode: Mode, header: bool) -> Codec {
        Codec::ArrayToBytes(Arc::new(Self { mode, header }))
    }

    fn name_v3(&self) -> &'static str {
        if self.header {
            "numcodecs.zfpy"
        } else {
            "zfp"
        }
    }
}

impl ExtensionName for ZfpCodec {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        match version {
            ZarrVersion::V2 => self.header.then_some(Cow::Borrowed("zfpy")),
            _ => Some(Cow::Borrowed(self.name_v3())),
        }
    }
}

impl CodecTraits for ZfpCodec {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn configuration(
        &self,
        _version: ZarrVersion,
        _options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        let config = if self.header {
            self.mode.zfpy_json()?
        } else {
            self.mode.zfp_json()
        };
        Some(Configuration::from(config))
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability {
            partial_read: false,
            partial_decode: false,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability {
            partial_encode: false,
        }
    }
}

impl ArrayCodecTraits for ZfpCodec {
    fn recommended_concurrency(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }
}

fn shape_u64(shape: &[NonZeroU64]) -> Vec<u64> {
    shape.iter().map(|d| d.get()).collect()
}

impl ArrayToBytesCodecTraits for ZfpCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToBytesCodecTraits> {
        self
    }

    /// The most bytes zfp writes for the chunk (header included), or unbounded where this
    /// codec cannot encode the chunk: that only matters when encoding, so decoding goes on.
    fn encoded_representation(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
    ) -> Result<BytesRepresentation, CodecError> {
        let most = || {
            let t = element_type(self.name_v3(), data_type).ok()?;
            let (ty, config) = encode::encode_config(self.mode, t).ok()?;
            let size = config.maximum_size(ty, zfp_dims(&shape_u64(shape)).ok()?)?;
            u64::try_from(size).ok()
        };
        Ok(most().map_or(BytesRepresentation::UnboundedSize, |n| {
            BytesRepresentation::BoundedSize(n)
        }))
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let t = element_type(self.name_v3(), data_type)?;
        let shape = shape_u64(shape);
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?))
            .ok_or_else(|| error("chunk too large"))?;
        let raw = bytes.into_fixed()?;
        expect_len(self.name_v3(), &raw, t, n)?;
        let encoded = encode::encode(&raw, t, &shape, self.mode, self.header)?;
        Ok(Cow::Owned(encoded))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytesRaw<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let t = element_type(self.name_v3(), data_type)?;
        let params = if self.header {
            Params::Header
        } else {
            Params::Mode(self.mode)
        };
        let decoded = decode::decode(&bytes, t, &shape_u64(shape), params)?;
        Ok(ArrayBytes::from(decoded))
    }
}

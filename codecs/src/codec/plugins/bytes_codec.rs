//! One zarrs bytes-to-bytes codec for the compressors of this module (numcodecs' lz4, bz2):
//! each says how to encode and how to decode within a size limit; this file speaks zarrs'
//! codec traits and holds every decode to the size zarrs expects.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayBytesRaw, BytesRepresentation, BytesToBytesCodecTraits, Codec, CodecError,
    CodecMetadataOptions, CodecOptions, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, ZarrVersion};

use super::{check_decoded_size, decoded_limit};

/// A compressor.
pub trait Compressor: std::fmt::Debug + Send + Sync + 'static {
    fn name_v3(&self) -> &'static str;
    fn name_v2(&self) -> &'static str;
    fn configuration(&self) -> Map<String, Value>;
    /// The largest encoding of `n` bytes.
    fn max_encoded(&self, n: u64) -> u64;
    /// Whether every encoding of `n` bytes is exactly `max_encoded(n)` long (a checksum's
    /// frame): a fixed size is what lets zarrs use the codec in a shard's index.
    fn fixed_size(&self) -> bool {
        false
    }
    fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>, CodecError>;
    /// Decodes `encoded`, refusing (without allocating it) any output over `limit` bytes.
    fn decode(&self, encoded: &[u8], limit: usize) -> Result<Vec<u8>, CodecError>;
}

/// The zarrs codec around a [`Compressor`].
#[derive(Debug)]
pub struct BytesCodec<C: Compressor>(pub C);

impl<C: Compressor> BytesCodec<C> {
    pub fn codec(c: C) -> Codec {
        Codec::BytesToBytes(Arc::new(Self(c)))
    }
}

impl<C: Compressor> ExtensionName for BytesCodec<C> {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        Some(Cow::Borrowed(match version {
            ZarrVersion::V2 => self.0.name_v2(),
            _ => self.0.name_v3(),
        }))
    }
}

impl<C: Compressor> CodecTraits for BytesCodec<C> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn configuration(
        &self,
        _version: ZarrVersion,
        _options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        Some(Configuration::from(self.0.configuration()))
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

impl<C: Compressor> BytesToBytesCodecTraits for BytesCodec<C> {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _decoded: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        match decoded {
            BytesRepresentation::FixedSize(n) if self.0.fixed_size() => {
                BytesRepresentation::FixedSize(self.0.max_encoded(*n))
            }
            BytesRepresentation::FixedSize(n) | BytesRepresentation::BoundedSize(n) => {
                BytesRepresentation::BoundedSize(self.0.max_encoded(*n))
            }
            BytesRepresentation::UnboundedSize => BytesRepresentation::UnboundedSize,
        }
    }

    fn encode<'a>(
        &self,
        decoded: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Ok(Cow::Owned(self.0.encode(&decoded)?))
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let out = self.0.decode(&encoded, decoded_limit(decoded))?;
        check_decoded_size(self.0.name_v3(), out.len(), decoded)?;
        Ok(Cow::Owned(out))
    }
}

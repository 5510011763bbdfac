//! A zarrs array-to-bytes codec with zarrpipe's decoder (today pcodec's): zarrs keeps
//! encoding and metadata, the decoder given here is held to the chunk's shape and type.

use std::num::NonZeroU64;
use std::sync::Arc;

use zarrs::array::codec::api::{
    ArrayBytesRaw, ArrayCodecTraits, ArrayToBytesCodecTraits, BytesRepresentation, Codec,
    CodecError, CodecOptions, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs::plugin::{ExtensionName, ZarrVersion};

use super::element_type;
use crate::codec::wrapper::whole_input_wrapper;
use crate::ElementType;

/// Decodes one chunk of the given element type and shape.
pub type Decode =
    Box<dyn Fn(&[u8], ElementType, &[u64]) -> Result<Vec<u8>, CodecError> + Send + Sync>;

/// zarrs' codec for everything but decoding.
pub struct BoundedArrayToBytes {
    inner: Arc<dyn ArrayToBytesCodecTraits>,
    decode: Decode,
}

impl std::fmt::Debug for BoundedArrayToBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedArrayToBytes")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl BoundedArrayToBytes {
    pub fn codec(inner: Arc<dyn ArrayToBytesCodecTraits>, decode: Decode) -> Codec {
        Codec::ArrayToBytes(Arc::new(Self { inner, decode }))
    }
}

whole_input_wrapper!(BoundedArrayToBytes, inner);

impl ArrayCodecTraits for BoundedArrayToBytes {
    fn recommended_concurrency(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(shape, data_type)
    }
}

impl ArrayToBytesCodecTraits for BoundedArrayToBytes {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToBytesCodecTraits> {
        self
    }

    fn encoded_representation(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<BytesRepresentation, CodecError> {
        // A size zarrs cannot state only matters when encoding: decoding goes on.
        Ok(self
            .inner
            .encoded_representation(shape, data_type, fill_value)
            .unwrap_or(BytesRepresentation::UnboundedSize))
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
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let name = self.inner.name(ZarrVersion::V3).unwrap_or_default();
        let t = element_type(&name, data_type)?;
        let shape: Vec<u64> = shape.iter().map(|d| d.get()).collect();
        Ok(ArrayBytes::from((self.decode)(&bytes, t, &shape)?))
    }
}

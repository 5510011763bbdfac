//! One zarrs array-to-array codec for the element-wise transforms of this module (delta,
//! fixedscaleoffset, packbits, scale_offset, cast_value): each transform says what it stores
//! and how to encode and decode a whole chunk; this file speaks zarrs' codec traits.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayCodecTraits, ArrayPartialDecoderTraits, ArrayToArrayCodecTraits, CodecError,
    CodecMetadataOptions, CodecOptions, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::{ArrayBytes, ArraySubset, DataType, FillValue, Indexer};
use zarrs::metadata::{ChunkShape, Configuration};
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs::storage::StorageError;

use super::{element_type, zarrs_data_type};
use crate::ElementType;

/// An element-wise (or whole-chunk) array transform.
pub trait Transform: std::fmt::Debug + Send + Sync + 'static {
    /// The v3 name (zarr-python's spelling).
    fn name_v3(&self) -> &'static str;
    /// The numcodecs id, if any.
    fn name_v2(&self) -> Option<&'static str>;
    /// The configuration to write back.
    fn configuration(&self) -> Map<String, Value>;
    /// The stored element type for chunks of `decoded`.
    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError>;
    /// The stored shape (default: unchanged).
    fn encoded_shape(&self, decoded: &[NonZeroU64]) -> Result<ChunkShape, CodecError> {
        Ok(decoded.to_vec())
    }
    /// Encodes `n` elements of `decoded` (native-endian bytes).
    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError>;
    /// Decodes a stored chunk back to `n` elements of `decoded`; must check the input's size.
    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError>;
}

/// Checks that `bytes` holds exactly `n` elements of `t`.
pub fn expect_len(codec: &str, bytes: &[u8], t: ElementType, n: usize) -> Result<(), CodecError> {
    if n.checked_mul(t.size()) == Some(bytes.len()) {
        Ok(())
    } else {
        Err(CodecError::Other(format!(
            "{codec}: chunk is {} bytes, expected {n} elements of {t}",
            bytes.len()
        )))
    }
}

/// The zarrs codec around a [`Transform`].
#[derive(Debug)]
pub struct ArrayCodec<T: Transform>(pub T);

impl<T: Transform> ArrayCodec<T> {
    /// The codec as zarrs wants it from a plugin.
    pub fn codec(t: T) -> zarrs::array::codec::api::Codec {
        zarrs::array::codec::api::Codec::ArrayToArray(Arc::new(Self(t)))
    }
}

fn num_elements(shape: &[NonZeroU64]) -> Result<usize, CodecError> {
    shape
        .iter()
        .try_fold(1usize, |acc, d| {
            usize::try_from(d.get())
                .ok()
                .and_then(|d| acc.checked_mul(d))
        })
        .ok_or_else(|| CodecError::Other("chunk has too many elements".into()))
}

impl<T: Transform> ExtensionName for ArrayCodec<T> {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        match version {
            ZarrVersion::V2 => self.0.name_v2().map(Cow::Borrowed),
            _ => Some(Cow::Borrowed(self.0.name_v3())),
        }
    }
}

impl<T: Transform> CodecTraits for ArrayCodec<T> {
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

impl<T: Transform> ArrayCodecTraits for ArrayCodec<T> {
    fn recommended_concurrency(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }
}

impl<T: Transform> ArrayToArrayCodecTraits for ArrayCodec<T> {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        let decoded = element_type(self.0.name_v3(), decoded_data_type)?;
        Ok(zarrs_data_type(self.0.encoded_type(decoded)?))
    }

    fn encoded_fill_value(
        &self,
        decoded_data_type: &DataType,
        decoded_fill_value: &FillValue,
    ) -> Result<FillValue, CodecError> {
        let decoded = element_type(self.0.name_v3(), decoded_data_type)?;
        let encoded = self.0.encoded_type(decoded)?;
        if self.0.encoded_shape(&[NonZeroU64::MIN])? != [NonZeroU64::MIN] {
            // A transform that reshapes (packbits) has no element-wise fill value.
            return Ok(FillValue::new(vec![0u8; encoded.size()]));
        }
        let bytes = self
            .0
            .encode(decoded_fill_value.as_ne_bytes(), decoded, 1)?;
        Ok(FillValue::new(bytes))
    }

    fn encoded_shape(&self, decoded_shape: &[NonZeroU64]) -> Result<ChunkShape, CodecError> {
        self.0.encoded_shape(decoded_shape)
    }

    fn decoded_shape(
        &self,
        encoded_shape: &[NonZeroU64],
    ) -> Result<Option<ChunkShape>, CodecError> {
        let same = self.0.encoded_shape(encoded_shape)? == encoded_shape;
        Ok(same.then(|| encoded_shape.to_vec()))
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let decoded = element_type(self.0.name_v3(), data_type)?;
        let n = num_elements(shape)?;
        let raw = bytes.into_fixed()?;
        expect_len(self.0.name_v3(), &raw, decoded, n)?;
        Ok(ArrayBytes::from(self.0.encode(&raw, decoded, n)?))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let decoded = element_type(self.0.name_v3(), data_type)?;
        let n = num_elements(shape)?;
        let raw = bytes.into_fixed()?;
        let out = self.0.decode(&raw, decoded, n)?;
        expect_len(self.0.name_v3(), &out, decoded, n)?;
        Ok(ArrayBytes::from(out))
    }

    fn partial_decoder(
        self: Arc<Self>,
        input_handle: Arc<dyn ArrayPartialDecoderTraits>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<Arc<dyn ArrayPartialDecoderTraits>, CodecError> {
        let encoded_shape = self.0.encoded_shape(shape)?;
        Ok(Arc::new(WholeChunk {
            input: input_handle,
            codec: self,
            shape: shape.to_vec(),
            encoded_shape: encoded_shape.iter().map(|d| d.get()).collect(),
            data_type: data_type.clone(),
            fill_value: fill_value.clone(),
        }))
    }
}

/// Decodes the whole chunk for any part of it. zarrs' default partial decoder asks the next
/// codec for the same part of the encoded chunk, which is wrong for these transforms: delta's
/// stored elements depend on all earlier ones, packbits changes the shape, and a missing
/// chunk must read as the array's fill value, not as the decoding of an encoded fill value.
struct WholeChunk<T: Transform> {
    input: Arc<dyn ArrayPartialDecoderTraits>,
    codec: Arc<ArrayCodec<T>>,
    shape: Vec<NonZeroU64>,
    encoded_shape: Vec<u64>,
    data_type: DataType,
    fill_value: FillValue,
}

impl<T: Transform> ArrayPartialDecoderTraits for WholeChunk<T> {
    fn data_type(&self) -> &DataType {
        &self.data_type
    }

    fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists()
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    fn partial_decode(
        &self,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'_>, CodecError> {
        if !self.input.exists()? {
            return ArrayBytes::new_fill_value(&self.data_type, indexer.len(), &self.fill_value)
                .map_err(|e| CodecError::Other(e.to_string()));
        }
        let all = ArraySubset::new_with_shape(self.encoded_shape.clone());
        let encoded = self.input.partial_decode(&all, options)?.into_owned();
        let decoded = self.codec.decode(
            encoded,
            &self.shape,
            &self.data_type,
            &self.fill_value,
            options,
        )?;
        let shape: Vec<u64> = self.shape.iter().map(|d| d.get()).collect();
        Ok(decoded
            .extract_array_subset(indexer, &shape, &self.data_type)?
            .into_owned())
    }

    fn supports_partial_decode(&self) -> bool {
        false
    }
}

//! Arrays of variable-length elements: UTF-8 strings (v3 `string`, v2 `|O` with the
//! `vlen-utf8` filter) and byte strings (v3 `variable_length_bytes`, v2 `|O` with
//! `vlen-bytes`). No fixed-size buffer can hold them, so they do not take the placement
//! path of `read`/`write`: zarrs' codec chain decodes and encodes their chunks, with
//! zarrpipe's bounded vlen and compressor decoders registered in it (`plugins::vlen`,
//! `harden`), and the result is one flat byte buffer plus offsets ([`VarData`]), which the
//! binding turns into Python `str` / `bytes` objects. Here: what the elements are and one
//! chunk decoded or encoded; reads of regions and picks are `read/variable.rs`'s, writes
//! `write/variable.rs`'s.

use std::num::NonZeroU64;

use zarrs::array::codec::api::{ArrayBytesOffsets, ArrayToBytesCodecTraits, CodecOptions};
use zarrs::array::data_type::{BytesDataType, StringDataType};
use zarrs::array::{ArrayBytes, ArrayMetadata, DataType};

use crate::array::Array;
use crate::error::{Error, Result};

/// What the elements of a variable-length array are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variable {
    /// UTF-8 text (checked when decoded).
    Utf8,
    /// Arbitrary bytes.
    Bytes,
}

impl Variable {
    /// The kind of a variable-length data type. A v2 `|O` array is text unless its filters
    /// say `vlen-bytes` (zarrs opens both as `string`).
    #[must_use]
    pub fn of(data_type: &DataType, metadata: &ArrayMetadata) -> Option<Self> {
        if data_type.is::<BytesDataType>() {
            return Some(Self::Bytes);
        }
        if !data_type.is::<StringDataType>() {
            return None;
        }
        let vlen_bytes = match metadata {
            ArrayMetadata::V2(m) => m.filters.iter().flatten().any(|f| f.id() == "vlen-bytes"),
            ArrayMetadata::V3(_) => false,
        };
        Some(if vlen_bytes { Self::Bytes } else { Self::Utf8 })
    }
}

/// Variable-length elements in C order: element `i` is `bytes[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VarData {
    pub bytes: Vec<u8>,
    pub offsets: Vec<usize>,
    pub shape: Vec<u64>,
}

impl VarData {
    /// Element `i`.
    #[must_use]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.offsets[i]..self.offsets[i + 1]]
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements at `indices`, in that order (1-d); an index past the end is an error.
    pub fn select(&self, indices: impl IntoIterator<Item = usize>) -> Result<Self> {
        let mut out = Self {
            offsets: vec![0],
            ..Self::default()
        };
        for i in indices {
            if i >= self.len() {
                return Err(Error::Internal(format!(
                    "element {i} of {} variable-length elements",
                    self.len()
                )));
            }
            out.bytes.extend_from_slice(self.get(i));
            out.offsets.push(out.bytes.len());
        }
        out.shape = vec![out.len() as u64];
        Ok(out)
    }

    /// `parts` one after the other (1-d).
    #[must_use]
    pub fn concat(parts: &[Self]) -> Self {
        let mut out = Self {
            offsets: vec![0],
            ..Self::default()
        };
        for p in parts {
            let at = out.bytes.len();
            out.offsets.extend(p.offsets.iter().skip(1).map(|o| o + at));
            out.bytes.extend_from_slice(&p.bytes);
        }
        out.shape = vec![out.len() as u64];
        out
    }

    pub(crate) fn from_array_bytes(
        bytes: ArrayBytes<'_>,
        shape: Vec<u64>,
        what: &str,
    ) -> Result<Self> {
        let (data, offsets) = bytes
            .into_variable()
            .map_err(|_| Error::Internal(format!("{what}: zarrs returned fixed-size data")))?
            .into_parts();
        Ok(Self {
            bytes: data.into_owned(),
            offsets: offsets.to_vec(),
            shape,
        })
    }
}

pub(crate) fn options() -> CodecOptions {
    CodecOptions::default()
}

/// A zarrs read failure as the engine's error (`key`: the chunk, or the array when zarrs
/// does not say which chunk).
pub(crate) fn array_error(key: &str, e: zarrs::array::ArrayError) -> Error {
    use zarrs::array::codec::api::CodecError as C;
    use zarrs::array::ArrayError as A;
    match e {
        A::CodecError(C::InvalidChecksum) => Error::Checksum {
            key: key.to_owned(),
            detail: String::new(),
        },
        A::StorageError(s) | A::CodecError(C::StorageError(s)) => {
            crate::store::zarrs_storage_error(key, &s)
        }
        A::IncompatibleDimensionalityError(_)
        | A::InvalidArraySubset(..)
        | A::InvalidChunkGridIndicesError(_) => Error::InvalidSelection(format!("{key}: {e}")),
        other => Error::corrupt(key, other),
    }
}

impl Array {
    /// The kind of this array's elements, or `Unsupported` for a fixed-size array.
    pub fn variable(&self) -> Result<Variable> {
        self.info.variable.ok_or_else(|| {
            Error::Unsupported(format!(
                "array {} holds fixed-size elements, not variable-length ones",
                self.info.path
            ))
        })
    }

    /// Decodes one stored chunk (shard) of `shape` of a variable-length array, whole;
    /// `None` (a missing chunk) is all fill value.
    pub fn decode_variable(
        &self,
        encoded: Option<&[u8]>,
        key: &str,
        shape: &[u64],
    ) -> Result<VarData> {
        self.variable()?;
        let shape = shape.to_vec();
        let Some(encoded) = encoded else {
            let fill = self.zarrs.fill_value().as_ne_bytes();
            let n = usize::try_from(shape.iter().product::<u64>())
                .map_err(|_| Error::InvalidArgument(format!("{key}: chunk too large")))?;
            let mut out = VarData {
                bytes: Vec::new(),
                offsets: (0..=n).map(|i| i * fill.len()).collect(),
                shape,
            };
            out.bytes = fill.repeat(n);
            return Ok(out);
        };
        let dims = nonzero(&shape, key)?;
        let bytes = self
            .zarrs
            .codecs()
            .decode(
                std::borrow::Cow::Borrowed(encoded),
                &dims,
                self.zarrs.data_type(),
                self.zarrs.fill_value(),
                &options().with_concurrent_target(1),
            )
            .map_err(|e| Error::corrupt(key, e))?;
        VarData::from_array_bytes(bytes, shape, key)
    }

    /// Encodes one whole stored chunk (shard) of a variable-length array (of the shape
    /// `chunk` says).
    pub fn encode_variable(&self, chunk: VarData, key: &str) -> Result<Vec<u8>> {
        self.variable()?;
        let dims = nonzero(&chunk.shape, key)?;
        if chunk.len() as u64 != chunk.shape.iter().product::<u64>() {
            return Err(Error::InvalidArgument(format!(
                "{key}: {} values for a chunk of shape {:?}",
                chunk.len(),
                chunk.shape
            )));
        }
        let offsets = ArrayBytesOffsets::new(chunk.offsets)
            .map_err(|e| Error::InvalidArgument(format!("{key}: {e}")))?;
        let bytes = ArrayBytes::new_vlen(chunk.bytes, offsets)
            .map_err(|e| Error::InvalidArgument(format!("{key}: {e}")))?;
        let encoded = self
            .zarrs
            .codecs()
            .encode(
                bytes,
                &dims,
                self.zarrs.data_type(),
                self.zarrs.fill_value(),
                &options().with_concurrent_target(1),
            )
            .map_err(|e| Error::corrupt(key, format!("encoding failed: {e}")))?;
        Ok(encoded.into_owned())
    }

    /// Whether every element of `chunk` is the fill value.
    #[must_use]
    pub fn all_fill_variable(&self, chunk: &VarData) -> bool {
        let fill = self.zarrs.fill_value().as_ne_bytes();
        (0..chunk.len()).all(|i| chunk.get(i) == fill)
    }
}

fn nonzero(shape: &[u64], key: &str) -> Result<Vec<NonZeroU64>> {
    shape
        .iter()
        .map(|&d| {
            NonZeroU64::new(d).ok_or_else(|| Error::Internal(format!("zero-sized chunk {key}")))
        })
        .collect()
}

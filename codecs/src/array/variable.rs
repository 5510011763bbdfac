//! Arrays of variable-length elements: UTF-8 strings (v3 `string`, v2 `|O` with the
//! `vlen-utf8` filter) and byte strings (v3 `variable_length_bytes`, v2 `|O` with
//! `vlen-bytes`). No fixed-size buffer can hold them, so they do not take the placement
//! path of `read`/`write`: zarrs' codec chain decodes and encodes their chunks, in parallel
//! on the pool, with zarrpipe's bounded vlen and compressor decoders registered in it
//! (`plugins::vlen`, `harden`), and the result is one flat byte buffer plus offsets, which
//! the binding turns into Python `str` / `bytes` objects.

use std::num::NonZeroU64;
use std::ops::Range;

use zarrs::array::codec::api::{ArrayBytesOffsets, ArrayToBytesCodecTraits, CodecOptions};
use zarrs::array::data_type::{BytesDataType, StringDataType};
use zarrs::array::{ArrayBytes, ArrayMetadata, DataType};

use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::select::selection::Region;
use crate::store::Made;

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

    fn from_array_bytes(bytes: ArrayBytes<'_>, shape: Vec<u64>, what: &str) -> Result<Self> {
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

fn options() -> CodecOptions {
    CodecOptions::default()
}

/// A zarrs read failure as the engine's error (`key`: the chunk, or the array when zarrs
/// does not say which chunk).
fn array_error(key: &str, e: zarrs::array::ArrayError) -> Error {
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

    /// Reads a region of a variable-length array (missing chunks read as the fill value):
    /// the stored chunks it touches are decoded in parallel, each only for its part of the
    /// region, then laid out in the region's C order.
    pub fn read_variable(&self, region: &Region) -> Result<VarData> {
        self.variable()?;
        let extent = region.extent();
        let n = usize::try_from(extent.iter().product::<u64>())
            .map_err(|_| Error::InvalidArgument("selection too large".into()))?;
        if n == 0 {
            return Ok(VarData {
                offsets: vec![0],
                shape: region.out_shape.clone(),
                ..VarData::default()
            });
        }
        let indices = self.stored_chunks_of(region);
        let pieces: Vec<(Vec<Range<u64>>, VarData)> =
            crate::process::pool::try_map(&indices, |index| {
                let key = self.chunk_key(index);
                let origin = self.grid.origin(index);
                let chunk = self.grid.chunk_shape(index);
                // This chunk's part of the region, in array and in chunk coordinates.
                let part: Vec<Range<u64>> = region
                    .ranges
                    .iter()
                    .zip(&origin)
                    .zip(&chunk)
                    .map(|((r, &o), &c)| r.start.max(o)..r.end.min(o + c))
                    .collect();
                let local: Vec<Range<u64>> = part
                    .iter()
                    .zip(&origin)
                    .map(|(p, &o)| p.start - o..p.end - o)
                    .collect();
                let bytes = self
                    .zarrs
                    .retrieve_chunk_subset_opt::<ArrayBytes<'static>>(index, &local, &options())
                    .map_err(|e| array_error(&key, e))?;
                let shape = part.iter().map(|p| p.end - p.start).collect();
                Ok((part, VarData::from_array_bytes(bytes, shape, &key)?))
            })?;
        // Lay the pieces out: walk the region in C order, taking each element from the
        // piece (chunk) that holds it.
        let total: usize = pieces.iter().map(|(_, p)| p.bytes.len()).sum();
        let mut out = VarData {
            bytes: Vec::with_capacity(total),
            offsets: Vec::with_capacity(n + 1),
            shape: region.out_shape.clone(),
        };
        let mut slot = vec![usize::MAX; n];
        for (k, (part, _)) in pieces.iter().enumerate() {
            for_each_index(part, |coord| {
                let mut at = 0u64;
                for ((c, r), e) in coord.iter().zip(&region.ranges).zip(&extent) {
                    at = at * e + (c - r.start);
                }
                slot[at as usize] = k;
            });
        }
        let mut next = vec![0usize; pieces.len()];
        for &k in &slot {
            let piece = &pieces
                .get(k)
                .ok_or_else(|| Error::Internal("a region element no chunk covers".into()))?
                .1;
            out.offsets.push(out.bytes.len());
            out.bytes.extend_from_slice(piece.get(next[k]));
            next[k] += 1;
        }
        out.offsets.push(out.bytes.len());
        Ok(out)
    }

    /// The stored chunks (shards) a region touches, in C order of the storage grid.
    fn stored_chunks_of(&self, region: &Region) -> Vec<Vec<u64>> {
        let boxes: Vec<Range<u64>> = region
            .ranges
            .iter()
            .enumerate()
            .map(|(a, r)| self.grid.covering(a, r))
            .collect();
        let mut out = Vec::new();
        for_each_index(&boxes, |i| out.push(i.to_vec()));
        out
    }

    /// Reads chunks of the `chunks` grid, in parallel, one [`VarData`] each.
    pub fn read_variable_chunks(&self, indices: &[Vec<u64>]) -> Result<Vec<VarData>> {
        self.variable()?;
        crate::process::pool::try_map(indices, |index| {
            self.read_variable(&self.chunk_region(index)?)
        })
    }

    /// Writes `data` (the region's extent, C order) into `region`, chunk by chunk in
    /// parallel: a chunk the region only partly covers is read, updated and stored as one
    /// step no other writer of it interleaves with ([`crate::store::Store::update`]); one
    /// left all fill value is deleted unless `write_empty`.
    pub fn write_variable(&self, region: &Region, data: &VarData, write_empty: bool) -> Result<()> {
        self.variable()?;
        self.store.check_writable()?;
        let extent = region.extent();
        let n: u64 = extent.iter().product();
        if data.len() as u64 != n {
            return Err(Error::InvalidArgument(format!(
                "{} values for a selection of {n} elements",
                data.len()
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let indices = self.stored_chunks_of(region);
        let fill = self.zarrs.fill_value().as_ne_bytes().to_vec();
        let keys: Vec<String> = indices.iter().map(|i| self.chunk_key(i)).collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reads_old: Vec<bool> = indices
            .iter()
            .map(|i| !self.covered_part(i, region).1)
            .collect();
        let sizes: Vec<u64> = indices
            .iter()
            .map(|i| self.grid.chunk_shape(i).iter().product())
            .collect();
        self.rebuild(
            &key_refs,
            &reads_old,
            &sizes,
            None,
            None,
            |i, prior, sink| {
                let keep_empty = write_empty || !prior.may_delete;
                let key = &keys[i];
                match self.updated_variable_chunk(
                    &indices[i],
                    region,
                    data,
                    &fill,
                    keep_empty,
                    prior.encoded,
                )? {
                    Some(encoded) => {
                        sink.put(&encoded).map_err(|e| Error::storage(key, e))?;
                        Ok(Made::Stored)
                    }
                    None => Ok(Made::Delete),
                }
            },
        )?;
        Ok(())
    }

    /// The cells of chunk `index` that `region` covers, per axis in chunk coordinates, and
    /// whether they are all of its cells inside the array.
    fn covered_part(&self, index: &[u64], region: &Region) -> (Vec<Range<u64>>, bool) {
        let shape = &self.grid.chunk_shape(index);
        let origin = self.grid.origin(index);
        let covered: Vec<Range<u64>> = region
            .ranges
            .iter()
            .zip(&origin)
            .zip(shape)
            .map(|((r, &o), &c)| r.start.max(o) - o..r.end.min(o + c) - o)
            .collect();
        let whole = covered
            .iter()
            .zip(&origin)
            .zip(shape.iter().zip(&self.info.shape))
            .all(|((r, &o), (&c, &s))| r.start == 0 && r.end >= c.min(s.saturating_sub(o)));
        (covered, whole)
    }

    /// The encoded chunk `index` after the write (`None`: delete it), from its old stored
    /// bytes `old` where the write covers only part of it.
    fn updated_variable_chunk(
        &self,
        index: &[u64],
        region: &Region,
        data: &VarData,
        fill: &[u8],
        write_empty: bool,
        old: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        let key = self.chunk_key(index);
        let shape = &self.grid.chunk_shape(index);
        let origin = self.grid.origin(index);
        let (covered, whole) = self.covered_part(index, region);
        let old = if whole {
            None
        } else {
            Some(self.decode_variable(old, &key, shape)?)
        };
        let total: u64 = shape.iter().product();
        let mut out = VarData {
            bytes: Vec::new(),
            offsets: Vec::with_capacity(total as usize + 1),
            shape: shape.clone(),
        };
        let extent = region.extent();
        let mut all_fill = true;
        let mut linear = 0usize;
        let ranges: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
        for_each_index(&ranges, |coord| {
            let inside = coord.iter().zip(&covered).all(|(c, r)| r.contains(c));
            let value: &[u8] = if inside {
                // Position in the region's extent, C order.
                let mut at = 0u64;
                for ((c, (r, o)), e) in coord
                    .iter()
                    .zip(region.ranges.iter().zip(&origin))
                    .zip(&extent)
                {
                    at = at * e + (c + o - r.start);
                }
                data.get(at as usize)
            } else {
                match &old {
                    Some(o) => o.get(linear),
                    None => fill,
                }
            };
            all_fill &= value == fill;
            out.offsets.push(out.bytes.len());
            out.bytes.extend_from_slice(value);
            linear += 1;
        });
        out.offsets.push(out.bytes.len());
        if all_fill && !write_empty {
            return Ok(None);
        }
        self.encode_variable(out, &key).map(Some)
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

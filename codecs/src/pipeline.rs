//! Chunk-level decode and encode for zarr-python's codec pipeline: zarr-python plans which
//! chunks a selection touches; this decodes them in parallel straight into its output array,
//! and encodes chunks for writes (read-modify-write for partial chunks, dropping chunks that
//! are all fill value when asked).
//!
//! Store I/O happens here for local directories (files are replaced atomically, so a failed
//! write never leaves a torn chunk); for any other store the caller passes the bytes.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;
use zarrs::array::{Array, ArrayBytes, ArrayMetadata, ArrayToBytesCodecTraits, CodecOptions};
use zarrs::metadata::v3::ArrayMetadataV3;
use zarrs::storage::store::MemoryStore;

use crate::buffer::{checked_nbytes, try_with_capacity};
use crate::decode::bytes_codecs::DecodeError;
use crate::decode::chain::{ChainError, ChunkChain};
use crate::decode::placement::{OutPtr, Placement};
use crate::decode::sharding::ShardIndex;
use crate::decode::{decode_chunk, ChunkTarget};
use crate::dtype::{ElementKind, ElementType};
use crate::error::{Error, Result};
use crate::read::read_stored;
use crate::remote_read::{read_remote, Fetch};
use crate::store::Store;

/// One chunk of a read: where it is stored and which part of it goes where.
pub struct ChunkRead {
    pub key: String,
    pub placement: Placement,
}

/// One chunk of a write: the part of the chunk (`want`, chunk coordinates) that takes new
/// values, and where those values are in the source array (byte offset and strides per chunk
/// axis; a stride of 0 broadcasts).
pub struct ChunkWrite {
    pub key: String,
    pub chunk_shape: Vec<u64>,
    pub want: Vec<std::ops::Range<u64>>,
    pub src_offset: usize,
    pub src_strides: Vec<usize>,
    /// The old chunk is not read: cells the write does not cover become the fill value
    /// (zarr-python's "complete chunk": an edge chunk whose part inside the array is all
    /// written).
    pub fresh: bool,
}

/// A read-only view of the source array of a write.
#[derive(Clone, Copy)]
pub struct SrcPtr {
    ptr: *const u8,
    len: usize,
}

// SAFETY: only read from, while the caller keeps the memory alive and unchanged (`new`).
unsafe impl Send for SrcPtr {}
unsafe impl Sync for SrcPtr {}

impl SrcPtr {
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes, unchanged while this value is used.
    pub unsafe fn new(ptr: *const u8, len: usize) -> Self {
        Self { ptr, len }
    }

    fn get(&self, offset: usize, n: usize) -> Result<&[u8]> {
        match offset.checked_add(n) {
            // SAFETY: in bounds of the memory `new` vouched for.
            Some(end) if end <= self.len => {
                Ok(unsafe { std::slice::from_raw_parts(self.ptr.add(offset), n) })
            }
            _ => Err(Error::Internal("write source out of bounds".into())),
        }
    }
}

/// The codecs of one array, for zarr-python's pipeline.
pub struct ChunkCodecs {
    pub dtype: ElementType,
    /// zarrs' view of the array (in an empty memory store): encoding, data type, fill value.
    array: Array<MemoryStore>,
    codecs: Vec<zarrs::metadata::v3::MetadataV3>,
    /// Decoding chains by chunk shape (all chunks of a regular grid share one).
    chains: Mutex<HashMap<Vec<u64>, Arc<ChunkChain>>>,
    /// The order to lay inner chunks out in when writing a shard (C-order linear indices);
    /// empty keeps zarrs' order (C order).
    subchunk_order: Vec<u64>,
}

impl ChunkCodecs {
    /// Parses zarr-python's array metadata (`json.dumps(metadata.to_dict())`, v2 or v3).
    /// `Unsupported` if zarrpipe cannot decode this array itself.
    pub fn from_metadata_json(json: &str) -> Result<Self> {
        crate::harden::install();
        let metadata = crate::array::parse_metadata(json)
            .map_err(|e| Error::Unsupported(format!("array metadata zarrs cannot parse: {e}")))?;
        let v3: ArrayMetadataV3 = match &metadata {
            ArrayMetadata::V3(m) => m.clone(),
            ArrayMetadata::V2(m) => zarrs::convert::array_metadata_v2_to_v3(m)
                .map_err(|e| Error::Unsupported(format!("v2 metadata: {e}")))?,
        };
        let array = Array::new_with_metadata(Arc::new(MemoryStore::new()), "/", metadata)
            .map_err(|e| Error::Unsupported(e.to_string()))?;
        let dtype = ElementType::from_zarrs(array.data_type())?;
        let codecs = ChunkCodecs {
            dtype,
            codecs: v3.codecs.clone(),
            array,
            chains: Mutex::new(HashMap::new()),
            subchunk_order: Vec::new(),
        };
        // Fail now, not on the first read, if the regular grid's chain is not ours.
        let grid: serde_json::Value = serde_json::to_value(&v3.chunk_grid).unwrap_or_default();
        let regular = grid.get("name").and_then(|n| n.as_str()) == Some("regular");
        let chunk_shape: Option<Vec<u64>> = grid
            .pointer("/configuration/chunk_shape")
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        match (regular, chunk_shape) {
            (true, Some(shape)) => {
                codecs.chain(&shape)?;
            }
            _ => return Err(Error::Unsupported("chunk grid is not regular".into())),
        }
        Ok(codecs)
    }

    /// Writes shards with their inner chunks in `order` (C-order linear indices).
    #[must_use]
    pub fn with_subchunk_order(mut self, order: Vec<u64>) -> Self {
        self.subchunk_order = order;
        self
    }

    /// The decoding chain for chunks of `shape`.
    pub fn chain(&self, shape: &[u64]) -> Result<Arc<ChunkChain>> {
        let mut chains = self.chains.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = chains.get(shape) {
            return Ok(c.clone());
        }
        let chain = Arc::new(ChunkChain::parse(&self.codecs, shape, self.dtype).map_err(
            |e| match e {
                ChainError::Unsupported(why) => Error::Unsupported(format!("codec chain: {why}")),
                ChainError::Invalid(reason) => Error::Metadata {
                    path: "array".into(),
                    reason,
                },
            },
        )?);
        chains.insert(shape.to_vec(), chain.clone());
        Ok(chain)
    }

    /// Decodes chunks into `out`: each from `encoded[i]` when given (`None` = missing), else
    /// from `store` by key (an object store is fetched from concurrently). Returns, per chunk, whether it was present.
    pub fn read(
        &self,
        items: &[ChunkRead],
        encoded: Option<&[Option<&[u8]>]>,
        store: Option<&Store>,
        out: &OutPtr,
        fill: &[u8],
    ) -> Result<Vec<bool>> {
        let target = ChunkTarget {
            threads: crate::pool::codec_threads(items.len() as u64),
            out,
            elem: self.dtype.size(),
            fill,
        };
        if let (None, Some(remote)) = (encoded, store.and_then(Store::remote)) {
            // An object store: fetch concurrently, decode as the pieces arrive.
            let fetches = items
                .iter()
                .map(|item| {
                    Ok(Fetch {
                        key: item.key.clone(),
                        chain: self.chain(&item.placement.chunk_shape)?,
                        placement: item.placement.clone(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            return read_remote(remote, fetches, &target);
        }
        let one = |(i, item): (usize, &ChunkRead)| -> Result<bool> {
            let chain = self.chain(&item.placement.chunk_shape)?;
            match (encoded, store) {
                (Some(enc), _) => match enc.get(i).copied().flatten() {
                    Some(bytes) => decode_chunk(&chain, bytes, &item.placement, &target, &item.key)
                        .map(|()| true),
                    None => item
                        .placement
                        .fill(out, fill)
                        .map(|()| false)
                        .map_err(|e| DecodeError::from(e).at(&item.key)),
                },
                (None, Some(store)) => {
                    read_stored(store, &chain, &item.key, &item.placement, &target)
                }
                (None, None) => Err(Error::Internal("a read needs bytes or a store".into())),
            }
        };
        if items.len() == 1 {
            items.iter().enumerate().map(one).collect()
        } else {
            items.par_iter().enumerate().map(one).collect()
        }
    }

    /// Builds each chunk a write touches: the old chunk (from `existing[i]`, or `store`; only
    /// read when the write covers part of it and the item is not `fresh`) updated with the new values, then encoded.
    /// `None` means "delete the chunk": it is all fill value and `write_empty` is false.
    /// With a local `store`, the results are also written (atomically) or deleted there.
    pub fn write(
        &self,
        items: &[ChunkWrite],
        src: &SrcPtr,
        existing: Option<&[Option<&[u8]>]>,
        store: Option<&Store>,
        write_empty: bool,
        fill: &[u8],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let one = |(i, item): (usize, &ChunkWrite)| -> Result<Option<Vec<u8>>> {
            let chunk = self.updated_chunk(item, i, src, existing, store, fill)?;
            let encoded = if !write_empty && all_fill(&chunk, fill, self.dtype) {
                None
            } else {
                let bytes = self.encode(&chunk, &item.chunk_shape, &item.key)?;
                Some(self.in_subchunk_order(bytes, &item.chunk_shape, &item.key)?)
            };
            if let Some(root) = store.and_then(Store::local_root) {
                let path = root.join(item.key.trim_start_matches('/'));
                match &encoded {
                    Some(bytes) => {
                        write_atomically(&path, bytes).map_err(|e| Error::storage(&item.key, e))?
                    }
                    None => remove_if_present(&path).map_err(|e| Error::storage(&item.key, e))?,
                }
            }
            Ok(encoded)
        };
        if items.len() == 1 {
            items.iter().enumerate().map(one).collect()
        } else {
            items.par_iter().enumerate().map(one).collect()
        }
    }

    /// The whole chunk after the write, in C order.
    fn updated_chunk(
        &self,
        item: &ChunkWrite,
        i: usize,
        src: &SrcPtr,
        existing: Option<&[Option<&[u8]>]>,
        store: Option<&Store>,
        fill: &[u8],
    ) -> Result<Vec<u8>> {
        let elem = self.dtype.size();
        let nbytes = checked_nbytes(&item.chunk_shape, elem)?;
        let mut chunk = try_with_capacity(nbytes, &item.key)?;
        let whole = Placement::whole(&item.chunk_shape, elem);
        let covers_all = whole.want == item.want;
        if covers_all {
            chunk.resize(nbytes, 0);
        } else if item.fresh {
            // SAFETY: `chunk` has capacity `nbytes`; the fill below writes all of it.
            let out = unsafe { OutPtr::new(chunk.as_mut_ptr(), nbytes) };
            whole
                .fill(&out, fill)
                .map_err(|e| DecodeError::from(e).at(&item.key))?;
            // SAFETY: the fill wrote every byte.
            unsafe { chunk.set_len(nbytes) };
        } else {
            // SAFETY: `chunk` has capacity `nbytes`; the read below fills all of it.
            let out = unsafe { OutPtr::new(chunk.as_mut_ptr(), nbytes) };
            let reads = [ChunkRead {
                key: item.key.clone(),
                placement: whole.clone(),
            }];
            match existing {
                Some(enc) => {
                    let one = [enc.get(i).copied().flatten()];
                    self.read(&reads, Some(&one), None, &out, fill)?;
                }
                None => {
                    self.read(&reads, None, store, &out, fill)?;
                }
            }
            // SAFETY: the read wrote every byte (decoded or filled) or returned an error.
            unsafe { chunk.set_len(nbytes) };
        }
        copy_in(&mut chunk, &whole.out_strides, item, src, elem)?;
        Ok(chunk)
    }

    /// An encoded shard with its inner chunks in the configured order.
    fn in_subchunk_order(&self, shard: Vec<u8>, shape: &[u64], key: &str) -> Result<Vec<u8>> {
        if self.subchunk_order.is_empty() {
            return Ok(shard);
        }
        let chain = self.chain(shape)?;
        let Some(spec) = chain.plain_sharding() else {
            return Ok(shard);
        };
        let n = spec.grid(shape).iter().product();
        ShardIndex::relayout(spec, &shard, n, &self.subchunk_order).map_err(|e| e.at(key))
    }

    fn encode(&self, chunk: &[u8], shape: &[u64], key: &str) -> Result<Vec<u8>> {
        let shape: Vec<NonZeroU64> = shape
            .iter()
            .map(|&d| {
                NonZeroU64::new(d).ok_or_else(|| Error::Internal(format!("zero-sized chunk {key}")))
            })
            .collect::<Result<_>>()?;
        let options = CodecOptions::default().with_concurrent_target(1);
        let encoded = self
            .array
            .codecs()
            .encode(
                ArrayBytes::new_flen(chunk),
                &shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .map_err(|e| Error::corrupt(key, format!("encoding failed: {e}")))?;
        Ok(encoded.into_owned())
    }
}

/// Copies the source values into the wanted part of a C-order chunk.
fn copy_in(
    chunk: &mut [u8],
    chunk_strides: &[usize],
    item: &ChunkWrite,
    src: &SrcPtr,
    elem: usize,
) -> Result<()> {
    let ndim = item.want.len();
    if ndim == 0 {
        chunk[..elem].copy_from_slice(src.get(item.src_offset, elem)?);
        return Ok(());
    }
    let inner = &item.want[ndim - 1];
    let inner_len = (inner.end - inner.start) as usize;
    let inner_src = item.src_strides[ndim - 1];
    let mut coord: Vec<u64> = item.want[..ndim - 1].iter().map(|r| r.start).collect();
    if item.want.iter().any(|r| r.start >= r.end) {
        return Ok(());
    }
    loop {
        let mut dst = inner.start as usize * elem;
        let mut s = item.src_offset;
        for (a, &c) in coord.iter().enumerate() {
            dst += c as usize * chunk_strides[a];
            s += (c - item.want[a].start) as usize * item.src_strides[a];
        }
        if inner_src == elem {
            chunk[dst..dst + inner_len * elem].copy_from_slice(src.get(s, inner_len * elem)?);
        } else {
            for k in 0..inner_len {
                chunk[dst + k * elem..dst + (k + 1) * elem]
                    .copy_from_slice(src.get(s + k * inner_src, elem)?);
            }
        }
        let mut axis = coord.len();
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            coord[axis] += 1;
            if coord[axis] < item.want[axis].end {
                break;
            }
            coord[axis] = item.want[axis].start;
        }
    }
}

/// Whether every element equals the fill value, as zarr-python decides it: bit for bit when
/// the fill value is a float zero (so -0.0 and 0.0 differ), otherwise numerically with NaN
/// equal to NaN for floats (and for each part of a complex number), bit for bit otherwise.
fn all_fill(chunk: &[u8], fill: &[u8], dtype: ElementType) -> bool {
    let bitwise = || chunk.chunks_exact(fill.len()).all(|e| e == fill);
    match dtype.kind() {
        ElementKind::Float | ElementKind::BFloat => {
            let f = as_f64(fill, dtype);
            if f == 0.0 {
                return bitwise();
            }
            chunk
                .chunks_exact(fill.len())
                .all(|e| same_number(as_f64(e, dtype), f))
        }
        ElementKind::Complex => {
            // Part by part. (zarr-python counts any NaN-containing number as equal to a NaN
            // fill, dropping chunks like [5+NaNj]: that loses data, so zarrpipe does not.)
            let half = fill.len() / 2;
            let width = if half == 4 {
                ElementType::Float32
            } else {
                ElementType::Float64
            };
            let (fr, fi) = (as_f64(&fill[..half], width), as_f64(&fill[half..], width));
            chunk.chunks_exact(fill.len()).all(|e| {
                same_number(as_f64(&e[..half], width), fr)
                    && same_number(as_f64(&e[half..], width), fi)
            })
        }
        _ => bitwise(),
    }
}

/// `a == b`, with NaN equal to NaN (NumPy's `array_equal(equal_nan=True)`).
fn same_number(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// One float element's value (float16/bfloat16 widened exactly).
fn as_f64(b: &[u8], dtype: ElementType) -> f64 {
    match (b.len(), dtype) {
        (2, ElementType::BFloat16) => f64::from(f32::from_bits(
            u32::from(u16::from_ne_bytes([b[0], b[1]])) << 16,
        )),
        (2, _) => f16_to_f64(u16::from_ne_bytes([b[0], b[1]])),
        (4, _) => f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        (8, _) => f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => f64::NAN,
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1F);
    let frac = f64::from(h & 0x03FF);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// Replaces `path` with `bytes` so readers see the old file or the new one, never a mix.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = sibling_tempfile(dir, path)?;
    let result = std::io::Write::write_all(&mut tmp.1, bytes)
        .and_then(|()| tmp.1.sync_data())
        .and_then(|()| std::fs::rename(&tmp.0, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp.0);
    }
    result
}

/// A new file next to `path` with a name no other writer uses.
fn sibling_tempfile(dir: &Path, path: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("chunk");
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.zarrpipe-{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_comparison_follows_zarr_python() {
        let neg_zero = (-0.0f64).to_ne_bytes();
        let zero = 0.0f64.to_ne_bytes();
        let nan = f64::NAN.to_ne_bytes();
        // A zero fill compares bit for bit: -0.0 is data.
        assert!(!all_fill(&neg_zero, &zero, ElementType::Float64));
        assert!(all_fill(
            &[zero, zero].concat(),
            &zero,
            ElementType::Float64
        ));
        // Other fills compare numerically, NaN equal to NaN (any payload).
        let other_nan = f64::from_bits(f64::NAN.to_bits() | 1).to_ne_bytes();
        assert!(all_fill(&other_nan, &nan, ElementType::Float64));
        assert!(all_fill(&[0x00, 0x3C], &[0x00, 0x3C], ElementType::Float16));
        assert!(!all_fill(
            &[0x00, 0x80],
            &[0x00, 0x00],
            ElementType::Float16
        ));
        assert!(all_fill(&[nan, nan].concat(), &nan, ElementType::Float64));
        assert!(!all_fill(
            &1.0f64.to_ne_bytes(),
            &zero,
            ElementType::Float64
        ));
        assert!(all_fill(&[0, 0, 0], &[0], ElementType::UInt8));
        assert!(!all_fill(&[0, 1, 0], &[0], ElementType::UInt8));
    }
}

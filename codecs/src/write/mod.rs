//! Writing: every stored chunk (or shard) a write touches is rebuilt — read, updated and
//! encoded, or built from the fill value when the write covers all of it in bounds
//! ("complete", as zarr-python decides) — in parallel on the pool, and stored as soon as it
//! is encoded, so memory holds a few chunks, not the whole write: local files replaced
//! atomically, object-store values put whole (PUT is atomic there), chunks that end up all
//! fill value deleted unless `write_empty_chunks`. A failed write leaves every chunk either
//! old or new, never torn (chunks stored before the failure keep their new values).

pub mod pick;
pub mod points;

use std::num::NonZeroU64;
use std::ops::Range;

use rayon::prelude::*;
use zarrs::array::{ArrayBytes, ArrayToBytesCodecTraits, CodecOptions};

use crate::array::Array;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::ShardIndex;
use crate::codec::encode::view::ChunkView;
use crate::dtype::{ElementKind, ElementType};
use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::layout::placement::Placement;
use crate::layout::plan::ChunkPlan;
use crate::memory::buffer::checked_nbytes;
use crate::memory::out::OutPtr;
use crate::memory::scratch;
use crate::read::cache::ChunkCache;
use crate::read::Source;
use crate::select::selection::Region;
use crate::store::sink::Sink;
use crate::store::{Made, Prior};

/// One chunk (or shard) of a write: the part of it (`want`, chunk coordinates) that takes
/// new values, and where those values are in the source (byte offset of the first one and
/// strides per chunk axis; a stride of 0 repeats a value, as NumPy broadcasting does).
#[derive(Clone, Debug)]
pub struct ChunkWrite {
    pub key: String,
    pub chunk_shape: Vec<u64>,
    pub want: Vec<Range<u64>>,
    pub src_offset: usize,
    pub src_strides: Vec<isize>,
    /// The old chunk is not read: cells the write does not cover become the fill value
    /// (zarr-python's "complete chunk": an edge chunk whose part inside the array is all
    /// written).
    pub fresh: bool,
}

/// A read-only view of the source values of a write.
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
    #[must_use]
    pub unsafe fn new(ptr: *const u8, len: usize) -> Self {
        Self { ptr, len }
    }

    /// Bytes of source values.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All of the source values' memory.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: valid for reads of `len` bytes and unchanged while this value is used
        // (`new`'s contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn get(&self, offset: usize, n: usize) -> Result<&[u8]> {
        match offset.checked_add(n) {
            // SAFETY: in bounds of the memory `new` vouched for.
            Some(end) if end <= self.len => {
                Ok(unsafe { std::slice::from_raw_parts(self.ptr.add(offset), n) })
            }
            _ => Err(Error::Internal("write source out of bounds".into())),
        }
    }
}

/// What became of one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Encoded to these bytes, for a caller that stores them itself.
    Bytes(Vec<u8>),
    /// Encoded to this many bytes and stored in the array's store.
    Stored(usize),
    /// All fill value (and empty chunks are not written): deleted.
    Deleted,
}

impl Array {
    /// Plans a write of `region` from source values laid out with byte `strides` per array
    /// axis (integer-selected axes included, any stride) whose first element is at byte
    /// `base`.
    pub fn plan_write(
        &self,
        region: &Region,
        strides: &[isize],
        base: usize,
    ) -> Result<Vec<ChunkWrite>> {
        self.chain()?;
        if strides.len() != region.ranges.len() {
            return Err(Error::InvalidArgument(format!(
                "{} source strides for {} axes",
                strides.len(),
                region.ranges.len()
            )));
        }
        if region.ranges.iter().any(|r| r.start >= r.end) {
            return Ok(Vec::new());
        }
        let shards = self.info.shards.is_some();
        let grid: Vec<Range<u64>> = region
            .ranges
            .iter()
            .zip(&self.chunk_shape)
            .map(|(r, &c)| r.start / c..r.end.div_ceil(c))
            .collect();
        let mut items = Vec::new();
        let mut error = None;
        for_each_index(&grid, |index| {
            let origin: Vec<u64> = index
                .iter()
                .zip(&self.chunk_shape)
                .map(|(i, c)| i * c)
                .collect();
            let Some(p) = Placement::new(&origin, &self.chunk_shape, &region.ranges, strides, base)
            else {
                error.get_or_insert(Error::InvalidArgument(
                    "the source values do not cover the selection".into(),
                ));
                return;
            };
            let complete = p
                .want
                .iter()
                .zip(&origin)
                .zip(&self.info.shape)
                .zip(&self.chunk_shape)
                .all(|(((w, &o), &s), &c)| w.start == 0 && w.end >= c.min(s - o));
            items.push(ChunkWrite {
                key: self.chunk_key(index),
                chunk_shape: self.chunk_shape.clone(),
                want: p.want,
                src_offset: p.out_offset,
                src_strides: p.out_strides,
                fresh: complete && !shards,
            });
        });
        error.map_or(Ok(items), Err)
    }

    /// Rebuilds and encodes every chunk of `items` from `src`. Old chunks come from the
    /// store, and the results are stored there (each read, updated and stored as one step
    /// no other writer interleaves with, see [`crate::store::Store::update`]); or, when the
    /// caller keeps the store itself, from `supplied` (one per item, `None` = missing), and
    /// the results are returned. The chunk cache forgets every chunk written.
    pub fn write_chunks(
        &self,
        items: &[ChunkWrite],
        src: &SrcPtr,
        supplied: Option<&[Option<&[u8]>]>,
        write_empty: bool,
        cache: Option<&ChunkCache>,
    ) -> Result<Vec<Written>> {
        self.chain()?;
        let mut keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "chunk {:?} appears twice in one write",
                w[0]
            )));
        }
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        let elem = self.info.dtype.size();
        let reads_old: Vec<bool> = items
            .iter()
            .map(|i| !i.fresh && Placement::whole(&i.chunk_shape, elem).want != i.want)
            .collect();
        let sizes: Vec<u64> = items
            .iter()
            .map(|i| i.chunk_shape.iter().product())
            .collect();
        self.rebuild(
            &keys,
            &reads_old,
            &sizes,
            supplied,
            cache,
            |i, prior, sink| {
                let item = &items[i];
                let keep_empty = write_empty || !prior.may_delete;
                let covers = Placement::whole(&item.chunk_shape, elem).want == item.want;
                if covers && self.encoder.is_some() {
                    // Encoded straight from the caller's values.
                    let view = ChunkView::new(
                        src.bytes(),
                        item.src_offset,
                        item.src_strides.clone(),
                        item.chunk_shape.clone(),
                        elem,
                    );
                    return self.finish_view(&view, &item.key, keep_empty, sink);
                }
                let chunk = self.updated_chunk(item, src, prior.encoded)?;
                self.finish(chunk, &item.chunk_shape, &item.key, keep_empty, sink)
            },
        )
    }

    /// Runs `rebuilt(i, prior, sink)` (which encodes chunk `keys[i]`, of `elements[i]`
    /// elements, into the sink, or says to delete it) for every chunk, in parallel. `prior`
    /// holds the old value where `reads_old[i]`; it comes from `supplied` (and the results
    /// are returned) or from the store, where each chunk is stored as it is made: one that
    /// reads its old value through [`crate::store::Store::update`], one that does not by
    /// [`crate::store::Store::replace`]. The chunk cache forgets every chunk written.
    pub(crate) fn rebuild(
        &self,
        keys: &[&str],
        reads_old: &[bool],
        elements: &[u64],
        supplied: Option<&[Option<&[u8]>]>,
        cache: Option<&ChunkCache>,
        rebuilt: impl Fn(usize, Prior<'_>, &mut dyn Sink) -> Result<Made> + Sync + Send,
    ) -> Result<Vec<Written>> {
        let n = keys.len();
        let fresh = Prior {
            encoded: None,
            may_delete: true,
        };
        let in_memory = |i: usize, prior: Prior<'_>| -> Result<Option<Vec<u8>>> {
            let mut value = Vec::new();
            Ok((rebuilt(i, prior, &mut value)? == Made::Stored).then_some(value))
        };
        if let Some(supplied) = supplied {
            if supplied.len() != n {
                return Err(Error::InvalidArgument(format!(
                    "{} old chunks for {n} chunks",
                    supplied.len()
                )));
            }
            return map_indices(0..n, |i| {
                let prior = Prior {
                    encoded: supplied[i].filter(|_| reads_old[i]),
                    may_delete: true,
                };
                Ok(in_memory(i, prior)?.map_or(Written::Deleted, Written::Bytes))
            });
        }
        self.store.check_writable()?;
        let stored =
            |len: Option<u64>| len.map_or(Written::Deleted, |n| Written::Stored(n as usize));
        let update = |i: usize| -> Result<Written> {
            let limit = self.stored_value_limit(elements[i]);
            let mut f = |prior: Prior<'_>, sink: &mut dyn Sink| rebuilt(i, prior, sink);
            self.store.update(keys[i], limit, &mut f).map(stored)
        };
        let results = if self.store.remote().is_some() {
            // Values replaced whole go a group at a time; updates one by one.
            let (updates, whole): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| reads_old[i]);
            let mut results: Vec<Option<Written>> = vec![None; n];
            for (i, w) in updates
                .iter()
                .zip(map_indices(0..updates.len(), |k| update(updates[k]))?)
            {
                results[*i] = Some(w);
            }
            let whole_keys: Vec<&str> = whole.iter().map(|&i| keys[i]).collect();
            let whole_sizes: Vec<u64> = whole.iter().map(|&i| elements[i]).collect();
            let made =
                self.store_in_groups(&whole_keys, &whole_sizes, &|k| in_memory(whole[k], fresh))?;
            for (i, w) in whole.iter().zip(made) {
                results[*i] = Some(w);
            }
            Ok(results.into_iter().flatten().collect())
        } else {
            // Local files and memory: each pool thread stores its chunk as it makes it
            // (into the file that becomes the value, for a local store).
            map_indices(0..n, |i| {
                if reads_old[i] {
                    return update(i);
                }
                let mut make = |sink: &mut dyn Sink| rebuilt(i, fresh, sink);
                self.store.replace(keys[i], &mut make).map(stored)
            })
        };
        if let Some(cache) = cache {
            for key in keys {
                cache.forget_chunk(key);
            }
        }
        results
    }

    /// The most bytes a stored chunk (shard) of `elements` elements can take: longer ones
    /// are corrupt and refused before they are read. No bound for variable-length data.
    fn stored_value_limit(&self, elements: u64) -> u64 {
        if self.info.variable.is_some() {
            return u64::MAX;
        }
        let decoded = elements.saturating_mul(self.info.dtype.size() as u64);
        let index = self
            .chain()
            .ok()
            .and_then(|c| c.plain_sharding())
            .map_or(0, |spec| {
                spec.index_len(spec.grid(&self.chunk_shape).iter().product())
            });
        crate::read::encoded_limit(decoded).saturating_add(index)
    }

    /// A rebuilt chunk (C order, this thread's pooled buffer, given back here) encoded into
    /// `sink`, or `Delete` when it is all fill value and empty chunks are not written.
    pub(crate) fn finish(
        &self,
        chunk: Vec<u8>,
        shape: &[u64],
        key: &str,
        write_empty: bool,
        sink: &mut dyn Sink,
    ) -> Result<Made> {
        let elem = self.info.dtype.size();
        let made = self.finish_view(
            &ChunkView::contiguous(&chunk, shape, elem),
            key,
            write_empty,
            sink,
        );
        scratch::give(chunk);
        made
    }

    /// A whole chunk, `view`, encoded into `sink` (a shard's inner chunks in the configured
    /// order), or `Delete` when it is all fill value and empty chunks are not written.
    pub(crate) fn finish_view(
        &self,
        view: &ChunkView<'_>,
        key: &str,
        write_empty: bool,
        sink: &mut dyn Sink,
    ) -> Result<Made> {
        let fill = self.info.fill_value.as_slice();
        if !write_empty && view_all_fill(view, fill, self.info.dtype) {
            return Ok(Made::Delete);
        }
        if let Some(encoder) = &self.encoder {
            encoder.encode(view, fill, &self.subchunk_order, sink, key)?;
        } else {
            // zarrs encodes whole C-order chunks.
            let mut chunk = chunk_buffer(view.nbytes() as usize, key)?;
            view.for_each_run(|run| {
                chunk.extend_from_slice(run);
                Ok(())
            })
            .map_err(Error::Internal)?;
            let bytes = self.encode(&chunk, view.shape(), key);
            scratch::give(chunk);
            let bytes = self.in_subchunk_order(bytes?, key)?;
            sink.put(&bytes).map_err(|e| Error::storage(key, e))?;
        }
        Ok(Made::Stored)
    }

    /// Object stores: chunks are encoded a group at a time (the pool in parallel) and each
    /// group is put with the store's concurrency, so memory holds one group, not the write.
    fn store_in_groups(
        &self,
        keys: &[&str],
        elements: &[u64],
        rebuilt: &(dyn Fn(usize) -> Result<Option<Vec<u8>>> + Sync),
    ) -> Result<Vec<Written>> {
        const GROUP_BYTES: u64 = 256 << 20;
        let elem = self.info.dtype.size() as u64;
        let mut results = Vec::with_capacity(keys.len());
        let mut start = 0;
        while start < keys.len() {
            let mut end = start;
            let mut bytes = 0u64;
            while end < keys.len() && (end == start || bytes < GROUP_BYTES) {
                bytes = bytes.saturating_add(elements[end].saturating_mul(elem));
                end += 1;
            }
            let group = map_indices(start..end, rebuilt)?;
            let ops: Vec<(&str, Option<&[u8]>)> = keys[start..end]
                .iter()
                .zip(&group)
                .map(|(key, v)| (*key, v.as_deref()))
                .collect();
            self.store.put_many(&ops)?;
            results.extend(group.iter().map(|v| {
                v.as_ref()
                    .map_or(Written::Deleted, |b| Written::Stored(b.len()))
            }));
            start = end;
        }
        Ok(results)
    }

    /// The whole chunk after the write, in C order, from the old stored value `old`
    /// (decoded unless the write covers the chunk or builds it from the fill value).
    fn updated_chunk(
        &self,
        item: &ChunkWrite,
        src: &SrcPtr,
        old: Option<&[u8]>,
    ) -> Result<Vec<u8>> {
        let elem = self.info.dtype.size();
        let whole = Placement::whole(&item.chunk_shape, elem);
        let mut chunk = if whole.want == item.want {
            let nbytes = checked_nbytes(&item.chunk_shape, elem)?;
            let mut chunk = chunk_buffer(nbytes, &item.key)?;
            chunk.resize(nbytes, 0);
            chunk
        } else if item.fresh {
            self.filled_chunk(&item.chunk_shape, &item.key)?
        } else {
            self.decoded_chunk(&item.chunk_shape, &item.key, old)?
        };
        copy_in(&mut chunk, &whole.out_strides, item, src, elem)?;
        Ok(chunk)
    }

    /// A whole chunk of the fill value, in C order.
    pub(crate) fn filled_chunk(&self, shape: &[u64], key: &str) -> Result<Vec<u8>> {
        let elem = self.info.dtype.size();
        let nbytes = checked_nbytes(shape, elem)?;
        let mut chunk = chunk_buffer(nbytes, key)?;
        // SAFETY: `chunk` has capacity `nbytes`; the fill writes all of it, or fails.
        let out = unsafe { OutPtr::new(chunk.as_mut_ptr(), nbytes) };
        Placement::whole(shape, elem)
            .fill(&out, &self.info.fill_value)
            .map_err(|e| DecodeError::from(e).at(key))?;
        // SAFETY: every byte was filled.
        unsafe { chunk.set_len(nbytes) };
        Ok(chunk)
    }

    /// The whole chunk `key` decoded in C order from its stored bytes (all fill value when
    /// it is missing).
    pub(crate) fn decoded_chunk(
        &self,
        shape: &[u64],
        key: &str,
        encoded: Option<&[u8]>,
    ) -> Result<Vec<u8>> {
        let elem = self.info.dtype.size();
        let nbytes = checked_nbytes(shape, elem)?;
        let mut chunk = chunk_buffer(nbytes, key)?;
        let plan = ChunkPlan {
            key: key.to_owned(),
            index: None,
            placement: Placement::whole(shape, elem),
            out_box: shape.iter().map(|&d| 0..d).collect(),
        };
        // SAFETY: `chunk` has capacity `nbytes`; the read writes all of it, or fails.
        let out = unsafe { OutPtr::new(chunk.as_mut_ptr(), nbytes) };
        let source = Source::Supplied(std::slice::from_ref(&encoded));
        self.read_plan(std::slice::from_ref(&plan), &out, source, None)?;
        // SAFETY: every byte was decoded or filled (errors returned above).
        unsafe { chunk.set_len(nbytes) };
        Ok(chunk)
    }

    /// An encoded shard with its inner chunks in the configured order.
    fn in_subchunk_order(&self, shard: Vec<u8>, key: &str) -> Result<Vec<u8>> {
        if self.subchunk_order.is_empty() {
            return Ok(shard);
        }
        let Some(spec) = self.chain()?.plain_sharding() else {
            return Ok(shard);
        };
        let n = spec.grid(&self.chunk_shape).iter().product();
        ShardIndex::relayout(spec, &shard, n, &self.subchunk_order).map_err(|e| e.at(key))
    }

    /// Encodes one whole chunk with zarrs' codec chain (zarrpipe's bounded decoders only
    /// replace decoding).
    fn encode(&self, chunk: &[u8], shape: &[u64], key: &str) -> Result<Vec<u8>> {
        let shape: Vec<NonZeroU64> = shape
            .iter()
            .map(|&d| {
                NonZeroU64::new(d).ok_or_else(|| Error::Internal(format!("zero-sized chunk {key}")))
            })
            .collect::<Result<_>>()?;
        let options = CodecOptions::default().with_concurrent_target(1);
        let encoded = self
            .zarrs
            .codecs()
            .encode(
                ArrayBytes::new_flen(chunk),
                &shape,
                self.zarrs.data_type(),
                self.zarrs.fill_value(),
                &options,
            )
            .map_err(|e| Error::Encode {
                key: key.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(encoded.into_owned())
    }
}

/// An empty buffer with room for a whole chunk of `nbytes`, from this thread's pool when it
/// holds one (a write of many chunks then faults in its memory once per thread, not once
/// per chunk).
fn chunk_buffer(nbytes: usize, key: &str) -> Result<Vec<u8>> {
    let mut buf = scratch::take_fitting(nbytes);
    buf.clear();
    buf.try_reserve_exact(nbytes)
        .map_err(|_| Error::OutOfMemory {
            bytes: nbytes as u128,
            what: format!("chunk {key:?}"),
        })?;
    Ok(buf)
}

/// [`all_fill`] over a view's elements.
fn view_all_fill(view: &ChunkView<'_>, fill: &[u8], dtype: ElementType) -> bool {
    view.for_each_run(|run| {
        if all_fill(run, fill, dtype) {
            Ok(())
        } else {
            Err(String::new()) // stop at the first run with data
        }
    })
    .is_ok()
}

/// `f` over `range`, in parallel when it has several indices.
pub(crate) fn map_indices<T: Send>(
    range: Range<usize>,
    f: impl Fn(usize) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    if range.len() == 1 {
        range.map(f).collect()
    } else {
        range.into_par_iter().map(f).collect()
    }
}

/// Copies the source values into the wanted part of a C-order chunk.
fn copy_in(
    chunk: &mut [u8],
    chunk_strides: &[isize],
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
    let outer = &item.want[..ndim - 1];
    let at = |base: usize, delta: isize| {
        base.checked_add_signed(delta)
            .ok_or_else(|| Error::Internal("write source out of bounds".into()))
    };
    let mut result = Ok(());
    for_each_index(outer, |coord| {
        if result.is_err() {
            return;
        }
        result = (|| {
            let mut dst = inner.start as usize * elem;
            let mut delta = 0isize;
            for (a, &c) in coord.iter().enumerate() {
                dst += c as usize * chunk_strides[a] as usize;
                delta += (c - item.want[a].start) as isize * item.src_strides[a];
            }
            let s = at(item.src_offset, delta)?;
            if inner_src == elem as isize {
                chunk[dst..dst + inner_len * elem].copy_from_slice(src.get(s, inner_len * elem)?);
            } else {
                for k in 0..inner_len {
                    let from = at(s, k as isize * inner_src)?;
                    chunk[dst + k * elem..dst + (k + 1) * elem]
                        .copy_from_slice(src.get(from, elem)?);
                }
            }
            Ok(())
        })();
    });
    result
}

/// Whether every element equals the fill value, as zarr-python decides it: bit for bit when
/// the fill value is a float zero (so -0.0 and 0.0 differ), otherwise numerically with NaN
/// equal to NaN for floats (and for each part of a complex number), bit for bit otherwise.
pub fn all_fill(chunk: &[u8], fill: &[u8], dtype: ElementType) -> bool {
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

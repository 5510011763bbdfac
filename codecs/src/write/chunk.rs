//! Rebuilding one chunk (or shard) of a write: its old value read and decoded, or the fill
//! value, the new values copied in, encoded and stored (or deleted when all fill).

use crate::array::Array;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::ShardIndex;
use crate::codec::encode::view::ChunkView;
use crate::dtype::swap_fields;
use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::layout::placement::Placement;
use crate::layout::plan::ChunkPlan;
use crate::memory::buffer::checked_nbytes;
use crate::memory::out::OutPtr;
use crate::memory::scratch;
use crate::read::cache::ChunkCache;
use crate::read::Source;
use crate::store::sink::Sink;
use crate::store::{Made, Prior};
use std::num::NonZeroU64;
use zarrs::array::{ArrayBytes, ArrayToBytesCodecTraits, CodecOptions};

use super::fill::view_all_fill;
use super::{map_indices, ChunkWrite, SrcPtr, Written};

impl Array {
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
        // A shard holds whole inner chunks: its index has one entry per inner chunk.
        let index = self
            .chain()
            .ok()
            .and_then(|c| c.plain_sharding())
            .map_or(0, |spec| {
                let inner = spec.inner_shape.iter().product::<u64>().max(1);
                spec.index_len(elements.div_ceil(inner))
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
            let order = self.subchunk_order_of(view.shape());
            encoder.encode(view, fill, &order, sink, key)?;
        } else {
            // zarrs encodes whole C-order chunks.
            let mut chunk = chunk_buffer(view.nbytes() as usize, key)?;
            view.for_each_run(|run| {
                chunk.extend_from_slice(run);
                Ok(())
            })
            .map_err(Error::Internal)?;
            if let Some(t) = &self.info.numpy_type {
                if let Some(swaps) = &t.field_swaps {
                    // zarrs stores records as opaque bytes: their fields take the stored
                    // order here.
                    swap_fields(&mut chunk, self.info.dtype.size(), swaps);
                }
                if let Some(sub) = t.sub_byte {
                    sub.to_stored(&mut chunk);
                }
            }
            let bytes = self.encode(&chunk, view.shape(), key);
            scratch::give(chunk);
            let bytes = self.in_subchunk_order(bytes?, view.shape(), key)?;
            sink.put(&bytes).map_err(|e| Error::storage(key, e))?;
        }
        Ok(Made::Stored)
    }

    /// The whole chunk after the write, in C order, from the old stored value `old`
    /// (decoded unless the write covers the chunk or builds it from the fill value).
    pub(super) fn updated_chunk(
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

    /// The order a shard of `shape` lays out its inner chunks, as C-order indices (empty:
    /// C order).
    fn subchunk_order_of(&self, shape: &[u64]) -> Vec<u64> {
        match self.chain().ok().and_then(|c| c.plain_sharding()) {
            Some(spec) => self.shard_order.linear_indices(&spec.grid(shape)),
            None => Vec::new(),
        }
    }

    /// An encoded shard of `shape` with its inner chunks in the configured order.
    fn in_subchunk_order(&self, shard: Vec<u8>, shape: &[u64], key: &str) -> Result<Vec<u8>> {
        let order = self.subchunk_order_of(shape);
        if order.is_empty() {
            return Ok(shard);
        }
        let Some(spec) = self.chain()?.plain_sharding() else {
            return Ok(shard);
        };
        let n = spec.grid(shape).iter().product();
        ShardIndex::relayout(spec, &shard, n, &order).map_err(|e| e.at(key))
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

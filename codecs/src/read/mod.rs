//! Reading a plan: every chunk (or shard) it touches is fetched and decoded on the pool,
//! straight into its place in the output. One path for every source — a local directory,
//! an object store (fetched concurrently, see `remote_read`), any zarrs store, or bytes the
//! caller supplies — and for every output: a fresh buffer (`read_region`) or a caller's
//! (`read_region_into`, the pipeline). The chunk cache is consulted for every chunk, and
//! for every inner chunk of a shard.

pub mod cache;
pub mod gather;
pub mod remote;
pub mod rows;

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rayon::prelude::*;

use crate::array::Array;
use crate::codec::chain::ChunkChain;
use crate::codec::decode::arriving::Arriving;
use crate::codec::decode::bytes_codecs::{
    zstd_decode_arriving, zstd_stream_read, DecodeError, WHOLE_AT_MOST,
};
use crate::codec::decode::scatter::Scatter;
use crate::codec::decode::sharding::{
    decode_inner, decode_shard, inner_parts, InnerPart, ShardIndex,
};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::layout::placement::{c_strides, Placement};
use crate::layout::plan::{check, plan_region, ChunkPlan, OutLayout};
use crate::memory::buffer::{checked_nbytes, try_room_for, try_with_capacity, AlignedOutput};
use crate::memory::out::{OutPtr, RawTarget};
use crate::memory::scratch::Scratch;
use crate::read::cache::{inner_key, ChunkCache};
use crate::select::selection::Region;
use crate::store::ranged::{ByteSource, InMemory};
use crate::store::{value_too_large, Store};

/// Where the encoded chunks of a plan come from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// The array's store.
    Store,
    /// The caller's bytes, one per plan item (`None`: the chunk is missing).
    Supplied(&'a [Option<&'a [u8]>]),
}

/// One chunk read by [`Array::read_chunks`].
pub struct ChunkData {
    pub bytes: Bytes,
    /// The chunk's in-bounds shape (edge chunks are trimmed).
    pub shape: Vec<u64>,
    /// Served from the chunk cache, so shared with it.
    pub cached: bool,
}

/// The most bytes any encoding of `decoded` bytes can take (compressors expand
/// incompressible data by a small fraction, plus headers).
pub(crate) fn encoded_limit(decoded: u64) -> u64 {
    decoded.saturating_add(decoded / 8).saturating_add(1 << 20)
}

/// The most bytes the stored value of a whole chunk can take; for a shard, its index too.
pub(crate) fn stored_limit(chain: &ChunkChain, placement: &Placement, elem: usize) -> u64 {
    let index = chain.plain_sharding().map_or(0, |spec| {
        spec.index_len(spec.grid(&placement.chunk_shape).iter().product())
    });
    encoded_limit(placement.chunk_bytes(elem) as u64) + index
}

/// A cache entry: a chunk (or inner chunk) trimmed to the array's bounds, in C order.
#[derive(Clone, Debug)]
pub(crate) struct CacheSlot {
    pub key: String,
    /// The trimmed shape.
    pub shape: Vec<u64>,
}

impl CacheSlot {
    /// The slot of the chunk of `chunk_shape` at `origin` of an array of `array_shape`.
    pub fn new(key: String, origin: &[u64], chunk_shape: &[u64], array_shape: &[u64]) -> Self {
        let shape = origin
            .iter()
            .zip(chunk_shape)
            .zip(array_shape)
            .map(|((&o, &c), &s)| c.min(s.saturating_sub(o)))
            .collect();
        Self { key, shape }
    }

    /// Where a decoder writes the in-bounds part of the (padded) chunk to make the entry.
    fn fill_placement(&self, chunk_shape: &[u64], elem: usize) -> Placement {
        Placement {
            chunk_shape: chunk_shape.to_vec(),
            want: self.shape.iter().map(|&d| 0..d).collect(),
            out_offset: 0,
            out_strides: c_strides(&self.shape, elem),
        }
    }

    /// `placement` (of the padded chunk) re-aimed at the entry's trimmed layout: every wanted
    /// element is in bounds, so inside the entry.
    fn read_placement(&self, placement: &Placement) -> Placement {
        Placement {
            chunk_shape: self.shape.clone(),
            ..placement.clone()
        }
    }
}

/// Decodes a chunk for the cache: its in-bounds part, into a fresh buffer.
pub(crate) fn decode_entry(
    decode: impl FnOnce(&ChunkTarget<'_>, &Placement) -> Result<()>,
    slot: &CacheSlot,
    chunk_shape: &[u64],
    target: &ChunkTarget<'_>,
) -> Result<Bytes> {
    let n = checked_nbytes(&slot.shape, target.elem)?;
    let mut buf = try_with_capacity(n, &slot.key)?;
    // SAFETY: `buf` has capacity `n` and outlives `out`; only this thread writes it.
    let out = unsafe { OutPtr::new(buf.as_mut_ptr(), n) };
    let entry_target = ChunkTarget {
        out: &out,
        elem: target.elem,
        fill: target.fill,
        threads: target.threads,
    };
    decode(
        &entry_target,
        &slot.fill_placement(chunk_shape, target.elem),
    )?;
    // SAFETY: the placement covers every byte of the entry, decoded or filled, or the decode
    // returned an error above.
    unsafe { buf.set_len(n) };
    Ok(Bytes::from(buf))
}

/// Copies a cached chunk's wanted part into place.
pub(crate) fn scatter_entry(
    entry: &[u8],
    slot: &CacheSlot,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let p = slot.read_placement(placement);
    let mut sink = Scatter::new(target.out, &p, target.elem, ByteOrder::Native, None);
    let at = |e| DecodeError::from(e).at(&slot.key);
    sink.write(entry).map_err(at)?;
    sink.finish().map_err(at)
}

impl Array {
    /// Reads `region` into a fresh buffer that nobody else holds. Runs on the current rayon
    /// pool (wrap in `pool::install`).
    pub fn read_region(&self, region: &Region, cache: Option<&ChunkCache>) -> Result<Bytes> {
        let elem = self.info.dtype.size();
        let extent = region.extent();
        let nbytes = checked_nbytes(&extent, elem)?;
        self.chain()?;
        if nbytes == 0 {
            return Ok(Bytes::new());
        }
        // The output first: a region too large for memory fails before it is planned.
        let mut buf = AlignedOutput::new(
            nbytes,
            &format!("reading {} bytes of {}", nbytes, self.info.path),
        )?;
        let layout = OutLayout::c_order(&extent, elem);
        let plans = self.plan(region, &layout)?;
        check(&plans, &layout, true)?;
        // SAFETY: `buf` has room for `nbytes` and outlives `out`; the checked plan gives
        // every chunk a disjoint part of it.
        let out = unsafe { OutPtr::new(buf.as_mut_ptr(), nbytes) };
        self.read_plan(&plans, &out, Source::Store, cache)?;
        // SAFETY: the checked plan covers every element of the region, and every chunk was
        // decoded or filled (or an error returned above).
        Ok(unsafe { buf.into_bytes() })
    }

    /// Reads `region` into the caller's memory `out`, laid out as `layout` over the
    /// region's output shape (integer-selected axes dropped).
    pub fn read_region_into(
        &self,
        region: &Region,
        out: &OutPtr,
        layout: &OutLayout,
        cache: Option<&ChunkCache>,
    ) -> Result<()> {
        if layout.shape != region.out_shape {
            return Err(Error::InvalidArgument(format!(
                "output of shape {:?} for a selection of shape {:?}",
                layout.shape, region.out_shape
            )));
        }
        if layout.elem != self.info.dtype.size() || layout.len > out.len() {
            return Err(Error::InvalidArgument(
                "output buffer does not match its layout or the array's data type".into(),
            ));
        }
        // Back to one axis per array axis: dropped axes have length 1 and any stride.
        let mut axes = layout.shape.iter().zip(&layout.strides);
        let (shape, strides): (Vec<u64>, Vec<isize>) = region
            .dropped
            .iter()
            .map(|&dropped| {
                if dropped {
                    (1, 0)
                } else {
                    axes.next().map_or((1, 0), |(&n, &s)| (n, s))
                }
            })
            .unzip();
        let full = OutLayout {
            shape,
            strides,
            ..layout.clone()
        };
        let plans = self.plan(region, &full)?;
        check(&plans, &full, false)?;
        self.read_plan(&plans, out, Source::Store, cache)
            .map(|_| ())
    }

    /// The plan of a read of `region` into `out` (one axis per array axis).
    fn plan(&self, region: &Region, out: &OutLayout) -> Result<Vec<ChunkPlan>> {
        self.chain()?;
        plan_region(&region.ranges, &self.chunk_shape, out, |i| {
            self.chunk_key(i)
        })
    }

    /// Decodes every chunk of a checked plan into `out`; returns per item whether its chunk
    /// (or shard) is stored (a missing one reads as the fill value).
    pub fn read_plan(
        &self,
        plans: &[ChunkPlan],
        out: &OutPtr,
        source: Source<'_>,
        cache: Option<&ChunkCache>,
    ) -> Result<Vec<bool>> {
        let chain = self.chain()?;
        let out = &out.streaming_if_large();
        let target = ChunkTarget {
            threads: crate::process::pool::codec_threads(plans.len() as u64),
            out,
            elem: self.info.dtype.size(),
            fill: &self.info.fill_value,
        };
        if let Source::Supplied(bytes) = source {
            if bytes.len() != plans.len() {
                return Err(Error::InvalidArgument(format!(
                    "{} encoded chunks for {} chunks",
                    bytes.len(),
                    plans.len()
                )));
            }
        }
        if let (Source::Store, Some(remote)) = (source, self.store.remote()) {
            return crate::read::remote::read_remote(self, remote, chain, plans, &target, cache);
        }
        let one = |(i, plan): (usize, &ChunkPlan)| -> Result<bool> {
            match source {
                Source::Supplied(bytes) => match bytes[i] {
                    Some(encoded) => {
                        decode_chunk(chain, encoded, &plan.placement, &target, &plan.key)
                            .map(|()| true)
                    }
                    None => plan
                        .placement
                        .fill(out, target.fill)
                        .map(|()| false)
                        .map_err(|e| DecodeError::from(e).at(&plan.key)),
                },
                Source::Store => self.read_cached(chain, plan, &target, cache),
            }
        };
        if plans.len() == 1 {
            plans.iter().enumerate().map(one).collect()
        } else {
            plans.par_iter().enumerate().map(one).collect()
        }
    }

    /// The cache slot of plan item `plan` (`None` without a cache or a grid index).
    pub(crate) fn slot(&self, plan: &ChunkPlan, cache: Option<&ChunkCache>) -> Option<CacheSlot> {
        cache?;
        let index = plan.index.as_ref()?;
        let origin: Vec<u64> = index
            .iter()
            .zip(&self.chunk_shape)
            .map(|(i, c)| i * c)
            .collect();
        Some(CacheSlot::new(
            plan.key.clone(),
            &origin,
            &self.chunk_shape,
            &self.info.shape,
        ))
    }

    /// The cache slot of inner chunk `part` of the shard `plan` reads.
    pub(crate) fn inner_slot(
        &self,
        plan: &ChunkPlan,
        part: &InnerPart,
        inner_shape: &[u64],
    ) -> Option<CacheSlot> {
        let index = plan.index.as_ref()?;
        let origin: Vec<u64> = index
            .iter()
            .zip(&self.chunk_shape)
            .zip(part.coord.iter().zip(inner_shape))
            .map(|((i, c), (p, s))| i * c + p * s)
            .collect();
        Some(CacheSlot::new(
            inner_key(&plan.key, &part.coord),
            &origin,
            inner_shape,
            &self.info.shape,
        ))
    }

    /// One stored chunk or shard of a local or zarrs store, through the cache.
    fn read_cached(
        &self,
        chain: &ChunkChain,
        plan: &ChunkPlan,
        target: &ChunkTarget<'_>,
        cache: Option<&ChunkCache>,
    ) -> Result<bool> {
        let (Some(cache), true) = (cache, plan.index.is_some()) else {
            return read_stored(&self.store, chain, &plan.key, &plan.placement, target);
        };
        if let Some(spec) = chain.plain_sharding() {
            return self.read_shard_cached(spec, plan, target, cache);
        }
        let slot = self.slot(plan, Some(cache)).expect("a cache and an index");
        if let Some(hit) = cache.get(&slot.key) {
            scatter_entry(&hit, &slot, &plan.placement, target)?;
            return Ok(true);
        }
        let mut stored = false;
        let entry = decode_entry(
            |t, p| {
                stored = read_stored(&self.store, chain, &plan.key, p, t)?;
                Ok(())
            },
            &slot,
            &self.chunk_shape,
            target,
        )?;
        scatter_entry(&entry, &slot, &plan.placement, target)?;
        cache.insert(slot.key, entry);
        Ok(stored)
    }

    /// A shard through the cache, inner chunk by inner chunk: the shard is opened (and its
    /// index read) only when some inner chunk the read needs is not cached.
    fn read_shard_cached(
        &self,
        spec: &crate::codec::chain::Sharding,
        plan: &ChunkPlan,
        target: &ChunkTarget<'_>,
        cache: &ChunkCache,
    ) -> Result<bool> {
        let parts = inner_parts(spec, &plan.placement);
        let mut missing = Vec::new();
        for part in parts {
            let slot = self
                .inner_slot(plan, &part, &spec.inner_shape)
                .expect("planned with an index");
            match cache.get(&slot.key) {
                Some(hit) => scatter_entry(&hit, &slot, &part.placement, target)?,
                None => missing.push((part, slot)),
            }
        }
        if missing.is_empty() {
            return Ok(true);
        }
        let Some(src) = self.store.open_ranged(&plan.key)? else {
            for (part, slot) in missing {
                let entry = decode_entry(
                    |t, p| {
                        p.fill(t.out, t.fill)
                            .map_err(|e| DecodeError::from(e).at(&slot.key))
                    },
                    &slot,
                    &spec.inner_shape,
                    target,
                )?;
                scatter_entry(&entry, &slot, &part.placement, target)?;
                cache.insert(slot.key, entry);
            }
            return Ok(false);
        };
        let n: u64 = spec.grid(&plan.placement.chunk_shape).iter().product();
        let index = ShardIndex::read(spec, src.as_ref(), n).map_err(|e| e.at(&plan.key))?;
        let one = |(part, slot): &(InnerPart, CacheSlot)| -> Result<()> {
            let entry = decode_entry(
                |t, p| {
                    let within = InnerPart {
                        placement: p.clone(),
                        ..part.clone()
                    };
                    decode_inner(spec, src.as_ref(), &index, &within, t, &plan.key)
                },
                slot,
                &spec.inner_shape,
                target,
            )?;
            scatter_entry(&entry, slot, &part.placement, target)?;
            cache.insert(slot.key.clone(), entry);
            Ok(())
        };
        if missing.len() > 1 {
            missing.par_iter().try_for_each(one)?;
        } else {
            missing.iter().try_for_each(one)?;
        }
        Ok(true)
    }

    /// True when reading the chunks `indices` runs no parallel loop, so it can run on the
    /// calling thread (`pool::run_here`): one chunk, see [`Self::one_chunk_reads_here`].
    #[must_use]
    pub fn reads_sequentially(&self, indices: &[Vec<u64>]) -> bool {
        indices.len() == 1 && self.one_chunk_reads_here()
    }

    /// Like [`Self::reads_sequentially`], for a read of `region`: it must lie inside one
    /// chunk of the `chunks` grid (for a sharded array, one inner chunk of one shard).
    #[must_use]
    pub fn reads_region_sequentially(&self, region: &Region) -> bool {
        let one_chunk = region
            .ranges
            .iter()
            .zip(&self.info.chunks)
            .all(|(r, &c)| c > 0 && r.start < r.end && r.start / c == (r.end - 1) / c);
        one_chunk && self.one_chunk_reads_here()
    }

    /// True when a read of one chunk has no parallel loop in it: a local store (an object
    /// store's reads run on its async runtime), decoded on one thread by zarrpipe's own
    /// decoders, into an output small enough not to be faulted in on several threads, and
    /// not a zstd chunk large enough to overlap its file read with its decoding on the pool.
    fn one_chunk_reads_here(&self) -> bool {
        let elem = self.info.dtype.size() as u64;
        let Some(bytes) = self
            .info
            .chunks
            .iter()
            .try_fold(elem, |acc, &d| acc.checked_mul(d))
        else {
            return false;
        };
        let overlaps =
            |c: &ChunkChain| c.zstd_only_order().is_some() && bytes >= OVERLAP_AT_LEAST as u64;
        self.store.local_root().is_some()
            && bytes < crate::memory::first_touch::PARALLEL_AT_LEAST as u64
            && self
                .chain()
                .is_ok_and(|c| c.decodes_sequentially() && !overlaps(c))
    }

    /// Reads whole chunks of the `chunks` grid, each into its own buffer, in parallel.
    /// With a cache, hits share the cache's bytes; misses are fresh (the cache keeps its
    /// own copy).
    pub fn read_chunks(
        &self,
        indices: &[Vec<u64>],
        cache: Option<&ChunkCache>,
    ) -> Result<Vec<ChunkData>> {
        let one = |index: &Vec<u64>| -> Result<ChunkData> {
            let region = self.chunk_region(index)?;
            if let Some(hit) = cache.and_then(|c| c.get_if_hit(&self.cache_key_of_chunk(index))) {
                return Ok(ChunkData {
                    bytes: hit,
                    shape: region.out_shape,
                    cached: true,
                });
            }
            let bytes = self.read_region(&region, cache)?;
            Ok(ChunkData {
                bytes,
                shape: region.out_shape,
                cached: false,
            })
        };
        if indices.len() == 1 {
            indices.iter().map(one).collect()
        } else {
            indices.par_iter().map(one).collect()
        }
    }

    /// The cache key of chunk `index` of the `chunks` grid (an inner chunk of a shard has
    /// its shard's key and its position in the shard).
    fn cache_key_of_chunk(&self, index: &[u64]) -> String {
        let per_shard: Vec<u64> = self
            .chunk_shape
            .iter()
            .zip(&self.info.chunks)
            .map(|(s, c)| s / c)
            .collect();
        let shard: Vec<u64> = index.iter().zip(&per_shard).map(|(i, n)| i / n).collect();
        let key = self.chunk_key(&shard);
        match &self.info.shards {
            Some(_) if self.chain().is_ok_and(|c| c.plain_sharding().is_some()) => {
                let coord: Vec<u64> = index.iter().zip(&per_shard).map(|(i, n)| i % n).collect();
                inner_key(&key, &coord)
            }
            _ => key,
        }
    }
}

/// Reads the stored chunk (or shard) at `key` and decodes the part `placement` wants into
/// `target`; a missing key reads as the fill value. Returns whether the key was present.
pub fn read_stored(
    store: &Store,
    chain: &ChunkChain,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<bool> {
    let fill = || {
        placement
            .fill(target.out, target.fill)
            .map_err(|e| DecodeError::from(e).at(key))
    };
    if let Some(spec) = chain.plain_sharding() {
        // A whole shard is one read (measured faster than parallel ranged reads of its
        // inner chunks: 1117 vs 837 MB/s reading 1 GiB, where other shards keep the threads
        // busy meanwhile); part of one reads the index, then each needed inner chunk. So
        // does a whole file read by itself on several threads, which would otherwise wait
        // for that one read: 1 GiB shard by shard (32 MiB shards, 2 threads) took 0.82 s
        // instead of 0.97 (medians of interleaved runs, BENCHMARKS.md).
        let lone_file = target.threads > 1 && store.local_root().is_some();
        if placement.wants_whole_chunk() && !lone_file {
            return match store.read(key, stored_limit(chain, placement, target.elem))? {
                Some(shard) => {
                    decode_shard(spec, &InMemory(&shard), placement, target, key).map(|()| true)
                }
                None => fill().map(|()| false),
            };
        }
        return match store.open_ranged(key)? {
            Some(src) => decode_shard(spec, src.as_ref(), placement, target, key).map(|()| true),
            None => fill().map(|()| false),
        };
    }
    if let (Some(order), Some(_)) = (chain.raw_order(), store.local_root()) {
        return match store.open_ranged(key)? {
            Some(src) => {
                read_raw(src.as_ref(), chain, order, key, placement, target).map(|()| true)
            }
            None => fill().map(|()| false),
        };
    }
    if let (Some(order), Some(_)) = (chain.zstd_only_order(), store.local_root()) {
        let overlap = overlaps_read_and_decode(chain, order, placement, target);
        if overlap || streams_from_file(placement, target.elem) {
            return match store.open_ranged(key)? {
                Some(src) if overlap => {
                    read_zstd_overlapped(src.as_ref(), chain, order, key, placement, target)
                        .map(|()| true)
                }
                Some(src) => read_zstd_streamed(src.as_ref(), chain, order, key, placement, target)
                    .map(|()| true),
                None => fill().map(|()| false),
            };
        }
    }
    match store.read(key, stored_limit(chain, placement, target.elem))? {
        Some(encoded) => decode_chunk(chain, &encoded, placement, target, key).map(|()| true),
        None => fill().map(|()| false),
    }
}

/// True when a zstd chunk is decoded from its file piece by piece: it is scattered (zstd
/// cannot decode it straight into place, where it wants the whole frame at once) and too
/// large to be decoded whole in cache. No thread then keeps a chunk-sized buffer of encoded
/// bytes; on the benchmark's 1 GiB zstd read-all it measured about 1 % faster (within noise).
fn streams_from_file(placement: &Placement, elem: usize) -> bool {
    !placement.is_contiguous_whole(elem) && placement.chunk_bytes(elem) > WHOLE_AT_MOST
}

/// The stored value's length, refused as corrupt when no encoding of the chunk is that long.
fn checked_stored_len(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    placement: &Placement,
    target: &ChunkTarget<'_>,
    key: &str,
) -> Result<u64> {
    let limit = stored_limit(chain, placement, target.elem);
    let len = src.size();
    if len > limit {
        return Err(value_too_large(key, len, limit));
    }
    Ok(len)
}

/// Decoded chunks at least this large, read by themselves, overlap their file read with
/// their decoding: below it the wake-up of a second thread costs more than the copy.
const OVERLAP_AT_LEAST: usize = 4 << 20;

/// True when a zstd chunk's file is read on one pool thread while another decodes it: a
/// large chunk that is the whole read (so the pool's other thread is idle, `threads > 1`)
/// and that zstd can decode straight into place.
fn overlaps_read_and_decode(
    chain: &ChunkChain,
    order: ByteOrder,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> bool {
    target.threads > 1
        && placement.chunk_bytes(target.elem) >= OVERLAP_AT_LEAST
        && chain
            .scatter(target, placement, order)
            .direct_target()
            .is_some()
}

static OVERLAPPED: AtomicU64 = AtomicU64::new(0);

/// How many chunk reads in this process have overlapped their file read with their
/// decoding (tests check that the path they mean to test was taken).
#[doc(hidden)]
#[must_use]
pub fn overlapped_reads() -> u64 {
    OVERLAPPED.load(Ordering::Relaxed)
}

/// A large zstd chunk read by itself: one pool thread reads its file a step at a time
/// while another decodes each step as it lands, straight into place. Measured chunk by
/// chunk through the benchmark's 1 GiB zstd array (256³ chunks, 20 MiB stored each): the
/// file read had been 7 % of the time, all of it before the decode could start.
fn read_zstd_overlapped(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let len = checked_stored_len(src, chain, placement, target, key)?;
    OVERLAPPED.fetch_add(1, Ordering::Relaxed);
    let len = len as usize;
    let mut buf = Scratch::fitting(len);
    buf.clear();
    try_room_for(&mut buf, len, &format!("reading {key:?}"))?;
    let arriving = Arriving::new(&mut buf.spare_capacity_mut()[..len]);
    let mut sink = chain.scatter(target, placement, order);
    let decode = |sink: &mut Scatter<'_>| -> Result<()> {
        let Some(direct) = sink.direct_target() else {
            return Err(Error::Internal(format!(
                "{key}: an overlapped zstd read needs a direct target"
            )));
        };
        let written = zstd_decode_arriving(&arriving, &direct).map_err(|e| e.at(key))?;
        // `None`: the reader failed, and its error is returned instead.
        sink.assume_written(written.unwrap_or(0));
        Ok(())
    };
    let (read, decoded) = rayon::join(
        || arriving.fill_from(src),
        || {
            let decoded = decode(&mut sink);
            if decoded.is_err() {
                arriving.abandon();
            }
            decoded
        },
    );
    read?;
    decoded?;
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

/// A zstd chunk decoded from its file piece by piece into place.
fn read_zstd_streamed(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let len = checked_stored_len(src, chain, placement, target, key)?;
    let mut sink = chain.scatter(target, placement, order);
    let fill = |offset: u64, buf: &mut [u8]| {
        src.read_to(
            offset,
            &RawTarget {
                ptr: buf.as_mut_ptr(),
                len: buf.len(),
            },
        )
    };
    zstd_stream_read(len as usize, fill, &mut sink, key)?;
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

/// Bytes per file read when streaming an uncompressed chunk into place: few enough that the
/// kernel copies them into a buffer in cache (see `local_read`).
const RAW_PIECE: usize = crate::store::local_read::CACHED_READ;

/// An uncompressed chunk: read from the file straight into the output when it lands there
/// whole and contiguous, else streamed through a small buffer into place. Either way no
/// chunk-sized intermediate buffer.
fn read_raw(
    src: &dyn ByteSource,
    chain: &ChunkChain,
    order: ByteOrder,
    key: &str,
    placement: &Placement,
    target: &ChunkTarget<'_>,
) -> Result<()> {
    let expected = placement.chunk_bytes(target.elem);
    if src.size() != expected as u64 {
        return Err(Error::corrupt(
            key,
            format!(
                "uncompressed chunk is {} bytes, expected {expected}",
                src.size()
            ),
        ));
    }
    let mut sink = chain.scatter(target, placement, order);
    if let Some(direct) = sink.direct_target() {
        src.read_to(0, &direct)?;
        sink.assume_written(expected);
    } else {
        let mut piece = Scratch::fitting(RAW_PIECE.min(expected));
        piece.resize(RAW_PIECE.min(expected), 0);
        let mut offset = 0;
        while offset < expected {
            let n = piece.len().min(expected - offset);
            let into = RawTarget {
                ptr: piece.as_mut_ptr(),
                len: n,
            };
            src.read_to(offset as u64, &into)?;
            sink.write(&piece[..n])
                .map_err(|e| DecodeError::from(e).at(key))?;
            offset += n;
        }
    }
    sink.finish().map_err(|e| DecodeError::from(e).at(key))
}

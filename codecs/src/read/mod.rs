//! Reading a plan: every chunk (or shard) it touches is fetched and decoded on the pool,
//! straight into its place in the output. One path for every source — a local directory,
//! an object store (fetched concurrently, see `remote`), any zarrs store, or bytes the
//! caller supplies — and for every output: a fresh buffer (`read_region`) or a caller's
//! (`read_region_into`, the pipeline). The chunk cache is consulted for every chunk, and
//! for every inner chunk of a shard. Uses everything below it (`array`, `codec`, `store`,
//! `layout`, `select`, `memory`, `process`), never `write`.

pub mod cache;
mod cache_slot;
mod chunk_picks;
pub mod fetched;
pub mod gather;
mod local;
mod pick_direct;
pub mod remote;
pub mod rows;
pub mod variable;

pub(crate) use cache_slot::{decode_entry, scatter_entry, CacheSlot};
use local::OVERLAP_AT_LEAST;
pub use local::{overlapped_reads, read_stored};
pub use pick_direct::direct_pick_boxes;

use crate::process::pool::{try_each, try_map};
use bytes::Bytes;

use crate::array::Array;
use crate::codec::chain::ChunkChain;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::{decode_inner, inner_parts, InnerPart, ShardIndex};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::layout::placement::Placement;
use crate::layout::plan::{check, plan_region, ChunkPlan, OutLayout};
use crate::memory::buffer::{checked_nbytes, AlignedOutput};
use crate::memory::out::OutPtr;
use crate::read::cache::{inner_key, ChunkCache};
use crate::select::selection::Region;

/// Where the encoded chunks of a plan come from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// The array's store.
    Store,
    /// The caller's bytes, one per plan item (`None`: the chunk is missing).
    Supplied(&'a [Option<&'a [u8]>]),
    /// What the caller fetched, one per plan item: shards possibly in part.
    Fetched(&'a [fetched::Fetched<'a>]),
}

impl Source<'_> {
    /// How many values the caller supplied (None: the store is read).
    pub(crate) fn supplied(&self) -> Option<usize> {
        match self {
            Source::Store => None,
            Source::Supplied(list) => Some(list.len()),
            Source::Fetched(list) => Some(list.len()),
        }
    }
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
        plan_region(&region.ranges, &self.grid, out, |i| self.chunk_key(i))
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
        if let Some(n) = source.supplied().filter(|&n| n != plans.len()) {
            return Err(Error::InvalidArgument(format!(
                "{n} encoded chunks for {} chunks",
                plans.len()
            )));
        }
        if let (Source::Store, Some(remote)) = (source, self.store.remote()) {
            return crate::read::remote::read_remote(self, remote, chain, plans, &target, cache);
        }
        let indexed: Vec<(usize, &ChunkPlan)> = plans.iter().enumerate().collect();
        try_map(&indexed, |&(i, plan)| -> Result<bool> {
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
                Source::Fetched(fetched) => {
                    fetched::decode_fetched(chain, plan, &fetched[i], &target)
                }
                Source::Store => self.read_cached(chain, plan, &target, cache),
            }
        })
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
            &plan.placement.chunk_shape,
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
        try_each(&missing, |(part, slot)| -> Result<()> {
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
        })?;
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
        let g = &self.read_grid;
        let one_chunk =
            region.ranges.iter().enumerate().all(|(a, r)| {
                r.start < r.end && g.chunk_at(a, r.start) == g.chunk_at(a, r.end - 1)
            });
        one_chunk && self.one_chunk_reads_here()
    }

    /// True when a read of one chunk has no parallel loop in it: a local store (an object
    /// store's reads run on its async runtime), decoded on one thread by zarrpipe's own
    /// decoders, into an output small enough not to be faulted in on several threads, and
    /// not a zstd chunk large enough to overlap its file read with its decoding on the pool.
    fn one_chunk_reads_here(&self) -> bool {
        let elem = self.info.dtype.size() as u64;
        let Some(bytes) = self
            .read_grid
            .max_chunk_shape()
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
        try_map(indices, |index| -> Result<ChunkData> {
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
        })
    }

    /// The cache key of chunk `index` of the `chunks` grid (an inner chunk of a shard has
    /// its shard's key and its position in the shard).
    fn cache_key_of_chunk(&self, index: &[u64]) -> String {
        // The shard holding the inner chunk, and the inner chunk's place in it.
        let origin = self.read_grid.origin(index);
        let shard: Vec<u64> = (origin.iter().enumerate())
            .map(|(a, &o)| self.grid.chunk_at(a, o))
            .collect();
        let key = self.chunk_key(&shard);
        match &self.info.shards {
            Some(_) if self.chain().is_ok_and(|c| c.plain_sharding().is_some()) => {
                let coord: Vec<u64> = (origin.iter().zip(self.grid.origin(&shard)))
                    .zip(&self.info.chunks)
                    .map(|((o, s), c)| (o - s) / c)
                    .collect();
                inner_key(&key, &coord)
            }
            _ => key,
        }
    }
}

//! Writing: every stored chunk (or shard) a write touches is rebuilt — read, updated and
//! encoded, or built from the fill value when the write covers all of it in bounds
//! ("complete", as zarr-python decides) — in parallel on the pool, and stored as soon as it
//! is encoded, so memory holds a few chunks, not the whole write: local files replaced
//! atomically, object-store values put whole (PUT is atomic there), chunks that end up all
//! fill value deleted unless `write_empty_chunks`. A failed write leaves every chunk either
//! old or new, never torn (chunks stored before the failure keep their new values).
//! The top floor: uses `read` (old values of partly written chunks) and everything below.

mod chunk;
mod fill;
pub mod pick;
mod variable;

pub use fill::all_fill;

use std::ops::Range;

use crate::array::Array;
use crate::codec::encode::view::ChunkView;
use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::layout::placement::Placement;
use crate::read::cache::ChunkCache;
use crate::select::selection::Region;

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
// SAFETY: as for `Send`: shared use only reads.
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
            Some(end) if end <= self.len => {
                // SAFETY: in bounds of the memory `new` vouched for.
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
            .enumerate()
            .map(|(a, r)| self.grid.covering(a, r))
            .collect();
        let mut items = Vec::new();
        let mut error = None;
        for_each_index(&grid, |index| {
            let origin = self.grid.origin(index);
            let chunk_shape = self.grid.chunk_shape(index);
            let Some(p) = Placement::new(&origin, &chunk_shape, &region.ranges, strides, base)
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
                .zip(&chunk_shape)
                .all(|(((w, &o), &s), &c)| w.start == 0 && w.end >= c.min(s - o));
            items.push(ChunkWrite {
                key: self.chunk_key(index),
                chunk_shape,
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
        for item in items {
            self.check_chunk_shape(&item.chunk_shape, &item.key)?;
        }
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
}

/// `f` over `range`, in parallel when it has several indices; each index (a chunk of a
/// write) first checks that nobody asked the call to stop.
pub(crate) fn map_indices<T: Send>(
    range: Range<usize>,
    f: impl Fn(usize) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    let indices: Vec<usize> = range.collect();
    crate::process::pool::try_map(&indices, |&i| f(i))
}

//! Writing values at listed positions of stored chunks (shards): zarr-python's selections
//! of every kind (integer arrays, masks, steps, coordinates) as its codec pipeline hands
//! them over, one C-order position in the stored chunk per value, for fixed-size and
//! variable-length elements alike. Each chunk is read, updated and stored as one step no
//! other writer of it interleaves with ([`crate::store::Store::update`]), or built from the
//! fill value without reading it when zarr-python calls it complete. Of repeated positions
//! the last value stays, as in NumPy's assignment.

use crate::array::variable::VarData;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::memory::buffer::checked_nbytes;
use crate::read::cache::ChunkCache;
use crate::store::Made;
use crate::write::{SrcPtr, Written};

/// One stored chunk of a write by positions.
#[derive(Clone, Debug)]
pub struct PointWrite {
    pub key: String,
    /// The stored chunk's shape (chunks of a rectilinear grid differ).
    pub shape: Vec<u64>,
    /// C-order positions in the stored chunk; the k-th takes this item's k-th value.
    pub positions: Vec<u64>,
    /// The old chunk is not read: the cells not listed become the fill value.
    pub fresh: bool,
}

impl Array {
    /// Writes `values` (each item's values in turn, elements of the array's type) at the
    /// items' positions. With `supplied` (old chunks, one per item, `None` = missing) the
    /// encoded chunks are returned instead of stored.
    pub fn write_points(
        &self,
        items: &[PointWrite],
        values: &SrcPtr,
        supplied: Option<&[Option<&[u8]>]>,
        write_empty: bool,
        cache: Option<&ChunkCache>,
    ) -> Result<Vec<Written>> {
        self.chain()?;
        let elem = self.info.dtype.size();
        let starts = self.check_points(items, values.len() / elem.max(1))?;
        if !values.len().is_multiple_of(elem.max(1)) {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of values is not a whole number of {elem}-byte elements",
                values.len()
            )));
        }
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        let reads_old: Vec<bool> = items.iter().map(|i| !i.fresh).collect();
        let sizes: Vec<u64> = items.iter().map(|i| i.shape.iter().product()).collect();
        self.rebuild(
            &keys,
            &reads_old,
            &sizes,
            supplied,
            cache,
            |i, prior, sink| {
                let item = &items[i];
                let shape = &item.shape;
                let mut chunk = if item.fresh {
                    self.filled_chunk(shape, &item.key)?
                } else {
                    self.decoded_chunk(shape, &item.key, prior.encoded)?
                };
                debug_assert_eq!(chunk.len(), checked_nbytes(shape, elem)?);
                for (k, &p) in item.positions.iter().enumerate() {
                    let at = p as usize * elem;
                    let value = values.get((starts[i] + k) * elem, elem)?;
                    chunk[at..at + elem].copy_from_slice(value);
                }
                self.finish(
                    chunk,
                    shape,
                    &item.key,
                    write_empty || !prior.may_delete,
                    sink,
                )
            },
        )
    }

    /// [`Array::write_points`] for variable-length elements: `values` holds each item's
    /// values in turn.
    pub fn write_points_variable(
        &self,
        items: &[PointWrite],
        values: &VarData,
        supplied: Option<&[Option<&[u8]>]>,
        write_empty: bool,
    ) -> Result<Vec<Written>> {
        self.variable()?;
        let starts = self.check_points(items, values.len())?;
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        let reads_old: Vec<bool> = items.iter().map(|i| !i.fresh).collect();
        let sizes: Vec<u64> = items.iter().map(|i| i.shape.iter().product()).collect();
        self.rebuild(
            &keys,
            &reads_old,
            &sizes,
            supplied,
            None,
            |i, prior, sink| {
                let item = &items[i];
                let n = sizes[i] as usize; // checked by check_points
                let old = self.decode_variable(
                    prior.encoded.filter(|_| !item.fresh),
                    &item.key,
                    &item.shape,
                )?;
                // Which value each cell takes: the last listed for it, else its old one.
                let mut new_value: Vec<Option<usize>> = vec![None; n];
                for (k, &p) in item.positions.iter().enumerate() {
                    new_value[p as usize] = Some(starts[i] + k);
                }
                let mut chunk = VarData {
                    bytes: Vec::with_capacity(old.bytes.len()),
                    offsets: Vec::with_capacity(n + 1),
                    shape: item.shape.clone(),
                };
                for (cell, value) in new_value.iter().enumerate() {
                    chunk.offsets.push(chunk.bytes.len());
                    chunk
                        .bytes
                        .extend_from_slice(value.map_or_else(|| old.get(cell), |v| values.get(v)));
                }
                chunk.offsets.push(chunk.bytes.len());
                if !write_empty && prior.may_delete && self.all_fill_variable(&chunk) {
                    return Ok(Made::Delete);
                }
                let encoded = self.encode_variable(chunk, &item.key)?;
                sink.put(&encoded)
                    .map_err(|e| Error::storage(&item.key, e))?;
                Ok(Made::Stored)
            },
        )
    }

    /// Checks the items of a write by positions against the chunk size and the number of
    /// values; returns where each item's values start.
    fn check_points(&self, items: &[PointWrite], values: usize) -> Result<Vec<usize>> {
        let mut keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "chunk {:?} appears twice in one write",
                w[0]
            )));
        }
        let mut starts = Vec::with_capacity(items.len());
        let mut total = 0usize;
        for item in items {
            self.check_chunk_shape(&item.shape, &item.key)?;
            let cells: u64 = item.shape.iter().product();
            if let Some(p) = item.positions.iter().find(|&&p| p >= cells) {
                return Err(Error::InvalidSelection(format!(
                    "position {p} is outside chunk {:?} of {cells} elements",
                    item.key
                )));
            }
            starts.push(total);
            total += item.positions.len();
        }
        if total != values {
            return Err(Error::InvalidArgument(format!(
                "{values} values for {total} positions"
            )));
        }
        Ok(starts)
    }
}

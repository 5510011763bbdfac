//! Writing a region of a variable-length array (strings, bytes): each stored chunk it
//! touches is rebuilt whole (a variable-length chunk has no partial encode) — read,
//! updated and stored as one step no other writer of it interleaves with where the region
//! covers only part of it — and one left all fill value is deleted unless asked to keep it.

use std::ops::Range;

use crate::array::variable::VarData;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::index::for_each_index;
use crate::select::selection::Region;
use crate::store::Made;

impl Array {
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
}

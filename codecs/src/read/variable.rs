//! Reading a variable-length array (strings, bytes): a region's stored chunks decoded in
//! parallel, each only for its part, then laid out in C order; an `Array` pick reads the box
//! that spans it once, then takes its elements in the pick's order by the same runs as the
//! gather of fixed-size elements (in element units instead of bytes); zarr-python's chunk
//! picks decode each stored chunk whole and take the picked elements.

use std::ops::Range;

use zarrs::array::ArrayBytes;

use crate::array::variable::{array_error, options, VarData};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::index::for_each_index;
use crate::layout::placement::c_strides;
use crate::process::pool::try_map;
use crate::read::gather::{check_partition, group_factor, Group, Runs};
use crate::select::pick::Pick;
use crate::select::selection::Region;

impl Array {
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
    pub(crate) fn stored_chunks_of(&self, region: &Region) -> Vec<Vec<u64>> {
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

    /// Reads `pick` of a variable-length array into elements in C order of
    /// `pick.out_shape()`.
    pub fn read_variable_pick(&self, pick: &Pick) -> Result<VarData> {
        if let Some(region) = pick.as_region() {
            return self.read_variable(&region);
        }
        let shape = &self.info.shape;
        let out_shape = pick.out_shape();
        let factors = pick.factors();
        // The whole array as one grid cell: one group per factor (none when it is empty).
        let whole = ChunkGrid::regular(shape, shape);
        let groups: Vec<Vec<Group>> = factors.iter().map(|f| group_factor(f, &whole)).collect();
        check_partition(factors, &groups)?;
        if groups.iter().any(Vec::is_empty) {
            self.variable()?;
            return Ok(VarData {
                bytes: Vec::new(),
                offsets: vec![0],
                shape: out_shape,
            });
        }
        let mut ranges: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
        for (f, gs) in factors.iter().zip(&groups) {
            for (t, &a) in f.axes().iter().enumerate() {
                ranges[a] = gs[0].lo[t]..gs[0].hi[t];
            }
        }
        let extent: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
        let region = Region {
            out_shape: extent.clone(),
            dropped: vec![false; ranges.len()],
            ranges,
        };
        let boxed = self.read_variable(&region)?;
        let n = usize::try_from(out_shape.iter().product::<u64>())
            .map_err(|_| Error::InvalidArgument("selection too large".into()))?;
        // Each output element's index in the box.
        let mut index = vec![0usize; n];
        let item_groups = vec![0; factors.len()];
        let out_strides = c_strides(&out_shape, 1);
        let runs = Runs {
            factors,
            groups: &groups,
            item_groups: &item_groups,
            out_strides: &out_strides,
            elem: 1,
        };
        runs.for_each(&c_strides(&extent, 1), true, |d, s, len| {
            let to = index
                .get_mut(d..d + len)
                .ok_or_else(|| Error::Internal("variable gather outside its output".into()))?;
            for (k, slot) in to.iter_mut().enumerate() {
                *slot = s + k;
            }
            Ok(())
        })?;
        let mut out = VarData {
            bytes: Vec::new(),
            offsets: Vec::with_capacity(n + 1),
            shape: out_shape,
        };
        out.offsets.push(0);
        for &i in &index {
            if i >= boxed.len() {
                return Err(Error::Internal("variable gather outside its box".into()));
            }
            out.bytes.extend_from_slice(boxed.get(i));
            out.offsets.push(out.bytes.len());
        }
        Ok(out)
    }
}

/// One stored chunk of a pick read: its bytes (None: missing, all fill value), key, shape and
/// the C-order positions of the picked elements in it.
pub struct VariableChunkPick<'a> {
    pub encoded: Option<&'a [u8]>,
    pub key: &'a str,
    pub shape: &'a [u64],
    pub positions: &'a [u64],
}

impl Array {
    /// The picked elements of each chunk, chunk after chunk (1-d): each chunk decoded whole
    /// on the pool (a variable-length chunk has no partial decode), then its positions taken.
    pub fn read_variable_chunk_picks(&self, chunks: &[VariableChunkPick<'_>]) -> Result<VarData> {
        self.variable()?;
        let parts = try_map(chunks, |c| {
            self.check_chunk_shape(c.shape, c.key)?;
            let whole = self.decode_variable(c.encoded, c.key, c.shape)?;
            let positions = c.positions.iter().map(|&p| usize::try_from(p));
            let positions: Vec<usize> = positions
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| Error::InvalidSelection(format!("{}: position too large", c.key)))?;
            whole.select(positions)
        })?;
        Ok(VarData::concat(&parts))
    }
}

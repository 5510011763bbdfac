//! Reading picks of a variable-length array (strings, bytes): an `Array` pick reads the box
//! that spans it once, then takes its elements in the pick's order by the same runs as the
//! gather of fixed-size elements (in element units instead of bytes); zarr-python's chunk
//! picks decode each stored chunk whole and take the picked elements.

use std::ops::Range;

use crate::array::variable::VarData;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::grid::ChunkGrid;
use crate::layout::placement::c_strides;
use crate::process::pool::try_map;
use crate::read::gather::{check_partition, group_factor, Group, Runs};
use crate::select::pick::Pick;
use crate::select::selection::Region;

impl Array {
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

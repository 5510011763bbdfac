//! Writing picks (steps, index arrays, points, masks), the one way: every write by pick
//! becomes, per stored chunk (shard) it touches, a [`ChunkPick`] — the pick inside that
//! chunk — and where each of its values comes from in the caller's values. An array's pick
//! ([`Array::write_pick`]) is grouped by stored chunk as reads group it; zarr-python's
//! pipeline hands its chunks over already split ([`Array::write_chunk_picks`]). Each touched
//! chunk is read whole (or built from the fill value when the write covers it), its new
//! values are copied to their places — of repeated positions the last value stays, as in
//! NumPy's assignment — and it is encoded and stored as one step no other writer of that
//! chunk interleaves with ([`crate::store::Store::update`]). Fixed-size and variable-length
//! elements differ only in how one chunk is updated.

use crate::array::variable::VarData;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::index::try_for_each_index;
use crate::layout::placement::c_strides;
use crate::memory::buffer::checked_nbytes;
use crate::read::cache::ChunkCache;
use crate::read::gather::{check_partition, group_factor, Group};
use crate::select::pick::{Factor, Pick};
use crate::select::positions::{factor_offsets, for_each_pick_offset, pick_offsets};
use crate::store::sink::Sink;
use crate::store::{Made, Prior};
use crate::write::{SrcPtr, Written};
use std::ops::Range;

/// One stored chunk of a write by picks.
#[derive(Clone, Debug)]
pub struct ChunkPick {
    pub key: String,
    /// The stored chunk's shape (chunks of a rectilinear grid differ).
    pub shape: Vec<u64>,
    /// The elements written, over `shape`; its k-th value (C order of its output) is the
    /// k-th value the caller's `sources` names for this chunk.
    pub pick: Pick,
    /// The old chunk is not read: the cells the pick leaves become the fill value.
    pub fresh: bool,
}

/// The values of a write by picks: elements of the array's type.
#[derive(Clone, Copy)]
pub enum PickValues<'a> {
    /// Fixed-size elements, back to back.
    Fixed(&'a SrcPtr),
    /// Strings or bytes.
    Variable(&'a VarData),
}

impl PickValues<'_> {
    /// How many elements there are.
    fn count(&self, elem: usize) -> usize {
        match self {
            Self::Fixed(src) => src.len() / elem.max(1),
            Self::Variable(data) => data.len(),
        }
    }
}

/// Where one chunk's values are in the caller's values, in the order of the chunk's pick.
#[derive(Clone, Debug)]
pub enum Sources {
    /// The element index of each value (zarr-python's pairs, broadcast as NumPy does).
    Listed(Vec<usize>),
    /// The values are themselves a pick over a C-order array of `shape`, factor by factor
    /// beside the chunk's (an array's own pick): walked in step with the chunk's, with no
    /// list made.
    Picked { shape: Vec<u64>, pick: Pick },
}

impl Sources {
    /// The element indices, one per value.
    fn listed(self) -> Vec<usize> {
        match self {
            Self::Listed(list) => list,
            Self::Picked { shape, pick } => pick_offsets(&pick, &c_strides_i64(&shape, 1))
                .into_iter()
                .map(|o| o as usize)
                .collect(),
        }
    }
}

impl Array {
    /// Writes `values` (C order, `pick.out_shape()`) to the positions `pick` selects and
    /// stores every chunk it touches. Runs on the current rayon pool; the chunk cache
    /// forgets the chunks written.
    pub fn write_pick(
        &self,
        pick: &Pick,
        values: PickValues<'_>,
        write_empty: bool,
        cache: Option<&ChunkCache>,
    ) -> Result<()> {
        let elem = self.info.dtype.size();
        let out_shape = pick.out_shape();
        let wanted = usize::try_from(out_shape.iter().product::<u64>())
            .map_err(|_| Error::InvalidSelection("selection too large".into()))?;
        if let PickValues::Fixed(src) = values {
            let nbytes = checked_nbytes(&out_shape, elem)?;
            if src.len() != nbytes {
                return Err(Error::InvalidArgument(format!(
                    "{} bytes of values for a selection of {nbytes}",
                    src.len()
                )));
            }
        }
        if values.count(elem) != wanted {
            return Err(Error::InvalidArgument(format!(
                "{} values for a selection of {wanted}",
                values.count(elem)
            )));
        }
        if wanted == 0 {
            return Ok(());
        }
        match (pick.as_region(), values) {
            // Step-1 slices and integers: the box paths, which build complete chunks from
            // the fill value without reading them.
            (Some(region), PickValues::Fixed(src)) => {
                self.chain()?;
                self.store.check_writable()?;
                let items = self.plan_write(&region, &c_strides(&out_shape, elem), 0)?;
                self.write_chunks(&items, src, None, write_empty, cache)?;
                return Ok(());
            }
            (Some(region), PickValues::Variable(data)) => {
                return self.write_variable(&region, data, write_empty);
            }
            (None, _) => {}
        }
        let factors = pick.factors();
        let groups: Vec<Vec<Group>> = (factors.iter())
            .map(|f| group_factor(f, &self.grid))
            .collect();
        check_partition(factors, &groups)?;
        let touched = self.items(factors, &groups, &self.grid, elem)?;
        let chunks = (touched.iter())
            .map(|item| {
                let index: Vec<u64> = (item.bbox.iter().enumerate())
                    .map(|(a, r)| self.grid.chunk_at(a, r.start))
                    .collect();
                let shape = self.grid.chunk_shape(&index);
                let local = (factors.iter().zip(&groups).zip(&item.groups))
                    .map(|((f, gs), &g)| Factor::Points {
                        axes: f.axes().to_vec(),
                        coords: gs[g].local.clone(),
                    })
                    .collect();
                Ok(ChunkPick {
                    key: self.chunk_key(&index),
                    pick: Pick::new(&shape, local)?,
                    shape,
                    fresh: false,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Chunk i's values: the output positions of its groups, one factor per output axis.
        let sources = |i: usize| -> Result<Sources> {
            let positions = (groups.iter().zip(&touched[i].groups).enumerate())
                .map(|(t, (gs, &g))| Factor::Points {
                    axes: vec![t],
                    coords: gs[g].pos.clone(),
                })
                .collect();
            Ok(Sources::Picked {
                pick: Pick::new(&out_shape, positions)?,
                shape: out_shape.clone(),
            })
        };
        self.write_chunk_picks(&chunks, values, sources, None, write_empty, cache)?;
        Ok(())
    }

    /// Writes each chunk's pick: the k-th value of `chunks[i].pick` is the k-th element of
    /// `values` that `sources(i)` names (computed one chunk at a time, so the lists of all
    /// chunks are never held together). With `supplied` (old chunks, one per chunk, `None` =
    /// missing) the encoded chunks are returned instead of stored.
    pub fn write_chunk_picks(
        &self,
        chunks: &[ChunkPick],
        values: PickValues<'_>,
        sources: impl Fn(usize) -> Result<Sources> + Sync,
        supplied: Option<&[Option<&[u8]>]>,
        write_empty: bool,
        cache: Option<&ChunkCache>,
    ) -> Result<Vec<Written>> {
        match values {
            PickValues::Fixed(_) => drop(self.chain()?),
            PickValues::Variable(_) => drop(self.variable()?),
        }
        let elem = self.info.dtype.size();
        if let PickValues::Fixed(src) = values {
            if !src.len().is_multiple_of(elem.max(1)) {
                return Err(Error::InvalidArgument(format!(
                    "{} bytes of values is not a whole number of {elem}-byte elements",
                    src.len()
                )));
            }
        }
        self.check_chunk_picks(chunks)?;
        let count = values.count(elem);
        let keys: Vec<&str> = chunks.iter().map(|c| c.key.as_str()).collect();
        let reads_old: Vec<bool> = chunks.iter().map(|c| !c.fresh).collect();
        let sizes: Vec<u64> = chunks.iter().map(|c| c.shape.iter().product()).collect();
        self.rebuild(
            &keys,
            &reads_old,
            &sizes,
            supplied,
            cache,
            |i, prior, sink| {
                let chunk = &chunks[i];
                let from = sources(i)?;
                check_sources(chunk, &from, count)?;
                match values {
                    PickValues::Fixed(src) => {
                        self.update_fixed(chunk, src, &from, prior, write_empty, sink)
                    }
                    PickValues::Variable(data) => {
                        let from = from.listed();
                        self.update_variable(chunk, data, &from, prior, write_empty, sink)
                    }
                }
            },
        )
    }

    /// Chunk `chunk` with the values at `from` copied in, encoded into `sink`.
    fn update_fixed(
        &self,
        chunk: &ChunkPick,
        src: &SrcPtr,
        from: &Sources,
        prior: Prior<'_>,
        write_empty: bool,
        sink: &mut dyn Sink,
    ) -> Result<Made> {
        let elem = self.info.dtype.size();
        let mut bytes = if chunk.fresh {
            self.filled_chunk(&chunk.shape, &chunk.key)?
        } else {
            self.decoded_chunk(&chunk.shape, &chunk.key, prior.encoded)?
        };
        let values = src.bytes();
        let strides = c_strides_i64(&chunk.shape, elem);
        match from {
            Sources::Listed(from) => {
                // Runs contiguous on both sides are copied at once, in pick order (so of
                // repeated positions the last value stays).
                let mut run: Option<(usize, usize, usize)> = None;
                let mut k = 0;
                for_each_pick_offset(&chunk.pick, &strides, |d| {
                    let (d, s) = (d as usize, from[k] * elem);
                    k += 1;
                    match &mut run {
                        Some((rd, rs, n)) if *rd + *n == d && *rs + *n == s => *n += elem,
                        _ => {
                            if let Some(done) = run.replace((d, s, elem)) {
                                copy_run(&mut bytes, values, done)?;
                            }
                        }
                    }
                    Ok(())
                })?;
                if let Some(done) = run {
                    copy_run(&mut bytes, values, done)?;
                }
            }
            Sources::Picked { shape, pick } => {
                let src_strides = c_strides_i64(shape, elem);
                let to = (&chunk.pick, strides.as_slice());
                copy_in_step(&mut bytes, to, values, (pick, &src_strides), elem)?;
            }
        }
        self.finish(
            bytes,
            &chunk.shape,
            &chunk.key,
            write_empty || !prior.may_delete,
            sink,
        )
    }

    /// [`Self::update_fixed`] for strings and bytes.
    fn update_variable(
        &self,
        chunk: &ChunkPick,
        data: &VarData,
        from: &[usize],
        prior: Prior<'_>,
        write_empty: bool,
        sink: &mut dyn Sink,
    ) -> Result<Made> {
        let old = self.decode_variable(
            prior.encoded.filter(|_| !chunk.fresh),
            &chunk.key,
            &chunk.shape,
        )?;
        let cells = old.len();
        // Which value each cell takes: the last picked for it, else its old one.
        let mut new_value: Vec<Option<usize>> = vec![None; cells];
        for (p, &v) in pick_offsets(&chunk.pick, &c_strides_i64(&chunk.shape, 1))
            .iter()
            .zip(from)
        {
            *new_value
                .get_mut(*p as usize)
                .ok_or_else(|| Error::Internal("a pick outside its chunk".into()))? = Some(v);
        }
        let mut new = VarData {
            bytes: Vec::with_capacity(old.bytes.len()),
            offsets: Vec::with_capacity(cells + 1),
            shape: chunk.shape.clone(),
        };
        for (cell, value) in new_value.iter().enumerate() {
            new.offsets.push(new.bytes.len());
            (new.bytes).extend_from_slice(value.map_or_else(|| old.get(cell), |v| data.get(v)));
        }
        new.offsets.push(new.bytes.len());
        if !write_empty && prior.may_delete && self.all_fill_variable(&new) {
            return Ok(Made::Delete);
        }
        let encoded = self.encode_variable(new, &chunk.key)?;
        sink.put(&encoded)
            .map_err(|e| Error::storage(&chunk.key, e))?;
        Ok(Made::Stored)
    }

    /// Refuses a chunk listed twice (its two rebuilds would race) or of the wrong shape.
    fn check_chunk_picks(&self, chunks: &[ChunkPick]) -> Result<()> {
        let mut keys: Vec<&str> = chunks.iter().map(|c| c.key.as_str()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "chunk {:?} appears twice in one write",
                w[0]
            )));
        }
        chunks
            .iter()
            .try_for_each(|c| self.check_chunk_shape(&c.shape, &c.key))
    }
}

/// Checks that `from` names one value of the `count` there are for each element of the
/// chunk's pick.
fn check_sources(chunk: &ChunkPick, from: &Sources, count: usize) -> Result<()> {
    let wanted = chunk.pick.out_shape();
    let bad = |what: String| {
        Err(Error::InvalidArgument(format!(
            "{what} for the elements picked in chunk {:?}",
            chunk.key
        )))
    };
    match from {
        Sources::Listed(list) => {
            if list.len() as u64 != wanted.iter().product::<u64>() {
                return bad(format!("{} values", list.len()));
            }
            if let Some(v) = list.iter().find(|&&v| v >= count) {
                return bad(format!("value {v} of {count}"));
            }
        }
        Sources::Picked { shape, pick } => {
            if pick.out_shape() != wanted {
                return bad("values of another shape".into());
            }
            if shape.iter().product::<u64>() > count as u64 {
                return bad(format!("values over {shape:?} of {count}"));
            }
        }
    }
    Ok(())
}

/// Copies the `elem`-byte values `src_pick` selects (byte `src_strides`) to the places `pick`
/// selects (byte `strides`) in `chunk`, the two walked factor by factor in step: the innermost
/// factor's runs contiguous on both sides are found once, then copied for each combination
/// of the outer factors, in pick order (the last of repeated positions stays).
fn copy_in_step(
    chunk: &mut [u8],
    (pick, strides): (&Pick, &[i64]),
    values: &[u8],
    (src_pick, src_strides): (&Pick, &[i64]),
    elem: usize,
) -> Result<()> {
    let mut dst: Vec<Vec<i64>> = (pick.factors().iter())
        .map(|f| factor_offsets(f, strides))
        .collect();
    let mut src: Vec<Vec<i64>> = (src_pick.factors().iter())
        .map(|f| factor_offsets(f, src_strides))
        .collect();
    let (Some(dst_inner), Some(src_inner)) = (dst.pop(), src.pop()) else {
        return copy_run(chunk, values, (0, 0, elem)); // 0-d: one element
    };
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (&d, &s) in dst_inner.iter().zip(&src_inner) {
        let (d, s) = (d as usize, s as usize);
        match runs.last_mut() {
            Some((rd, rs, n)) if *rd + *n == d && *rs + *n == s => *n += elem,
            _ => runs.push((d, s, elem)),
        }
    }
    let outer: Vec<Range<u64>> = dst.iter().map(|o| 0..o.len() as u64).collect();
    try_for_each_index(&outer, |k| {
        let (mut d0, mut s0) = (0usize, 0usize);
        for ((&j, d), s) in k.iter().zip(&dst).zip(&src) {
            d0 += d[j as usize] as usize;
            s0 += s[j as usize] as usize;
        }
        (runs.iter()).try_for_each(|&(d, s, n)| copy_run(chunk, values, (d0 + d, s0 + s, n)))
    })
}

/// Copies `n` bytes of `values` at `s` to `chunk` at `d`; single elements of the common
/// sizes without a `memcpy` call, which would dominate a pick of scattered elements.
fn copy_run(chunk: &mut [u8], values: &[u8], (d, s, n): (usize, usize, usize)) -> Result<()> {
    let (Some(to), Some(from)) = (chunk.get_mut(d..d + n), values.get(s..s + n)) else {
        return Err(Error::Internal("a pick outside its chunk or values".into()));
    };
    match n {
        1 => to[0] = from[0],
        2 => copy_fixed::<2>(to, from),
        4 => copy_fixed::<4>(to, from),
        8 => copy_fixed::<8>(to, from),
        _ => to.copy_from_slice(from),
    }
    Ok(())
}

fn copy_fixed<const N: usize>(to: &mut [u8], from: &[u8]) {
    if let (Ok(to), Ok(from)) = (<&mut [u8; N]>::try_from(to), <&[u8; N]>::try_from(from)) {
        *to = *from;
    }
}

/// C-order strides of `shape` in units of `elem` bytes, signed as offsets are.
fn c_strides_i64(shape: &[u64], elem: usize) -> Vec<i64> {
    c_strides(shape, elem).iter().map(|&s| s as i64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-step walk puts each value where the element-by-element pairing of the two
    /// picks' offsets puts it, repeated positions included (the last value stays).
    #[test]
    fn values_walked_in_step_land_where_their_pairs_say() {
        let elem = 2;
        let shape = [6u64, 5];
        let pick = Pick::new(
            &shape,
            vec![
                Factor::step(0, 5, -2, 3),
                Factor::Points {
                    axes: vec![1],
                    coords: vec![0, 1, 2, 2, 4],
                },
            ],
        )
        .unwrap();
        let src_shape = [4u64, 7];
        let src_pick = Pick::new(
            &src_shape,
            vec![Factor::step(0, 1, 1, 3), Factor::step(1, 6, -1, 5)],
        )
        .unwrap();
        let values: Vec<u8> = (0..4 * 7 * elem as u8).collect();
        let strides = c_strides_i64(&shape, elem);
        let src_strides = c_strides_i64(&src_shape, elem);
        let mut walked = vec![0u8; 6 * 5 * elem];
        copy_in_step(
            &mut walked,
            (&pick, &strides),
            &values,
            (&src_pick, &src_strides),
            elem,
        )
        .unwrap();
        let mut paired = vec![0u8; 6 * 5 * elem];
        let to = pick_offsets(&pick, &strides);
        let from = pick_offsets(&src_pick, &src_strides);
        for (&d, &s) in to.iter().zip(&from) {
            let (d, s) = (d as usize, s as usize);
            paired[d..d + elem].copy_from_slice(&values[s..s + elem]);
        }
        assert_eq!(walked, paired);
        assert_ne!(walked, vec![0u8; 6 * 5 * elem]);
    }
}

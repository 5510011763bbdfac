//! Writing a [`Pick`] (steps, index arrays, points, masks): the positions of each factor are
//! grouped by the stored chunk (shard) that holds them, as reads group them; each touched
//! chunk is read whole, the new values are copied to their places in it — of repeated
//! positions the last value stays, as in NumPy's assignment — and it is encoded and stored
//! like any rebuilt chunk, as one step no other writer of that chunk interleaves with
//! ([`crate::store::Store::update`]). Every selected position belongs to exactly one chunk
//! ([`check_partition`]), so the chunks are rebuilt in parallel without sharing anything.

use crate::array::Array;
use crate::error::{Error, Result};
use crate::layout::placement::c_strides;
use crate::memory::buffer::checked_nbytes;
use crate::read::cache::ChunkCache;
use crate::read::gather::{check_partition, group_factor, Group, Runs};
use crate::select::pick::Pick;
use crate::write::SrcPtr;

impl Array {
    /// Writes the values of `src` (C order, `pick.out_shape()`, the array's element type)
    /// to the positions `pick` selects, and stores every chunk it touches. Runs on the
    /// current rayon pool; the chunk cache forgets the chunks written.
    pub fn write_pick(
        &self,
        pick: &Pick,
        src: &SrcPtr,
        write_empty: bool,
        cache: Option<&ChunkCache>,
    ) -> Result<()> {
        self.chain()?;
        self.store.check_writable()?;
        let elem = self.info.dtype.size();
        let out_shape = pick.out_shape();
        let nbytes = checked_nbytes(&out_shape, elem)?;
        if src.len() != nbytes {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of values for a selection of {nbytes}",
                src.len()
            )));
        }
        if nbytes == 0 {
            return Ok(());
        }
        let src_strides = c_strides(&out_shape, elem);
        if let Some(region) = pick.as_region() {
            // Step-1 slices and integers: the box path, which builds complete chunks from
            // the fill value without reading them.
            let items = self.plan_write(&region, &src_strides, 0)?;
            self.write_chunks(&items, src, None, write_empty, cache)?;
            return Ok(());
        }
        let grid = &self.grid;
        let factors = pick.factors();
        let groups: Vec<Vec<Group>> = factors.iter().map(|f| group_factor(f, grid)).collect();
        check_partition(factors, &groups)?;
        let items = self.items(factors, &groups, grid, elem)?;
        let indices: Vec<Vec<u64>> = (items.iter())
            .map(|item| {
                (item.bbox.iter().enumerate())
                    .map(|(a, r)| grid.chunk_at(a, r.start))
                    .collect()
            })
            .collect();
        let keys: Vec<String> = indices.iter().map(|i| self.chunk_key(i)).collect();
        let shapes: Vec<Vec<u64>> = indices.iter().map(|i| grid.chunk_shape(i)).collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let sizes: Vec<u64> = shapes.iter().map(|s| s.iter().product()).collect();
        let reads_old = vec![true; items.len()];
        self.rebuild(
            &key_refs,
            &reads_old,
            &sizes,
            None,
            cache,
            |i, prior, sink| {
                let mut chunk = self.decoded_chunk(&shapes[i], &keys[i], prior.encoded)?;
                let chunk_strides = c_strides(&shapes[i], elem);
                let runs = Runs {
                    factors,
                    groups: &groups,
                    item_groups: &items[i].groups,
                    out_strides: &src_strides,
                    elem,
                };
                runs.for_each(&chunk_strides, false, |d, s, n| {
                    let values = src.get(d, n)?;
                    chunk
                        .get_mut(s..s + n)
                        .ok_or_else(|| Error::Internal("scatter outside its chunk".into()))?
                        .copy_from_slice(values);
                    Ok(())
                })?;
                self.finish(
                    chunk,
                    &shapes[i],
                    &keys[i],
                    write_empty || !prior.may_delete,
                    sink,
                )
            },
        )?;
        Ok(())
    }
}

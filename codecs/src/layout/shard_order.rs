//! The order a written shard lays out its inner chunks, as zarr-python ≥ 3.4 writes them
//! (its sharding codec's `subchunk_write_order`): Morton (Z) order by default, or
//! column-major; C order otherwise. Readers find inner chunks through the shard's index
//! whatever the order; the order only makes zarrpipe's shards byte for byte zarr-python's.
//! Computed for each shard's own inner grid, so shards of a rectilinear grid (of different
//! sizes, and new ones after zarr-python grows the grid) are laid out as zarr-python lays
//! them out.

use crate::layout::index::for_each_index;

/// How a shard orders its inner chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardOrder {
    /// C order (`lexicographic`, `unordered`, and zarr-python before 3.4).
    #[default]
    C,
    /// Morton order of the compressed Morton code (an axis of fewer bits drops out when
    /// its bits are used up), as zarr-python's `morton_order_coords`.
    Morton,
    /// Column-major: the first axis varies fastest (`colexicographic`).
    Colexicographic,
}

impl ShardOrder {
    /// zarr-python's `subchunk_write_order` name; `None` for one it does not define.
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "lexicographic" | "unordered" => Some(Self::C),
            "morton" => Some(Self::Morton),
            "colexicographic" => Some(Self::Colexicographic),
            _ => None,
        }
    }

    /// The C-order linear indices of a shard's inner chunks (inner grid `per_shard`) in
    /// this order; empty for C order itself (nothing to rearrange).
    #[must_use]
    pub fn linear_indices(self, per_shard: &[u64]) -> Vec<u64> {
        let boxed: Vec<std::ops::Range<u64>> = per_shard.iter().map(|&n| 0..n).collect();
        let mut keyed: Vec<(u64, u64)> = Vec::new();
        let mut linear = 0u64;
        match self {
            Self::C => return Vec::new(),
            Self::Morton => {
                let bits: Vec<u32> = per_shard
                    .iter()
                    .map(|&n| u64::BITS - n.saturating_sub(1).leading_zeros())
                    .collect();
                for_each_index(&boxed, |coord| {
                    keyed.push((morton_code(coord, &bits), linear));
                    linear += 1;
                });
            }
            Self::Colexicographic => {
                for_each_index(&boxed, |coord| {
                    // Position in column-major order: the first axis is the fastest.
                    let key = coord
                        .iter()
                        .zip(per_shard)
                        .rev()
                        .fold(0u64, |acc, (&c, &n)| acc * n + c);
                    keyed.push((key, linear));
                    linear += 1;
                });
            }
        }
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, i)| i).collect()
    }
}

/// The compressed Morton code of `coord`: bit `b` of every axis that has one, axis by axis,
/// from the lowest bit up (the inverse of zarr-python's `decode_morton`).
fn morton_code(coord: &[u64], bits: &[u32]) -> u64 {
    let most = bits.iter().copied().max().unwrap_or(0);
    let mut code = 0u64;
    let mut out_bit = 0;
    for bit in 0..most {
        for (c, &b) in coord.iter().zip(bits) {
            if bit < b {
                code |= ((c >> bit) & 1) << out_bit;
                out_bit += 1;
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn morton_order_is_zarr_pythons() {
        // zarr.core.indexing.morton_order_coords((3, 2)) → (0,0) (1,0) (0,1) (1,1) (2,0)
        // (2,1); as C-order indices of the 3 × 2 grid:
        assert_eq!(
            ShardOrder::Morton.linear_indices(&[3, 2]),
            [0, 2, 1, 3, 4, 5]
        );
        // (2, 2, 2): the cube's Z curve, the last axis slowest.
        assert_eq!(
            ShardOrder::Morton.linear_indices(&[2, 2, 2]),
            [0, 4, 2, 6, 1, 5, 3, 7]
        );
        // (4, 1): an axis of one chunk has no bits.
        assert_eq!(ShardOrder::Morton.linear_indices(&[4, 1]), [0, 1, 2, 3]);
        // (5, 3, 2): axes run out of bits at different depths.
        assert_eq!(
            ShardOrder::Morton.linear_indices(&[5, 3, 2]),
            [
                0, 6, 2, 8, 1, 7, 3, 9, 12, 18, 14, 20, 13, 19, 15, 21, 4, 10, 5, 11, 16, 22, 17,
                23, 24, 26, 25, 27, 28, 29
            ]
        );
    }

    #[test]
    fn column_major_and_c_orders() {
        assert_eq!(
            ShardOrder::Colexicographic.linear_indices(&[2, 3]),
            [0, 3, 1, 4, 2, 5]
        );
        assert!(ShardOrder::C.linear_indices(&[2, 3]).is_empty());
        assert_eq!(ShardOrder::named("unordered"), Some(ShardOrder::C));
        assert_eq!(ShardOrder::named("hilbert"), None);
    }
}

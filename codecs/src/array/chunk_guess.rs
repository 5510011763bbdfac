//! The chunk shape `create_array(chunks=None)` picks: the same targets as zarr-python's
//! "auto" (and h5py's), so an array made here chunks like one zarr-python makes.

/// Bytes a chunk of a 1 MiB array aims at; the target doubles per tenfold array size.
const BASE: f64 = (256 << 10) as f64;
const MIN: f64 = (128 << 10) as f64;
const MAX: u128 = 64 << 20;

/// A chunk shape for an array (or a shard) of `shape` with `itemsize`-byte elements: the
/// target size grows with the array's, from 128 KiB to 64 MiB; axes are halved in turn
/// until a chunk is near it.
#[must_use]
pub fn guess_chunks(shape: &[u64], itemsize: u64) -> Vec<u64> {
    let mut chunks: Vec<u64> = shape.iter().map(|&n| n.max(1)).collect();
    let elements = |c: &[u64]| c.iter().map(|&d| u128::from(d)).product::<u128>();
    let total = elements(&chunks) * u128::from(itemsize);
    let target = BASE * 2f64.powf(((total.max(1) as f64) / f64::from(1 << 20)).log10());
    let target = target.clamp(MIN, MAX as f64);
    let mut axis = 0;
    while !chunks.is_empty() {
        let nbytes = elements(&chunks) * u128::from(itemsize);
        let near = (nbytes as f64) < target || ((nbytes as f64) - target).abs() / target < 0.5;
        if (near && nbytes < MAX) || elements(&chunks) == 1 {
            break;
        }
        let k = axis % chunks.len();
        chunks[k] = chunks[k].div_ceil(2);
        axis += 1;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_halved_towards_a_target_that_grows_with_the_array() {
        // 1 MiB of float64: the target is 256 KiB, so one halving of each of two axes.
        assert_eq!(guess_chunks(&[128, 1024], 8), vec![64, 512]);
        // Small arrays stay whole; empty axes count as one.
        assert_eq!(guess_chunks(&[10, 10], 4), vec![10, 10]);
        assert_eq!(guess_chunks(&[0, 5], 1), vec![1, 5]);
        // What zarrpipe's Python version (and zarr-python's "auto") gave for these.
        assert_eq!(guess_chunks(&[512, 1024, 1024], 2), vec![64, 128, 128]);
        assert_eq!(guess_chunks(&[1000, 1000, 3], 1), vec![500, 500, 2]);
        assert_eq!(guess_chunks(&[7], 16), vec![7]);
        assert!(guess_chunks(&[], 8).is_empty());
    }
}

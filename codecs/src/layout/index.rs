//! The one C-order loop over the multi-indices of a box, which plans, placements, shard
//! layouts, picks, variable-length chunks and the binding's NumPy selections all walk (the
//! decoder's scatter steps the same order as a cursor, one row per piece of a stream).

use std::ops::Range;

/// Calls `f` with every multi-index in `ranges`, in C order (never for an empty range; once,
/// with no coordinates, for no ranges at all).
pub fn for_each_index(ranges: &[Range<u64>], mut f: impl FnMut(&[u64])) {
    let done: Result<(), std::convert::Infallible> = try_for_each_index(ranges, |c| {
        f(c);
        Ok(())
    });
    let Ok(()) = done;
}

/// [`for_each_index`], stopping at the first error `f` returns.
pub fn try_for_each_index<E>(
    ranges: &[Range<u64>],
    mut f: impl FnMut(&[u64]) -> Result<(), E>,
) -> Result<(), E> {
    if ranges.iter().any(|r| r.start >= r.end) {
        return Ok(());
    }
    let mut coord: Vec<u64> = ranges.iter().map(|r| r.start).collect();
    loop {
        f(&coord)?;
        let mut axis = ranges.len();
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            coord[axis] += 1;
            if coord[axis] < ranges[axis].end {
                break;
            }
            coord[axis] = ranges[axis].start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_come_in_c_order() {
        let mut seen = Vec::new();
        for_each_index(&[1..3, 5..7], |c| seen.push(c.to_vec()));
        assert_eq!(seen, [[1, 5], [1, 6], [2, 5], [2, 6]]);
        let mut once = 0;
        for_each_index(&[], |c| {
            assert!(c.is_empty());
            once += 1;
        });
        assert_eq!(once, 1);
        for_each_index(&[0..3, 2..2], |_| panic!("an empty box has no indices"));
        let stopped =
            try_for_each_index(
                &[0..1, 0..10],
                |c| if c[1] == 3 { Err(c[1]) } else { Ok(()) },
            );
        assert_eq!(stopped, Err(3));
    }
}

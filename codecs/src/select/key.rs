//! The items of an index key as NumPy classifies them (an integer, a slice, `...`, `None`, a
//! boolean scalar, an integer array, a boolean mask), with NumPy's rules for each: `...`
//! expanded into full slices, slices clamped as `slice.indices` clamps them, negative
//! integers counted from the end. The binding only classifies Python objects; what they
//! select is decided here, where `cargo test` reaches it.

use crate::error::{Error, Result};

/// An index array: its shape and its elements in C order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indices<T> {
    pub shape: Vec<usize>,
    pub values: Vec<T>,
}

impl<T> Indices<T> {
    #[must_use]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
}

/// A slice's bounds as written (`None`: left out). Bounds beyond `i64` saturate, which
/// clamping makes equivalent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SliceItem {
    pub start: Option<i64>,
    pub stop: Option<i64>,
    pub step: Option<i64>,
}

/// One item of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyItem {
    NewAxis,
    Ellipsis,
    Slice(SliceItem),
    /// An integer (any size up to `i128`: an out-of-range one is refused with its value).
    Int(i128),
    /// `True` or `False`: a new axis of length 1 or 0 that takes part in broadcasting.
    Bool(bool),
    Array(Indices<i64>),
    Mask(Indices<bool>),
}

impl KeyItem {
    /// The full slice `:`.
    pub const ALL: Self = Self::Slice(SliceItem {
        start: None,
        stop: None,
        step: None,
    });

    /// How many array axes the item consumes.
    fn axes_used(&self) -> usize {
        match self {
            Self::Slice(_) | Self::Int(_) | Self::Array(_) => 1,
            Self::Mask(m) => m.ndim(),
            Self::NewAxis | Self::Ellipsis | Self::Bool(_) => 0,
        }
    }

    /// Advanced indexing: index arrays, masks and boolean scalars.
    #[must_use]
    pub fn is_advanced(&self) -> bool {
        matches!(self, Self::Array(_) | Self::Mask(_) | Self::Bool(_))
    }
}

/// The key's items for an array of `ndim` axes, its `...` expanded into full slices
/// (trailing full slices for the axes the key leaves out).
pub fn expand(ndim: usize, items: Vec<KeyItem>) -> Result<Vec<KeyItem>> {
    let ellipses = items
        .iter()
        .filter(|i| matches!(i, KeyItem::Ellipsis))
        .count();
    if ellipses > 1 {
        return Err(Error::InvalidSelection(
            "an index can only have a single ellipsis ('...')".into(),
        ));
    }
    let used: usize = items.iter().map(KeyItem::axes_used).sum();
    if used > ndim {
        return Err(Error::InvalidSelection(format!(
            "too many indices for array: array is {ndim}-dimensional, but {used} were indexed"
        )));
    }
    let full = ndim - used;
    let mut out = Vec::with_capacity(items.len() + full);
    let mut filled = false;
    for item in items {
        if matches!(item, KeyItem::Ellipsis) {
            out.extend((0..full).map(|_| KeyItem::ALL));
            filled = true;
        } else {
            out.push(item);
        }
    }
    if !filled {
        out.extend((0..full).map(|_| KeyItem::ALL));
    }
    Ok(out)
}

/// `(start, step, count)` of slice `s` over an axis of `n`, clamped as Python's
/// `slice.indices` clamps (a step of 0 is its `ValueError`).
pub fn slice_steps(s: &SliceItem, n: u64) -> Result<(u64, i64, u64)> {
    let step = i128::from(s.step.unwrap_or(1));
    if step == 0 {
        return Err(Error::InvalidArgument("slice step cannot be zero".into()));
    }
    let len = i128::from(n);
    // Where a bound lands: counted from the end when negative, then clamped into the
    // range a walk in the step's direction can start or stop at.
    let clamp = |bound: Option<i64>, default: i128| match bound {
        None => default,
        Some(b) => {
            let b = i128::from(b);
            let b = if b < 0 { b + len } else { b };
            if step < 0 {
                b.clamp(-1, len - 1)
            } else {
                b.clamp(0, len)
            }
        }
    };
    let (start, stop) = if step < 0 {
        (clamp(s.start, len - 1), clamp(s.stop, -1))
    } else {
        (clamp(s.start, 0), clamp(s.stop, len))
    };
    let count = if step < 0 && stop < start {
        (start - stop - 1) / -step + 1
    } else if step > 0 && start < stop {
        (stop - start - 1) / step + 1
    } else {
        0
    };
    let start = if count == 0 { 0 } else { start as u64 };
    Ok((start, step as i64, count as u64))
}

/// Integer `i` on axis `axis` of `n`, negative counting from the end.
pub fn int_index(i: i128, n: u64, axis: usize) -> Result<u64> {
    let len = i128::from(n);
    if !(-len..len).contains(&i) {
        return Err(Error::InvalidSelection(format!(
            "index {i} is out of bounds for axis {axis} with size {n}"
        )));
    }
    Ok((if i < 0 { i + len } else { i }) as u64)
}

/// Index array values on axis `axis` of `n`, negative ones counting from the end.
pub fn wrap(values: &[i64], n: u64, axis: usize) -> Result<Vec<u64>> {
    values
        .iter()
        .map(|&v| int_index(i128::from(v), n, axis))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> SliceItem {
        SliceItem { start, stop, step }
    }

    /// Python's `range(n)[start:stop:step]`, the reference `slice.indices` agrees with.
    fn python_slice(s: &SliceItem, n: i64) -> Vec<i64> {
        let step = s.step.unwrap_or(1);
        let norm = |b: i64| if b < 0 { b + n } else { b };
        let mut out = Vec::new();
        if step > 0 {
            let start = s.start.map_or(0, norm).clamp(0, n);
            let stop = s.stop.map_or(n, norm).clamp(0, n);
            let mut i = start;
            while i < stop {
                out.push(i);
                i += step;
            }
        } else {
            let start = s.start.map_or(n - 1, norm).clamp(-1, n - 1);
            let stop = s.stop.map_or(-1, norm).clamp(-1, n - 1);
            let mut i = start;
            while i > stop {
                out.push(i);
                i += step;
            }
        }
        out
    }

    #[test]
    fn slices_clamp_as_python_does() {
        let bounds = [
            None,
            Some(-12),
            Some(-5),
            Some(-1),
            Some(0),
            Some(2),
            Some(5),
            Some(12),
        ];
        for n in [0u64, 1, 5, 7] {
            for start in bounds {
                for stop in bounds {
                    for step in [
                        None,
                        Some(1),
                        Some(2),
                        Some(3),
                        Some(-1),
                        Some(-2),
                        Some(-4),
                    ] {
                        let s = slice(start, stop, step);
                        let (first, step, count) = slice_steps(&s, n).unwrap();
                        let got: Vec<i64> =
                            (0..count as i64).map(|k| first as i64 + k * step).collect();
                        assert_eq!(got, python_slice(&s, n as i64), "{s:?} over {n}");
                    }
                }
            }
        }
        let huge = slice(Some(i64::MIN), Some(i64::MAX), Some(i64::MAX));
        assert_eq!(slice_steps(&huge, 10).unwrap(), (0, i64::MAX, 1));
        assert!(matches!(
            slice_steps(&slice(None, None, Some(0)), 3),
            Err(Error::InvalidArgument(m)) if m == "slice step cannot be zero"
        ));
    }

    #[test]
    fn integers_count_from_the_end_and_are_checked() {
        assert_eq!(int_index(-1, 4, 0).unwrap(), 3);
        assert_eq!(wrap(&[0, -4, 3], 4, 1).unwrap(), vec![0, 0, 3]);
        let err = int_index(4, 4, 2).unwrap_err().to_string();
        assert_eq!(err, "index 4 is out of bounds for axis 2 with size 4");
        assert!(int_index(-5, 4, 0).is_err());
        assert!(int_index(0, 0, 0).is_err());
    }

    #[test]
    fn the_ellipsis_expands_and_keys_are_checked() {
        let items = vec![KeyItem::Int(0), KeyItem::Ellipsis, KeyItem::Int(1)];
        let out = expand(4, items).unwrap();
        assert_eq!(
            out,
            vec![KeyItem::Int(0), KeyItem::ALL, KeyItem::ALL, KeyItem::Int(1)]
        );
        assert_eq!(expand(2, vec![KeyItem::NewAxis]).unwrap().len(), 3);
        let two = vec![KeyItem::Ellipsis, KeyItem::Ellipsis];
        assert!(expand(2, two)
            .unwrap_err()
            .to_string()
            .contains("single ellipsis"));
        let mask = KeyItem::Mask(Indices {
            shape: vec![2, 2],
            values: vec![true; 4],
        });
        let err = expand(1, vec![mask]).unwrap_err().to_string();
        assert_eq!(
            err,
            "too many indices for array: array is 1-dimensional, but 2 were indexed"
        );
    }
}

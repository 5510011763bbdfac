//! Whether a chunk holds only the fill value, as zarr-python decides it (such chunks are
//! deleted, not stored, unless `write_empty_chunks`).

use crate::codec::encode::view::ChunkView;
use crate::dtype::{ElementKind, ElementType};

/// [`all_fill`] over a view's elements.
pub(super) fn view_all_fill(view: &ChunkView<'_>, fill: &[u8], dtype: ElementType) -> bool {
    view.for_each_run(|run| {
        if all_fill(run, fill, dtype) {
            Ok(())
        } else {
            Err(String::new()) // stop at the first run with data
        }
    })
    .is_ok()
}

/// Whether every element equals the fill value, as zarr-python decides it: bit for bit when
/// the fill value is a float zero (so -0.0 and 0.0 differ), otherwise numerically with NaN
/// equal to NaN for floats (and for each part of a complex number), bit for bit otherwise.
pub fn all_fill(chunk: &[u8], fill: &[u8], dtype: ElementType) -> bool {
    let bitwise = || chunk.chunks_exact(fill.len()).all(|e| e == fill);
    match dtype.kind() {
        ElementKind::Float | ElementKind::BFloat => {
            let f = as_f64(fill, dtype);
            if f == 0.0 {
                return bitwise();
            }
            chunk
                .chunks_exact(fill.len())
                .all(|e| same_number(as_f64(e, dtype), f))
        }
        ElementKind::Complex => {
            // Part by part. (zarr-python counts any NaN-containing number as equal to a NaN
            // fill, dropping chunks like [5+NaNj]: that loses data, so zarrpipe does not.)
            let half = fill.len() / 2;
            let width = if half == 4 {
                ElementType::Float32
            } else {
                ElementType::Float64
            };
            let (fr, fi) = (as_f64(&fill[..half], width), as_f64(&fill[half..], width));
            chunk.chunks_exact(fill.len()).all(|e| {
                same_number(as_f64(&e[..half], width), fr)
                    && same_number(as_f64(&e[half..], width), fi)
            })
        }
        _ => bitwise(),
    }
}

/// `a == b`, with NaN equal to NaN (NumPy's `array_equal(equal_nan=True)`).
fn same_number(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// One float element's value (float16/bfloat16 widened exactly).
fn as_f64(b: &[u8], dtype: ElementType) -> f64 {
    match (b.len(), dtype) {
        (2, ElementType::BFloat16) => f64::from(f32::from_bits(
            u32::from(u16::from_ne_bytes([b[0], b[1]])) << 16,
        )),
        (2, _) => f16_to_f64(u16::from_ne_bytes([b[0], b[1]])),
        (4, _) => f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        (8, _) => f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => f64::NAN,
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1F);
    let frac = f64::from(h & 0x03FF);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_comparison_follows_zarr_python() {
        let neg_zero = (-0.0f64).to_ne_bytes();
        let zero = 0.0f64.to_ne_bytes();
        let nan = f64::NAN.to_ne_bytes();
        // A zero fill compares bit for bit: -0.0 is data.
        assert!(!all_fill(&neg_zero, &zero, ElementType::Float64));
        assert!(all_fill(
            &[zero, zero].concat(),
            &zero,
            ElementType::Float64
        ));
        // Other fills compare numerically, NaN equal to NaN (any payload).
        let other_nan = f64::from_bits(f64::NAN.to_bits() | 1).to_ne_bytes();
        assert!(all_fill(&other_nan, &nan, ElementType::Float64));
        assert!(all_fill(&[0x00, 0x3C], &[0x00, 0x3C], ElementType::Float16));
        assert!(!all_fill(
            &[0x00, 0x80],
            &[0x00, 0x00],
            ElementType::Float16
        ));
        assert!(all_fill(&[nan, nan].concat(), &nan, ElementType::Float64));
        assert!(!all_fill(
            &1.0f64.to_ne_bytes(),
            &zero,
            ElementType::Float64
        ));
        assert!(all_fill(&[0, 0, 0], &[0], ElementType::UInt8));
        assert!(!all_fill(&[0, 1, 0], &[0], ElementType::UInt8));
    }
}

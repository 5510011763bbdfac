//! Element values for the arithmetic codecs (delta, fixedscaleoffset, scale_offset,
//! cast_value), with NumPy's semantics: integers wrap at their width, float arithmetic is
//! rounded to the element's precision after every operation (done in f64 and rounded, which
//! is exact for +, -, *, / since f64 has more than twice the bits of f32 and f16), and
//! casts follow `ndarray.astype` (float to int truncates toward zero).

use half::{bf16, f16};

use crate::ElementType as E;

/// One element: integers (and bool) widened to i128, floats to f64, complex as two f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

/// Whether `t` is an integer type (bool counts as one: 0 or 1).
#[must_use]
pub fn is_int(t: E) -> bool {
    matches!(
        t,
        E::Bool
            | E::Int8
            | E::Int16
            | E::Int32
            | E::Int64
            | E::UInt8
            | E::UInt16
            | E::UInt32
            | E::UInt64
    )
}

/// Whether `t` is a real floating-point type.
#[must_use]
pub fn is_float(t: E) -> bool {
    matches!(t, E::Float16 | E::BFloat16 | E::Float32 | E::Float64)
}

/// The range of an integer type.
#[must_use]
pub fn int_range(t: E) -> (i128, i128) {
    match t {
        E::Bool => (0, 1),
        E::Int8 => (i8::MIN.into(), i8::MAX.into()),
        E::Int16 => (i16::MIN.into(), i16::MAX.into()),
        E::Int32 => (i32::MIN.into(), i32::MAX.into()),
        E::Int64 => (i64::MIN.into(), i64::MAX.into()),
        E::UInt8 => (0, u8::MAX.into()),
        E::UInt16 => (0, u16::MAX.into()),
        E::UInt32 => (0, u32::MAX.into()),
        E::UInt64 => (0, u64::MAX.into()),
        _ => (i128::MIN, i128::MAX),
    }
}

/// Rounds `x` to the precision of float type `t` (round to nearest, ties to even).
#[must_use]
pub fn round_to(t: E, x: f64) -> f64 {
    match t {
        E::Float16 => f16::from_f64(x).to_f64(),
        E::BFloat16 => bf16::from_f64(x).to_f64(),
        E::Float32 | E::Complex64 => f64::from(x as f32),
        _ => x,
    }
}

/// Wraps an integer to the width of integer type `t` (two's complement, as NumPy does).
#[must_use]
pub fn wrap(t: E, x: i128) -> i128 {
    match t {
        E::Bool => i128::from(x != 0),
        E::Int8 => i128::from(x as i8),
        E::Int16 => i128::from(x as i16),
        E::Int32 => i128::from(x as i32),
        E::Int64 => i128::from(x as i64),
        E::UInt8 => i128::from(x as u8),
        E::UInt16 => i128::from(x as u16),
        E::UInt32 => i128::from(x as u32),
        E::UInt64 => i128::from(x as u64),
        _ => x,
    }
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Reads element `i` of type `t` from native-endian `bytes`.
#[must_use]
pub fn load(t: E, bytes: &[u8], i: usize) -> Val {
    let b = &bytes[i * t.size()..(i + 1) * t.size()];
    match t {
        E::Bool => Val::Int(i128::from(b[0] != 0)),
        E::Int8 => Val::Int(i128::from(b[0] as i8)),
        E::UInt8 => Val::Int(i128::from(b[0])),
        E::Int16 => Val::Int(i16::from_ne_bytes(arr(b)).into()),
        E::UInt16 => Val::Int(u16::from_ne_bytes(arr(b)).into()),
        E::Int32 => Val::Int(i32::from_ne_bytes(arr(b)).into()),
        E::UInt32 => Val::Int(u32::from_ne_bytes(arr(b)).into()),
        E::Int64 => Val::Int(i64::from_ne_bytes(arr(b)).into()),
        E::UInt64 => Val::Int(u64::from_ne_bytes(arr(b)).into()),
        E::Float16 => Val::Float(f16::from_ne_bytes(arr(b)).to_f64()),
        E::BFloat16 => Val::Float(bf16::from_ne_bytes(arr(b)).to_f64()),
        E::Float32 => Val::Float(f32::from_ne_bytes(arr(b)).into()),
        E::Float64 => Val::Float(f64::from_ne_bytes(arr(b))),
        E::Complex64 => Val::Complex(
            f32::from_ne_bytes(arr(b)).into(),
            f32::from_ne_bytes(arr(&b[4..])).into(),
        ),
        E::Complex128 => Val::Complex(f64::from_ne_bytes(arr(b)), f64::from_ne_bytes(arr(&b[8..]))),
        // Opaque elements (strings, records) have no value: the numeric codecs refuse such
        // arrays before loading anything (their type checks: `is_int` / `is_float`).
        E::Raw { .. } => Val::Int(0),
    }
}

/// Writes `v`, already of type `t` (see [`cast`]), as element `i` of `bytes`.
pub fn store(t: E, v: Val, bytes: &mut [u8], i: usize) {
    let v = cast(v, t);
    let b = &mut bytes[i * t.size()..(i + 1) * t.size()];
    match (t, v) {
        (E::Bool | E::Int8 | E::UInt8, Val::Int(x)) => b[0] = x as u8,
        (E::Int16 | E::UInt16, Val::Int(x)) => b.copy_from_slice(&(x as u16).to_ne_bytes()),
        (E::Int32 | E::UInt32, Val::Int(x)) => b.copy_from_slice(&(x as u32).to_ne_bytes()),
        (E::Int64 | E::UInt64, Val::Int(x)) => b.copy_from_slice(&(x as u64).to_ne_bytes()),
        (E::Float16, Val::Float(x)) => b.copy_from_slice(&f16::from_f64(x).to_ne_bytes()),
        (E::BFloat16, Val::Float(x)) => b.copy_from_slice(&bf16::from_f64(x).to_ne_bytes()),
        (E::Float32, Val::Float(x)) => b.copy_from_slice(&(x as f32).to_ne_bytes()),
        (E::Float64, Val::Float(x)) => b.copy_from_slice(&x.to_ne_bytes()),
        (E::Complex64, Val::Complex(re, im)) => {
            b[..4].copy_from_slice(&(re as f32).to_ne_bytes());
            b[4..].copy_from_slice(&(im as f32).to_ne_bytes());
        }
        (E::Complex128, Val::Complex(re, im)) => {
            b[..8].copy_from_slice(&re.to_ne_bytes());
            b[8..].copy_from_slice(&im.to_ne_bytes());
        }
        _ => unreachable!("cast returns a value of the target's kind"),
    }
}

/// Converts `v` to type `t` as NumPy's `astype` does (unsafe casting): integers wrap, floats
/// round to nearest, float to integer truncates toward zero (NaN and out-of-range values,
/// undefined in NumPy, saturate), complex to real drops the imaginary part.
#[must_use]
/// `n` elements of `from` in `bytes`, each cast to `to` (NumPy's `astype`).
pub fn convert(bytes: &[u8], from: E, to: E, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n * to.size()];
    for i in 0..n {
        store(to, cast(load(from, bytes, i), to), &mut out, i);
    }
    out
}

pub fn cast(v: Val, t: E) -> Val {
    let re = match v {
        Val::Int(x) => x as f64,
        Val::Float(x) | Val::Complex(x, _) => x,
    };
    if is_int(t) {
        let x = match v {
            Val::Int(x) => x,
            _ if t == E::Bool => i128::from(re != 0.0),
            _ => re.trunc() as i128,
        };
        Val::Int(wrap(t, x))
    } else if is_float(t) {
        Val::Float(round_to(t, re))
    } else {
        let im = match v {
            Val::Complex(_, im) => im,
            _ => 0.0,
        };
        Val::Complex(round_to(t, re), round_to(t, im))
    }
}

/// `a + b` in type `t` (both already of type `t`).
#[must_use]
pub fn add(t: E, a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Val::Int(wrap(t, x.wrapping_add(y))),
        (Val::Float(x), Val::Float(y)) => Val::Float(round_to(t, x + y)),
        (Val::Complex(a, b), Val::Complex(c, d)) => {
            Val::Complex(round_to(t, a + c), round_to(t, b + d))
        }
        _ => cast(a, t),
    }
}

/// `a - b` in type `t` (both already of type `t`).
#[must_use]
pub fn sub(t: E, a: Val, b: Val) -> Val {
    match b {
        Val::Int(y) => add(t, a, Val::Int(y.wrapping_neg())),
        Val::Float(y) => add(t, a, Val::Float(-y)),
        Val::Complex(c, d) => add(t, a, Val::Complex(-c, -d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_wrap_and_floats_round() {
        assert_eq!(add(E::Int8, Val::Int(127), Val::Int(1)), Val::Int(-128));
        assert_eq!(sub(E::UInt16, Val::Int(0), Val::Int(1)), Val::Int(65535));
        assert_eq!(cast(Val::Float(-2.7), E::Int32), Val::Int(-2));
        assert_eq!(cast(Val::Int(300), E::UInt8), Val::Int(44));
        let third = cast(Val::Float(1.0 / 3.0), E::Float32);
        assert_eq!(third, Val::Float(f64::from(1.0f32 / 3.0)));
        let mut b = vec![0u8; 8];
        store(E::Complex64, Val::Complex(1.5, -2.0), &mut b, 0);
        assert_eq!(load(E::Complex64, &b, 0), Val::Complex(1.5, -2.0));
    }
}

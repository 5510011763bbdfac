//! Encoding a chunk as zfp: its elements promoted to one of zfp's four scalar types as zarrs
//! promotes them, compressed by zfp-rs (the C library's bytes, bit for bit) into a stream sized
//! for the worst case, behind zfp's full header for zfpy. The bytes are those zarrs' encoder
//! (libzfp through zfp-sys) wrote.
//!
//! zarrs' promotion, which `decode.rs` undoes: (u)int8 and (u)int16 are shifted into the top
//! of an int32 (unsigned ones centred on zero first), uint32 is capped at `i32::MAX` and
//! uint64 at `i64::MAX`; int32, int64, float32 and float64 are coded as they are.

use std::borrow::Cow;

use bytemuck::Pod;
use zarrs::array::codec::api::CodecError;
use zfp_rs::{ZfpBitStream, ZfpConfig, ZfpField, ZfpHeaderMask, ZfpScalar, ZfpScalarType};

use super::config::Mode;
use super::{error, unsupported, zfp_dims, zfp_type};
use crate::ElementType;

/// The configuration chunks of `t` are encoded with.
pub fn encode_config(mode: Mode, t: ElementType) -> Result<(ZfpScalarType, ZfpConfig), CodecError> {
    let ty = zfp_type(t).ok_or_else(|| unsupported(t))?;
    // zarrs' encoder refuses fixed accuracy for integer data, which zfp would code lossily
    // (numcodecs' zfpy, given its default tolerance of -1, writes such data reversibly): so
    // does this one.
    if matches!(mode, Mode::FixedAccuracy(_))
        && matches!(ty, ZfpScalarType::I32 | ZfpScalarType::I64)
    {
        return Err(error(format!(
            "fixed accuracy needs float data, not {t}: use mode 5 (zfpy) or \"reversible\" (zfp) \
             for lossless integers, or fixed precision"
        )));
    }
    let config = mode
        .zfp_config(ty)
        .map_err(|e| error(format!("{mode:?} for {t}: {e}")))?;
    Ok((ty, config))
}

/// Encodes one chunk of `t` and C-order `shape` (`bytes`: its native-endian elements), with
/// zfp's full header when `header` is set.
pub fn encode(
    bytes: &[u8],
    t: ElementType,
    shape: &[u64],
    mode: Mode,
    header: bool,
) -> Result<Vec<u8>, CodecError> {
    let (ty, config) = encode_config(mode, t)?;
    let dims = zfp_dims(shape)?;
    let promoted = promote(t, bytes).ok_or_else(|| unsupported(t))?;
    match promoted {
        Promoted::I32(v) => compress(&v, dims, ty, &config, header),
        Promoted::I64(v) => compress(&v, dims, ty, &config, header),
        Promoted::F32(v) => compress(&v, dims, ty, &config, header),
        Promoted::F64(v) => compress(&v, dims, ty, &config, header),
    }
}

fn compress<T: ZfpScalar>(
    values: &[T],
    dims: [usize; 4],
    ty: ZfpScalarType,
    config: &ZfpConfig,
    header: bool,
) -> Result<Vec<u8>, CodecError> {
    let field = ZfpField::new(values, dims).map_err(error)?;
    let capacity = config
        .maximum_size(ty, dims)
        .ok_or_else(|| error(format!("a chunk of {dims:?} values is too large")))?;
    let mut stream = ZfpBitStream::new(capacity).map_err(error)?;
    if header {
        stream
            .write_header(config, &field.metadata(), ZfpHeaderMask::FULL)
            .map_err(error)?;
    }
    stream.compress(config, &field).map_err(error)?;
    stream.into_bytes().map_err(error)
}

/// Native-endian elements as `T`s: borrowed when `bytes` is aligned for `T` (as allocations
/// are), else copied. `bytes.len()` must be a multiple of `T`'s size (a partial element is
/// dropped).
fn view<T: Pod>(bytes: &[u8]) -> Cow<'_, [T]> {
    match bytemuck::try_cast_slice(bytes) {
        Ok(values) => Cow::Borrowed(values),
        Err(_) => Cow::Owned(
            bytes
                .chunks_exact(size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        ),
    }
}

/// A chunk's elements as zfp codes them.
enum Promoted<'a> {
    I32(Cow<'a, [i32]>),
    I64(Cow<'a, [i64]>),
    F32(Cow<'a, [f32]>),
    F64(Cow<'a, [f64]>),
}

/// The elements of a chunk of `t` (native-endian `bytes`, a whole number of elements) as
/// zfp codes them; `None` for types zfp cannot code.
fn promote(t: ElementType, bytes: &[u8]) -> Option<Promoted<'_>> {
    use ElementType as E;
    fn map<const N: usize, T>(bytes: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect()
    }
    let i32s = |v: Vec<i32>| Promoted::I32(Cow::Owned(v));
    Some(match t {
        E::Int8 => i32s(map(bytes, |[b]| i32::from(b as i8) << 23)),
        E::UInt8 => i32s(map(bytes, |[b]| (i32::from(b) - 0x80) << 23)),
        E::Int16 => i32s(map(bytes, |b| i32::from(i16::from_ne_bytes(b)) << 15)),
        E::UInt16 => i32s(map(bytes, |b| {
            (i32::from(u16::from_ne_bytes(b)) - 0x8000) << 15
        })),
        E::UInt32 => i32s(map(bytes, |b| {
            i32::try_from(u32::from_ne_bytes(b)).unwrap_or(i32::MAX)
        })),
        E::UInt64 => Promoted::I64(Cow::Owned(map(bytes, |b| {
            i64::try_from(u64::from_ne_bytes(b)).unwrap_or(i64::MAX)
        }))),
        E::Int32 => Promoted::I32(view(bytes)),
        E::Int64 => Promoted::I64(view(bytes)),
        E::Float32 => Promoted::F32(view(bytes)),
        E::Float64 => Promoted::F64(view(bytes)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::decode::{narrow_i32, zero_negatives};
    use super::*;

    fn i32s(p: Promoted<'_>) -> Vec<i32> {
        match p {
            Promoted::I32(v) => v.into_owned(),
            _ => panic!("not int32"),
        }
    }

    #[test]
    fn small_integers_round_trip_through_int32() {
        for (t, bytes) in [
            (ElementType::Int8, vec![0x80u8, 0x7f, 0, 0xff]),
            (ElementType::UInt8, vec![0u8, 0xff, 1, 0x80]),
            (
                ElementType::Int16,
                [i16::MIN, i16::MAX, 0, -1].map(i16::to_ne_bytes).concat(),
            ),
            (
                ElementType::UInt16,
                [0u16, u16::MAX, 1, 0x8000].map(u16::to_ne_bytes).concat(),
            ),
        ] {
            let values = i32s(promote(t, &bytes).unwrap());
            let mut out = vec![0u8; bytes.len()];
            narrow_i32(t, &values, &mut out);
            assert_eq!(out, bytes, "{t}");
        }
        // Shifted into the top bits: int8 -128 is the most negative int32 zfp is given.
        assert_eq!(
            i32s(promote(ElementType::Int8, &[0x80]).unwrap()),
            [-(1 << 30)]
        );
        // Decoded values past the type's range are clamped to it.
        let mut out = [0u8; 2];
        narrow_i32(ElementType::UInt8, &[i32::MAX, i32::MIN], &mut out);
        assert_eq!(out, [0xff, 0]);
    }

    #[test]
    fn wide_unsigned_values_are_capped_and_clamped() {
        let big = u32::MAX.to_ne_bytes();
        assert_eq!(
            i32s(promote(ElementType::UInt32, &big).unwrap()),
            [i32::MAX]
        );
        match promote(ElementType::UInt64, &u64::MAX.to_ne_bytes()).unwrap() {
            Promoted::I64(v) => assert_eq!(v[..], [i64::MAX]),
            _ => panic!("not int64"),
        }
        let mut out = [(-5i32).to_ne_bytes(), 7i32.to_ne_bytes()].concat();
        zero_negatives(4, &mut out);
        assert_eq!(out, [0u32.to_ne_bytes(), 7u32.to_ne_bytes()].concat());
        assert!(promote(ElementType::Float16, &[0, 0]).is_none());
        assert!(zfp_type(ElementType::Bool).is_none());
    }

    #[test]
    fn unaligned_bytes_are_copied() {
        let bytes: Vec<u8> = [1.5f64, -2.0].map(f64::to_ne_bytes).concat();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        let values = view::<f64>(&shifted[1..]);
        assert_eq!(values[..], [1.5, -2.0]);
    }
}

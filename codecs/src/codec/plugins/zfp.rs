//! zfp decoding that cannot read or write outside its buffers: numcodecs' `zfpy` (a zfp
//! stream with a full header) and zarrs' `zfp` (no header, the mode in the metadata).
//!
//! Specs: <https://numcodecs.readthedocs.io/en/stable/compression/zfpy.html> (v3
//! `numcodecs.zfpy`), <https://codec.zarrs.dev/array_to_bytes/zfp> and zfp's stream format,
//! <https://zfp.readthedocs.io/en/release1.0.1/>.
//!
//! zarrs' zfpy decoder takes the array's dimensions from the stream header and decompresses
//! into a buffer sized from the chunk shape (a header naming a larger field writes past it),
//! and zfp's bit stream reads words without bounds checks (a truncated stream reads past its
//! end). Here the header must name exactly the chunk's type and shape, its mode must be one
//! a real encoder writes, and the stream is copied into a zero-padded buffer at least as long
//! as the most bits the decoder can read for that shape (~2.3x the chunk in the worst case),
//! so reading never leaves it; a stream that reads into the padding (ones, so that a decoder
//! there keeps reading) is an error. Encoding stays
//! zarrs'. zarr-python writes `{"mode": 4}` (numcodecs' default tolerance of -1 left out),
//! which zarrs cannot parse: the numcodecs defaults are filled in first.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError, CodecTraitsV3};
use zarrs::array::codec::{ZfpCodec, ZfpCodecConfiguration, ZfpMode, ZfpyCodec};
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::plugin::PluginCreateError;
use zfp_sys as z;

use super::bad_config;
use super::bounded_a2b::BoundedArrayToBytes;
use crate::ElementType;

/// How the stream's parameters are known.
#[derive(Clone, Copy, Debug)]
enum Params {
    /// From the stream's own header (zfpy).
    Header,
    /// From the array metadata (zarrs' zfp).
    Mode(ZfpMode),
}

/// numcodecs' `zfpy`: zarrs' codec for encoding, our decoder.
pub fn create_zfpy(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let mut config = config.clone();
    let mode = config.get("mode").and_then(Value::as_i64).unwrap_or(4);
    config.insert("mode".into(), mode.into());
    for field in ["tolerance", "rate", "precision"] {
        if config.get(field).is_none_or(Value::is_null) {
            config.insert(field.into(), (-1).into());
        }
    }
    let metadata =
        MetadataV3::new_with_configuration("numcodecs.zfpy", Configuration::from(config));
    match ZfpyCodec::create(&metadata)? {
        Codec::ArrayToBytes(inner) => Ok(BoundedArrayToBytes::codec(
            inner,
            Box::new(|src, t, shape| decode(src, t, shape, Params::Header)),
        )),
        other => Ok(other),
    }
}

/// zarrs' `zfp`: zarrs' codec for encoding, our decoder.
pub fn create_zfp(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let parsed: ZfpCodecConfiguration =
        serde_json::from_value(Value::Object(config.clone())).map_err(|e| bad_config("zfp", e))?;
    let ZfpCodecConfiguration::V1(v1) = parsed else {
        return Err(bad_config("zfp", "unknown configuration version"));
    };
    let metadata = MetadataV3::new_with_configuration("zfp", Configuration::from(config.clone()));
    let mode = v1.mode;
    match ZfpCodec::create(&metadata)? {
        Codec::ArrayToBytes(inner) => Ok(BoundedArrayToBytes::codec(
            inner,
            Box::new(move |src, t, shape| decode(src, t, shape, Params::Mode(mode))),
        )),
        other => Ok(other),
    }
}

fn corrupt(why: impl std::fmt::Display) -> CodecError {
    CodecError::Other(format!("zfp: {why}"))
}

/// The zfp type a chunk of `t` is coded as (zarrs promotes small integers to int32).
fn native(t: ElementType) -> Result<(z::zfp_type, usize), CodecError> {
    use ElementType as E;
    Ok(match t {
        E::Int8 | E::UInt8 | E::Int16 | E::UInt16 | E::Int32 | E::UInt32 => {
            (z::zfp_type_zfp_type_int32, 4)
        }
        E::Int64 | E::UInt64 => (z::zfp_type_zfp_type_int64, 8),
        E::Float32 => (z::zfp_type_zfp_type_float, 4),
        E::Float64 => (z::zfp_type_zfp_type_double, 8),
        other => return Err(corrupt(format!("unsupported data type {other}"))),
    })
}

/// The most bits zfp's decoder can read for one block of `dims` dimensions of `ty`
/// (a zero-block flag and exponent, then per bit plane at most two bits per value), or
/// `minbits` when a fixed-rate stream pads every block to it.
fn block_bits(ty: z::zfp_type, dims: u32) -> u64 {
    let (ebits, intprec) = match ty {
        z::zfp_type_zfp_type_float => (8, 32),
        z::zfp_type_zfp_type_double => (11, 64),
        z::zfp_type_zfp_type_int32 => (0, 32),
        _ => (0, 64),
    };
    let size = 4u64.pow(dims);
    128 + ebits + intprec * (2 * size + 1)
}

/// Owns zfp's stream, bit stream and field; frees them on every path.
struct Handles {
    bits: *mut z::bitstream,
    stream: *mut z::zfp_stream,
    field: *mut z::zfp_field,
}

impl Drop for Handles {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or came from the matching zfp allocation, freed once.
        unsafe {
            if !self.field.is_null() {
                z::zfp_field_free(self.field);
            }
            if !self.stream.is_null() {
                z::zfp_stream_close(self.stream);
            }
            if !self.bits.is_null() {
                z::stream_close(self.bits);
            }
        }
    }
}

fn set_mode(stream: *mut z::zfp_stream, mode: ZfpMode, ty: z::zfp_type) -> Result<(), CodecError> {
    // SAFETY: `stream` is a live zfp stream; these setters only store parameters.
    // FixedRate uses dims = 3 as zarrs' encoder does, so the same maxbits result.
    unsafe {
        match mode {
            ZfpMode::Expert {
                minbits,
                maxbits,
                maxprec,
                minexp,
            } => {
                if z::zfp_stream_set_params(stream, minbits, maxbits, maxprec, minexp) == 0 {
                    return Err(corrupt("invalid expert parameters"));
                }
            }
            ZfpMode::FixedRate { rate } => {
                z::zfp_stream_set_rate(stream, rate, ty, 3, 0);
            }
            ZfpMode::FixedPrecision { precision } => {
                z::zfp_stream_set_precision(stream, precision);
            }
            ZfpMode::FixedAccuracy { tolerance } => {
                z::zfp_stream_set_accuracy(stream, tolerance);
            }
            ZfpMode::Reversible => z::zfp_stream_set_reversible(stream),
        }
    }
    Ok(())
}

/// Decodes a zfp stream into a chunk of element type `t` and C-order `shape` (1 to 4 axes).
fn decode(
    src: &[u8],
    t: ElementType,
    shape: &[u64],
    params: Params,
) -> Result<Vec<u8>, CodecError> {
    let (ty, width) = native(t)?;
    if shape.is_empty() || shape.len() > 4 {
        return Err(corrupt(format!(
            "{} dimensions (zfp codes 1 to 4)",
            shape.len()
        )));
    }
    let dims = shape.len() as u32;
    // zfp's x axis is the last (fastest) one.
    let mut size = [1usize; 4];
    for (k, &d) in shape.iter().rev().enumerate() {
        size[k] = usize::try_from(d).map_err(|_| corrupt("chunk too large"))?;
    }
    let n = size.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let n = n.ok_or_else(|| corrupt("chunk too large"))?;
    let blocks: u64 = size[..shape.len()]
        .iter()
        .map(|&d| (d as u64).div_ceil(4))
        .product();
    let limit_bits = blocks
        .checked_mul(block_bits(ty, dims))
        .and_then(|b| b.checked_add(u64::from(z::ZFP_HEADER_MAX_BITS) + 256))
        .ok_or_else(|| corrupt("chunk too large"))?;
    let words = (limit_bits.div_ceil(64) as usize).max(src.len().div_ceil(8)) + 2;
    let mut padded: Vec<u64> = Vec::new();
    padded
        .try_reserve_exact(words)
        .map_err(|_| corrupt(format!("cannot allocate {words} words")))?;
    // Padding of ones: a decoder reading past the real stream keeps finding significant bits,
    // so it runs on (within the padding) and the overrun shows in the bytes it consumed.
    padded.resize(words, u64::MAX);
    // SAFETY: `padded` has words * 8 >= src.len() bytes; the regions do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), padded.as_mut_ptr().cast::<u8>(), src.len());
    }
    let mut out = vec![
        0u8;
        n.checked_mul(width)
            .ok_or_else(|| corrupt("chunk too large"))?
    ];
    // Decode into a buffer of the native type (aligned), then narrow.
    let mut native_buf: Vec<u64> = vec![0; (out.len() / 8) + 1];

    // SAFETY: every pointer handed to zfp is owned by `h` or points into `padded` (read
    // only, `words * 8` bytes, longer than any read the checked parameters allow) or
    // `native_buf` (at least n * width bytes, the size of the field zfp writes: the header
    // must match the chunk's shape and type before anything is decoded).
    let consumed = unsafe {
        let mut h = Handles {
            bits: z::stream_open(padded.as_mut_ptr().cast(), words * 8),
            stream: std::ptr::null_mut(),
            field: z::zfp_field_alloc(),
        };
        if h.bits.is_null() || h.field.is_null() {
            return Err(corrupt("cannot open a stream"));
        }
        h.stream = z::zfp_stream_open(h.bits);
        if h.stream.is_null() {
            return Err(corrupt("cannot open a stream"));
        }
        match params {
            Params::Header => {
                if z::zfp_read_header(h.stream, h.field, z::ZFP_HEADER_FULL) == 0 {
                    return Err(corrupt("invalid header"));
                }
                let f = &*h.field;
                let got = [f.nx, f.ny, f.nz, f.nw];
                let want: Vec<usize> = (0..4)
                    .map(|k| if k < shape.len() { size[k] } else { 0 })
                    .collect();
                if f.type_ != ty || got[..] != want[..] {
                    return Err(corrupt(format!(
                        "header describes a field of type {} and size {got:?}, the chunk is {t} of \
                         size {want:?}",
                        f.type_
                    )));
                }
            }
            Params::Mode(mode) => {
                set_mode(h.stream, mode, ty)?;
                z::zfp_field_set_type(h.field, ty);
                match dims {
                    1 => z::zfp_field_set_size_1d(h.field, size[0]),
                    2 => z::zfp_field_set_size_2d(h.field, size[0], size[1]),
                    3 => z::zfp_field_set_size_3d(h.field, size[0], size[1], size[2]),
                    _ => z::zfp_field_set_size_4d(h.field, size[0], size[1], size[2], size[3]),
                }
                z::zfp_stream_rewind(h.stream);
            }
        }
        let (mut minbits, mut maxbits, mut maxprec, mut minexp) = (0u32, 0u32, 0u32, 0i32);
        z::zfp_stream_params(
            h.stream,
            &raw mut minbits,
            &raw mut maxbits,
            &raw mut maxprec,
            &raw mut minexp,
        );
        if u64::from(minbits) > block_bits(ty, dims) || minbits > maxbits {
            return Err(corrupt(format!(
                "implausible block size {minbits}..{maxbits} bits"
            )));
        }
        z::zfp_field_set_pointer(h.field, native_buf.as_mut_ptr().cast());
        z::zfp_decompress(h.stream, h.field)
    };
    if consumed == 0 {
        return Err(corrupt("decompression failed"));
    }
    if consumed > src.len() {
        return Err(corrupt(format!(
            "stream is truncated: {} bytes, decoding needed {consumed}",
            src.len()
        )));
    }
    // SAFETY: native_buf holds at least n * width initialised bytes.
    let native_bytes =
        unsafe { std::slice::from_raw_parts(native_buf.as_ptr().cast::<u8>(), n * width) };
    narrow(t, native_bytes, &mut out);
    out.truncate(n * t.size());
    Ok(out)
}

/// Undoes zarrs' promotion of small integer types to zfp's int32/int64.
fn narrow(t: ElementType, native: &[u8], out: &mut [u8]) {
    use ElementType as E;
    let i32s = || {
        native
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
    };
    let i64s = || {
        native
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
    };
    match t {
        E::Int8 => out
            .iter_mut()
            .zip(i32s())
            .for_each(|(o, i)| *o = (i >> 23).clamp(-0x80, 0x7f) as i8 as u8),
        E::UInt8 => out
            .iter_mut()
            .zip(i32s())
            .for_each(|(o, i)| *o = ((i >> 23) + 0x80).clamp(0, 0xff) as u8),
        E::Int16 => out.chunks_exact_mut(2).zip(i32s()).for_each(|(o, i)| {
            o.copy_from_slice(&((i >> 15).clamp(-0x8000, 0x7fff) as i16).to_ne_bytes())
        }),
        E::UInt16 => out.chunks_exact_mut(2).zip(i32s()).for_each(|(o, i)| {
            o.copy_from_slice(&(((i >> 15) + 0x8000).clamp(0, 0xffff) as u16).to_ne_bytes());
        }),
        E::UInt32 => out
            .chunks_exact_mut(4)
            .zip(i32s())
            .for_each(|(o, i)| o.copy_from_slice(&(i.max(0) as u32).to_ne_bytes())),
        E::UInt64 => out
            .chunks_exact_mut(8)
            .zip(i64s())
            .for_each(|(o, i)| o.copy_from_slice(&(i.max(0) as u64).to_ne_bytes())),
        _ => out.copy_from_slice(&native[..out.len()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A zfpy stream with a full header for a 2x4 float64 chunk holding 0..8,
    /// written by `numcodecs.ZFPY().encode(np.arange(8, dtype="<f8").reshape(2, 4))` (mode 4,
    /// tolerance -1: lossless for these values), as hex.
    const ZFPY_FIXTURE: &str = include_str!("../../../tests/fixtures/zfpy_f8_2x4.hex");

    #[test]
    fn reads_numcodecs_zfpy() {
        let enc = hex(ZFPY_FIXTURE.trim());
        let want: Vec<u8> = (0..8).flat_map(|i| f64::from(i).to_ne_bytes()).collect();
        let got = decode(&enc, ElementType::Float64, &[2, 4], Params::Header).unwrap();
        assert_eq!(got, want);
    }

    /// `numcodecs.ZFPY().encode(np.sin(np.arange(64, dtype="<f8")).reshape(8, 8))`, as hex
    /// (488 bytes), and what numcodecs decodes it to (the input, little-endian float64).
    const ZFPY_SIN: &str = include_str!("../../../tests/fixtures/zfpy_f8_8x8_sin.hex");
    const ZFPY_SIN_DECODED: &str =
        include_str!("../../../tests/fixtures/zfpy_f8_8x8_sin.decoded.hex");

    #[test]
    fn hostile_streams_are_errors() {
        let sin = hex(ZFPY_SIN.trim());
        let want = hex(ZFPY_SIN_DECODED.trim());
        assert_eq!(
            decode(&sin, ElementType::Float64, &[8, 8], Params::Header).unwrap(),
            want
        );
        for cut in [0, 4, 8, 12, 100, sin.len() / 2, sin.len() - 16] {
            let r = decode(&sin[..cut], ElementType::Float64, &[8, 8], Params::Header);
            assert!(r.is_err(), "cut {cut} decoded");
        }
        let enc = hex(ZFPY_FIXTURE.trim());
        // The header names a 2x4 field: any other chunk shape or type is refused.
        assert!(decode(&enc, ElementType::Float64, &[4, 2], Params::Header).is_err());
        assert!(decode(&enc, ElementType::Float64, &[64, 64], Params::Header).is_err());
        assert!(decode(&enc, ElementType::Float32, &[2, 4], Params::Header).is_err());
        // Truncated, empty or garbage streams stay inside the padded copy and are refused.
        for cut in [0, 4, 8] {
            assert!(decode(&enc[..cut], ElementType::Float64, &[2, 4], Params::Header).is_err());
        }
        assert!(decode(&[0xff; 64], ElementType::Float64, &[2, 4], Params::Header).is_err());
        // Without a header, a too-short stream is refused too.
        let short = decode(
            &[0x55; 8],
            ElementType::Float64,
            &[64],
            Params::Mode(ZfpMode::Reversible),
        );
        assert!(short.is_err());
    }
}

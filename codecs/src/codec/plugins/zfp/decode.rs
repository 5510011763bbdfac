//! Decoding a zfp stream into exactly one chunk, whatever the stream claims: zfpy's header
//! must name the chunk's zfp type and shape, the parameters (header or metadata) must be ones
//! an encoder can write, and the stream must hold every word decoding reads.
//!
//! zfp-rs checks every read (C's bit stream does not: the decoder this replaces decoded from a
//! padded copy long enough for the worst case). A read past the end is its `Truncated`
//! error; decoding that ends inside a final partial word, or past the end after skipping
//! padding, is refused here by comparing where it ended with the stream's length. Memory: the
//! chunk's bytes, a wider buffer for the types zarrs promotes (4 bytes per int8), and a copy
//! of the stream only when it is not whole aligned words. Values are narrowed back to the
//! chunk's type as `encode.rs` promoted them, clamped to the type's range.

use zarrs::array::codec::api::CodecError;
use zfp_rs::{
    ZfpBitStream, ZfpBitStreamOps, ZfpBitStreamRef, ZfpConfig, ZfpDecompressionError, ZfpFieldMut,
    ZfpHeaderMask, ZfpScalar, ZfpScalarType, STREAM_WORD_BYTES, ZFP_MAX_BITS,
};

use super::config::Mode;
use super::{error, unsupported, zfp_dims, zfp_type};
use crate::ElementType;

/// Where a stream's parameters come from.
#[derive(Clone, Copy, Debug)]
pub enum Params {
    /// zfp's full header at the start of the stream (numcodecs' zfpy).
    Header,
    /// The codec's metadata (zarrs' zfp, no header).
    Mode(Mode),
}

/// The chunk a stream is decoded into, and the stream's length.
struct Chunk {
    t: ElementType,
    ty: ZfpScalarType,
    dims: [usize; 4],
    stream_len: usize,
}

/// Decodes a zfp stream into a chunk of element type `t` and C-order `shape` (1 to 4 axes).
pub fn decode(
    src: &[u8],
    t: ElementType,
    shape: &[u64],
    params: Params,
) -> Result<Vec<u8>, CodecError> {
    let ty = zfp_type(t).ok_or_else(|| unsupported(t))?;
    let dims = zfp_dims(shape)?;
    let n = dims
        .iter()
        .filter(|&&d| d > 0)
        .try_fold(1usize, |a, &d| a.checked_mul(d));
    let len = n.and_then(|n| n.checked_mul(t.size()));
    let len = len.ok_or_else(|| error("chunk too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| error(format!("cannot allocate {len} bytes")))?;
    out.resize(len, 0);
    // zfp reads 64-bit words: chunk bytes that are whole aligned words are read in place,
    // others are copied into words (the last one zero-padded).
    let chunk = Chunk {
        t,
        ty,
        dims,
        stream_len: src.len(),
    };
    let consumed = match ZfpBitStreamRef::from_bytes(src)
        .filter(|_| src.len().is_multiple_of(STREAM_WORD_BYTES))
    {
        Some(mut stream) => decode_stream(&mut stream, &mut out, &chunk, params)?,
        None => {
            let mut stream = ZfpBitStream::from_bytes(src).map_err(error)?;
            decode_stream(&mut stream, &mut out, &chunk, params)?
        }
    };
    if consumed > src.len() {
        return Err(error(format!(
            "stream is truncated: {} bytes, decoding needed {consumed}",
            src.len()
        )));
    }
    Ok(out)
}

/// The parameters, read from the header (checked against the chunk) or taken from the mode.
fn parameters<S: ZfpBitStreamOps>(
    stream: &mut S,
    chunk: &Chunk,
    params: Params,
) -> Result<ZfpConfig, CodecError> {
    let Chunk { t, ty, dims, .. } = *chunk;
    let config = match params {
        Params::Header => {
            let header = stream
                .read_header(ZfpHeaderMask::FULL)
                .map_err(|e| error(format!("invalid header ({e})")))?;
            let (Some(field), Some(config)) = (header.metadata, header.config) else {
                return Err(error("invalid header"));
            };
            if field.scalar_type != ty || field.dims != dims {
                return Err(error(format!(
                    "header describes a field of {:?} values and size {:?}, the chunk is {t} \
                     (coded as {ty:?}) of size {dims:?}",
                    field.scalar_type, field.dims
                )));
            }
            config
        }
        Params::Mode(mode) => mode
            .zfp_config(ty)
            .map_err(|e| error(format!("{mode:?} cannot code {t}: {e}")))?,
    };
    // No encoder pads a block past the most bits any block takes (4-D, 64-bit values).
    if config.min_bits() > ZFP_MAX_BITS {
        return Err(error(format!(
            "implausible block size {}..{} bits",
            config.min_bits(),
            config.max_bits()
        )));
    }
    Ok(config)
}

fn decode_stream<S: ZfpBitStreamOps>(
    stream: &mut S,
    out: &mut [u8],
    chunk: &Chunk,
    params: Params,
) -> Result<usize, CodecError> {
    use ElementType as E;
    let config = parameters(stream, chunk, params)?;
    let t = chunk.t;
    match t {
        E::Int8 | E::UInt8 | E::Int16 | E::UInt16 => {
            let n = out.len() / t.size();
            let mut wide: Vec<i32> = Vec::new();
            wide.try_reserve_exact(n)
                .map_err(|_| error(format!("cannot allocate {n} int32 values")))?;
            wide.resize(n, 0);
            let consumed = run(stream, &config, chunk, &mut wide)?;
            narrow_i32(t, &wide, out);
            Ok(consumed)
        }
        E::Int32 | E::UInt32 => {
            let consumed = decode_in_place::<i32, S>(stream, &config, chunk, out)?;
            if t == E::UInt32 {
                zero_negatives(4, out);
            }
            Ok(consumed)
        }
        E::Int64 | E::UInt64 => {
            let consumed = decode_in_place::<i64, S>(stream, &config, chunk, out)?;
            if t == E::UInt64 {
                zero_negatives(8, out);
            }
            Ok(consumed)
        }
        E::Float32 => decode_in_place::<f32, S>(stream, &config, chunk, out),
        _ => decode_in_place::<f64, S>(stream, &config, chunk, out),
    }
}

/// Decodes into `out` viewed as `T`s: in place when it is aligned for `T` (as allocations
/// are), else through a buffer of `T`s copied out.
fn decode_in_place<T: ZfpScalar, S: ZfpBitStreamOps>(
    stream: &mut S,
    config: &ZfpConfig,
    chunk: &Chunk,
    out: &mut [u8],
) -> Result<usize, CodecError> {
    if let Ok(values) = bytemuck::try_cast_slice_mut::<u8, T>(out) {
        return run(stream, config, chunk, values);
    }
    let mut values = vec![T::default(); out.len() / size_of::<T>()];
    let consumed = run(stream, config, chunk, &mut values)?;
    out.copy_from_slice(bytemuck::cast_slice(&values));
    Ok(consumed)
}

/// Decompresses the chunk's field into `values`; returns the bytes read from the stream's
/// start (a whole number of words).
fn run<T: ZfpScalar, S: ZfpBitStreamOps>(
    stream: &mut S,
    config: &ZfpConfig,
    chunk: &Chunk,
    values: &mut [T],
) -> Result<usize, CodecError> {
    let mut field = ZfpFieldMut::new(values, chunk.dims).map_err(error)?;
    stream.decompress(config, &mut field).map_err(|e| match e {
        ZfpDecompressionError::Truncated { required, .. } => error(format!(
            "stream is truncated: {} bytes, decoding needed {required}",
            chunk.stream_len
        )),
        other => error(format!("decompression failed: {other}")),
    })
}

/// Writes decoded int32 values into `out` as elements of the narrower `t` (int8, uint8,
/// int16, uint16), undoing `encode.rs`'s shift and clamping to the type's range.
pub fn narrow_i32(t: ElementType, values: &[i32], out: &mut [u8]) {
    use ElementType as E;
    match t {
        E::Int8 => {
            for (o, &v) in out.iter_mut().zip(values) {
                *o = (v >> 23).clamp(-0x80, 0x7f) as i8 as u8;
            }
        }
        E::UInt8 => {
            for (o, &v) in out.iter_mut().zip(values) {
                *o = ((v >> 23) + 0x80).clamp(0, 0xff) as u8;
            }
        }
        E::Int16 => {
            for (o, &v) in out.chunks_exact_mut(2).zip(values) {
                o.copy_from_slice(&((v >> 15).clamp(-0x8000, 0x7fff) as i16).to_ne_bytes());
            }
        }
        _ => {
            for (o, &v) in out.chunks_exact_mut(2).zip(values) {
                o.copy_from_slice(&(((v >> 15) + 0x8000).clamp(0, 0xffff) as u16).to_ne_bytes());
            }
        }
    }
}

/// Sets negative values to zero: uint32 (uint64) elements are decoded in place as int32
/// (int64), and a lossy mode may decode a value near zero to one below it.
pub fn zero_negatives(width: usize, out: &mut [u8]) {
    for c in out.chunks_exact_mut(width.max(1)) {
        // The sign bit: the top bit of the most significant byte.
        let top = if cfg!(target_endian = "little") {
            c.last()
        } else {
            c.first()
        };
        if top.is_some_and(|&b| b & 0x80 != 0) {
            c.fill(0);
        }
    }
}

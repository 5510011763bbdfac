//! Codecs zarrs lacks or reads differently from zarr-python (numcodecs' lz4, lzma, delta,
//! fixedscaleoffset, astype, quantize and packbits; zarr-python's `scale_offset` and
//! `cast_value`), bounded decoders for the zarrs codecs that trust their input (bz2, pcodec),
//! zfp and numcodecs' zfpy in pure Rust (zfp-rs: zarrs' own compile zfp's C source with cmake
//! and libclang), numcodecs' checksums (adler32, fletcher32, crc32, crc32c, jenkins_lookup3)
//! checked on every read, and the numcodecs defaults zarr-python leaves out of v3
//! metadata, all registered at runtime in zarrs' codec registry (v2 by numcodecs `id`, v3 by
//! name and `numcodecs.<id>`).

pub mod array_codec;
pub mod astype;
pub mod bounded_a2b;
pub mod bytes_codec;
pub mod bz2;
pub mod cast_value;
pub mod checksum;
pub mod checksum32;
pub mod defaults;
pub mod delta;
pub mod fixedscaleoffset;
pub mod jenkins_lookup3;
pub mod lz4;
pub mod lzma;
mod lzma_filters;
pub mod numeric;
pub mod packbits;
pub mod pcodec;
pub mod quantize;
pub mod scale_offset;
pub mod v2_conversion;
pub mod vlen;
pub mod zfp;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, BytesRepresentation, Codec, CodecError,
    CodecRuntimePluginV2, CodecRuntimePluginV3,
};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::plugin::PluginCreateError;

/// Decoded sizes zarrs cannot state (a compressor after another compressor) are capped here.
pub(crate) const UNBOUNDED_CAP: u64 = 4 << 30;

/// A codec built from its configuration (a JSON object, numcodecs' fields for v2).
type Create = fn(&Map<String, Value>) -> Result<Codec, PluginCreateError>;

/// Registers every plugin of this module. Called once, from `harden::install`, before the
/// bounded replacements of zstd/gzip/zlib/blosc/crc32c (runtime plugins are consulted in
/// registration order, and the names here do not overlap with those).
pub(crate) fn install() {
    register(&["numcodecs.lz4"], &["lz4"], lz4::create);
    register(&["numcodecs.delta"], &["delta"], delta::create);
    register(
        &["numcodecs.fixedscaleoffset"],
        &["fixedscaleoffset"],
        fixedscaleoffset::create,
    );
    register(&["numcodecs.packbits"], &["packbits"], packbits::create);
    register(&["numcodecs.bz2"], &["bz2"], bz2::create);
    register(
        &[
            "numcodecs.pcodec",
            "https://codec.zarrs.dev/array_to_bytes/pcodec",
        ],
        &["pcodec"],
        pcodec::create,
    );
    register(
        &[
            "numcodecs.zfpy",
            "https://codec.zarrs.dev/array_to_bytes/zfpy",
        ],
        &["zfpy"],
        zfp::create_zfpy,
    );
    register(
        &[
            "zfp",
            "zarrs.zfp",
            "https://codec.zarrs.dev/array_to_bytes/zfp",
        ],
        &[],
        zfp::create_zfp,
    );
    register(
        &["numcodecs.adler32"],
        &["adler32"],
        checksum::create_adler32,
    );
    register(
        &["numcodecs.fletcher32"],
        &["fletcher32"],
        checksum::create_fletcher32,
    );
    register(&["numcodecs.crc32"], &["crc32"], checksum32::create_crc32);
    // numcodecs' crc32c: not the core v3 `crc32c` (harden.rs), which has no `location`.
    register(
        &["numcodecs.crc32c"],
        &["crc32c"],
        checksum32::create_crc32c,
    );
    register(
        &["numcodecs.jenkins_lookup3"],
        &["jenkins_lookup3"],
        checksum32::create_jenkins_lookup3,
    );
    register(&["numcodecs.astype"], &["astype"], astype::create);
    register(&["numcodecs.quantize"], &["quantize"], quantize::create);
    register(&["numcodecs.lzma"], &["lzma"], lzma::create);
    register(
        &[
            "vlen-utf8",
            "numcodecs.vlen-utf8",
            "https://codec.zarrs.dev/array_to_bytes/vlen_utf8",
        ],
        &["vlen-utf8"],
        vlen::create_utf8,
    );
    register(
        &[
            "vlen-bytes",
            "numcodecs.vlen-bytes",
            "https://codec.zarrs.dev/array_to_bytes/vlen_bytes",
        ],
        &["vlen-bytes"],
        vlen::create_bytes,
    );
    register(&["scale_offset"], &[], scale_offset::create);
    register(&["cast_value"], &[], cast_value::create);
    defaults::install();
}

/// Registers `create` under the v3 `names` and the v2 `ids`.
fn register(names: &'static [&'static str], ids: &'static [&'static str], create: Create) {
    if !names.is_empty() {
        let _handle = register_codec_v3(CodecRuntimePluginV3::new(
            move |name| names.contains(&name),
            move |metadata: &MetadataV3| create(&config_v3(metadata)),
        ));
    }
    if !ids.is_empty() {
        let _handle = register_codec_v2(CodecRuntimePluginV2::new(
            move |id| ids.contains(&id),
            move |metadata: &MetadataV2| create(&config_v2(metadata)),
        ));
    }
}

/// The `configuration` of v3 codec metadata (`{}` when absent).
pub(crate) fn config_v3(metadata: &MetadataV3) -> Map<String, Value> {
    match serde_json::to_value(metadata) {
        Ok(Value::Object(mut m)) => match m.remove("configuration") {
            Some(Value::Object(c)) => c,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// The fields of v2 codec metadata other than `id`.
pub(crate) fn config_v2(metadata: &MetadataV2) -> Map<String, Value> {
    match serde_json::to_value(metadata) {
        Ok(Value::Object(mut m)) => {
            m.remove("id");
            m
        }
        _ => Map::new(),
    }
}

/// A configuration error for codec `name`.
pub(crate) fn bad_config(name: &str, why: impl std::fmt::Display) -> PluginCreateError {
    PluginCreateError::Other(format!("codec {name}: {why}"))
}

/// The most bytes a bytes-to-bytes decoder may produce for `decoded`.
pub(crate) fn decoded_limit(decoded: &BytesRepresentation) -> usize {
    let limit = match decoded {
        BytesRepresentation::FixedSize(n) | BytesRepresentation::BoundedSize(n) => *n,
        BytesRepresentation::UnboundedSize => UNBOUNDED_CAP,
    };
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// Checks a decoder's output against a fixed expected size.
pub(crate) fn check_decoded_size(
    codec: &str,
    got: usize,
    decoded: &BytesRepresentation,
) -> Result<(), CodecError> {
    match decoded {
        BytesRepresentation::FixedSize(n) if got as u64 != *n => Err(CodecError::Other(format!(
            "{codec} stream decodes to {got} bytes, expected {n}"
        ))),
        _ => Ok(()),
    }
}

/// Parses a NumPy dtype string as numcodecs stores it (`"<i2"`, `"|u1"`, `"f8"`, `"int16"`,
/// `"bool"`) into an element type; byte order is ignored (arrays are native in memory).
pub(crate) fn numpy_dtype(s: &str) -> Option<crate::ElementType> {
    use crate::ElementType as E;
    let code = s.trim_start_matches(['<', '>', '|', '=']);
    Some(match code {
        "b1" | "?" | "bool" => E::Bool,
        "i1" | "int8" => E::Int8,
        "i2" | "int16" => E::Int16,
        "i4" | "int32" => E::Int32,
        "i8" | "int64" => E::Int64,
        "u1" | "uint8" => E::UInt8,
        "u2" | "uint16" => E::UInt16,
        "u4" | "uint32" => E::UInt32,
        "u8" | "uint64" => E::UInt64,
        "f2" | "float16" => E::Float16,
        "f4" | "float32" => E::Float32,
        "f8" | "float64" => E::Float64,
        "c8" | "complex64" => E::Complex64,
        "c16" | "complex128" => E::Complex128,
        "bfloat16" => E::BFloat16,
        _ => return None,
    })
}

/// [`numpy_dtype`], refusing a big-endian multi-byte type: a codec that stores elements of
/// this type (astype, quantize) would have to write them byte-swapped.
pub(crate) fn little_endian_dtype(s: &str) -> Option<crate::ElementType> {
    numpy_dtype(s).filter(|t| !(s.starts_with('>') && t.size() > 1))
}

/// The zarrs data type of an element type.
pub(crate) fn zarrs_data_type(t: crate::ElementType) -> zarrs::array::DataType {
    use crate::ElementType as E;
    use zarrs::array::data_type as dt;
    match t {
        E::Bool => dt::bool(),
        E::Int8 => dt::int8(),
        E::Int16 => dt::int16(),
        E::Int32 => dt::int32(),
        E::Int64 => dt::int64(),
        E::UInt8 => dt::uint8(),
        E::UInt16 => dt::uint16(),
        E::UInt32 => dt::uint32(),
        E::UInt64 => dt::uint64(),
        E::Float16 => dt::float16(),
        E::BFloat16 => dt::bfloat16(),
        E::Float32 => dt::float32(),
        E::Float64 => dt::float64(),
        E::Complex64 => dt::complex64(),
        E::Complex128 => dt::complex128(),
        E::Raw { size, .. } => zarrs::array::DataType::new(dt::RawBitsDataType::new(size as usize)),
    }
}

/// The element type of a zarrs data type, as a codec error when it is not a number or bool.
pub(crate) fn element_type(
    codec: &str,
    data_type: &zarrs::array::DataType,
) -> Result<crate::ElementType, CodecError> {
    crate::ElementType::from_zarrs(data_type)
        .map_err(|_| CodecError::Other(format!("{codec}: unsupported data type {data_type:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_dtype_strings() {
        use crate::ElementType as E;
        assert_eq!(numpy_dtype("<i2"), Some(E::Int16));
        assert_eq!(numpy_dtype("|u1"), Some(E::UInt8));
        assert_eq!(numpy_dtype(">f8"), Some(E::Float64));
        assert_eq!(numpy_dtype("float32"), Some(E::Float32));
        assert_eq!(numpy_dtype("|b1"), Some(E::Bool));
        assert_eq!(numpy_dtype("<M8[s]"), None);
    }
}

//! The zfp codecs against streams numcodecs and zarrs' C-backed encoder wrote (fixtures in
//! `codecs/tests/fixtures/`), and hostile streams; the helpers `round_trips.rs` shares.

use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayToBytesCodecTraits, BytesRepresentation, Codec, CodecError, CodecOptions,
};
use zarrs::array::{ArrayBytes, FillValue};
use zfp_rs::{ZfpBitStream, ZfpConfig, ZfpFieldMetadata, ZfpHeaderMask, ZfpScalarType};

use super::config::Mode;
use super::decode::{decode, Params};
use super::{create_zfp, create_zfpy};
use crate::codec::plugins::zarrs_data_type;
use crate::ElementType;

pub(super) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The codec `name` (`numcodecs.zfpy` or `zfp`) with configuration `config` (JSON).
pub(super) fn codec(name: &str, config: &str) -> Arc<dyn ArrayToBytesCodecTraits> {
    let config: Map<String, Value> = serde_json::from_str(config).unwrap();
    let create = if name == "zfp" {
        create_zfp
    } else {
        create_zfpy
    };
    match create(&config).unwrap() {
        Codec::ArrayToBytes(c) => c,
        _ => unreachable!("zfp is an array-to-bytes codec"),
    }
}

pub(super) fn nonzero(shape: &[u64]) -> Vec<NonZeroU64> {
    shape.iter().map(|&d| NonZeroU64::new(d).unwrap()).collect()
}

pub(super) fn encode(
    c: &dyn ArrayToBytesCodecTraits,
    t: ElementType,
    shape: &[u64],
    data: &[u8],
) -> Result<Vec<u8>, CodecError> {
    let fill = FillValue::new(vec![0; t.size()]);
    let dt = zarrs_data_type(t);
    let opts = CodecOptions::default();
    c.encode(
        ArrayBytes::from(data.to_vec()),
        &nonzero(shape),
        &dt,
        &fill,
        &opts,
    )
    .map(|b| b.into_owned())
}

pub(super) fn decode_with(
    c: &dyn ArrayToBytesCodecTraits,
    t: ElementType,
    shape: &[u64],
    enc: &[u8],
) -> Result<Vec<u8>, CodecError> {
    let fill = FillValue::new(vec![0; t.size()]);
    let dt = zarrs_data_type(t);
    let opts = CodecOptions::default();
    let decoded = c.decode(enc.to_vec().into(), &nonzero(shape), &dt, &fill, &opts)?;
    Ok(decoded.into_fixed()?.into_owned())
}

/// A zfpy stream with a full header for a 2x4 float64 chunk holding 0..8,
/// written by `numcodecs.ZFPY().encode(np.arange(8, dtype="<f8").reshape(2, 4))` (mode 4,
/// tolerance -1: numcodecs writes a reversible stream), as hex.
const ZFPY_FIXTURE: &str = include_str!("../../../../tests/fixtures/zfpy_f8_2x4.hex");

#[test]
fn reads_numcodecs_zfpy() {
    let enc = hex(ZFPY_FIXTURE.trim());
    let want: Vec<u8> = (0..8).flat_map(|i| f64::from(i).to_ne_bytes()).collect();
    let got = decode(&enc, ElementType::Float64, &[2, 4], Params::Header).unwrap();
    assert_eq!(got, want);
}

/// `numcodecs.ZFPY().encode(np.sin(np.arange(64, dtype="<f8")).reshape(8, 8))`, as hex
/// (488 bytes), and what numcodecs decodes it to (the input, little-endian float64).
const ZFPY_SIN: &str = include_str!("../../../../tests/fixtures/zfpy_f8_8x8_sin.hex");
const ZFPY_SIN_DECODED: &str =
    include_str!("../../../../tests/fixtures/zfpy_f8_8x8_sin.decoded.hex");

#[test]
fn hostile_streams_are_errors() {
    let f8 = ElementType::Float64;
    let sin = hex(ZFPY_SIN.trim());
    let want = hex(ZFPY_SIN_DECODED.trim());
    assert_eq!(decode(&sin, f8, &[8, 8], Params::Header).unwrap(), want);
    for cut in [0, 4, 8, 12, 100, sin.len() / 2, sin.len() - 16] {
        let r = decode(&sin[..cut], f8, &[8, 8], Params::Header);
        assert!(r.is_err(), "cut {cut} decoded");
    }
    let enc = hex(ZFPY_FIXTURE.trim());
    // The header names a 2x4 field: any other chunk shape or type is refused.
    let lie = decode(&enc, f8, &[64, 64], Params::Header).unwrap_err();
    assert!(
        lie.to_string().contains("header describes a field of"),
        "{lie}"
    );
    assert!(decode(&enc, f8, &[4, 2], Params::Header).is_err());
    assert!(decode(&enc, ElementType::Float32, &[2, 4], Params::Header).is_err());
    // Truncated, empty or garbage streams are refused.
    for cut in [0, 4, 8] {
        assert!(decode(&enc[..cut], f8, &[2, 4], Params::Header).is_err());
    }
    let garbage = decode(&[0xff; 64], f8, &[2, 4], Params::Header).unwrap_err();
    assert!(garbage.to_string().contains("invalid header"), "{garbage}");
    // Without a header, a too-short stream is refused too.
    let short = decode(&[0x55; 8], f8, &[64], Params::Mode(Mode::Reversible));
    assert!(short.is_err());
}

/// zfp-rs reads zeros past a stream's end and reports the words it missed; a stream cut
/// inside its last word (zero-padded when copied) is refused by where decoding ended.
#[test]
fn every_cut_of_a_stream_is_an_error() {
    let f8 = ElementType::Float64;
    let sin = hex(ZFPY_SIN.trim());
    for cut in 0..sin.len() {
        // Cut in the header: a bad or different header; after it: truncated.
        let err = decode(&sin[..cut], f8, &[8, 8], Params::Header).unwrap_err();
        let msg = err.to_string();
        assert!(
            cut < 16 || msg.contains("stream is truncated"),
            "cut {cut}: {msg}"
        );
    }
    // In a misaligned copy of the bytes, too (the stream is then copied into words).
    let mut shifted = vec![0u8];
    shifted.extend_from_slice(&sin);
    assert!(decode(&shifted[1..], f8, &[8, 8], Params::Header).is_ok());
    assert!(decode(&shifted[1..sin.len() - 3], f8, &[8, 8], Params::Header).is_err());
    // Without a header, in every mode (fixed rate ends mid-word; reversible does not).
    let data: Vec<u8> = (0..60)
        .flat_map(|i| (f64::from(i) * 0.3).sin().to_ne_bytes())
        .collect();
    for config in [
        r#"{"mode":"reversible"}"#,
        r#"{"mode":"fixed_rate","rate":2.5}"#,
        r#"{"mode":"fixed_precision","precision":7}"#,
        r#"{"mode":"fixed_accuracy","tolerance":0.01}"#,
    ] {
        let c = codec("zfp", config);
        let enc = encode(&*c, f8, &[6, 10], &data).unwrap();
        for cut in 0..enc.len() {
            assert!(
                decode_with(&*c, f8, &[6, 10], &enc[..cut]).is_err(),
                "{config} cut {cut}"
            );
        }
        // Bytes after the stream are not read.
        let mut longer = enc.clone();
        longer.extend_from_slice(&[0xff; 9]);
        assert_eq!(
            decode_with(&*c, f8, &[6, 10], &longer).unwrap(),
            decode_with(&*c, f8, &[6, 10], &enc).unwrap()
        );
    }
}

#[test]
fn implausible_headers_are_errors() {
    // A valid header whose mode pads every block to 20000 bits, more than any block takes.
    let config = ZfpConfig::expert(20_000, 20_000, 64, -1074).unwrap();
    let meta = ZfpFieldMetadata {
        scalar_type: ZfpScalarType::F64,
        dims: [4, 2, 0, 0],
    };
    let mut stream = ZfpBitStream::new(64).unwrap();
    stream
        .write_header(&config, &meta, ZfpHeaderMask::FULL)
        .unwrap();
    let mut enc = stream.into_bytes().unwrap();
    enc.resize(20_000, 0);
    let err = decode(&enc, ElementType::Float64, &[2, 4], Params::Header).unwrap_err();
    assert!(err.to_string().contains("implausible block size"), "{err}");
}

/// One fixture of `codecs/tests/fixtures/zfp*_*.hex`: what zarrs' encoder (libzfp) wrote for
/// an input, and what libzfp decoded it to.
struct Golden {
    name: String,
    config: String,
    t: ElementType,
    shape: Vec<u64>,
    input: Vec<u8>,
    encoded: Vec<u8>,
    decoded: Vec<u8>,
}

fn golden(text: &str) -> Golden {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {key}"))
            .to_owned()
    };
    Golden {
        name: field("name"),
        config: field("configuration"),
        t: ElementType::from_name(&field("data_type")).unwrap(),
        shape: serde_json::from_str(&field("shape")).unwrap(),
        input: hex(&field("input")),
        encoded: hex(&field("encoded")),
        decoded: hex(&field("decoded")),
    }
}

const GOLDEN: [&str; 8] = [
    include_str!("../../../../tests/fixtures/zfpy_f8_5x7_mode4.hex"),
    include_str!("../../../../tests/fixtures/zfpy_f4_4x4x4_rate12.hex"),
    include_str!("../../../../tests/fixtures/zfpy_i4_3x1x5x2_precision10.hex"),
    include_str!("../../../../tests/fixtures/zfp_i2_2x3x4x5_reversible.hex"),
    include_str!("../../../../tests/fixtures/zfp_u1_17_precision13.hex"),
    include_str!("../../../../tests/fixtures/zfp_u8_5x3x6_rate2.5.hex"),
    include_str!("../../../../tests/fixtures/zfp_f8_1x9_expert.hex"),
    include_str!("../../../../tests/fixtures/zfp_f4_5x7_accuracy.hex"),
];

#[test]
fn encodes_and_decodes_as_libzfp_did() {
    if cfg!(target_endian = "big") {
        return; // zfp's words, and the fixtures' elements, are little-endian
    }
    for text in GOLDEN {
        let g = golden(text);
        let c = codec(&g.name, &g.config);
        let what = format!("{} {} {} {:?}", g.name, g.config, g.t, g.shape);
        assert_eq!(
            encode(&*c, g.t, &g.shape, &g.input).unwrap(),
            g.encoded,
            "{what}"
        );
        assert_eq!(
            decode_with(&*c, g.t, &g.shape, &g.encoded).unwrap(),
            g.decoded,
            "{what}"
        );
        match c.encoded_representation(
            &nonzero(&g.shape),
            &zarrs_data_type(g.t),
            &FillValue::new(vec![0; g.t.size()]),
        ) {
            Ok(BytesRepresentation::BoundedSize(n)) => {
                assert!(g.encoded.len() as u64 <= n, "{what}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

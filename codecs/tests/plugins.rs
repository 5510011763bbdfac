//! The codec plugins (src/codec/plugins/) end to end: zarrs encodes chunks through them (as
//! zarrpipe's writes do), zarrpipe reads them back, and corrupt chunks are clean errors that
//! name the chunk, never panics.

mod common;

use std::sync::Arc;

use common::*;
use zarrpipe_codecs::select::selection::Region;
use zarrpipe_codecs::Error;
use zarrs::array::{Array, ArrayBytes};
use zarrs::filesystem::FilesystemStore;

const SHAPE: [u64; 2] = [4, 6];
const CHUNKS: [u64; 2] = [2, 3];

/// Writes `data` (C order, native-endian, SHAPE) through zarrs' codecs for `codec_list`, then
/// reads it with zarrpipe. Returns the store and what zarrpipe read.
fn round_trip(
    dtype: &str,
    elem: usize,
    fill: &str,
    codec_list: &str,
    data: &[u8],
) -> (TestStore, Vec<u8>) {
    zarrpipe_codecs::codec::harden::install();
    let store = TestStore::new();
    store.array_v3("a", &SHAPE, &CHUNKS, dtype, fill, codec_list);
    let fs = Arc::new(FilesystemStore::new(store.root()).unwrap());
    let array = Array::open(fs, "/a").unwrap();
    for ci in 0..2u64 {
        for cj in 0..2u64 {
            let mut chunk = Vec::new();
            for i in 0..2 {
                let row = (ci * 2 + i) as usize;
                let start = (row * 6 + cj as usize * 3) * elem;
                chunk.extend_from_slice(&data[start..start + 3 * elem]);
            }
            array
                .store_chunk(&[ci, cj], ArrayBytes::from(chunk))
                .unwrap();
        }
    }
    let reader = store.open("a").unwrap();
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    let got = reader.read_region(&region, None).unwrap().to_vec();
    (store, got)
}

fn bytes<T: Copy, const N: usize>(
    values: impl IntoIterator<Item = T>,
    to: fn(T) -> [u8; N],
) -> Vec<u8> {
    values.into_iter().flat_map(to).collect()
}

fn u16s() -> Vec<u8> {
    bytes((0..24u16).map(|i| i * 37 + 5), u16::to_ne_bytes)
}

#[track_caller]
fn assert_corrupt_chunk(store: &TestStore, garbage: &[u8]) {
    store.put("a/c/1/1", garbage);
    let reader = store.open("a").unwrap();
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    match reader.read_region(&region, None) {
        Err(e @ (Error::Corrupt { .. } | Error::Checksum { .. })) => {
            assert!(
                e.key().is_some_and(|k| k.contains("a/c/1/1")),
                "{e} should name the chunk"
            );
        }
        other => panic!("expected a corrupt-chunk error, got {other:?}"),
    }
    // The other chunks still read.
    let part = Region::resolve(&reader.info.shape, &[slice(0, 2), slice(0, 3)]).unwrap();
    reader.read_region(&part, None).unwrap();
}

fn lossless(dtype: &str, elem: usize, codec_list: &str, data: &[u8], garbage: &[&[u8]]) {
    let fill = if dtype == "bool" { "false" } else { "0" };
    let (store, got) = round_trip(dtype, elem, fill, codec_list, data);
    assert_eq!(got, data, "{codec_list}");
    for g in garbage {
        assert_corrupt_chunk(&store, g);
    }
}

const GARBAGE: &[&[u8]] = &[
    b"",
    b"\x01",
    b"\xff\xff\xff\xff\x00\x00\x00\x00",
    &[0x5a; 64],
];

#[test]
fn numcodecs_lz4() {
    let list = codecs(&[BYTES_LE, r#"{"name":"numcodecs.lz4","configuration":{}}"#]);
    lossless("uint16", 2, &list, &u16s(), GARBAGE);
}

#[test]
fn numcodecs_bz2_with_default_level() {
    let list = codecs(&[BYTES_LE, r#"{"name":"numcodecs.bz2","configuration":{}}"#]);
    lossless("uint16", 2, &list, &u16s(), GARBAGE);
}

#[test]
fn numcodecs_zlib_zstd_gzip_blosc_shuffle_with_defaults() {
    for codec in [
        r#"{"name":"numcodecs.zlib","configuration":{}}"#,
        r#"{"name":"numcodecs.zstd","configuration":{}}"#,
        r#"{"name":"numcodecs.gzip","configuration":{}}"#,
        r#"{"name":"numcodecs.blosc","configuration":{"cname":"zstd","shuffle":2}}"#,
        r#"{"name":"numcodecs.shuffle","configuration":{"elementsize":2}}"#,
    ] {
        let list = codecs(&[BYTES_LE, codec]);
        let garbage: &[&[u8]] = if codec.contains("shuffle\",") {
            &[b"\x01"]
        } else {
            GARBAGE
        };
        lossless("uint16", 2, &list, &u16s(), garbage);
    }
}

#[test]
fn numcodecs_delta() {
    let data = bytes((0..24i32).map(|i| i * i - 100), i32::to_ne_bytes);
    let list = codecs(&[
        r#"{"name":"numcodecs.delta","configuration":{"dtype":"<i4","astype":"<i2"}}"#,
        BYTES_LE,
    ]);
    lossless("int32", 4, &list, &data, &[b"", &[1, 2, 3]]);
    let wrong = codecs(&[
        r#"{"name":"numcodecs.delta","configuration":{"dtype":"<f8"}}"#,
        BYTES_LE,
    ]);
    let store = TestStore::new();
    store.array_v3("a", &SHAPE, &CHUNKS, "int32", "0", &wrong);
    store.put("a/c/0/0", &[0; 24]);
    let reader = store.open("a").unwrap();
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    assert!(reader.read_region(&region, None).is_err());
}

#[test]
fn numcodecs_fixedscaleoffset() {
    let data = bytes((0..24).map(|i| f64::from(i) * 0.25 - 2.0), f64::to_ne_bytes);
    let list = codecs(&[
        r#"{"name":"numcodecs.fixedscaleoffset","configuration":{"offset":-2,"scale":4,"dtype":"<f8","astype":"|u1"}}"#,
        BYTES_LE,
    ]);
    lossless("float64", 8, &list, &data, &[b"", &[1, 2, 3, 4, 5, 6, 7]]);
}

#[test]
fn numcodecs_packbits() {
    let data: Vec<u8> = (0..24u8).map(|i| u8::from(i % 3 == 0)).collect();
    let list = codecs(&[
        r#"{"name":"numcodecs.packbits","configuration":{}}"#,
        BYTES_LE,
    ]);
    lossless(
        "bool",
        1,
        &list,
        &data,
        &[b"", b"\x02", b"\x03\xff", b"\x02\xff\xff"],
    );
}

#[test]
fn pcodec() {
    let data = bytes((0..24).map(|i| f32::from(i as u8) * 1.5), f32::to_ne_bytes);
    let list = codecs(&[r#"{"name":"numcodecs.pcodec","configuration":{}}"#]);
    lossless("float32", 4, &list, &data, GARBAGE);
}

/// zarrpipe's pcodec decodes into the chunk's element count: a file of 2^20 elements for a
/// 6-element chunk is refused by its message, where zarrs' own decoder (which would take
/// over without the plugin) inflates the whole file first.
#[test]
fn pcodec_file_longer_than_its_chunk_is_refused_by_the_bounded_decoder() {
    let list = codecs(&[r#"{"name":"numcodecs.pcodec","configuration":{}}"#]);
    let (store, _) = round_trip("uint16", 2, "0", &list, &u16s());
    let big = pco::standalone::simple_compress(&vec![5u16; 1 << 20], &pco::ChunkConfig::default())
        .unwrap();
    store.put("a/c/1/1", &big);
    let reader = store.open("a").unwrap();
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    let err = reader.read_region(&region, None).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("pcodec: stream holds more elements, expected 6"),
        "{err}"
    );
}

#[test]
fn zfpy_and_zfp() {
    let data = bytes((0..24).map(|i| f64::from(i) * 0.5), f64::to_ne_bytes);
    let zfpy = r#"{"name":"numcodecs.zfpy","configuration":{"mode":4}}"#;
    lossless("float64", 8, &codecs(&[zfpy]), &data, GARBAGE);
    // Without a header any long enough bit string is a zfp stream: only short ones are errors.
    let zfp = r#"{"name":"zfp","configuration":{"mode":"reversible"}}"#;
    lossless(
        "float64",
        8,
        &codecs(&[zfp]),
        &data,
        &[b"", b"\x01", &[0xff; 16]],
    );
}

#[test]
fn scale_offset_and_cast_value() {
    let data = bytes(
        (0..24).map(|i| f32::from(i as u8) * 0.25 - 1.0),
        f32::to_ne_bytes,
    );
    let list = codecs(&[
        r#"{"name":"scale_offset","configuration":{"offset":-1,"scale":4}}"#,
        r#"{"name":"cast_value","configuration":{"data_type":"uint8","out_of_range":"clamp"}}"#,
        BYTES_LE,
    ]);
    lossless("float32", 4, &list, &data, &[b"", &[1, 2]]);
    let ints = bytes((0..24i16).map(|i| i * 3 - 30), i16::to_ne_bytes);
    let list = codecs(&[
        r#"{"name":"scale_offset","configuration":{"offset":3,"scale":2}}"#,
        BYTES_LE,
    ]);
    let (store, got) = round_trip("int16", 2, "0", &list, &ints);
    assert_eq!(got, ints);
    // An odd stored value is not a multiple of the scale: an error, as in zarr-python.
    assert_corrupt_chunk(&store, &bytes([1i16; 6], i16::to_le_bytes));
}

#[test]
fn unsupported_cast_target_is_refused_at_open() {
    let store = TestStore::new();
    let list = codecs(&[
        r#"{"name":"cast_value","configuration":{"data_type":"float8_e4m3"}}"#,
        BYTES_LE,
    ]);
    store.array_v3("a", &SHAPE, &CHUNKS, "float32", "0", &list);
    assert!(matches!(store.open("a"), Err(Error::Unsupported(_))));
}

/// A v2 array `a` of (4, 6) `dtype` elements in 2x3 chunks with `filters` and `compressor`
/// (numcodecs JSON), written by zarrs and read back equal by zarrpipe: the reader and the
/// whole-array region.
fn v2_round_trip(
    store: &TestStore,
    dtype: &str,
    filters: &str,
    compressor: &str,
) -> (zarrpipe_codecs::array::Array, Region) {
    let zarray = format!(
        r#"{{"zarr_format":2,"shape":[4,6],"chunks":[2,3],"dtype":"{dtype}","compressor":{compressor},
        "fill_value":0,"filters":{filters},"order":"C"}}"#
    );
    store.put("a/.zarray", zarray.as_bytes());
    let fs = Arc::new(FilesystemStore::new(store.root()).unwrap());
    let array = Array::open(fs, "/a").unwrap();
    // Values every codec tested keeps (quantize with 1 digit keeps sixteenths).
    let data: Vec<u8> = if dtype == "<f4" {
        bytes((0..24).map(|i| f32::from(i as u8) * 0.5), f32::to_ne_bytes)
    } else {
        bytes(0..24i32, i32::to_ne_bytes)
    };
    let full = zarrs::array::ArraySubset::new_with_shape(vec![4, 6]);
    array
        .store_array_subset(&full, ArrayBytes::from(data.clone()))
        .unwrap();
    let reader = store.open("a").unwrap();
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    assert_eq!(
        reader.read_region(&region, None).unwrap().to_vec(),
        data,
        "{filters} {compressor}"
    );
    (reader, region)
}

#[test]
fn v2_filters_and_compressors_by_numcodecs_id() {
    zarrpipe_codecs::codec::harden::install();
    let cases = [
        (
            r#"[{"id":"delta","dtype":"<i4"}]"#,
            r#"{"id":"lz4","acceleration":1}"#,
        ),
        (
            r#"[{"id":"bitround","keepbits":10}]"#,
            r#"{"id":"bz2","level":1}"#,
        ),
        (
            r#"[{"id":"fixedscaleoffset","offset":0,"scale":1,"dtype":"<i4","astype":"|u1"}]"#,
            "null",
        ),
    ];
    for (filters, compressor) in cases {
        let dtype = if filters.contains("bitround") {
            "<f4"
        } else {
            "<i4"
        };
        let store = TestStore::new();
        let (reader, region) = v2_round_trip(&store, dtype, filters, compressor);
        store.put("a/1.1", b"\x10\x00\x00\x00garbage");
        assert!(reader.read_region(&region, None).is_err());
    }
}

/// zfpy is a v2 compressor but an array-to-bytes codec: its v2 arrays read and write as
/// zarr-python's (zarrs' v2-to-v3 conversion, which knows this only with its zfp feature
/// off here, must not put a `bytes` codec before it: array/metadata.rs).
#[test]
fn v2_zfpy_by_numcodecs_id() {
    zarrpipe_codecs::codec::harden::install();
    let cases = [
        (
            "<f4",
            "null",
            r#"{"id":"zfpy","mode":4,"tolerance":-1,"rate":-1,"precision":-1}"#,
        ),
        (
            "<i4",
            "null",
            r#"{"id":"zfpy","mode":5,"tolerance":-1,"rate":-1,"precision":-1}"#,
        ),
        (
            "<i4",
            r#"[{"id":"delta","dtype":"<i4"}]"#,
            r#"{"id":"zfpy","mode":5}"#,
        ),
        (
            "<f4",
            "null",
            r#"{"id":"zfpy","mode":2,"rate":16,"tolerance":-1,"precision":-1}"#,
        ),
    ];
    for (dtype, filters, compressor) in cases {
        let store = TestStore::new();
        let (reader, region) = v2_round_trip(&store, dtype, filters, compressor);
        let chunk = std::fs::read(store.root().join("a/1.1")).unwrap();
        assert_eq!(&chunk[..4], b"zfp\x05", "a full zfp header");
        store.put("a/1.1", &chunk[..chunk.len() / 2]);
        match reader.read_region(&region, None) {
            Err(Error::Corrupt { .. }) => {}
            other => panic!("{filters} {compressor}: expected a corrupt chunk, got {other:?}"),
        }
    }
}

#[test]
fn v2_checksums_astype_quantize_lzma_by_numcodecs_id() {
    zarrpipe_codecs::codec::harden::install();
    let cases = [
        ("<i4", "null", r#"{"id":"crc32"}"#),
        ("<i4", "null", r#"{"id":"crc32","location":"end"}"#),
        ("<i4", "null", r#"{"id":"crc32c"}"#),
        ("<i4", "null", r#"{"id":"crc32c","location":"start"}"#),
        (
            "<i4",
            "null",
            r#"{"id":"jenkins_lookup3","initval":0,"prefix":null}"#,
        ),
        (
            "<i4",
            "null",
            r#"{"id":"lzma","format":1,"check":-1,"preset":null,"filters":null}"#,
        ),
        (
            "<i4",
            r#"[{"id":"astype","encode_dtype":"<i2","decode_dtype":"<i4"}]"#,
            "null",
        ),
        (
            "<f4",
            r#"[{"id":"quantize","digits":1,"dtype":"<f4","astype":"<f4"}]"#,
            r#"{"id":"crc32"}"#,
        ),
    ];
    for (dtype, filters, compressor) in cases {
        let store = TestStore::new();
        let (reader, region) = v2_round_trip(&store, dtype, filters, compressor);
        let what = format!("{filters} {compressor}");
        let one = Region::resolve(&reader.info.shape, &[slice(3, 4), slice(4, 5)]).unwrap();
        let file = store.root().join("a/1.1");
        let mut chunk = std::fs::read(&file).unwrap();
        if compressor.contains("crc32") || compressor.contains("jenkins") {
            chunk[5] ^= 0x10;
            std::fs::write(&file, &chunk).unwrap();
            for r in [&region, &one] {
                match reader.read_region(r, None) {
                    Err(Error::Checksum { key, .. }) => assert!(key.contains("a/1.1"), "{what}"),
                    other => panic!("{what}: expected a checksum error, got {other:?}"),
                }
            }
        }
        store.put("a/1.1", b"\x10\x00\x00\x00garbage");
        assert!(reader.read_region(&one, None).is_err(), "{what}");
    }
}

#[test]
fn adler32_and_fletcher32_are_checked_on_partial_reads() {
    for codec in [
        r#"{"name":"numcodecs.adler32"}"#,
        r#"{"name":"numcodecs.fletcher32"}"#,
    ] {
        let list = codecs(&[BYTES_LE, codec]);
        let (store, got) = round_trip("uint16", 2, "0", &list, &u16s());
        assert_eq!(got, u16s());
        let file = store.root().join("a/c/1/1");
        let mut chunk = std::fs::read(&file).unwrap();
        chunk[if codec.contains("adler") { 5 } else { 1 }] ^= 0x10;
        std::fs::write(&file, &chunk).unwrap();
        let reader = store.open("a").unwrap();
        // One element of the damaged chunk: a partial read, checked all the same.
        let one = Region::resolve(&reader.info.shape, &[slice(3, 4), slice(4, 5)]).unwrap();
        assert!(reader.read_region(&one, None).is_err(), "{codec}");
        store.put("a/c/1/1", b"");
        assert!(reader.read_region(&one, None).is_err(), "{codec}");
    }
}

#[test]
fn blosc_frame_smaller_than_its_typesize() {
    // zarr.create_array(shape=(3,), chunks=(1,), dtype="int16",
    //     compressors=[BloscCodec(cname="lz4", typesize=4, shuffle="shuffle")])[...] = [-3, 7, 1000]
    // wrote this as chunk c/0: 2 bytes of typesize 4, blocksize 1 (c-blosc's choice).
    let frame = [
        0x02, 0x01, 0x33, 0x04, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00,
        0x00, 0xfd, 0xff,
    ];
    let blosc = r#"{"name":"blosc","configuration":{"typesize":4,"cname":"lz4","clevel":5,"shuffle":"shuffle","blocksize":0}}"#;
    let store = TestStore::new();
    store.array_v3("a", &[3], &[1], "int16", "0", &codecs(&[BYTES_LE, blosc]));
    store.put("a/c/0", &frame);
    let reader = store.open("a").unwrap();
    assert!(
        reader.fallback_reason().is_none(),
        "zarrpipe's own blosc decoder reads it"
    );
    let region = Region::resolve(&reader.info.shape, &[]).unwrap();
    let got = reader.read_region(&region, None).unwrap();
    assert_eq!(&got[..2], &(-3i16).to_ne_bytes());
    assert_eq!(&got[2..], &[0; 4]);
}

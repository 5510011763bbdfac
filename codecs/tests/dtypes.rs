//! The engine's data types beyond numbers: datetimes, fixed-length strings and bytes and
//! records created, written and read back as opaque elements (byte-swapped where stored
//! big-endian), fill values of missing chunks, and variable-length strings and bytes read
//! and written chunk by chunk, with damaged vlen chunks refused naming the chunk.

mod common;

use std::sync::Arc;

use common::{slice, TestStore};
use serde_json::{json, Value};
use zarrpipe_codecs::array::create::{create_array, ArraySpec};
use zarrpipe_codecs::array::variable::{VarData, Variable};
use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::layout::placement::c_strides;
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::store::Store;
use zarrpipe_codecs::write::SrcPtr;
use zarrpipe_codecs::{ElementType, Error};

fn local(ts: &TestStore) -> Arc<Store> {
    Arc::new(Store::open_local(ts.root()).unwrap())
}

fn spec(
    zarr_format: u8,
    data_type: Value,
    fill: Value,
    shape: &[u64],
    chunks: &[u64],
) -> ArraySpec {
    ArraySpec::from_json(
        &json!({"shape": shape, "chunks": chunks, "data_type": data_type, "fill_value": fill,
                "zarr_format": zarr_format})
        .to_string(),
    )
    .unwrap()
}

fn write(array: &Array, selectors: &[AxisSelector], bytes: &[u8]) {
    let region = Region::resolve(&array.info.shape, selectors).unwrap();
    let strides = c_strides(&region.extent(), array.info.dtype.size());
    // SAFETY: `bytes` outlives the write and is not modified during it.
    let src = unsafe { SrcPtr::new(bytes.as_ptr(), bytes.len()) };
    let items = array.plan_write(&region, &strides, 0).unwrap();
    array.write_chunks(&items, &src, None, false, None).unwrap();
}

fn read_all(array: &Array) -> Vec<u8> {
    array
        .read_region(&Region::all(&array.info.shape), None)
        .unwrap()
        .to_vec()
}

#[test]
fn datetimes_round_trip_with_nat_fill_in_both_formats() {
    let ts = TestStore::new();
    for (fmt, dt) in [
        (2, json!(">M8[10s]")),
        (
            3,
            json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 10}}),
        ),
    ] {
        let path = format!("t{fmt}");
        let a = create_array(
            &local(&ts),
            &path,
            &spec(fmt, dt, json!("NaT"), &[5], &[2]),
            false,
        )
        .unwrap();
        assert_eq!(a.info.dtype, ElementType::Int64);
        let numpy = &a.info.numpy_type.as_ref().unwrap().numpy;
        assert!(numpy.as_str().unwrap().ends_with("M8[10s]"), "{numpy}");
        // Elements 0..2 written, the rest missing: NaT (i64::MIN).
        let vals: Vec<u8> = [7i64, -3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        write(&a, &[slice(0, 2)], &vals);
        let got: Vec<i64> = read_all(&a)
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![7, -3, i64::MIN, i64::MIN, i64::MIN]);
    }
}

#[test]
fn utf32_strings_swap_code_points_when_big_endian() {
    let ts = TestStore::new();
    let s = ArraySpec::from_json(
        &json!({"shape": [3], "chunks": [2], "data_type": ">U2", "fill_value": "z",
                "zarr_format": 2, "compressors": []})
        .to_string(),
    )
    .unwrap();
    let a = create_array(&local(&ts), "u", &s, false).unwrap();
    assert_eq!(a.info.dtype, ElementType::Raw { size: 8, swap: 4 });
    let text: Vec<u8> = "aéb€"
        .chars()
        .flat_map(|c| u32::from(c).to_ne_bytes())
        .collect();
    write(&a, &[slice(0, 2)], &text);
    // Stored big-endian, uncompressed: 'a' is 00 00 00 61.
    let raw = std::fs::read(ts.root().join("u/0")).unwrap();
    assert_eq!(&raw[..4], &[0, 0, 0, 0x61]);
    let got = read_all(&a);
    assert_eq!(&got[..16], &text[..]);
    let z: Vec<u8> = ['z', '\0']
        .iter()
        .flat_map(|c| u32::from(*c).to_ne_bytes())
        .collect();
    assert_eq!(
        &got[16..],
        &z[..],
        "the missing chunk reads as the fill value"
    );
}

#[test]
fn bytes_and_records_are_opaque_elements() {
    let ts = TestStore::new();
    let record = json!({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int16"}, {"name": "b", "data_type":
        {"name": "null_terminated_bytes", "configuration": {"length_bytes": 3}}}]}});
    let fill = json!({"a": 258, "b": "eHk="});
    let a = create_array(&local(&ts), "r", &spec(3, record, fill, &[3], &[2]), false).unwrap();
    assert_eq!(a.info.dtype, ElementType::Raw { size: 5, swap: 1 });
    let rec: Vec<u8> = [1i16.to_ne_bytes().as_slice(), b"abc"].concat();
    write(&a, &[slice(0, 1)], &rec);
    let got = read_all(&a);
    let fill: Vec<u8> = [258i16.to_ne_bytes().as_slice(), b"xy\0"].concat();
    assert_eq!(got, [rec.clone(), fill.clone(), fill].concat());
    let s = spec(2, json!("|S4"), json!("cQ=="), &[2], &[2]);
    let b = create_array(&local(&ts), "s", &s, false).unwrap();
    assert_eq!(read_all(&b), b"q\0\0\0q\0\0\0");
}

#[test]
fn bad_fill_values_are_argument_errors() {
    let err = ArraySpec::from_json(
        &json!({"shape": [2], "chunks": [2], "data_type": "<U1", "fill_value": "too long",
                "zarr_format": 2})
        .to_string(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// A v3 `string` array (or v2 `|O` + `vlen-bytes`), written by hand: metadata only.
fn vlen_array(ts: &TestStore, text: bool) -> Array {
    let meta = if text {
        json!({"zarr_format": 3, "node_type": "array", "shape": [5], "data_type": "string",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
               "chunk_key_encoding": {"name": "default"}, "fill_value": "-",
               "codecs": [{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]})
    } else {
        json!({"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": "|O",
               "fill_value": "AA==", "order": "C", "compressor": null,
               "filters": [{"id": "vlen-bytes"}]})
    };
    let name = if text { "v/zarr.json" } else { "v/.zarray" };
    ts.put(name, meta.to_string().as_bytes());
    Array::open(local(ts), "v").unwrap()
}

fn var(items: &[&[u8]]) -> VarData {
    let mut d = VarData {
        shape: vec![items.len() as u64],
        ..VarData::default()
    };
    for i in items {
        d.offsets.push(d.bytes.len());
        d.bytes.extend_from_slice(i);
    }
    d.offsets.push(d.bytes.len());
    d
}

#[test]
fn variable_length_arrays_read_and_write_chunk_by_chunk() {
    for text in [true, false] {
        let ts = TestStore::new();
        let a = vlen_array(&ts, text);
        let kind = if text {
            Variable::Utf8
        } else {
            Variable::Bytes
        };
        assert_eq!(a.info.variable, Some(kind));
        let region = Region::resolve(&a.info.shape, &[slice(1, 4)]).unwrap();
        a.write_variable(&region, &var(&[b"ab", b"", "é".as_bytes()]), false)
            .unwrap();
        let all = a.read_variable(&Region::all(&a.info.shape)).unwrap();
        let fill: &[u8] = if text { b"-" } else { b"\0" };
        let want: Vec<&[u8]> = vec![fill, b"ab", b"", "é".as_bytes(), fill];
        assert_eq!((0..5).map(|i| all.get(i)).collect::<Vec<_>>(), want);
        // The fixed-size paths refuse it.
        assert!(matches!(
            a.read_region(&Region::all(&a.info.shape), None),
            Err(Error::Unsupported(_))
        ));
        // A chunk whose first length runs past its end: a DecodeError naming the chunk
        // (zarrs' own vlen decoders, without zarrpipe's, would panic slicing past the end).
        let key = a.chunk_key(&[1]);
        let file = key.trim_start_matches('/');
        let stored = std::fs::read(ts.root().join(file)).unwrap();
        let mut raw = if text {
            zstd::decode_all(&stored[..]).unwrap()
        } else {
            stored
        };
        raw[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        ts.put(file, &if text { common::zstd(&raw) } else { raw });
        let err = a.read_variable(&region).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(file), "{err}");
    }
}

/// A vlen chunk under numcodecs' adler32 or fletcher32, read in part: zarrs reads a part of a
/// chunk through the checksum's partial decoder, which strips the checksum unchecked;
/// zarrpipe's checksum codecs decode the chunk whole, so a changed byte of a string is a
/// checksum error, not a wrong string.
#[test]
fn checksums_under_vlen_chunks_are_checked_on_partial_reads() {
    for checksum in ["numcodecs.adler32", "numcodecs.fletcher32"] {
        let ts = TestStore::new();
        let meta = json!({"zarr_format": 3, "node_type": "array", "shape": [4],
            "data_type": "string", "fill_value": "",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
            "chunk_key_encoding": {"name": "default"},
            "codecs": [{"name": "vlen-utf8"}, {"name": checksum}]});
        ts.put("v/zarr.json", meta.to_string().as_bytes());
        let a = Array::open(local(&ts), "v").unwrap();
        let all = Region::all(&a.info.shape);
        a.write_variable(&all, &var(&[b"ab", b"cd", b"zzzz", b"ef"]), false)
            .unwrap();
        let file = a.chunk_key(&[1]).trim_start_matches('/').to_owned();
        let mut raw = std::fs::read(ts.root().join(&file)).unwrap();
        let at = raw.windows(4).position(|w| w == b"zzzz").unwrap();
        raw[at] = b'y';
        ts.put(&file, &raw);
        let part = Region::resolve(&a.info.shape, &[slice(2, 3)]).unwrap();
        let read = a.read_variable(&part);
        assert!(
            matches!(read, Err(Error::Checksum { .. } | Error::Corrupt { .. })),
            "{checksum}: {:?}",
            read.map(|d| d.get(0).to_vec())
        );
    }
}

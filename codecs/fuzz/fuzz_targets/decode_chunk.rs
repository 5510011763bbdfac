//! Fuzzes the chunk decode path: a small 2-D array with one of several codec chains (plain,
//! zstd, gzip, blosc, crc32c, sharded with checksummed index, nested), whose chunks are the
//! fuzzer's bytes — raw, or validly encoded and then corrupted, so both the framing checks
//! and the decoders' insides are reached. Any panic or abort is a bug; errors are fine.

#![no_main]

use std::io::Write;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::store::Store;

const LE: &str = r#"{"name":"bytes","configuration":{"endian":"little"}}"#;
const BE: &str = r#"{"name":"bytes","configuration":{"endian":"big"}}"#;
const ZSTD: &str = r#"{"name":"zstd","configuration":{"level":1,"checksum":false}}"#;
const GZIP: &str = r#"{"name":"gzip","configuration":{"level":1}}"#;
const BLOSC: &str = r#"{"name":"blosc","configuration":{"cname":"lz4","clevel":1,"shuffle":"shuffle","typesize":2,"blocksize":0}}"#;
const CRC: &str = r#"{"name":"crc32c"}"#;
const TRANSPOSE: &str = r#"{"name":"transpose","configuration":{"order":[1,0]}}"#;

/// (codecs JSON, how to encode a payload into a chunk)
fn chain(which: u8, inner: [u64; 2]) -> (String, Encoding) {
    let shard = |codecs: &str, index_at: &str| {
        format!(
            r#"[{{"name":"sharding_indexed","configuration":{{"chunk_shape":{inner:?},"codecs":{codecs},"index_codecs":[{LE},{CRC}],"index_location":"{index_at}"}}}}]"#
        )
    };
    match which % 10 {
        0 => (format!("[{LE}]"), Encoding::Raw),
        1 => (format!("[{BE}]"), Encoding::Raw),
        2 => (format!("[{LE},{ZSTD}]"), Encoding::Zstd),
        3 => (format!("[{LE},{GZIP}]"), Encoding::Gzip),
        4 => (format!("[{LE},{BLOSC}]"), Encoding::Raw),
        5 => (format!("[{LE},{CRC}]"), Encoding::Crc),
        6 => (format!("[{TRANSPOSE},{LE},{ZSTD},{CRC}]"), Encoding::ZstdCrc),
        7 => (shard(&format!("[{LE},{CRC}]"), "end"), Encoding::Raw),
        8 => (shard(&format!("[{LE},{ZSTD}]"), "start"), Encoding::Raw),
        _ => (
            shard(&shard(&format!("[{LE}]"), "end"), "end").replacen(&format!("{inner:?}"), "[2,2]", 1),
            Encoding::Raw,
        ),
    }
}

#[derive(Clone, Copy)]
enum Encoding {
    Raw,
    Zstd,
    Gzip,
    Crc,
    ZstdCrc,
}

fn encode(enc: Encoding, payload: &[u8]) -> Vec<u8> {
    let crc = |mut v: Vec<u8>| {
        let c = crc32c::crc32c(&v);
        v.extend_from_slice(&c.to_le_bytes());
        v
    };
    match enc {
        Encoding::Raw => payload.to_vec(),
        Encoding::Zstd => zstd::bulk::compress(payload, 1).unwrap_or_default(),
        Encoding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            let _ = e.write_all(payload);
            e.finish().unwrap_or_default()
        }
        Encoding::Crc => crc(payload.to_vec()),
        Encoding::ZstdCrc => crc(zstd::bulk::compress(payload, 1).unwrap_or_default()),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (head, payload) = data.split_at(6);
    let chunk = [1 + u64::from(head[1] % 6), 1 + u64::from(head[2] % 6)];
    let inner = [1.max(chunk[0] / 2), 1.max(chunk[1] / 2)];
    let chunk = [inner[0] * (chunk[0] / inner[0]), inner[1] * (chunk[1] / inner[1])];
    let shape = [chunk[0] * 2 - 1, chunk[1] + 1];
    let (codecs, encoding) = chain(head[0], inner);
    let mut bytes = encode(if head[3] & 1 == 0 { Encoding::Raw } else { encoding }, payload);
    // Corrupt a validly encoded chunk: flip one byte, or cut it short.
    if !bytes.is_empty() && head[3] & 2 != 0 {
        let at = usize::from(head[4]) % bytes.len();
        bytes[at] ^= head[5] | 1;
    }
    if head[3] & 4 != 0 {
        bytes.truncate(usize::from(head[4]));
    }
    let metadata = format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":{shape:?},"data_type":"uint16",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":{chunk:?}}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":7,"codecs":{codecs}}}"#
    );
    let store = Store::in_memory([
        ("a/zarr.json".to_string(), metadata.into_bytes()),
        ("a/c/0/0".to_string(), bytes.clone()),
        ("a/c/1/1".to_string(), bytes),
    ]);
    let Ok(reader) = Array::open(Arc::new(store), "a") else {
        return;
    };
    if reader.fallback_reason().is_some() {
        return; // zarrs' own decoder: not this target's subject (the binding catches its panics)
    }
    let part = [
        AxisSelector::Slice { start: Some(1), stop: None, step: None },
        AxisSelector::Index(i64::from(head[5] % 3)),
    ];
    for sel in [&[][..], &part[..]] {
        if let Ok(region) = Region::resolve(&reader.info.shape, sel) {
            if let Ok(out) = reader.read_region(&region, None) {
                assert_eq!(out.len() as u64, region.num_elements() * 2);
            }
        }
    }
    let _ = reader.read_chunks(&[vec![0, 0], vec![1, 1]], None);
});

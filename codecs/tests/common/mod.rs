//! Builds small Zarr stores by hand (metadata JSON and chunk bytes) so tests control every
//! byte, including the broken ones.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::store::Store;

pub struct TestStore {
    pub dir: tempfile::TempDir,
}

impl TestStore {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn put(&self, key: &str, bytes: &[u8]) {
        let path = self.root().join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// Writes a v3 array's zarr.json.
    pub fn array_v3(
        &self,
        path: &str,
        shape: &[u64],
        chunks: &[u64],
        dtype: &str,
        fill: &str,
        codecs: &str,
    ) {
        let json = format!(
            r#"{{"zarr_format":3,"node_type":"array","shape":{shape:?},"data_type":"{dtype}",
            "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":{chunks:?}}}}},
            "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
            "fill_value":{fill},"codecs":{codecs},"attributes":{{"units":"K"}}}}"#
        );
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        self.put(&format!("{prefix}zarr.json"), json.as_bytes());
    }

    pub fn open(&self, path: &str) -> zarrpipe_codecs::Result<Array> {
        Array::open(Arc::new(Store::open_local(self.root())?), path)
    }
}

pub const BYTES_LE: &str = r#"{"name":"bytes","configuration":{"endian":"little"}}"#;
pub const BYTES_BE: &str = r#"{"name":"bytes","configuration":{"endian":"big"}}"#;
pub const ZSTD: &str = r#"{"name":"zstd","configuration":{"level":3,"checksum":false}}"#;
pub const GZIP: &str = r#"{"name":"gzip","configuration":{"level":1}}"#;
pub const CRC32C: &str = r#"{"name":"crc32c"}"#;

pub fn codecs(list: &[&str]) -> String {
    format!("[{}]", list.join(","))
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(data, 3).unwrap()
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn with_crc32c(mut data: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&data);
    data.extend_from_slice(&crc.to_le_bytes());
    data
}

pub fn u16_le(values: impl IntoIterator<Item = u16>) -> Vec<u8> {
    values.into_iter().flat_map(u16::to_le_bytes).collect()
}

pub fn as_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .collect()
}

/// Reads `selectors` of `reader` and returns the values as u16.
pub fn read_u16(reader: &Array, selectors: &[AxisSelector]) -> zarrpipe_codecs::Result<Vec<u16>> {
    let region = Region::resolve(&reader.info.shape, selectors)?;
    Ok(as_u16(&reader.read_region(&region, None)?))
}

pub fn slice(start: i64, stop: i64) -> AxisSelector {
    AxisSelector::Slice {
        start: Some(start),
        stop: Some(stop),
        step: None,
    }
}

/// The value at (i, j) of the test pattern.
pub fn pattern(i: u64, j: u64) -> u16 {
    (i * 100 + j) as u16
}

/// The C-order bytes of chunk (ci, cj) of a 2-D pattern array, padded to the full chunk.
pub fn pattern_chunk(ci: u64, cj: u64, chunk: [u64; 2], big_endian: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..chunk[0] {
        for j in 0..chunk[1] {
            let v = pattern(ci * chunk[0] + i, cj * chunk[1] + j);
            out.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
    }
    out
}

/// `n` incompressible values (xorshift32), so a zstd frame of them is as large as they are.
pub fn incompressible_u16(n: usize) -> Vec<u16> {
    let mut x = 0x9E37_79B9u32;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u16
        })
        .collect()
}

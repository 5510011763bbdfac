//! Engine throughput (criterion, bytes per second of decoded output): decode one chunk, read
//! a whole array, read inner chunks of a shard — uncompressed, zstd and blosc.
//!
//!     cargo bench -p zarrpipe-codecs --bench engine
//!
//! The stores are written by hand here (metadata JSON and chunk bytes) into a temporary
//! directory, so the bench needs nothing but this crate. The data is a smooth field plus
//! noise, which compresses about as much as real images do (not zeros).

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::process::pool;
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::store::Store;

/// Array side (elements per axis) and chunk side: 256³ uint16 (32 MiB) in 128³ chunks.
const SIDE: u64 = 256;
const CHUNK: u64 = 128;
/// Inner chunk side of the sharded variant (its shards are the 128³ chunks).
const INNER: u64 = 32;

#[derive(Clone, Copy)]
enum Codec {
    Uncompressed,
    Zstd,
    Blosc,
}

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Self::Uncompressed => "uncompressed",
            Self::Zstd => "zstd",
            Self::Blosc => "blosc",
        }
    }

    fn json(self) -> &'static str {
        match self {
            Self::Uncompressed => "",
            Self::Zstd => r#",{"name":"zstd","configuration":{"level":3,"checksum":false}}"#,
            Self::Blosc => {
                r#",{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":2,"blocksize":0}}"#
            }
        }
    }

    fn encode(self, raw: &[u8]) -> Vec<u8> {
        match self {
            Self::Uncompressed => raw.to_vec(),
            Self::Zstd => zstd::bulk::compress(raw, 3).expect("zstd"),
            Self::Blosc => blosc_lz4(raw),
        }
    }
}

fn blosc_lz4(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; raw.len() + 16];
    // SAFETY: both buffers are valid for the lengths passed; blosc writes at most `out.len()`.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            5,
            1,
            2,
            raw.len(),
            raw.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            out.len(),
            c"lz4".as_ptr(),
            0,
            1,
        )
    };
    assert!(n > 0, "blosc compression failed");
    out.truncate(n as usize);
    out
}

/// Value at (z, y, x): smooth structure plus deterministic noise, like a microscopy volume.
fn value(z: u64, y: u64, x: u64) -> u16 {
    let (fz, fy, fx) = (z as f32 / 40.0, y as f32 / 55.0, x as f32 / 70.0);
    let smooth = 1500.0 + 800.0 * (fz.sin() * fy.cos()) + 500.0 * (fx + fz).sin();
    let mut h = z.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ y.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ x;
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let noise = (h >> 58) as f32 - 32.0;
    (smooth + noise) as u16
}

/// Little-endian C-order bytes of the block of side `side` starting at `origin`.
fn block(origin: [u64; 3], side: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((side * side * side * 2) as usize);
    for z in 0..side {
        for y in 0..side {
            for x in 0..side {
                let v = value(origin[0] + z, origin[1] + y, origin[2] + x);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

fn put(root: &Path, key: &str, bytes: &[u8]) {
    let path = root.join(key);
    std::fs::create_dir_all(path.parent().expect("key has a parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn metadata(codecs: &str) -> String {
    format!(
        r#"{{"zarr_format":3,"node_type":"array","shape":[{SIDE},{SIDE},{SIDE}],"data_type":"uint16",
        "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{CHUNK},{CHUNK},{CHUNK}]}}}},
        "chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},
        "fill_value":0,"codecs":{codecs}}}"#
    )
}

const BYTES_LE: &str = r#"{"name":"bytes","configuration":{"endian":"little"}}"#;

fn chunk_origins(side: u64, step: u64) -> Vec<[u64; 3]> {
    let n = side / step;
    let mut v = Vec::new();
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                v.push([i * step, j * step, k * step]);
            }
        }
    }
    v
}

/// A regular array: one file per 128³ chunk.
fn write_chunked(root: &Path, codec: Codec) {
    let dir = root.join(codec.name());
    put(
        &dir,
        "zarr.json",
        metadata(&format!("[{BYTES_LE}{}]", codec.json())).as_bytes(),
    );
    for o in chunk_origins(SIDE, CHUNK) {
        let key = format!("c/{}/{}/{}", o[0] / CHUNK, o[1] / CHUNK, o[2] / CHUNK);
        put(&dir, &key, &codec.encode(&block(o, CHUNK)));
    }
}

/// A sharded array: 128³ shards of 32³ zstd inner chunks, index (with crc32c) at the end.
fn write_sharded(root: &Path) {
    let dir = root.join("zstd-sharded");
    let sharding = format!(
        r#"[{{"name":"sharding_indexed","configuration":{{"chunk_shape":[{INNER},{INNER},{INNER}],
        "codecs":[{BYTES_LE}{}],"index_codecs":[{BYTES_LE},{{"name":"crc32c"}}],
        "index_location":"end"}}}}]"#,
        Codec::Zstd.json()
    );
    put(&dir, "zarr.json", metadata(&sharding).as_bytes());
    for shard in chunk_origins(SIDE, CHUNK) {
        let mut data = Vec::new();
        let mut index = Vec::new();
        for inner in chunk_origins(CHUNK, INNER) {
            let origin = [
                shard[0] + inner[0],
                shard[1] + inner[1],
                shard[2] + inner[2],
            ];
            let encoded = Codec::Zstd.encode(&block(origin, INNER));
            index.extend_from_slice(&(data.len() as u64).to_le_bytes());
            index.extend_from_slice(&(encoded.len() as u64).to_le_bytes());
            data.extend_from_slice(&encoded);
        }
        let crc = crc32c::crc32c(&index);
        data.extend_from_slice(&index);
        data.extend_from_slice(&crc.to_le_bytes());
        let key = format!(
            "c/{}/{}/{}",
            shard[0] / CHUNK,
            shard[1] / CHUNK,
            shard[2] / CHUNK
        );
        put(&dir, &key, &data);
    }
}

fn open(root: &Path, name: &str) -> Array {
    let store = Arc::new(Store::open_local(root).expect("store"));
    Array::open(store, name).expect("open array")
}

fn region(start: u64, side: u64) -> Region {
    let s = |a: u64| AxisSelector::Slice {
        start: Some(a as i64),
        stop: Some((a + side) as i64),
        step: None,
    };
    Region::resolve(&[SIDE; 3], &[s(start), s(start), s(start)]).expect("region")
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let codecs = [Codec::Uncompressed, Codec::Zstd, Codec::Blosc];
    for codec in codecs {
        write_chunked(root, codec);
    }
    write_sharded(root);

    let chunk_bytes = CHUNK.pow(3) * 2;
    let mut g = c.benchmark_group("decode_chunk");
    g.throughput(Throughput::Bytes(chunk_bytes));
    for codec in codecs {
        let array = open(root, codec.name());
        g.bench_function(BenchmarkId::from_parameter(codec.name()), |b| {
            b.iter(|| {
                pool::install(|| array.read_chunks(&[vec![1, 0, 1]], None))
                    .unwrap()
                    .unwrap()
            });
        });
    }
    g.finish();

    let mut g = c.benchmark_group("read_all");
    g.throughput(Throughput::Bytes(SIDE.pow(3) * 2));
    let all = Region::all(&[SIDE; 3]);
    for name in ["uncompressed", "zstd", "blosc", "zstd-sharded"] {
        let array = open(root, name);
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                pool::install(|| array.read_region(&all, None))
                    .unwrap()
                    .unwrap()
            });
        });
    }
    g.finish();

    // One inner chunk of a shard (index read + one inner chunk), then a 2×2×2 block of them.
    let mut g = c.benchmark_group("read_inner_chunks");
    let sharded = open(root, "zstd-sharded");
    for n in [1, 2] {
        let r = region(INNER, n * INNER);
        g.throughput(Throughput::Bytes((n * INNER).pow(3) * 2));
        g.bench_function(
            BenchmarkId::new("zstd-sharded", format!("{n}x{n}x{n}")),
            |b| {
                b.iter(|| {
                    pool::install(|| sharded.read_region(&r, None))
                        .unwrap()
                        .unwrap()
                });
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = engine;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = benches
}
criterion_main!(engine);

//! A large zstd chunk read by itself overlaps its file read (one pool thread) with its
//! decoding (the other). Its own test binary with one test, so no other read runs at the
//! same time: the path is taken only when the read has the pool to itself.

mod common;

use common::*;
use zarrpipe_codecs::process::pool;
use zarrpipe_codecs::read::overlapped_reads;
use zarrpipe_codecs::Error;

/// 1024 x 2048 uint16 in one 4 MiB chunk, stored as `chunk`.
fn store_with(chunk: &[u8]) -> TestStore {
    let store = TestStore::new();
    store.array_v3(
        "a",
        &[1024, 2048],
        &[1024, 2048],
        "uint16",
        "0",
        &codecs(&[BYTES_LE, ZSTD]),
    );
    store.put("a/c/0/0", chunk);
    store
}

/// Reads the whole array on the pool, as the Python binding does for a large chunk;
/// returns the values and whether this read took the overlapped path.
fn read(store: &TestStore) -> (zarrpipe_codecs::Result<Vec<u16>>, bool) {
    let before = overlapped_reads();
    let got = pool::install(|| read_u16(&store.open("a")?, &[])).unwrap();
    (got, overlapped_reads() > before)
}

#[test]
fn large_zstd_chunk_read_while_it_decodes() {
    pool::set_num_threads(2).unwrap();
    // Incompressible values: the frame is over 4 MiB, so it arrives in several steps.
    let values = incompressible_u16(1024 * 2048);
    let raw = u16_le(values.iter().copied());
    let frame = zstd(&raw);
    assert!(frame.len() > 4 << 20);

    let (got, overlapped) = read(&store_with(&frame));
    assert!(
        overlapped,
        "a lone 4 MiB zstd chunk should overlap its read"
    );
    assert_eq!(got.unwrap(), values);

    // Two frames back to back; a frame that does not say its size (a streaming encoder).
    let mut two = zstd(&raw[..raw.len() / 2]);
    two.extend_from_slice(&zstd(&raw[raw.len() / 2..]));
    let no_size = zstd::stream::encode_all(&raw[..], 3).unwrap();
    for good in [two, no_size] {
        let (got, overlapped) = read(&store_with(&good));
        assert!(overlapped);
        assert_eq!(got.unwrap(), values);
    }

    // A compressible chunk: a small frame for a large chunk.
    let pattern_raw = u16_le((0..1024 * 2048).map(|i| (i % 977) as u16));
    let (got, _) = read(&store_with(&zstd(&pattern_raw)));
    assert_eq!(got.unwrap(), as_u16(&pattern_raw));

    let short = zstd(&raw[..raw.len() - 2]);
    let long = zstd(&[&raw[..], &[0u8; 2][..]].concat());
    let long_unsized =
        zstd::stream::encode_all(&[&raw[..], &[0u8; 64][..]].concat()[..], 3).unwrap();
    let mut trailing = frame.clone();
    trailing.extend_from_slice(b"trailing garbage");
    for bad in [
        &frame[..frame.len() / 2],
        &frame[..(1 << 20) + 7],
        &frame[..frame.len() - 1],
        &[][..],
        b"definitely not zstd",
        &short,
        &long,
        &long_unsized,
        &trailing,
    ] {
        match read(&store_with(bad)).0 {
            Err(e @ (Error::Corrupt { .. } | Error::Checksum { .. })) => {
                assert!(e.key().is_some_and(|k| k.contains("a/c/0/0")), "{e}");
            }
            other => panic!("expected a corrupt-chunk error, got {other:?}"),
        }
    }
}

//! Corrupt and hostile chunk data: every case is an error that names the chunk (or, where
//! the format says so, the fill value) — never a panic, an abort, or a huge allocation.

mod common;

use common::*;
use zarrpipe_codecs::select::selection::AxisSelector;
use zarrpipe_codecs::Error;

/// A 4x4 u16 array in one chunk with `codec_list`, whose chunk bytes are `chunk`.
fn one_chunk(codec_list: &str, chunk: &[u8]) -> TestStore {
    let store = TestStore::new();
    store.array_v3("a", &[4, 4], &[4, 4], "uint16", "0", codec_list);
    store.put("a/c/0/0", chunk);
    store
}

fn read_all(store: &TestStore) -> zarrpipe_codecs::Result<Vec<u16>> {
    read_u16(&store.open("a")?, &[])
}

fn read_part(store: &TestStore) -> zarrpipe_codecs::Result<Vec<u16>> {
    read_u16(&store.open("a")?, &[slice(1, 3), slice(1, 3)])
}

#[track_caller]
fn assert_corrupt(result: zarrpipe_codecs::Result<Vec<u16>>, key: &str) {
    match result {
        Err(e @ (Error::Corrupt { .. } | Error::Checksum { .. })) => {
            assert!(
                e.key().is_some_and(|k| k.contains(key)),
                "{e} should name {key}"
            );
        }
        other => panic!("expected a corrupt-chunk error, got {other:?}"),
    }
}

#[test]
fn truncated_empty_and_garbage_chunks() {
    let good = zstd(&u16_le(0..16));
    for bad in [&good[..good.len() / 2], &[][..], b"definitely not zstd"] {
        let store = one_chunk(&codecs(&[BYTES_LE, ZSTD]), bad);
        assert_corrupt(read_all(&store), "a/c/0/0");
        assert_corrupt(read_part(&store), "a/c/0/0");
    }
    for bad in [&gzip(&u16_le(0..16))[..10], b"garbage garbage garbage"] {
        assert_corrupt(
            read_all(&one_chunk(&codecs(&[BYTES_LE, GZIP]), bad)),
            "a/c/0/0",
        );
    }
    // Uncompressed, but the wrong size.
    assert_corrupt(
        read_all(&one_chunk(&codecs(&[BYTES_LE]), &u16_le(0..15))),
        "a/c/0/0",
    );
    assert_corrupt(
        read_part(&one_chunk(&codecs(&[BYTES_LE]), &u16_le(0..17))),
        "a/c/0/0",
    );
}

#[test]
fn valid_frames_of_the_wrong_size() {
    for n in [15u16, 17, 1000] {
        let store = one_chunk(&codecs(&[BYTES_LE, ZSTD]), &zstd(&u16_le(0..n)));
        assert_corrupt(read_all(&store), "a/c/0/0");
        assert_corrupt(read_part(&store), "a/c/0/0");
    }
}

/// A 16-byte zstd frame whose header claims 1 TiB of content (single segment, so its
/// window is 1 TiB too): zstd must refuse it rather than allocate.
#[test]
fn zstd_frame_claiming_a_terabyte() {
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.push(0xE0); // 8-byte content size, single segment
    frame.extend_from_slice(&(1u64 << 40).to_le_bytes());
    frame.extend_from_slice(&[0x01, 0x00, 0x00]); // last raw block, 0 bytes
    let store = one_chunk(&codecs(&[BYTES_LE, ZSTD]), &frame);
    assert_corrupt(read_all(&store), "a/c/0/0");
    assert_corrupt(read_part(&store), "a/c/0/0");
}

#[test]
fn gzip_bomb_stops_at_the_chunk_size() {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut e, &vec![0u8; 64 << 20]).unwrap();
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "a bomb inflates at least 64x");
    let store = one_chunk(&codecs(&[BYTES_LE, GZIP]), &bomb);
    assert_corrupt(read_all(&store), "a/c/0/0");
    assert_corrupt(read_part(&store), "a/c/0/0");
}

#[test]
fn crc32c_mismatch_on_full_and_partial_reads() {
    let mut chunk = with_crc32c(u16_le(0..16));
    chunk[3] ^= 0x40;
    let store = one_chunk(&codecs(&[BYTES_LE, CRC32C]), &chunk);
    assert!(matches!(read_all(&store), Err(Error::Checksum { .. })));
    assert!(matches!(read_part(&store), Err(Error::Checksum { .. })));
    assert_corrupt(
        read_all(&one_chunk(&codecs(&[BYTES_LE, CRC32C]), b"abc")),
        "a/c/0/0",
    );
}

#[test]
fn oversized_chunk_files_are_not_read() {
    let store = one_chunk(&codecs(&[BYTES_LE, ZSTD]), &vec![0u8; 3 << 20]);
    assert_corrupt(read_all(&store), "a/c/0/0");
}

/// A one-shard array (4x4 in 2x2 inner chunks, raw inner chunks) whose shard is `shard`.
fn one_shard(shard: &[u8], index_crc: bool) -> TestStore {
    let store = TestStore::new();
    let index_codecs = if index_crc {
        format!("[{BYTES_LE},{CRC32C}]")
    } else {
        format!("[{BYTES_LE}]")
    };
    let sharding = format!(
        r#"[{{"name":"sharding_indexed","configuration":{{"chunk_shape":[2,2],
        "codecs":[{BYTES_LE},{CRC32C}],"index_codecs":{index_codecs}}}}}]"#
    );
    store.array_v3("a", &[4, 4], &[4, 4], "uint16", "5", &sharding);
    store.put("a/c/0/0", shard);
    store
}

/// Builds a shard from 4 index entries over `data`.
fn shard_with(entries: [(u64, u64); 4], data: &[u8], index_crc: bool) -> Vec<u8> {
    let mut index: Vec<u8> = entries
        .iter()
        .flat_map(|(o, n)| [o.to_le_bytes(), n.to_le_bytes()])
        .flatten()
        .collect();
    if index_crc {
        index = with_crc32c(index);
    }
    [data.to_vec(), index].concat()
}

fn inner(values: std::ops::Range<u16>) -> Vec<u8> {
    with_crc32c(u16_le(values))
}

#[test]
fn shard_index_entries_are_checked() {
    let data = [inner(0..4), inner(4..8), inner(8..12), inner(12..16)].concat();
    let good = [(0, 12), (12, 12), (24, 12), (36, 12)];
    let store = one_shard(&shard_with(good, &data, true), true);
    assert_eq!(
        read_all(&store).unwrap(),
        vec![0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]
    );

    let bad_entries: [[(u64, u64); 4]; 4] = [
        [(0, 12), (12, 12), (24, 12), (36, 1000)], // past the end
        [(0, 12), (u64::MAX - 3, 12), (24, 12), (36, 12)], // offset + size overflows
        [(0, 12), (12, 12), (u64::MAX, 12), (36, 12)], // offset = MAX alone
        [(0, 12), (12, 12), (24, 12), (36, u64::MAX)], // size = MAX alone
    ];
    for entries in bad_entries {
        let store = one_shard(&shard_with(entries, &data, true), true);
        assert_corrupt(read_all(&store), "a/c/0/0");
        assert_corrupt(read_part(&store), "a/c/0/0");
    }
}

#[test]
fn empty_inner_chunks_read_as_fill_value() {
    let data = [inner(0..4), inner(12..16)].concat();
    let entries = [
        (0, 12),
        (u64::MAX, u64::MAX),
        (u64::MAX, u64::MAX),
        (12, 12),
    ];
    let store = one_shard(&shard_with(entries, &data, true), true);
    assert_eq!(
        read_all(&store).unwrap(),
        vec![0, 1, 5, 5, 2, 3, 5, 5, 5, 5, 12, 13, 5, 5, 14, 15]
    );
}

#[test]
fn corrupt_index_checksum_and_short_shards() {
    let data = [inner(0..4), inner(4..8), inner(8..12), inner(12..16)].concat();
    let mut shard = shard_with([(0, 12), (12, 12), (24, 12), (36, 12)], &data, true);
    let n = shard.len();
    shard[n - 10] ^= 1;
    assert!(matches!(
        read_all(&one_shard(&shard, true)),
        Err(Error::Checksum { .. })
    ));
    assert_corrupt(read_all(&one_shard(&[1, 2, 3], true)), "a/c/0/0");
    assert_corrupt(read_part(&one_shard(&[1, 2, 3], false)), "a/c/0/0");
}

#[test]
fn checksum_of_exactly_one_inner_chunk() {
    let mut data = [inner(0..4), inner(4..8), inner(8..12), inner(12..16)].concat();
    data[13] ^= 0x10; // inside inner chunk 1
    let store = one_shard(
        &shard_with([(0, 12), (12, 12), (24, 12), (36, 12)], &data, true),
        true,
    );
    let a = store.open("a").unwrap();
    // Inner chunk (0, 0) is fine; (0, 1) has a bad checksum.
    assert_eq!(
        read_u16(&a, &[slice(0, 2), slice(0, 2)]).unwrap(),
        vec![0, 1, 2, 3]
    );
    match read_u16(&a, &[slice(0, 2), slice(2, 4)]) {
        Err(e @ Error::Checksum { .. }) => {
            assert!(e.key().unwrap().contains("inner chunk [0, 1]"), "{e}")
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    match a.read_chunks(&[vec![0, 1]], None) {
        Err(Error::Checksum { .. }) => {}
        other => panic!(
            "expected a checksum error, got {:?}",
            other.map(|v| v.len())
        ),
    }
}

#[test]
fn metadata_errors_are_typed() {
    let store = TestStore::new();
    store.put("bad/zarr.json", b"{not json");
    assert!(matches!(store.open("bad"), Err(Error::Metadata { .. })));
    store.array_v3(
        "weird",
        &[4],
        &[4],
        "uint16",
        "0",
        r#"[{"name":"no_such_codec"}]"#,
    );
    assert!(matches!(store.open("weird"), Err(Error::Unsupported(_))));
    store.array_v3(
        "strings",
        &[4],
        &[4],
        "string",
        "\"\"",
        r#"[{"name":"vlen-utf8"}]"#,
    );
    // Variable-length strings are read natively (they used to be unsupported).
    assert!(store.open("strings").is_ok());
    assert!(matches!(store.open("missing"), Err(Error::NotFound(_))));
    store.put("g/zarr.json", br#"{"zarr_format":3,"node_type":"group"}"#);
    assert!(matches!(store.open("g"), Err(Error::NotFound(m)) if m.contains("group")));
    assert!(matches!(
        store.open("../etc"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn absurd_chunk_shapes_with_tiny_files() {
    let store = TestStore::new();
    store.array_v3(
        "huge",
        &[1 << 20, 1 << 20],
        &[1 << 20, 1 << 20],
        "uint8",
        "0",
        &codecs(&[BYTES_LE, ZSTD]),
    );
    store.put("huge/c/0/0", &zstd(b"tiny"));
    let a = store.open("huge").unwrap();
    // A small read of a chunk declaring 2^40 elements: corrupt, not a 1 TiB allocation.
    let result = read_u16(&a, &[AxisSelector::Index(0), slice(0, 8)]);
    assert!(matches!(result, Err(Error::Corrupt { .. })), "{result:?}");
}

/// Found by fuzzing (decode_chunk): a shard whose inner chunk shape does not divide it was
/// handed to zarrs, which panicked reading a short shard. It is invalid metadata.
#[test]
fn inner_chunks_that_do_not_divide_the_shard_are_invalid_metadata() {
    let store = TestStore::new();
    let sharding = format!(
        r#"[{{"name":"sharding_indexed","configuration":{{"chunk_shape":[2,2],
        "codecs":[{BYTES_LE}],"index_codecs":[{BYTES_LE},{CRC32C}]}}}}]"#
    );
    store.array_v3("a", &[1, 3], &[1, 2], "uint16", "7", &sharding);
    store.put("a/c/0/0", &[]);
    assert!(matches!(store.open("a"), Err(Error::Metadata { .. })));
}

/// Chunks of 2 MiB read into a wider array: each is scattered, so zarrpipe decodes it piece
/// by piece (from the file, or, behind a crc32c, from memory) through a buffer of the
/// chunk's size. Truncated, garbage, empty, too long and wrong-sized chunks are errors
/// naming the chunk; two frames back to back, or one whose compressed bytes span several
/// pieces, decode to their values.
#[test]
fn large_zstd_chunks_decoded_in_pieces() {
    large_zstd_chunks(false);
    large_zstd_chunks(true);
}

/// A zstd frame as a streaming compressor writes it: no content size, a 4 MiB window.
fn zstd_windowed(data: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    e.window_log(22).unwrap();
    std::io::Write::write_all(&mut e, data).unwrap();
    e.finish().unwrap()
}

fn large_zstd_chunks(crc: bool) {
    let store_with = |chunk: &[u8]| {
        let store = TestStore::new();
        let list = if crc {
            codecs(&[BYTES_LE, ZSTD, CRC32C])
        } else {
            codecs(&[BYTES_LE, ZSTD])
        };
        store.array_v3("a", &[1024, 2048], &[1024, 1024], "uint16", "0", &list);
        let chunk = if crc {
            with_crc32c(chunk.to_vec())
        } else {
            chunk.to_vec()
        };
        store.put("a/c/0/0", &chunk);
        store
    };
    let read = |store: &TestStore| read_u16(&store.open("a")?, &[]);
    // Incompressible values: the frame is over 2 MiB, so its input spans three pieces.
    let values = incompressible_u16(1024 * 1024);
    let raw = u16_le(values.iter().copied());
    let frame = zstd(&raw);
    assert!(frame.len() > 2 << 20);
    let want_row = |r: usize, got: &[u16]| {
        assert_eq!(
            &got[r * 2048..r * 2048 + 1024],
            &values[r * 1024..(r + 1) * 1024]
        );
        assert!(got[r * 2048 + 1024..(r + 1) * 2048].iter().all(|&v| v == 0));
    };
    let got = read(&store_with(&frame)).unwrap();
    for r in [0, 1, 511, 1023] {
        want_row(r, &got);
    }
    let mut two = zstd(&raw[..raw.len() / 2]);
    two.extend_from_slice(&zstd(&raw[raw.len() / 2..]));
    // The same with a first frame whose window (4 MiB) covers the chunk, which decodes
    // through a buffer of the chunk's size rather than through zstd's window.
    let mut two_windowed = zstd_windowed(&raw[..raw.len() / 2]);
    two_windowed.extend_from_slice(&zstd(&raw[raw.len() / 2..]));
    for two in [&two, &two_windowed] {
        let got = read(&store_with(two)).unwrap();
        for r in [0, 511, 512, 1023] {
            want_row(r, &got);
        }
    }
    let short = zstd(&raw[..raw.len() - 2]);
    let long = zstd(&[&raw[..], &[7, 0]].concat());
    let mut long_second = zstd_windowed(&raw[..raw.len() / 2]);
    long_second.extend_from_slice(&zstd(&raw[raw.len() / 2 - 2..]));
    let short_windowed = zstd_windowed(&raw[..raw.len() - 2]);
    let mut trailing = frame.clone();
    trailing.extend_from_slice(b"trailing garbage");
    for bad in [
        &frame[..frame.len() / 2],
        &frame[..(1 << 20) + 7],
        &[][..],
        b"definitely not zstd",
        &short,
        &short_windowed,
        &long,
        &long_second,
        &trailing,
    ] {
        assert_corrupt(read(&store_with(bad)), "a/c/0/0");
    }
}

//! End-to-end reads of hand-built stores: the planner places every chunk (and inner chunk)
//! correctly, every codec chain decodes, missing data reads as the fill value.

mod common;

use common::*;
use zarrpipe_codecs::select::selection::{AxisSelector, Region};

/// A 10x7 u16 array in 4x3 chunks (ragged in both axes), written with `encode`; chunk (1, 1)
/// is missing. Returns the store.
fn pattern_store(
    codec_list: &str,
    big_endian: bool,
    encode: impl Fn(Vec<u8>) -> Vec<u8>,
) -> TestStore {
    let store = TestStore::new();
    store.array_v3("a", &[10, 7], &[4, 3], "uint16", "42", codec_list);
    for ci in 0..3 {
        for cj in 0..3 {
            if (ci, cj) != (1, 1) {
                store.put(
                    &format!("a/c/{ci}/{cj}"),
                    &encode(pattern_chunk(ci, cj, [4, 3], big_endian)),
                );
            }
        }
    }
    store
}

fn expected(rows: std::ops::Range<u64>, cols: std::ops::Range<u64>) -> Vec<u16> {
    let mut v = Vec::new();
    for i in rows {
        for j in cols.clone() {
            let missing = (4..8).contains(&i) && (3..6).contains(&j);
            v.push(if missing { 42 } else { pattern(i, j) });
        }
    }
    v
}

fn check_pattern_store(store: &TestStore) {
    let a = store.open("a").unwrap();
    assert!(a.fallback_reason().is_none(), "{:?}", a.fallback_reason());
    assert_eq!(read_u16(&a, &[]).unwrap(), expected(0..10, 0..7));
    assert_eq!(
        read_u16(&a, &[slice(3, 9), slice(2, 6)]).unwrap(),
        expected(3..9, 2..6)
    );
    assert_eq!(
        read_u16(&a, &[AxisSelector::Index(5)]).unwrap(),
        expected(5..6, 0..7)
    );
    // Per chunk: an edge chunk is trimmed to the array.
    let chunks = a
        .read_chunks(&[vec![2, 2], vec![1, 1], vec![0, 0]], None)
        .unwrap();
    assert_eq!(chunks[0].shape, vec![2, 1]);
    assert_eq!(as_u16(&chunks[0].bytes), expected(8..10, 6..7));
    assert_eq!(as_u16(&chunks[1].bytes), vec![42; 12]);
    assert_eq!(as_u16(&chunks[2].bytes), expected(0..4, 0..3));
}

#[test]
fn uncompressed_little_endian() {
    check_pattern_store(&pattern_store(&codecs(&[BYTES_LE]), false, |c| c));
}

#[test]
fn big_endian_is_swapped_to_native() {
    check_pattern_store(&pattern_store(&codecs(&[BYTES_BE]), true, |c| c));
}

#[test]
fn zstd_then_crc32c() {
    check_pattern_store(&pattern_store(
        &codecs(&[BYTES_LE, ZSTD, CRC32C]),
        false,
        |c| with_crc32c(zstd(&c)),
    ));
}

#[test]
fn gzip_chunks() {
    check_pattern_store(&pattern_store(&codecs(&[BYTES_LE, GZIP]), false, |c| {
        gzip(&c)
    }));
}

#[test]
fn transposed_chunks_land_in_c_order() {
    let store = TestStore::new();
    let transpose = r#"{"name":"transpose","configuration":{"order":[1,0]}}"#;
    store.array_v3(
        "t",
        &[4, 3],
        &[4, 3],
        "uint16",
        "0",
        &codecs(&[transpose, BYTES_LE]),
    );
    // Stored in F order: column by column.
    let mut f_order = Vec::new();
    for j in 0..3 {
        for i in 0..4 {
            f_order.push(pattern(i, j));
        }
    }
    store.put("t/c/0/0", &u16_le(f_order));
    let t = store.open("t").unwrap();
    assert_eq!(
        read_u16(&t, &[]).unwrap(),
        (0..4)
            .flat_map(|i| (0..3).map(move |j| pattern(i, j)))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        read_u16(&t, &[slice(1, 3), AxisSelector::Index(2)]).unwrap(),
        vec![pattern(1, 2), pattern(2, 2)]
    );
}

/// A sharded 8x6 array: shards of 4x6, inner chunks of 2x3 (gzip), index at the end with
/// crc32c. Shard 0 has inner chunk (1, 0) empty; shard 1 is missing entirely.
fn sharded_store(index_at_end: bool) -> TestStore {
    let store = TestStore::new();
    let location = if index_at_end { "end" } else { "start" };
    let sharding = format!(
        r#"{{"name":"sharding_indexed","configuration":{{"chunk_shape":[2,3],
        "codecs":[{BYTES_LE},{GZIP}],"index_codecs":[{BYTES_LE},{CRC32C}],"index_location":"{location}"}}}}"#
    );
    store.array_v3(
        "s",
        &[8, 6],
        &[4, 6],
        "uint16",
        "7",
        &format!("[{sharding}]"),
    );
    let index_len = 4 * 16 + 4;
    let mut data = Vec::new();
    let mut index = Vec::new();
    let base = if index_at_end { 0 } else { index_len as u64 };
    for (ii, ij) in [(0u64, 0u64), (0, 1), (1, 0), (1, 1)] {
        if (ii, ij) == (1, 0) {
            index.extend_from_slice(&u64::MAX.to_le_bytes());
            index.extend_from_slice(&u64::MAX.to_le_bytes());
            continue;
        }
        let mut raw = Vec::new();
        for i in 0..2 {
            for j in 0..3 {
                raw.extend_from_slice(&pattern(ii * 2 + i, ij * 3 + j).to_le_bytes());
            }
        }
        let enc = gzip(&raw);
        index.extend_from_slice(&(base + data.len() as u64).to_le_bytes());
        index.extend_from_slice(&(enc.len() as u64).to_le_bytes());
        data.extend_from_slice(&enc);
    }
    let index = with_crc32c(index);
    let shard = if index_at_end {
        [data, index].concat()
    } else {
        [index, data].concat()
    };
    store.put("s/c/0/0", &shard);
    store
}

fn sharded_expected(rows: std::ops::Range<u64>, cols: std::ops::Range<u64>) -> Vec<u16> {
    let mut v = Vec::new();
    for i in rows {
        for j in cols.clone() {
            let empty_inner = (2..4).contains(&i) && j < 3;
            v.push(if i >= 4 || empty_inner {
                7
            } else {
                pattern(i, j)
            });
        }
    }
    v
}

#[test]
fn sharded_reads_whole_partial_and_per_inner_chunk() {
    for at_end in [true, false] {
        let store = sharded_store(at_end);
        let s = store.open("s").unwrap();
        assert_eq!(s.info.chunks, vec![2, 3]);
        assert_eq!(s.info.shards, Some(vec![4, 6]));
        assert_eq!(read_u16(&s, &[]).unwrap(), sharded_expected(0..8, 0..6));
        // Partial: only inner chunk (0, 1) of shard 0 (ranged reads of the shard).
        assert_eq!(
            read_u16(&s, &[slice(0, 2), slice(4, 6)]).unwrap(),
            sharded_expected(0..2, 4..6)
        );
        assert_eq!(
            read_u16(&s, &[slice(1, 7), slice(2, 4)]).unwrap(),
            sharded_expected(1..7, 2..4)
        );
        let chunks = s
            .read_chunks(&[vec![0, 1], vec![1, 0], vec![3, 1]], None)
            .unwrap();
        assert_eq!(as_u16(&chunks[0].bytes), sharded_expected(0..2, 3..6));
        assert_eq!(as_u16(&chunks[1].bytes), vec![7; 6]);
        assert_eq!(as_u16(&chunks[2].bytes), vec![7; 6]);
    }
}

#[test]
fn zero_d_and_empty_selections() {
    let store = TestStore::new();
    store.array_v3("z", &[], &[], "uint16", "9", &codecs(&[BYTES_LE]));
    let z = store.open("z").unwrap();
    assert_eq!(read_u16(&z, &[]).unwrap(), vec![9]);
    store.put("z/c", &u16_le([1234]));
    let z = store.open("z").unwrap();
    assert_eq!(read_u16(&z, &[AxisSelector::Ellipsis]).unwrap(), vec![1234]);

    let a = pattern_store(&codecs(&[BYTES_LE]), false, |c| c);
    let a = a.open("a").unwrap();
    let region = Region::resolve(&a.info.shape, &[slice(5, 5)]).unwrap();
    assert_eq!(region.out_shape, vec![0, 7]);
    assert!(a.read_region(&region, None).unwrap().is_empty());
}

#[test]
fn chunk_indices_outside_the_grid_are_selection_errors() {
    let store = pattern_store(&codecs(&[BYTES_LE]), false, |c| c);
    let a = store.open("a").unwrap();
    for bad in [vec![3, 0], vec![0], vec![0, 0, 0]] {
        assert!(matches!(
            a.read_chunks(&[bad], None),
            Err(zarrpipe_codecs::Error::InvalidSelection(_))
        ));
    }
}

//! The engine's write path, end to end on local and in-memory stores: arrays created with
//! zarr-python's metadata, partial writes read-modify-written, complete chunks written
//! without reading the old one, chunks left all fill value deleted (or kept with
//! `write_empty`), shards laid out in the requested order, failed writes leaving every
//! chunk old or new, and overlapping or repeated placements refused before anything runs.

mod common;

use std::sync::Arc;

use common::{as_u16, slice, TestStore};
use serde_json::json;
use zarrpipe_codecs::array::create::{create_array, ArraySpec};
use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::layout::placement::c_strides;
use zarrpipe_codecs::layout::shard_order::ShardOrder;
use zarrpipe_codecs::read::cache::ChunkCache;
use zarrpipe_codecs::select::pick::{Factor, Pick};
use zarrpipe_codecs::select::selection::{AxisSelector, Region};
use zarrpipe_codecs::store::Store;
use zarrpipe_codecs::write::pick::PickValues;
use zarrpipe_codecs::write::{SrcPtr, Written};
use zarrpipe_codecs::{ElementType, Error};

fn spec(shape: &[u64], chunks: &[u64], shards: Option<&[u64]>) -> ArraySpec {
    ArraySpec::from_json(
        &json!({
            "shape": shape, "dtype": "uint16", "chunks": chunks, "shards": shards,
            "fill_value": 7,
        })
        .to_string(),
    )
    .unwrap()
}

/// Writes `values` (C order, the region's shape) into `region` of `array`.
fn write(array: &Array, selectors: &[AxisSelector], values: &[u16], write_empty: bool) {
    try_write(array, selectors, values, write_empty).unwrap();
}

fn try_write(
    array: &Array,
    selectors: &[AxisSelector],
    values: &[u16],
    write_empty: bool,
) -> zarrpipe_codecs::Result<Vec<Written>> {
    let region = Region::resolve(&array.info.shape, selectors)?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let strides = c_strides(&region.extent(), 2);
    // SAFETY: `bytes` outlives the write and is not modified during it.
    let src = unsafe { SrcPtr::new(bytes.as_ptr(), bytes.len()) };
    let items = array.plan_write(&region, &strides, 0)?;
    array.write_chunks(&items, &src, None, write_empty, None)
}

fn read_all(array: &Array) -> Vec<u16> {
    as_u16(
        &array
            .read_region(&Region::all(&array.info.shape), None)
            .unwrap(),
    )
}

fn local(ts: &TestStore) -> Arc<Store> {
    Arc::new(Store::open_local(ts.root()).unwrap())
}

#[test]
fn partial_writes_keep_the_rest_of_each_chunk() {
    let ts = TestStore::new();
    let a = create_array(&local(&ts), "a", &spec(&[6, 5], &[4, 3], None), false).unwrap();
    write(&a, &[], &(0..30).collect::<Vec<u16>>(), false);
    write(
        &a,
        &[slice(1, 3), slice(2, 4)],
        &[100, 101, 102, 103],
        false,
    );
    let got = read_all(&a);
    let mut want: Vec<u16> = (0..30).collect();
    for (k, (i, j)) in [(1, 2), (1, 3), (2, 2), (2, 3)].into_iter().enumerate() {
        want[i * 5 + j] = 100 + k as u16;
    }
    assert_eq!(got, want);
}

#[test]
fn complete_chunks_are_built_without_reading_the_old_one() {
    let ts = TestStore::new();
    let store = local(&ts);
    let a = create_array(&store, "a", &spec(&[4, 3], &[4, 3], None), false).unwrap();
    // A corrupt old chunk: a complete write never reads it, a partial one must fail.
    ts.put("a/c/0/0", b"not zstd at all");
    write(&a, &[], &[1; 12], false);
    assert_eq!(read_all(&a), vec![1; 12]);
    ts.put("a/c/0/0", b"not zstd at all");
    let err = try_write(&a, &[slice(0, 1)], &[2, 2, 2], false).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    // The failed write left the old (corrupt) bytes in place, not a torn chunk.
    assert_eq!(
        std::fs::read(ts.root().join("a/c/0/0")).unwrap(),
        b"not zstd at all"
    );
}

#[test]
fn edge_chunks_are_complete_when_their_in_bounds_part_is_written() {
    let ts = TestStore::new();
    let a = create_array(&local(&ts), "a", &spec(&[5], &[4], None), false).unwrap();
    ts.put("a/c/1", b"corrupt");
    // Chunk 1 holds one element inside the array: writing it is a complete write.
    write(&a, &[slice(4, 5)], &[9], false);
    assert_eq!(read_all(&a), vec![7, 7, 7, 7, 9]);
}

#[test]
fn chunks_left_all_fill_are_deleted_unless_write_empty() {
    let ts = TestStore::new();
    let a = create_array(&local(&ts), "a", &spec(&[8], &[4], None), false).unwrap();
    write(&a, &[], &[1, 2, 3, 4, 5, 6, 7, 8], false);
    assert!(ts.root().join("a/c/0").exists());
    let w = try_write(&a, &[slice(0, 4)], &[7; 4], false).unwrap();
    assert_eq!(w, vec![Written::Deleted]);
    assert!(!ts.root().join("a/c/0").exists(), "all fill: deleted");
    write(&a, &[slice(0, 4)], &[7; 4], true);
    assert!(ts.root().join("a/c/0").exists(), "write_empty keeps it");
    assert_eq!(read_all(&a), vec![7, 7, 7, 7, 5, 6, 7, 8]);
}

#[test]
fn shards_are_written_in_the_requested_order() {
    let store = Arc::new(Store::in_memory([]));
    let a = create_array(&store, "s", &spec(&[4, 4], &[2, 2], Some(&[4, 4])), false)
        .unwrap()
        .with_shard_order(ShardOrder::Colexicographic);
    write(&a, &[], &(0..16).collect::<Vec<u16>>(), false);
    assert_eq!(read_all(&a), (0..16).collect::<Vec<u16>>());
    // Column-major: inner chunks 0 (rows 0-1, cols 0-1), 2 (rows 2-3), 1, then 3.
    let shard = zarrs::storage::ReadableStorageTraits::get(
        &*store.zarrs(),
        &zarrs::storage::StoreKey::new("s/c/0/0").unwrap(),
    )
    .unwrap()
    .unwrap();
    let index = &shard[shard.len() - (16 * 4 + 4)..];
    let offset_of = |i: usize| u64::from_le_bytes(index[16 * i..16 * i + 8].try_into().unwrap());
    assert_eq!(offset_of(0), 0);
    assert!(offset_of(0) < offset_of(2) && offset_of(2) < offset_of(1));
    assert!(offset_of(1) < offset_of(3));
}

#[test]
fn a_write_into_a_shard_keeps_its_other_inner_chunks() {
    let store = Arc::new(Store::in_memory([]));
    let a = create_array(&store, "s", &spec(&[4, 4], &[2, 2], Some(&[4, 4])), false).unwrap();
    write(&a, &[], &(0..16).collect::<Vec<u16>>(), false);
    write(&a, &[slice(0, 1), slice(0, 1)], &[99], false);
    let mut want: Vec<u16> = (0..16).collect();
    want[0] = 99;
    assert_eq!(read_all(&a), want);
}

#[test]
fn one_write_may_not_name_a_chunk_twice() {
    let store = Arc::new(Store::in_memory([]));
    let a = create_array(&store, "a", &spec(&[4], &[4], None), false).unwrap();
    let region = Region::all(&[4]);
    let mut items = a.plan_write(&region, &[2], 0).unwrap();
    items.push(items[0].clone());
    let bytes = [0u8; 8];
    // SAFETY: `bytes` outlives the call.
    let src = unsafe { SrcPtr::new(bytes.as_ptr(), bytes.len()) };
    let err = a.write_chunks(&items, &src, None, false, None).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
}

#[test]
fn read_only_stores_refuse_writes_and_keep_their_chunks() {
    let ts = TestStore::new();
    let a = create_array(&local(&ts), "a", &spec(&[4], &[4], None), false).unwrap();
    write(&a, &[], &[1, 2, 3, 4], false);
    let ro = Arc::new(Store::open_local(ts.root()).unwrap().read_only(true));
    let b = Array::open(ro, "a").unwrap();
    assert!(matches!(
        try_write(&b, &[], &[0; 4], false),
        Err(Error::ReadOnly(_))
    ));
    assert_eq!(read_all(&b), vec![1, 2, 3, 4]);
}

#[test]
fn writes_forget_the_cached_chunks_they_replace() {
    let ts = TestStore::new();
    let a = create_array(
        &local(&ts),
        "a",
        &spec(&[4, 4], &[2, 2], Some(&[4, 4])),
        false,
    )
    .unwrap();
    write(&a, &[], &[1; 16], false);
    let cache = ChunkCache::new(1 << 20);
    let all = Region::all(&[4, 4]);
    a.read_region(&all, Some(&cache)).unwrap();
    assert_eq!(cache.stats().entries, 4, "one entry per inner chunk");
    let before = cache.stats().misses;
    a.read_region(&all, Some(&cache)).unwrap();
    assert_eq!(
        cache.stats().misses,
        before,
        "the second read is served from the cache"
    );
    let region = Region::all(&[4, 4]);
    let bytes: Vec<u8> = [2u16; 16].iter().flat_map(|v| v.to_ne_bytes()).collect();
    // SAFETY: `bytes` outlives the write.
    let src = unsafe { SrcPtr::new(bytes.as_ptr(), bytes.len()) };
    let items = a.plan_write(&region, &c_strides(&[4, 4], 2), 0).unwrap();
    a.write_chunks(&items, &src, None, false, Some(&cache))
        .unwrap();
    assert_eq!(cache.stats().entries, 0);
    assert_eq!(
        as_u16(&a.read_region(&all, Some(&cache)).unwrap()),
        vec![2; 16]
    );
}

#[test]
fn created_metadata_round_trips_every_dtype() {
    for dtype in ElementType::ALL {
        let store = Arc::new(Store::in_memory([]));
        let s = ArraySpec::from_json(
            &json!({"shape": [3], "dtype": dtype.name(), "chunks": [2]}).to_string(),
        )
        .unwrap();
        let a = create_array(&store, "x", &s, false).unwrap();
        assert_eq!(a.info.dtype, dtype);
        let v2 = ArraySpec {
            zarr_format: 2,
            ..s.clone()
        };
        if dtype != ElementType::BFloat16 {
            let b = create_array(&store, "y", &v2, false).unwrap();
            assert_eq!((b.info.dtype, b.info.zarr_format), (dtype, 2));
        }
    }
}

/// Writes `values` (C order of the pick's result) to `pick` of `array`.
fn write_pick(array: &Array, factors: Vec<Factor>, values: &[u16]) -> zarrpipe_codecs::Result<()> {
    let pick = Pick::new(&array.info.shape, factors)?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    // SAFETY: `bytes` outlives the write and is not modified during it.
    let src = unsafe { SrcPtr::new(bytes.as_ptr(), bytes.len()) };
    array.write_pick(&pick, PickValues::Fixed(&src), false, None)
}

#[test]
fn point_and_step_writes_scatter_into_the_chunks_they_touch() {
    for shards in [None, Some(&[4u64, 6][..])] {
        let ts = TestStore::new();
        let a = create_array(&local(&ts), "a", &spec(&[8, 6], &[2, 3], shards), false).unwrap();
        write(&a, &[], &(0..48).collect::<Vec<u16>>(), false);
        let mut want: Vec<u16> = (0..48).collect();
        // Points (1, 1), (6, 5), (1, 1) again: the last value of a repeated point stays.
        write_pick(
            &a,
            vec![Factor::Points {
                axes: vec![0, 1],
                coords: vec![1, 1, 6, 5, 1, 1],
            }],
            &[100, 101, 102],
        )
        .unwrap();
        want[6 + 1] = 102;
        want[6 * 6 + 5] = 101;
        // Every other row, backwards, times columns 4 and 0.
        write_pick(
            &a,
            vec![
                Factor::Step {
                    axis: 0,
                    start: 7,
                    step: -2,
                    count: 4,
                },
                Factor::Points {
                    axes: vec![1],
                    coords: vec![4, 0],
                },
            ],
            &[200, 201, 202, 203, 204, 205, 206, 207],
        )
        .unwrap();
        for (k, row) in [7usize, 5, 3, 1].into_iter().enumerate() {
            want[row * 6 + 4] = 200 + 2 * k as u16;
            want[row * 6] = 201 + 2 * k as u16;
        }
        assert_eq!(read_all(&a), want, "shards {shards:?}");
        // Too few values is an error before anything is written.
        let err = write_pick(
            &a,
            vec![Factor::Points {
                axes: vec![0, 1],
                coords: vec![0, 0],
            }],
            &[],
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(read_all(&a), want);
    }
}

#[test]
fn a_point_write_leaves_untouched_chunks_unread() {
    let ts = TestStore::new();
    let a = create_array(&local(&ts), "a", &spec(&[8], &[2], None), false).unwrap();
    write(&a, &[], &[1; 8], false);
    // Garbage in chunks the write does not touch: reading any of them would fail.
    ts.put("a/c/0", b"garbage");
    ts.put("a/c/3", b"garbage");
    write_pick(
        &a,
        vec![Factor::Points {
            axes: vec![0],
            coords: vec![3, 4],
        }],
        &[5, 6],
    )
    .unwrap();
    ts.put("a/c/0", &std::fs::read(ts.root().join("a/c/2")).unwrap());
    ts.put("a/c/3", &std::fs::read(ts.root().join("a/c/2")).unwrap());
    let got = read_all(&a);
    assert_eq!(&got[2..6], &[1, 5, 6, 1]);
}

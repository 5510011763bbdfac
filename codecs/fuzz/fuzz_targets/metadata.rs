//! Fuzzes array metadata: arbitrary zarr.json text (seeded with valid documents) over a
//! store with a few small chunks. Opening and reading must fail cleanly, never panic or
//! allocate without bound.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use zarrpipe_codecs::array::Array;
use zarrpipe_codecs::select::selection::Region;
use zarrpipe_codecs::store::Store;

fuzz_target!(|data: &[u8]| {
    let store = Store::in_memory([
        ("zarr.json".to_string(), data.to_vec()),
        ("c/0".to_string(), vec![1, 0, 2, 0, 3, 0, 4, 0]),
        ("c/0/0".to_string(), vec![1, 0, 2, 0, 3, 0, 4, 0]),
        ("0.0".to_string(), vec![1, 0, 2, 0]),
    ]);
    let Ok(reader) = Array::open(Arc::new(store), "") else {
        return;
    };
    if reader.fallback_reason().is_some() {
        return; // zarrs' own decoder: the binding catches its panics
    }
    // Only read what a real caller could allocate: small arrays.
    let Ok(region) = Region::resolve(&reader.info.shape, &[]) else {
        return;
    };
    if region.num_elements().saturating_mul(reader.info.dtype.size() as u64) <= 1 << 24 {
        let _ = reader.read_region(&region, None);
    }
    let _ = reader.read_chunks(&[vec![0; reader.info.shape.len()]], None);
});

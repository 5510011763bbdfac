//! A shard read in part from an object store while a writer replaces it: the ranges are
//! asked for on condition that the shard is the version whose index was read, so the read
//! gives the new version's values, never the new bytes read with the old index.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::array::Array;
use crate::error::Error;
use crate::select::selection::{AxisSelector, Region};
use crate::store::remote::Remote;
use crate::store::Store;

/// An in-memory object store whose shard `c/0/0` a "writer" replaces just before each
/// conditional range request (the first `replacements` of them), with the next version.
#[derive(Debug)]
struct Replacing {
    inner: InMemory,
    versions: Mutex<Vec<Bytes>>,
    replaced: AtomicUsize,
}

impl fmt::Display for Replacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Replacing")
    }
}

#[async_trait]
impl ObjectStore for Replacing {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if options.if_match.is_some() && location.as_ref() == "c/0/0" {
            let next = self.versions.lock().unwrap().pop();
            if let Some(version) = next {
                self.inner.put(location, version.into()).await?;
                self.replaced.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// 16 u16 inner chunks of 4 x 4 elements (all `value`) in a 16 x 16 shard without
/// compression, stored in `order`, its index (no checksum) at the end.
fn shard(value: u16, order: &[usize]) -> Bytes {
    let chunk: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), 16)
        .flatten()
        .collect();
    let mut data = Vec::new();
    let mut index = vec![(0u64, 0u64); 16];
    for &i in order {
        index[i] = (data.len() as u64, chunk.len() as u64);
        data.extend_from_slice(&chunk);
    }
    for (offset, len) in index {
        data.extend(offset.to_le_bytes());
        data.extend(len.to_le_bytes());
    }
    Bytes::from(data)
}

const METADATA: &str = r#"{"zarr_format":3,"node_type":"array","shape":[16,16],"data_type":"uint16",
    "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[16,16]}},
    "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,
    "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4,4],
      "codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
      "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}],
      "index_location":"end"}}]}"#;

/// Reads rows 0..4, columns 0..8 (two inner chunks) of an array whose shard is replaced,
/// before each conditional request, by the next of `versions`.
fn read_while_replaced(versions: Vec<Bytes>) -> (Result<Vec<u16>, Error>, usize) {
    let store = Arc::new(Replacing {
        inner: InMemory::new(),
        versions: Mutex::new(versions),
        replaced: AtomicUsize::new(0),
    });
    let remote = Remote::over(store.clone());
    let r = remote.clone();
    remote
        .block_on(async move {
            r.put("zarr.json", Bytes::from(METADATA)).await?;
            r.put("c/0/0", shard(1, &(0..16).collect::<Vec<_>>())).await
        })
        .unwrap();
    let array = Array::open(Arc::new(Store::over_remote(remote)), "/").unwrap();
    let range = |a, b| AxisSelector::Slice {
        start: Some(a),
        stop: Some(b),
        step: None,
    };
    let region = Region::resolve(&array.info.shape, &[range(0, 4), range(0, 8)]).unwrap();
    let values = array.read_region(&region, None).map(|b| {
        b.chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect()
    });
    (values, store.replaced.load(Ordering::Relaxed))
}

#[test]
fn a_shard_replaced_between_its_index_and_its_chunks_is_read_from_the_new_version() {
    // The new version stores its inner chunks in reverse: with the old index, its bytes
    // would be other inner chunks (here the same values, but not the same places).
    let reversed: Vec<usize> = (0..16).rev().collect();
    let (values, replaced) = read_while_replaced(vec![shard(2, &reversed)]);
    assert_eq!(replaced, 1);
    assert_eq!(values.unwrap(), vec![2u16; 32]);
}

#[test]
fn a_shard_that_keeps_changing_is_an_error() {
    let versions = (10..20).map(|v| shard(v, &[0, 1, 2, 3])).collect();
    let (values, replaced) = read_while_replaced(versions);
    let err = values.unwrap_err().to_string();
    assert!(err.contains("changed 4 times"), "{err}");
    assert_eq!(replaced, 4);
}

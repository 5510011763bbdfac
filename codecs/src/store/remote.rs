//! Object stores (S3, GCS, Azure Blob, plain HTTP) through the `object_store` crate.
//!
//! One tokio runtime per process (rebuilt in a forked child) does the network I/O. Reads of
//! many chunks fetch them concurrently (bounded by `concurrency`) and hand each one to the
//! rayon pool as it arrives, so latency and decoding overlap; shards fetch their index, then
//! only the inner chunks a read needs (nearby ranges merged into requests of at most
//! `MAX_REQUEST`, fetched in parallel). zarrs sees
//! the store through a blocking adapter (metadata, and its decoder for codecs zarrpipe lacks).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt, RetryConfig,
};

use crate::error::{Error, Result};
pub use crate::store::remote_runtime::runtime;
use crate::store::response_body;

/// Ranges of one value closer than this are fetched in one request (object_store's default).
pub(crate) const COALESCE_GAP: u64 = 1 << 20;

/// A merged range stops growing at this size: a longer span is fetched as several requests
/// at once, since object stores serve each request at a capped rate (AWS suggests ranges of
/// 8-16 MB for throughput). One range asked for is never split.
pub const MAX_REQUEST: u64 = 8 << 20;

/// `ranges` merged where they overlap or lie closer than `gap`, sorted by start; a range
/// joins the previous merged one only if that stays within `max_len` bytes (or overlaps it).
pub(crate) fn coalesce(ranges: &[Range<u64>], gap: u64, max_len: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| r.end > r.start).cloned().collect();
    sorted.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last)
                if r.start < last.end
                    || (r.start <= last.end.saturating_add(gap)
                        && r.end.max(last.end) - last.start <= max_len) =>
            {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// What [`Remote::get_ranges_each_if`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum RangesFound {
    /// Every range was handed over (or the caller stopped taking them).
    Done,
    /// The value does not exist.
    Missing,
    /// The value is no longer the version asked for.
    Changed,
}

/// The requests of one read in flight at once: each holds a permit while it runs, so that
/// splitting shards into ranges never multiplies the read's `concurrency`.
pub struct InFlight(tokio::sync::Semaphore);

impl InFlight {
    #[must_use]
    pub fn new(concurrency: usize) -> Self {
        Self(tokio::sync::Semaphore::new(concurrency.max(1)))
    }

    /// Waits for a free request slot. The semaphore is never closed.
    pub async fn slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.0.acquire().await.ok()
    }
}

/// How a remote store behaves on a slow or failing network.
#[derive(Clone, Copy, Debug)]
pub struct RemoteSettings {
    /// Per request, including reading the body.
    pub timeout: Duration,
    /// Retries of a request that failed transiently (5xx, connection reset, timeout).
    pub retries: usize,
    /// Requests in flight at once for one read.
    pub concurrency: usize,
    /// Where the store cannot write conditionally, write unconditionally (and count it, so
    /// the caller warns) instead of refusing updates of part of a value
    /// (`remote_update`).
    pub unconditional_writes: bool,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            retries: 3,
            concurrency: 32,
            unconditional_writes: false,
        }
    }
}

/// Requests a remote store has made: for benchmarks, and to check reads stay minimal.
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub bytes: AtomicU64,
    pub heads: AtomicU64,
    pub lists: AtomicU64,
}

pub struct Remote {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    pub settings: RemoteSettings,
    pub counts: RequestCounts,
    url: String,
    /// Writes made unconditionally since the binding last asked (`remote_update`).
    pub(crate) unconditional_writes: AtomicU64,
}

/// A response's whole body, gathered into a reused buffer (see [`crate::store::response_body`]).
pub(crate) async fn body(result: GetResult) -> object_store::Result<Bytes> {
    let len = result.range.end.saturating_sub(result.range.start);
    response_body::gather(result.into_stream(), len).await
}

fn storage_error(key: &str, e: object_store::Error) -> Error {
    use std::io::ErrorKind;
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        _ if timed_out(&e) => ErrorKind::TimedOut,
        _ => ErrorKind::Other,
    };
    let message = if kind == ErrorKind::TimedOut {
        format!("request timed out: {e}")
    } else {
        e.to_string()
    };
    Error::storage(key, std::io::Error::new(kind, message))
}

/// Whether a request failed because it ran past its timeout (somewhere in the error chain).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(http) = err.downcast_ref::<object_store::client::HttpError>() {
            if http.kind() == object_store::client::HttpErrorKind::Timeout {
                return true;
            }
        }
        current = err.source();
    }
    false
}

impl Remote {
    /// Opens `url` (`s3://bucket/prefix`, `gs://`, `az://`, `https://host/path`...).
    /// Credentials and settings come from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`,
    /// as object_store reads them) overridden by `options` (object_store's keys:
    /// `aws_endpoint`, `aws_region`, `aws_skip_signature`, `allow_http`, ...).
    pub fn open(url: &str, options: &[(String, String)], settings: RemoteSettings) -> Result<Self> {
        use object_store::{aws, azure, gcp, http};
        let parsed = url::Url::parse(url)
            .map_err(|e| Error::InvalidArgument(format!("invalid store URL {url:?}: {e}")))?;
        let (scheme, path) = object_store::ObjectStoreScheme::parse(&parsed)
            .map_err(|e| Error::InvalidArgument(format!("unsupported store URL {url:?}: {e}")))?;
        let prefix = ObjectPath::parse(path)
            .map_err(|e| Error::InvalidArgument(format!("invalid path in {url:?}: {e}")))?;
        let retry = RetryConfig {
            max_retries: settings.retries,
            retry_timeout: settings.timeout * (settings.retries as u32 + 1),
            ..RetryConfig::default()
        };
        let client = ClientOptions::new().with_timeout(settings.timeout);
        let bad = |e: object_store::Error| {
            Error::InvalidArgument(format!("cannot open store {url:?}: {e}"))
        };
        macro_rules! build {
            ($builder:expr, $key:ty) => {{
                let mut b = $builder
                    .with_url(url)
                    .with_retry(retry)
                    .with_client_options(client);
                for (k, v) in options {
                    let key: $key = k.parse().map_err(|e: object_store::Error| bad(e))?;
                    b = b.with_config(key, v.clone());
                }
                Arc::new(b.build().map_err(bad)?) as Arc<dyn ObjectStore>
            }};
        }
        let store = match scheme {
            object_store::ObjectStoreScheme::AmazonS3 => {
                build!(aws::AmazonS3Builder::from_env(), aws::AmazonS3ConfigKey)
            }
            object_store::ObjectStoreScheme::GoogleCloudStorage => {
                build!(
                    gcp::GoogleCloudStorageBuilder::from_env(),
                    gcp::GoogleConfigKey
                )
            }
            object_store::ObjectStoreScheme::MicrosoftAzure => {
                build!(
                    azure::MicrosoftAzureBuilder::from_env(),
                    azure::AzureConfigKey
                )
            }
            object_store::ObjectStoreScheme::Http => {
                let base = &parsed[..url::Position::BeforePath];
                let mut b = http::HttpBuilder::new()
                    .with_url(base)
                    .with_retry(retry)
                    .with_client_options(client);
                for (k, v) in options {
                    let key: object_store::ClientConfigKey =
                        k.parse().map_err(|e: object_store::Error| bad(e))?;
                    b = b.with_config(key, v.clone());
                }
                Arc::new(b.build().map_err(bad)?) as Arc<dyn ObjectStore>
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "{other:?} URLs are not remote stores; pass a local path instead"
                )))
            }
        };
        Ok(Self {
            store,
            prefix,
            settings,
            counts: RequestCounts::default(),
            url: url.to_owned(),
            unconditional_writes: AtomicU64::new(0),
        })
    }

    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A remote over `store` itself (tests: object_store's in-memory store).
    #[cfg(test)]
    pub(crate) fn over(store: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            store,
            prefix: ObjectPath::from(""),
            settings: RemoteSettings::default(),
            counts: RequestCounts::default(),
            url: "memory://".into(),
            unconditional_writes: AtomicU64::new(0),
        })
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    /// An object_store failure at `key` as the engine's error.
    pub(crate) fn error(&self, key: &str, e: object_store::Error) -> Error {
        storage_error(key, e)
    }

    pub(crate) fn path(&self, key: &str) -> ObjectPath {
        let key = key.trim_start_matches('/');
        if self.prefix.as_ref().is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.prefix))
        }
    }

    /// Stores `bytes` at `key` in one request (readers see the old value or the new one).
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        self.store
            .put(&self.path(key), object_store::PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
            .map_err(|e| storage_error(key, e))
    }

    /// Deletes the value at `key` (a missing one is no error).
    pub async fn delete(&self, key: &str) -> Result<()> {
        self.counts.deletes.fetch_add(1, Ordering::Relaxed);
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(storage_error(key, e)),
        }
    }

    /// The value at `key`, or `None` if it does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let got = match self.store.get(&self.path(key)).await {
            Ok(r) => body(r).await,
            Err(e) => Err(e),
        };
        match got {
            Ok(b) => {
                self.counts
                    .bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                Ok(Some(b))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(key, e)),
        }
    }

    /// The value at `key` as it arrives: its length and its body's frames (the bytes are
    /// counted as they come); `None` if it does not exist.
    pub async fn get_stream(
        &self,
        key: &str,
    ) -> Result<Option<(u64, BoxStream<'_, Result<Bytes>>)>> {
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let result = match self.store.get(&self.path(key)).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(storage_error(key, e)),
        };
        let len = result.range.end.saturating_sub(result.range.start);
        let key = key.to_owned();
        let frames = result.into_stream().map(move |frame| match frame {
            Ok(bytes) => {
                self.counts
                    .bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                Ok(bytes)
            }
            Err(e) => Err(storage_error(&key, e)),
        });
        Ok(Some((len, frames.boxed())))
    }

    /// The bytes of `ranges` of the value at `key`, in order; `None` if it does not exist.
    /// Fetched as [`Self::get_ranges_each`] fetches them.
    pub async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        limit: Option<&InFlight>,
    ) -> Result<Option<Vec<Bytes>>> {
        let mut out = vec![Bytes::new(); ranges.len()];
        let found = self
            .get_ranges_each(key, ranges, limit, |i, bytes| {
                out[i] = bytes;
                true
            })
            .await?;
        Ok(found.map(|()| out))
    }

    /// Fetches `ranges` of the value at `key` and hands each to `each(i, bytes)` (`i` its
    /// place in `ranges`) as soon as the request holding it completes, so that the caller
    /// can decode one part while the others arrive. Ranges closer than `COALESCE_GAP` share
    /// a request while it stays within `MAX_REQUEST` (each request is counted when it is
    /// made); the requests run concurrently, as many at once as `limit` allows (all of them
    /// without one). Stops early when `each` returns false. `None` if the value does not
    /// exist (some ranges may have been handed over already).
    pub async fn get_ranges_each(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        limit: Option<&InFlight>,
        each: impl FnMut(usize, Bytes) -> bool,
    ) -> Result<Option<()>> {
        match self
            .get_ranges_each_if(key, ranges, limit, None, each)
            .await?
        {
            RangesFound::Done => Ok(Some(())),
            RangesFound::Missing => Ok(None),
            RangesFound::Changed => Err(Error::corrupt(key, "the value changed while it was read")),
        }
    }

    /// [`Self::get_ranges_each`], each request on condition that the value's ETag is still
    /// `if_match` (when given): `Changed` once one is refused because it is not.
    pub async fn get_ranges_each_if(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        limit: Option<&InFlight>,
        if_match: Option<&str>,
        mut each: impl FnMut(usize, Bytes) -> bool,
    ) -> Result<RangesFound> {
        let merged = coalesce(ranges, COALESCE_GAP, MAX_REQUEST);
        // Every range lies inside exactly one merged range (merged ranges are disjoint and
        // sorted): the first that ends at or after it.
        let mut members = vec![Vec::new(); merged.len()];
        for (i, r) in ranges.iter().enumerate() {
            if r.end <= r.start {
                if !each(i, Bytes::new()) {
                    return Ok(RangesFound::Done);
                }
                continue;
            }
            members[merged.partition_point(|m| m.end < r.end)].push(i);
        }
        let path = self.path(key);
        let mut pending: futures::stream::FuturesUnordered<_> = merged
            .iter()
            .enumerate()
            .map(|(j, r)| {
                let path = &path;
                async move {
                    let _slot = match limit {
                        Some(l) => l.slot().await,
                        None => None,
                    };
                    self.counts.gets.fetch_add(1, Ordering::Relaxed);
                    let options = GetOptions {
                        range: Some(GetRange::Bounded(r.clone())),
                        if_match: if_match.map(str::to_owned),
                        ..GetOptions::default()
                    };
                    let got = match self.store.get_opts(path, options).await {
                        Ok(result) => body(result).await,
                        Err(e) => Err(e),
                    };
                    (j, got)
                }
            })
            .collect();
        while let Some((j, fetched)) = pending.next().await {
            let part = match fetched {
                Ok(part) => part,
                Err(object_store::Error::NotFound { .. }) => return Ok(RangesFound::Missing),
                Err(object_store::Error::Precondition { .. }) => return Ok(RangesFound::Changed),
                Err(e) => return Err(storage_error(key, e)),
            };
            let m = &merged[j];
            if part.len() as u64 != m.end - m.start {
                return Err(Error::corrupt(key, "the store returned a short range"));
            }
            self.counts
                .bytes
                .fetch_add(part.len() as u64, Ordering::Relaxed);
            for &i in &members[j] {
                let r = &ranges[i];
                let bytes = part.slice((r.start - m.start) as usize..(r.end - m.start) as usize);
                if !each(i, bytes) {
                    return Ok(RangesFound::Done);
                }
            }
        }
        Ok(RangesFound::Done)
    }

    /// A shard's index (`len` bytes at its end or start) and the shard's length, in one
    /// request; `None` if the shard does not exist.
    pub async fn get_index(
        &self,
        key: &str,
        at_end: bool,
        len: u64,
    ) -> Result<Option<(Bytes, u64)>> {
        let found = self.get_index_tagged(key, at_end, len).await?;
        Ok(found.map(|(bytes, size, _)| (bytes, size)))
    }

    /// [`Self::get_index`], and the shard's ETag when the store gives one.
    pub async fn get_index_tagged(
        &self,
        key: &str,
        at_end: bool,
        len: u64,
    ) -> Result<Option<(Bytes, u64, Option<String>)>> {
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let range = if at_end {
            GetRange::Suffix(len)
        } else {
            GetRange::Bounded(0..len)
        };
        let options = GetOptions {
            range: Some(range),
            ..GetOptions::default()
        };
        let result = match self.store.get_opts(&self.path(key), options).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            // A shard shorter than its index: the range cannot be satisfied.
            Err(object_store::Error::NotModified { .. }) => return Ok(None),
            Err(e) => return Err(storage_error(key, e)),
        };
        let size = result.meta.size;
        let tag = result.meta.e_tag.clone();
        let bytes = result.bytes().await.map_err(|e| storage_error(key, e))?;
        self.counts
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(Some((bytes, size, tag)))
    }

    /// The size of the value at `key`, or `None` if it does not exist.
    pub async fn size(&self, key: &str) -> Result<Option<u64>> {
        self.counts.heads.fetch_add(1, Ordering::Relaxed);
        match self.store.head(&self.path(key)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(key, e)),
        }
    }

    /// Every key under `prefix` with its stored size (one LIST, paged by object_store).
    pub async fn list_sizes(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        self.counts.lists.fetch_add(1, Ordering::Relaxed);
        let listed: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&self.path(prefix)))
            .try_collect()
            .await
            .map_err(|e| storage_error(prefix, e))?;
        let strip = if self.prefix.as_ref().is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        Ok(listed
            .into_iter()
            .filter_map(|m| {
                let key = m.location.as_ref().strip_prefix(&strip)?.to_owned();
                Some((key, m.size))
            })
            .collect())
    }

    /// Every key under `prefix` (one LIST, paged by object_store).
    pub async fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let listed = self.list_sizes(prefix).await?;
        Ok(listed.into_iter().map(|(key, _)| key).collect())
    }

    /// The names of the "directories" directly under `prefix` (one LIST with a delimiter,
    /// so a group's chunk keys are not listed).
    pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>> {
        self.counts.lists.fetch_add(1, Ordering::Relaxed);
        let base = self.path(prefix);
        let listed = self
            .store
            .list_with_delimiter(Some(&base))
            .await
            .map_err(|e| storage_error(prefix, e))?;
        Ok(listed
            .common_prefixes
            .into_iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .collect())
    }

    /// Runs `f` on the I/O runtime from synchronous code (never from inside the runtime).
    pub fn block_on<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        let rt = runtime()?;
        rt.block_on(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote over object_store's in-memory store holding `value` at "v".
    fn in_memory(value: Vec<u8>) -> Arc<Remote> {
        let remote = Remote::over(Arc::new(object_store::memory::InMemory::new()));
        let r = remote.clone();
        remote
            .block_on(async move { r.put("v", Bytes::from(value)).await })
            .unwrap();
        remote
    }

    #[test]
    fn ranges_asked_for_an_older_version_come_back_changed() {
        let remote = in_memory(vec![1; 64]);
        let r = remote.clone();
        let (before, after, now) = remote
            .block_on(async move {
                let (_, _, tag) = r.get_index_tagged("v", true, 16).await?.expect("stored");
                r.put("v", Bytes::from(vec![2; 80])).await?;
                let (_, _, new_tag) = r.get_index_tagged("v", true, 16).await?.expect("stored");
                let ask = |tag: Option<String>| {
                    let r = r.clone();
                    async move {
                        let mut got = Vec::new();
                        let found = r
                            .get_ranges_each_if(
                                "v",
                                std::slice::from_ref(&(0..4)),
                                None,
                                tag.as_deref(),
                                |_, b| {
                                    got.push(b);
                                    true
                                },
                            )
                            .await?;
                        Ok::<_, Error>((found, got))
                    }
                };
                Ok((ask(tag).await?, ask(new_tag).await?, ask(None).await?))
            })
            .unwrap();
        assert_eq!(before, (RangesFound::Changed, vec![]));
        assert_eq!(after, (RangesFound::Done, vec![Bytes::from(vec![2; 4])]));
        assert_eq!(now.0, RangesFound::Done);
    }

    #[test]
    fn each_range_is_handed_over_once_with_its_bytes() {
        let value: Vec<u8> = (0..(20u32 << 20)).map(|i| (i % 251) as u8).collect();
        let remote = in_memory(value.clone());
        // Four 4 MiB ranges back to back (two requests of 8 MiB), one far away, one empty.
        let mib = 1u64 << 20;
        let mut ranges: Vec<_> = (0..4).map(|i| i * 4 * mib..(i + 1) * 4 * mib).collect();
        ranges.extend([19 * mib..19 * mib + 10, 5..5]);
        let (r, asked) = (remote.clone(), ranges.clone());
        let got = remote
            .block_on(async move {
                let mut got = Vec::new();
                let found = r
                    .get_ranges_each("v", &asked, Some(&InFlight::new(1)), |i, b| {
                        got.push((i, b));
                        true
                    })
                    .await?;
                Ok((found, got))
            })
            .unwrap();
        assert_eq!(got.0, Some(()));
        let mut seen: Vec<usize> = got.1.iter().map(|(i, _)| *i).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..ranges.len()).collect::<Vec<_>>());
        for (i, bytes) in &got.1 {
            let r = &ranges[*i];
            assert_eq!(&bytes[..], &value[r.start as usize..r.end as usize]);
        }
        assert_eq!(remote.counts.gets.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn handing_over_stops_when_asked_and_a_missing_value_is_none() {
        let remote = in_memory(vec![7; 64 << 20]);
        let mib = 1u64 << 20;
        let ranges: Vec<_> = (0..8).map(|i| i * 8 * mib..(i + 1) * 8 * mib).collect();
        let r = remote.clone();
        let calls = remote
            .block_on(async move {
                let mut calls = 0;
                r.get_ranges_each("v", &ranges, None, |_, _| {
                    calls += 1;
                    false
                })
                .await?;
                Ok(calls)
            })
            .unwrap();
        assert_eq!(calls, 1);
        let r = remote.clone();
        let missing = remote
            .block_on(async move {
                r.get_ranges_each("nope", std::slice::from_ref(&(0..4)), None, |_, _| true)
                    .await
            })
            .unwrap();
        assert_eq!(missing, None);
    }

    #[test]
    fn ranges_closer_than_the_gap_merge() {
        let ranges = [30..40, 0..10, 10..20, 45..50, 200..210, 205..208, 7..7];
        let any = u64::MAX;
        assert_eq!(
            coalesce(&ranges, 0, any),
            vec![0..20, 30..40, 45..50, 200..210]
        );
        assert_eq!(coalesce(&ranges, 5, any), vec![0..20, 30..50, 200..210]);
        assert_eq!(coalesce(&ranges, 1000, any), vec![0..210]);
        assert!(coalesce(&[], 10, any).is_empty());
    }

    #[test]
    fn merged_ranges_stop_growing_at_the_request_size() {
        // Adjacent 10-byte ranges: merged up to 30 bytes, never split themselves.
        let ranges: Vec<_> = (0..10u64).map(|i| i * 10..i * 10 + 10).collect();
        assert_eq!(
            coalesce(&ranges, 0, 30),
            vec![0..30, 30..60, 60..90, 90..100]
        );
        assert_eq!(
            coalesce(&ranges, 0, 25),
            vec![0..20, 20..40, 40..60, 60..80, 80..100]
        );
        // One range longer than the limit stays whole; overlapping ranges always merge.
        assert_eq!(coalesce(&[0..100, 100..110], 0, 30), vec![0..100, 100..110]);
        assert_eq!(coalesce(&[0..100, 50..120], 0, 30), vec![0..120]);
        // Every byte asked for is covered exactly by the merged ranges.
        let odd = [5..9, 0..3, 40..70, 12..30, 71..72];
        let merged = coalesce(&odd, 4, 20);
        for r in &odd {
            assert!(merged.iter().any(|m| m.start <= r.start && r.end <= m.end));
        }
    }
}

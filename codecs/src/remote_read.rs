//! Reading a region from an object store: every stored chunk (or shard) the region touches
//! is fetched concurrently on the I/O runtime, and each piece is decoded on the rayon pool
//! as soon as it arrives. A shard the region covers whole is one request; a shard read in
//! part costs one request for its index, then one per run of nearby inner chunks needed.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use crate::decode::bytes_codecs::DecodeError;
use crate::decode::chain::{ChunkChain, Sharding};
use crate::decode::placement::Placement;
use crate::decode::sharding::{inner_work, ShardIndex};
use crate::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::read::stored_limit;
use crate::remote::{runtime, Remote};

/// One stored chunk (or shard) a read touches, and the chain that decodes it.
pub struct Fetch {
    pub key: String,
    pub chain: Arc<ChunkChain>,
    pub placement: Placement,
}

/// A piece ready to decode: its bytes (`None`: missing, read the fill value), the chain
/// that decodes them, and where they go.
struct Piece {
    key: String,
    /// Whether the chunk (or the shard holding it) is stored.
    stored: bool,
    chain: Arc<ChunkChain>,
    placement: Placement,
    bytes: Option<Bytes>,
}

/// Fetches and decodes `fetches` into `target`. Returns, per fetch, whether its chunk (or
/// shard) was stored (a missing one reads as the fill value).
pub fn read_remote(
    remote: &Arc<Remote>,
    fetches: Vec<Fetch>,
    target: &ChunkTarget<'_>,
) -> Result<Vec<bool>> {
    let mut present = vec![false; fetches.len()];
    let (tx, rx) = channel::<Result<(usize, Piece)>>();
    let concurrency = remote.settings.concurrency.max(1);
    let (remote2, elem) = (remote.clone(), target.elem);
    let fetching = runtime()?.spawn(async move {
        let mut pieces = futures::stream::iter(fetches.into_iter().enumerate())
            .map(|(i, f)| {
                let remote = remote2.clone();
                async move { fetch_one(remote, f, elem).await.map(|list| (i, list)) }
            })
            .buffer_unordered(concurrency);
        while let Some(result) = pieces.next().await {
            match result {
                // A send fails once the reader has stopped: stop fetching too.
                Ok((i, list)) => {
                    if list.into_iter().any(|p| tx.send(Ok((i, p))).is_err()) {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let record = |e: Error| {
        first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    };
    let record = &record;
    let present_mut = &mut present;
    rayon::scope(move |s| loop {
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok(Ok((i, piece))) => {
                present_mut[i] |= piece.stored;
                s.spawn(move |_| {
                    if let Err(e) = decode_piece(&piece, target) {
                        record(e);
                    }
                });
            }
            Ok(Err(e)) => {
                record(e);
                break;
            }
            Err(RecvTimeoutError::Timeout) => {
                // Help decode while the network is busy.
                let _ = rayon::yield_now();
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    });
    fetching.abort();
    match first_error
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        Some(e) => Err(e),
        None => Ok(present),
    }
}

fn decode_piece(piece: &Piece, target: &ChunkTarget<'_>) -> Result<()> {
    match &piece.bytes {
        Some(bytes) => decode_chunk(&piece.chain, bytes, &piece.placement, target, &piece.key),
        None => piece
            .placement
            .fill(target.out, target.fill)
            .map_err(|e| DecodeError::from(e).at(&piece.key)),
    }
}

async fn fetch_one(remote: Arc<Remote>, f: Fetch, elem: usize) -> Result<Vec<Piece>> {
    let chain = f.chain.clone();
    let sharding = chain.plain_sharding();
    // A shard read whole is one request, like a chunk; only a part of one needs its index.
    let Some(spec) = sharding.filter(|_| !f.placement.wants_whole_chunk()) else {
        let bytes = remote.get(&f.key).await?;
        if let Some(b) = &bytes {
            if b.len() as u64 > stored_limit(&chain, &f.placement, elem) {
                return Err(Error::corrupt(
                    &f.key,
                    format!(
                        "stored value is {} bytes, more than any encoding of the chunk",
                        b.len()
                    ),
                ));
            }
        }
        return Ok(vec![Piece {
            key: f.key,
            stored: bytes.is_some(),
            chain,
            placement: f.placement,
            bytes,
        }]);
    };
    fetch_shard(&remote, spec, &chain, f).await
}

/// A shard: its index, then the inner chunks the placement needs, adjacent ones together.
async fn fetch_shard(
    remote: &Remote,
    spec: &Sharding,
    chain: &Arc<ChunkChain>,
    f: Fetch,
) -> Result<Vec<Piece>> {
    let n: u64 = spec.grid(&f.placement.chunk_shape).iter().product();
    let index_len = spec.index_len(n);
    let Some((index_bytes, shard_len)) = remote
        .get_index(&f.key, spec.index_at_end, index_len)
        .await?
    else {
        return Ok(vec![Piece {
            key: f.key,
            stored: false,
            chain: chain.clone(),
            placement: f.placement,
            bytes: None,
        }]);
    };
    // Parse the index as if it sat in a shard of the real length (offsets are checked
    // against that length).
    let index =
        ShardIndex::from_index_bytes(spec, &index_bytes, shard_len, n).map_err(|e| e.at(&f.key))?;
    let inner_chain = Arc::new(spec.inner.clone());
    let work = inner_work(spec, &index, &f.placement);
    let ranges: Vec<_> = work
        .iter()
        .filter_map(|w| w.2.map(|(o, l)| o..o + l))
        .collect();
    let mut fetched = if ranges.is_empty() {
        Vec::new()
    } else {
        remote
            .get_ranges(&f.key, &ranges)
            .await?
            .ok_or_else(|| Error::corrupt(&f.key, "shard vanished while reading"))?
    }
    .into_iter();
    Ok(work
        .into_iter()
        .map(|(coord, placement, entry)| Piece {
            key: format!("{} (inner chunk {coord:?})", f.key),
            stored: true,
            chain: inner_chain.clone(),
            placement,
            bytes: entry.and_then(|_| fetched.next()),
        })
        .collect())
}

//! Reading a plan from an object store: chunks (and inner chunks of shards) found in the
//! chunk cache are placed at once; every other stored chunk is fetched concurrently on the
//! I/O runtime and decoded on the rayon pool as soon as it arrives. A shard the read needs
//! whole is one request, unless it is large and the read has request slots to spare; a
//! shard read in part (or a large one) costs one request for its index, then one per run of
//! nearby inner chunks, runs of at most `MAX_REQUEST` fetched in parallel. The pool thread
//! that waits for the network decodes whatever has arrived and blocks only when there is
//! nothing to decode.

use std::collections::HashMap;
use std::sync::mpsc::{channel, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::StreamExt;

use crate::array::Array;
use crate::cache::ChunkCache;
use crate::decode::bytes_codecs::DecodeError;
use crate::decode::chain::{ChunkChain, Sharding};
use crate::decode::placement::Placement;
use crate::decode::sharding::{inner_chunk_name, inner_parts, InMemory, InnerPart, ShardIndex};
use crate::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::plan::ChunkPlan;
use crate::read::{decode_entry, scatter_entry, stored_limit, CacheSlot};
use crate::remote::{runtime, InFlight, Remote, MAX_REQUEST};

/// What to fetch for one plan item.
enum Want {
    /// A whole chunk.
    Chunk { slot: Option<CacheSlot> },
    /// Inner chunks of a shard, each for a plan item (all of them when `whole`: one
    /// request for the shard, unless `split`: its index, then its ranges in parallel).
    /// Plan items reading parts of the same shard share one.
    Inner {
        parts: Vec<Part>,
        whole: bool,
        split: bool,
    },
}

/// An inner chunk to read for plan item `plan`.
struct Part {
    plan: usize,
    part: InnerPart,
    slot: Option<CacheSlot>,
}

struct Fetch {
    plan: usize,
    key: String,
    placement: Placement,
    want: Want,
}

/// One chunk ready to decode: its bytes (`None`: missing, read the fill value).
struct Piece {
    plan: usize,
    /// Whether the chunk, or the shard holding it, is stored.
    stored: bool,
    name: String,
    chain: Arc<ChunkChain>,
    placement: Placement,
    slot: Option<CacheSlot>,
    bytes: Option<Bytes>,
}

/// Fetches and decodes every chunk of `plans` into `target`. Returns per plan item whether
/// its chunk (or shard) is stored.
pub fn read_remote(
    array: &Array,
    remote: &Arc<Remote>,
    chain: &Arc<ChunkChain>,
    plans: &[ChunkPlan],
    target: &ChunkTarget<'_>,
    cache: Option<&ChunkCache>,
) -> Result<Vec<bool>> {
    let mut present = vec![true; plans.len()];
    let mut hits: Vec<(Bytes, CacheSlot, Placement)> = Vec::new();
    let mut fetches = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let fetch = |want| Fetch {
            plan: i,
            key: plan.key.clone(),
            placement: plan.placement.clone(),
            want,
        };
        match chain.plain_sharding() {
            Some(spec) => {
                let mut parts = Vec::new();
                for part in inner_parts(spec, &plan.placement) {
                    let slot = cache.and_then(|_| array.inner_slot(plan, &part, &spec.inner_shape));
                    match (cache, &slot) {
                        (Some(c), Some(s)) => match c.get(&s.key) {
                            Some(hit) => hits.push((hit, s.clone(), part.placement.clone())),
                            None => parts.push(Part {
                                plan: i,
                                part,
                                slot,
                            }),
                        },
                        _ => parts.push(Part {
                            plan: i,
                            part,
                            slot,
                        }),
                    }
                }
                if !parts.is_empty() {
                    let whole = plan.placement.wants_whole_chunk()
                        && parts.len() as u64
                            == spec
                                .grid(&plan.placement.chunk_shape)
                                .iter()
                                .product::<u64>();
                    fetches.push(fetch(Want::Inner {
                        parts,
                        whole,
                        split: false,
                    }));
                }
            }
            None => {
                let slot = array.slot(plan, cache);
                match (cache, &slot) {
                    (Some(c), Some(s)) => match c.get(&s.key) {
                        Some(hit) => hits.push((hit, s.clone(), plan.placement.clone())),
                        None => fetches.push(fetch(Want::Chunk { slot })),
                    },
                    _ => fetches.push(fetch(Want::Chunk { slot })),
                }
            }
        }
    }
    for f in &fetches {
        match &f.want {
            Want::Chunk { .. } => present[f.plan] = false,
            Want::Inner { parts, .. } => parts.iter().for_each(|p| present[p.plan] = false),
        }
    }
    let mut fetches = one_fetch_per_shard(fetches);
    let concurrency = remote.settings.concurrency.max(1);
    split_large_shards(&mut fetches, concurrency, target.elem);

    let (tx, rx) = channel::<Result<Piece>>();
    let (remote2, chain2, elem) = (remote.clone(), chain.clone(), target.elem);
    let fetching = runtime()?.spawn(async move {
        let limit = Arc::new(InFlight::new(concurrency));
        let mut fetched = futures::stream::iter(fetches)
            .map(|f| {
                let (remote, chain, limit) = (remote2.clone(), chain2.clone(), limit.clone());
                let tx = tx.clone();
                async move {
                    // A send fails once the reader has stopped: stop fetching too.
                    let deliver = |piece: Piece| tx.send(Ok(piece)).is_ok();
                    fetch_one(&remote, &chain, f, elem, &limit, deliver).await
                }
            })
            .buffer_unordered(concurrency);
        while let Some(result) = fetched.next().await {
            let go_on = match result {
                Ok(go_on) => go_on,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    false
                }
            };
            if !go_on {
                break;
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
    rayon::scope(move |s| {
        for (hit, slot, placement) in hits {
            s.spawn(move |_| {
                if let Err(e) = scatter_entry(&hit, &slot, &placement, target) {
                    record(e);
                }
            });
        }
        let mut handle = |piece: Piece| {
            present_mut[piece.plan] |= piece.stored;
            s.spawn(move |_| {
                if let Err(e) = decode_piece(&piece, target, cache) {
                    record(e);
                }
            });
        };
        loop {
            match rx.try_recv() {
                Ok(Ok(piece)) => handle(piece),
                Ok(Err(e)) => {
                    record(e);
                    break;
                }
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    // Decode what has arrived; wait for the network only with nothing to do.
                    if matches!(rayon::yield_now(), Some(rayon::Yield::Executed)) {
                        continue;
                    }
                    match rx.recv() {
                        Ok(Ok(piece)) => handle(piece),
                        Ok(Err(e)) => {
                            record(e);
                            break;
                        }
                        Err(_) => break,
                    }
                }
            }
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

fn decode_piece(piece: &Piece, target: &ChunkTarget<'_>, cache: Option<&ChunkCache>) -> Result<()> {
    let decode = |t: &ChunkTarget<'_>, p: &Placement| match &piece.bytes {
        Some(bytes) => decode_chunk(&piece.chain, bytes, p, t, &piece.name),
        None => p
            .fill(t.out, t.fill)
            .map_err(|e| DecodeError::from(e).at(&piece.name)),
    };
    match (&piece.slot, cache) {
        (Some(slot), Some(cache)) => {
            let entry = decode_entry(decode, slot, &piece.placement.chunk_shape, target)?;
            scatter_entry(&entry, slot, &piece.placement, target)?;
            cache.insert(slot.key.clone(), entry);
            Ok(())
        }
        _ => decode(target, &piece.placement),
    }
}

/// Shards of at least this many decoded bytes, read whole, are fetched as their index and
/// then ranges of at most `MAX_REQUEST` in parallel rather than in one request: the index
/// costs a round trip, which pays off once the shard takes several round trips to arrive
/// at one request's rate.
const SPLIT_SHARDS_FROM: u64 = 4 * MAX_REQUEST;

/// Lets large whole shards go through their index and parallel ranges when the read has
/// request slots to spare (with as many shards as slots, every slot is busy already and the
/// index requests would only add round trips).
fn split_large_shards(fetches: &mut [Fetch], concurrency: usize, elem: usize) {
    if fetches.len() >= concurrency {
        return;
    }
    for f in fetches {
        if let Want::Inner {
            whole: true, split, ..
        } = &mut f.want
        {
            let decoded = (f.placement.chunk_shape.iter())
                .try_fold(elem as u64, |bytes, &d| bytes.checked_mul(d));
            *split = decoded.is_none_or(|bytes| bytes >= SPLIT_SHARDS_FROM);
        }
    }
}

/// Fetches what `f` wants and hands each chunk to `deliver` as soon as its bytes are in
/// (the parts of a shard fetched in ranges, range by range). Returns false when `deliver`
/// did (the reader has stopped).
async fn fetch_one(
    remote: &Remote,
    chain: &Arc<ChunkChain>,
    f: Fetch,
    elem: usize,
    limit: &InFlight,
    mut deliver: impl FnMut(Piece) -> bool,
) -> Result<bool> {
    match f.want {
        Want::Chunk { slot } => {
            let bytes = {
                let _slot = limit.slot().await;
                remote.get(&f.key).await?
            };
            check_size(&bytes, stored_limit(chain, &f.placement, elem), &f.key)?;
            Ok(deliver(Piece {
                plan: f.plan,
                stored: bytes.is_some(),
                name: f.key,
                chain: chain.clone(),
                placement: f.placement,
                slot,
                bytes,
            }))
        }
        Want::Inner {
            parts,
            whole,
            split,
        } => {
            let spec = chain
                .plain_sharding()
                .ok_or_else(|| Error::Internal("inner chunks of an unsharded array".into()))?;
            let inner_chain = Arc::new(spec.inner.clone());
            let n: u64 = spec.grid(&f.placement.chunk_shape).iter().product();
            let limit_whole = stored_limit(chain, &f.placement, elem);
            let piece = |Part { plan, part, slot }: Part, bytes: Option<Bytes>| Piece {
                plan,
                stored: true,
                name: inner_chunk_name(&f.key, &part.coord),
                chain: inner_chain.clone(),
                placement: part.placement,
                slot,
                bytes,
            };
            if whole && !split {
                let shard = {
                    let _slot = limit.slot().await;
                    remote.get(&f.key).await?
                };
                let Some(shard) = shard else {
                    return Ok(missing_shard(&f.key, &inner_chain, parts)
                        .into_iter()
                        .all(deliver));
                };
                check_size(&Some(shard.clone()), limit_whole, &f.key)?;
                let index =
                    ShardIndex::read(spec, &InMemory(&shard), n).map_err(|e| e.at(&f.key))?;
                return Ok(parts.into_iter().all(|p| {
                    let bytes = index
                        .entry(p.part.linear)
                        .map(|(o, l)| shard.slice(o as usize..(o + l) as usize));
                    deliver(piece(p, bytes))
                }));
            }
            // A shard read whole is held to the same size limit either way.
            let shard_limit = whole.then_some(limit_whole);
            let fetched = fetch_inner(
                remote,
                spec,
                &f.key,
                n,
                parts,
                limit,
                shard_limit,
                |p, b| deliver(piece(p, b)),
            )
            .await?;
            Ok(match fetched {
                Inner::Delivered(go_on) => go_on,
                Inner::Missing(parts) => missing_shard(&f.key, &inner_chain, parts)
                    .into_iter()
                    .all(deliver),
            })
        }
    }
}

/// What [`fetch_inner`] did with the parts it was given.
enum Inner {
    /// Handed them over (false: the receiver stopped taking them).
    Delivered(bool),
    /// The shard is missing: nothing was fetched, the parts come back.
    Missing(Vec<Part>),
}

/// Fetches a shard's index, then its inner chunks `parts`, handing each to `deliver` with
/// its bytes (`None` for an empty index entry) as soon as the range holding it arrives.
#[allow(clippy::too_many_arguments)]
async fn fetch_inner(
    remote: &Remote,
    spec: &Sharding,
    key: &str,
    n: u64,
    parts: Vec<Part>,
    limit: &InFlight,
    shard_limit: Option<u64>,
    mut deliver: impl FnMut(Part, Option<Bytes>) -> bool,
) -> Result<Inner> {
    let index = {
        let _slot = limit.slot().await;
        remote
            .get_index(key, spec.index_at_end, spec.index_len(n))
            .await?
    };
    let Some((index_bytes, shard_len)) = index else {
        return Ok(Inner::Missing(parts));
    };
    if shard_limit.is_some_and(|limit| shard_len > limit) {
        return Err(Error::corrupt(
            key,
            format!("stored value is {shard_len} bytes, more than any encoding of the chunk"),
        ));
    }
    // Parse the index as if it sat in a shard of the real length (offsets are checked
    // against that length).
    let index =
        ShardIndex::from_index_bytes(spec, &index_bytes, shard_len, n).map_err(|e| e.at(key))?;
    let mut stored = Vec::new();
    let mut ranges = Vec::new();
    for p in parts {
        match index.entry(p.part.linear) {
            Some((o, l)) => {
                stored.push(Some(p));
                ranges.push(o..o + l);
            }
            None => {
                if !deliver(p, None) {
                    return Ok(Inner::Delivered(false));
                }
            }
        }
    }
    if ranges.is_empty() {
        return Ok(Inner::Delivered(true));
    }
    let mut go_on = true;
    let found = remote
        .get_ranges_each(key, &ranges, Some(limit), |i, bytes| {
            go_on = stored[i].take().is_some_and(|p| deliver(p, Some(bytes)));
            go_on
        })
        .await?;
    match found {
        Some(()) => Ok(Inner::Delivered(go_on)),
        None => Err(Error::corrupt(key, "shard vanished while reading")),
    }
}

/// Pieces that fill the inner chunks of a missing shard.
fn missing_shard(key: &str, chain: &Arc<ChunkChain>, parts: Vec<Part>) -> Vec<Piece> {
    parts
        .into_iter()
        .map(|Part { plan, part, slot }| Piece {
            plan,
            stored: false,
            name: inner_chunk_name(key, &part.coord),
            chain: chain.clone(),
            placement: part.placement,
            slot,
            bytes: None,
        })
        .collect()
}

/// Merges the partial reads of one shard by several plan items (a scattered selection
/// reads one box per inner chunk) into one fetch: its index is then requested once, and
/// nearby inner chunks of different items share range requests.
fn one_fetch_per_shard(fetches: Vec<Fetch>) -> Vec<Fetch> {
    let mut out: Vec<Fetch> = Vec::with_capacity(fetches.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for f in fetches {
        if let Want::Inner { whole: false, .. } = f.want {
            if let Some(&k) = at.get(&f.key) {
                if let (Want::Inner { parts: into, .. }, Want::Inner { parts, .. }) =
                    (&mut out[k].want, f.want)
                {
                    into.extend(parts);
                }
                continue;
            }
            at.insert(f.key.clone(), out.len());
        }
        out.push(f);
    }
    out
}

fn check_size(bytes: &Option<Bytes>, limit: u64, key: &str) -> Result<()> {
    match bytes {
        Some(b) if b.len() as u64 > limit => Err(Error::corrupt(
            key,
            format!(
                "stored value is {} bytes, more than any encoding of the chunk",
                b.len()
            ),
        )),
        _ => Ok(()),
    }
}

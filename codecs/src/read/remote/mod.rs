//! Reading a plan from an object store: chunks (and inner chunks of shards) found in the
//! chunk cache are placed at once; every other stored chunk is fetched concurrently on the
//! I/O runtime and decoded on the rayon pool as soon as it arrives. A shard the read needs
//! whole is one request (with the read's slots to spare, its inner chunks are decoded as they
//! arrive, and a slow one gets its index in a second request alongside), unless it is large;
//! a shard read in part (or a large one) costs one request for its index, then one per run of
//! nearby inner chunks, runs of at most `MAX_REQUEST` fetched in parallel, each on condition
//! that the shard is still the one whose index was read (`If-Match`). The pool thread
//! that waits for the network decodes whatever has arrived and blocks only when there is
//! nothing to decode.

mod fetch;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::StreamExt;

use crate::array::Array;
use crate::codec::chain::ChunkChain;
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::{inner_parts, InnerPart};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::layout::placement::Placement;
use crate::layout::plan::ChunkPlan;
use crate::process::interrupt::Stop;
use crate::read::cache::ChunkCache;
use crate::read::{decode_entry, scatter_entry, CacheSlot};
use crate::store::remote::{runtime, InFlight, Remote, MAX_REQUEST};

use fetch::fetch_one;

/// What to fetch for one plan item.
enum Want {
    /// A whole chunk.
    Chunk { slot: Option<CacheSlot> },
    /// Inner chunks of a shard, each for a plan item (all of them when `whole` says how
    /// the shard is fetched; otherwise its index, then runs of nearby inner chunks). Plan
    /// items reading parts of the same shard share one.
    Inner {
        parts: Vec<Part>,
        whole: Option<WholeShard>,
    },
}

/// How a shard the read needs whole is fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WholeShard {
    /// In one request, decoded once all of it is in.
    OneRequest,
    /// In one request, with its index (if stored at the end) in another alongside, so that
    /// each inner chunk is decoded as soon as its bytes are in.
    Streamed,
    /// Its index, then ranges of at most `MAX_REQUEST` in parallel.
    Split,
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

/// A chunk (inner chunk) the chunk cache holds: its decoded bytes, slot and placement.
type Hit = (Bytes, CacheSlot, Placement);

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
    let (hits, fetches) = plan_fetches(array, chain, plans, cache);
    // Cache hits are stored; a fetched item is once a fetch finds its chunk (shard).
    let mut present = vec![true; plans.len()];
    for f in &fetches {
        match &f.want {
            Want::Chunk { .. } => present[f.plan] = false,
            Want::Inner { parts, .. } => parts.iter().for_each(|p| present[p.plan] = false),
        }
    }
    let mut fetches = one_fetch_per_shard(fetches);
    let concurrency = remote.settings.concurrency.max(1);
    choose_whole_shard_fetches(&mut fetches, concurrency, target.elem);
    let (fetching, arrivals) = start_fetches(remote, chain, fetches, target.elem, concurrency)?;
    let decoded = decode_arrivals(hits, arrivals, target, cache, &mut present);
    fetching.abort();
    decoded.map(|()| present)
}

/// What the cache holds of `slot`.
fn cached(cache: Option<&ChunkCache>, slot: Option<&CacheSlot>) -> Option<(Bytes, CacheSlot)> {
    let (cache, slot) = (cache?, slot?);
    cache.get(&slot.key).map(|hit| (hit, slot.clone()))
}

/// Splits `plans` into what the cache holds and what must be fetched: per plan item its
/// whole chunk, or the inner chunks of its shard that the cache lacks.
fn plan_fetches(
    array: &Array,
    chain: &Arc<ChunkChain>,
    plans: &[ChunkPlan],
    cache: Option<&ChunkCache>,
) -> (Vec<Hit>, Vec<Fetch>) {
    let mut hits = Vec::new();
    let mut fetches = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let fetch = |want| Fetch {
            plan: i,
            key: plan.key.clone(),
            placement: plan.placement.clone(),
            want,
        };
        let Some(spec) = chain.plain_sharding() else {
            let slot = array.slot(plan, cache);
            match cached(cache, slot.as_ref()) {
                Some((hit, s)) => hits.push((hit, s, plan.placement.clone())),
                None => fetches.push(fetch(Want::Chunk { slot })),
            }
            continue;
        };
        let mut parts = Vec::new();
        for part in inner_parts(spec, &plan.placement) {
            let slot = cache.and_then(|_| array.inner_slot(plan, &part, &spec.inner_shape));
            match cached(cache, slot.as_ref()) {
                Some((hit, s)) => hits.push((hit, s, part.placement.clone())),
                None => parts.push(Part {
                    plan: i,
                    part,
                    slot,
                }),
            }
        }
        if parts.is_empty() {
            continue;
        }
        let inner_chunks: u64 = spec.grid(&plan.placement.chunk_shape).iter().product();
        let whole = plan.placement.wants_whole_chunk() && parts.len() as u64 == inner_chunks;
        fetches.push(fetch(Want::Inner {
            parts,
            whole: whole.then_some(WholeShard::OneRequest),
        }));
    }
    (hits, fetches)
}

/// Starts `fetches` on the I/O runtime, at most `concurrency` at a time; each fetched
/// piece arrives on the returned channel, and an error ends it.
fn start_fetches(
    remote: &Arc<Remote>,
    chain: &Arc<ChunkChain>,
    fetches: Vec<Fetch>,
    elem: usize,
    concurrency: usize,
) -> Result<(tokio::task::JoinHandle<()>, Receiver<Result<Piece>>)> {
    let (tx, rx) = channel::<Result<Piece>>();
    let (remote, chain) = (remote.clone(), chain.clone());
    let fetching = runtime()?.spawn(async move {
        let limit = Arc::new(InFlight::new(concurrency));
        let mut fetched = futures::stream::iter(fetches)
            .map(|f| {
                let (remote, chain, limit) = (remote.clone(), chain.clone(), limit.clone());
                let tx = tx.clone();
                async move {
                    // A send fails once the reader has stopped: stop fetching too.
                    let deliver = |piece: Piece| tx.send(Ok(piece)).is_ok();
                    fetch_one(&remote, &chain, f, elem, &limit, deliver).await
                }
            })
            .buffer_unordered(concurrency);
        while let Some(result) = fetched.next().await {
            let go_on = result.unwrap_or_else(|e| {
                let _ = tx.send(Err(e));
                false
            });
            if !go_on {
                break;
            }
        }
    });
    Ok((fetching, rx))
}

/// Places the cache hits and decodes every piece as it arrives, on the pool; the pool
/// thread that waits decodes whatever has arrived and blocks only with nothing to do.
/// Marks the plan items whose chunk a fetch found; returns the first error.
fn decode_arrivals(
    hits: Vec<Hit>,
    arrivals: Receiver<Result<Piece>>,
    target: &ChunkTarget<'_>,
    cache: Option<&ChunkCache>,
    present: &mut [bool],
) -> Result<()> {
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let record = |e: Error| {
        first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    };
    let record = &record;
    let stop = &Stop::current();
    rayon::scope(move |s| {
        for (hit, slot, placement) in hits {
            s.spawn(move |_| {
                if let Err(e) = scatter_entry(&hit, &slot, &placement, target) {
                    record(e);
                }
            });
        }
        let mut handle = |piece: Piece| {
            present[piece.plan] |= piece.stored;
            let stop = stop.clone();
            s.spawn(move |_| {
                if let Err(e) = decode_piece(&piece, target, cache, &stop) {
                    record(e);
                }
            });
        };
        loop {
            // A stopped call fetches no more (the caller aborts the fetches).
            if let Err(e) = stop.check() {
                record(e);
                break;
            }
            let next = match arrivals.try_recv() {
                Ok(next) => next,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    // Decode what has arrived; wait for the network only with nothing to do.
                    if matches!(rayon::yield_now(), Some(rayon::Yield::Executed)) {
                        continue;
                    }
                    match arrivals.recv() {
                        Ok(next) => next,
                        Err(_) => break,
                    }
                }
            };
            match next {
                Ok(piece) => handle(piece),
                Err(e) => {
                    record(e);
                    break;
                }
            }
        }
    });
    match first_error
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn decode_piece(
    piece: &Piece,
    target: &ChunkTarget<'_>,
    cache: Option<&ChunkCache>,
    stop: &Stop,
) -> Result<()> {
    stop.check()?;
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

/// Shards of at least this many decoded bytes (and below [`SPLIT_SHARDS_FROM`]), read whole,
/// are streamed: decoding the ones that arrived first overlaps the transfer of the rest,
/// which is worth the extra request for the index once a shard is more than a few inner
/// chunks.
const STREAM_SHARDS_FROM: u64 = 2 << 20;

/// Picks how each whole shard is fetched, when the read has request slots to spare (with as
/// many shards as slots, every slot is busy already, the shards arrive one after another,
/// and index requests would only add round trips): large ones split into ranges, mid-sized
/// ones streamed with their index alongside. A streamed shard takes two requests at once,
/// so streaming needs two slots per shard.
fn choose_whole_shard_fetches(fetches: &mut [Fetch], concurrency: usize, elem: usize) {
    if fetches.len() >= concurrency {
        return;
    }
    let stream = fetches.len() * 2 <= concurrency;
    for f in fetches {
        if let Want::Inner {
            whole: Some(how), ..
        } = &mut f.want
        {
            let decoded = (f.placement.chunk_shape.iter())
                .try_fold(elem as u64, |bytes, &d| bytes.checked_mul(d));
            *how = match decoded {
                None => WholeShard::Split,
                Some(b) if b >= SPLIT_SHARDS_FROM => WholeShard::Split,
                Some(b) if stream && b >= STREAM_SHARDS_FROM => WholeShard::Streamed,
                Some(_) => WholeShard::OneRequest,
            };
        }
    }
}

/// Merges the partial reads of one shard by several plan items (a scattered selection
/// reads one box per inner chunk) into one fetch: its index is then requested once, and
/// nearby inner chunks of different items share range requests.
fn one_fetch_per_shard(fetches: Vec<Fetch>) -> Vec<Fetch> {
    let mut out: Vec<Fetch> = Vec::with_capacity(fetches.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for f in fetches {
        if let Want::Inner { whole: None, .. } = f.want {
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

//! Reading a plan from an object store: chunks (and inner chunks of shards) found in the
//! chunk cache are placed at once; every other stored chunk is fetched concurrently on the
//! I/O runtime and decoded on the rayon pool as soon as it arrives. A shard the read needs
//! whole is one request (with the read's slots to spare, its inner chunks are decoded as they
//! arrive, and a slow one gets its index in a second request alongside), unless it is large;
//! a shard read in part (or a large one) costs one request for its index, then one per run of
//! nearby inner chunks, runs of at most `MAX_REQUEST` fetched in parallel. The pool thread
//! that waits for the network decodes whatever has arrived and blocks only when there is
//! nothing to decode.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::mpsc::{channel, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::Fuse;
use futures::{FutureExt, StreamExt};

use crate::array::Array;
use crate::codec::chain::{ChunkChain, Sharding};
use crate::codec::decode::bytes_codecs::DecodeError;
use crate::codec::decode::sharding::{inner_chunk_name, inner_parts, InnerPart, ShardIndex};
use crate::codec::decode::{decode_chunk, ChunkTarget};
use crate::error::{Error, Result};
use crate::layout::placement::Placement;
use crate::layout::plan::ChunkPlan;
use crate::read::cache::ChunkCache;
use crate::read::{decode_entry, scatter_entry, stored_limit, CacheSlot};
use crate::store::ranged::InMemory;
use crate::store::remote::{runtime, InFlight, Remote, MAX_REQUEST};
use crate::store::response_body::Arriving;

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
                        whole: whole.then_some(WholeShard::OneRequest),
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
    choose_whole_shard_fetches(&mut fetches, concurrency, target.elem);

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
        Want::Inner { parts, whole } => {
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
            if whole == Some(WholeShard::OneRequest) {
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
            let fetched = if whole == Some(WholeShard::Streamed) {
                let deliver = |p, b| deliver(piece(p, b));
                fetch_streamed(remote, spec, &f.key, n, parts, limit, limit_whole, deliver).await?
            } else {
                // A shard read whole is held to the same size limit either way.
                let shard_limit = whole.is_some().then_some(limit_whole);
                let deliver = |p, b| deliver(piece(p, b));
                fetch_inner(remote, spec, &f.key, n, parts, limit, shard_limit, deliver).await?
            };
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
        return Err(too_long(key, shard_len));
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

/// Fetches a whole shard in one request and hands each of its inner chunks `parts` to
/// `deliver` as soon as its bytes are in. The index is read from the body's start; stored at
/// the end, it is fetched by a second request if the body arrives slowly enough for that to
/// pay (see [`worth_asking_for_index`]), else read once the body is in. If the two requests
/// saw different versions of the shard, the read fails rather than mix them.
#[allow(clippy::too_many_arguments)]
async fn fetch_streamed(
    remote: &Remote,
    spec: &Sharding,
    key: &str,
    n: u64,
    parts: Vec<Part>,
    limit: &InFlight,
    shard_limit: u64,
    mut deliver: impl FnMut(Part, Option<Bytes>) -> bool,
) -> Result<Inner> {
    let index_len = spec.index_len(n);
    let _slot = limit.slot().await;
    let asked_at = Instant::now();
    let Some((shard_len, frames)) = remote.get_stream(key).await? else {
        return Ok(Inner::Missing(parts));
    };
    let round_trip = asked_at.elapsed();
    let len = usize::try_from(shard_len)
        .ok()
        .filter(|_| shard_len <= shard_limit)
        .ok_or_else(|| too_long(key, shard_len))?;
    if shard_len < index_len {
        return Err(Error::corrupt(
            key,
            format!("shard is {shard_len} bytes, shorter than its {index_len}-byte index"),
        ));
    }
    let mut frames = frames.fuse();
    let mut body = Arriving::new(len);
    let body_from = Instant::now();
    // The index request, once made. It takes no request slot of its own: shards are
    // streamed only when the read has two slots for each (`choose_whole_shard_fetches`).
    let mut index_request = Fuse::terminated();
    let mut asked = !spec.index_at_end;
    // The index from the other request, if it came back (for a shard of this length). The
    // loop reads the index from it at once, so when set it is the index the read used.
    let mut early: Option<Bytes> = None;
    let mut parts = Some(parts);
    // Once the index is known: the stored inner chunks still to hand over, the one that
    // ends first last, each with its byte range.
    let mut waiting: Option<Vec<(Range<u64>, Part)>> = None;
    loop {
        let filled = body.filled() as u64;
        if waiting.is_none() {
            let raw = if let Some(raw) = &early {
                Some(raw.clone())
            } else if !spec.index_at_end && filled >= index_len {
                Some(body.head().slice(..index_len as usize))
            } else if body.is_complete() {
                Some(body.head().slice(len - index_len as usize..))
            } else {
                None
            };
            if let Some(raw) = raw {
                let index = ShardIndex::from_index_bytes(spec, &raw, shard_len, n)
                    .map_err(|e| e.at(key))?;
                let mut stored = Vec::new();
                for p in parts.take().into_iter().flatten() {
                    match index.entry(p.part.linear) {
                        Some((o, l)) => stored.push((o..o + l, p)),
                        None if !deliver(p, None) => return Ok(Inner::Delivered(false)),
                        None => {}
                    }
                }
                stored.sort_by_key(|(r, _)| std::cmp::Reverse(r.end));
                waiting = Some(stored);
            }
        }
        if let Some(stored) = &mut waiting {
            if stored.last().is_some_and(|(r, _)| r.end <= filled) {
                let head = body.head();
                while stored.last().is_some_and(|(r, _)| r.end <= filled) {
                    let Some((r, p)) = stored.pop() else { break };
                    if !deliver(p, Some(head.slice(r.start as usize..r.end as usize))) {
                        return Ok(Inner::Delivered(false));
                    }
                }
            }
        }
        if body.is_complete() {
            break;
        }
        if !asked && worth_asking_for_index(round_trip, body_from.elapsed(), filled, shard_len) {
            asked = true;
            index_request = remote.get_index(key, true, index_len).boxed().fuse();
        }
        futures::select_biased! {
            got = index_request => {
                // A failed index request costs nothing: the body brings the index too.
                if let Ok(Some((raw, at_len))) = got {
                    early = (at_len == shard_len).then_some(raw);
                }
            }
            frame = frames.next() => {
                let Some(frame) = frame else {
                    return Err(Error::corrupt(
                        key,
                        format!("the store sent {filled} of the {shard_len} bytes it announced"),
                    ));
                };
                body.push(&frame?).map_err(|_| {
                    Error::corrupt(
                        key,
                        format!("the store sent more than the {shard_len} bytes it announced"),
                    )
                })?;
            }
        }
    }
    if early.is_some_and(|raw| body.head()[len - index_len as usize..] != raw[..]) {
        return Err(Error::corrupt(
            key,
            "the shard changed while it was read (its index and its body differ); read again",
        ));
    }
    Ok(Inner::Delivered(true))
}

/// Whether a shard body that started arriving `elapsed` ago, `filled` of `len` bytes in so
/// far, will take long enough still that a request for its index (about one `round_trip`,
/// the time its headers took) pays: inner chunks then decode while the rest arrives. That
/// takes more than three round trips still to come; a faster body is left alone, as the
/// extra request would cost the store more than it saves (`benches/s3_read.py`: at 1000
/// Mbit/s per request a lower bar added requests and no speed). The rate is judged after
/// half a round trip of the body, not from its first frames (a body often starts slowly).
fn worth_asking_for_index(round_trip: Duration, elapsed: Duration, filled: u64, len: u64) -> bool {
    let round_trip = round_trip.max(MIN_ROUND_TRIP).as_secs_f64();
    let elapsed = elapsed.as_secs_f64();
    if filled == 0 || elapsed < round_trip / 2.0 {
        return false;
    }
    let rest = (len - filled) as f64 * elapsed / filled as f64;
    rest > 3.0 * round_trip
}

/// Round trips are taken to be at least this long when judging a body's rate.
const MIN_ROUND_TRIP: Duration = Duration::from_millis(10);

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

fn check_size(bytes: &Option<Bytes>, limit: u64, key: &str) -> Result<()> {
    match bytes {
        Some(b) if b.len() as u64 > limit => Err(too_long(key, b.len() as u64)),
        _ => Ok(()),
    }
}

/// A stored value longer than any encoding of its chunk (or shard) could be.
fn too_long(key: &str, len: u64) -> Error {
    Error::corrupt(
        key,
        format!("stored value is {len} bytes, more than any encoding of the chunk"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_index_request_is_made_only_for_a_body_still_far_from_done() {
        // 20 ms round trips; 10 of 100 MiB in after 50 ms: 450 ms to go.
        assert!(worth_asking_for_index(20 * MS, 50 * MS, 10, 100));
        // Half in after 50 ms: 50 ms to go, under three round trips.
        assert!(!worth_asking_for_index(20 * MS, 50 * MS, 50, 100));
        // Judged only after half a round trip of the body, and never with nothing in.
        assert!(!worth_asking_for_index(20 * MS, 9 * MS, 1, 100));
        assert!(!worth_asking_for_index(20 * MS, 500 * MS, 0, 100));
        // Round trips under 10 ms count as 10 ms: 23 ms to go is not enough.
        assert!(!worth_asking_for_index(MS, 10 * MS, 30, 100));
        assert!(worth_asking_for_index(MS, 10 * MS, 10, 100));
    }
}

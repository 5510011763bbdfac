//! Fetching what one plan item wants from an object store: a chunk, a shard whole (in one
//! request, or streamed with its inner chunks decoded as they arrive), or a shard's index and
//! then runs of its inner chunks.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::Fuse;
use futures::{FutureExt, StreamExt};

use crate::codec::chain::{ChunkChain, Sharding};
use crate::codec::decode::sharding::{inner_chunk_name, ShardIndex};
use crate::error::{Error, Result};
use crate::read::stored_limit;
use crate::store::ranged::InMemory;
use crate::store::remote::{InFlight, RangesFound, Remote};
use crate::store::response_body::ArrivingBody;

use super::{Fetch, Part, Piece, Want, WholeShard};

/// Fetches what `f` wants and hands each chunk to `deliver` as soon as its bytes are in
/// (the parts of a shard fetched in ranges, range by range). Returns false when `deliver`
/// did (the reader has stopped).
pub(super) async fn fetch_one(
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

/// How many times a shard read in part starts again because the shard was replaced while it
/// was read.
const CHANGED_RETRIES: usize = 3;

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
    mut parts: Vec<Part>,
    limit: &InFlight,
    shard_limit: Option<u64>,
    mut deliver: impl FnMut(Part, Option<Bytes>) -> bool,
) -> Result<Inner> {
    // The ranges are asked for on condition that the shard is still the one whose index
    // was read (`If-Match` its ETag): a shard replaced in between would otherwise be read
    // with the old index. Then the parts not handed over yet start again from the new
    // index: each inner chunk comes whole from one version of the shard.
    for _ in 0..=CHANGED_RETRIES {
        let index = {
            let _slot = limit.slot().await;
            remote
                .get_index_tagged(key, spec.index_at_end, spec.index_len(n))
                .await?
        };
        let Some((index_bytes, shard_len, tag)) = index else {
            return Ok(Inner::Missing(parts));
        };
        if shard_limit.is_some_and(|limit| shard_len > limit) {
            return Err(too_long(key, shard_len));
        }
        // Parse the index as if it sat in a shard of the real length (offsets are checked
        // against that length).
        let index = ShardIndex::from_index_bytes(spec, &index_bytes, shard_len, n)
            .map_err(|e| e.at(key))?;
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
            .get_ranges_each_if(key, &ranges, Some(limit), tag.as_deref(), |i, bytes| {
                go_on = stored[i].take().is_some_and(|p| deliver(p, Some(bytes)));
                go_on
            })
            .await?;
        match found {
            RangesFound::Done => return Ok(Inner::Delivered(go_on)),
            RangesFound::Missing => {
                return Err(Error::corrupt(key, "shard vanished while reading"))
            }
            RangesFound::Changed if !go_on => return Ok(Inner::Delivered(false)),
            RangesFound::Changed => parts = stored.into_iter().flatten().collect(),
        }
    }
    Err(Error::corrupt(
        key,
        format!(
            "the shard changed {} times while it was read; read again",
            CHANGED_RETRIES + 1
        ),
    ))
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
    let mut body = ArrivingBody::new(len);
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

pub(super) fn check_size(bytes: &Option<Bytes>, limit: u64, key: &str) -> Result<()> {
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

//! Object-store response bodies gathered into buffers kept from earlier responses.
//!
//! Why: a response arrives as many small frames, and `object_store` gathers them into a
//! fresh `Vec` per request. A fresh allocation of a few MiB is new memory, so every one of
//! its pages faults (and is zeroed) while the frames are copied in. Profiled on
//! `benches/s3_read.py` (256 MiB of sharded zstd through 8 MiB range requests), that copy was
//! 16 % of the reader's CPU, 13 points of it page faults. Here a body goes into a buffer an
//! earlier response used, already faulted in, and the buffer comes back when the last
//! `Bytes` slice of it is dropped (the decoded chunk's bytes, or a cache entry).
//!
//! Bounded: only buffers of at least [`MIN_BYTES`] are kept, [`keep_bytes`] in all (the
//! oldest go first). A forked child never touches its parent's buffers.
//!
//! [`ArrivingBody`] is a body whose first bytes can be handed out (as `Bytes`) while the rest
//! still arrives: a shard read whole decodes its first inner chunks during the transfer.

use std::ptr::NonNull;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::memory::kept_buffers::KeptBuffers;

/// Smaller bodies come from the allocator's own free lists, already faulted in.
pub const MIN_BYTES: usize = 1 << 20;
/// At most this much is kept: the bodies of a read with 32 requests of the largest size in
/// flight, all of them arriving at once. Kept memory counts in the process's RSS.
const KEEP_AT_MOST: usize = 256 << 20;
/// A body announced as longer than this is reserved this much up front and grows as its
/// bytes arrive, so a length header alone cannot make the process allocate it.
const RESERVE_AT_MOST: usize = 256 << 20;

static POOL: KeptBuffers = KeptBuffers::new();

/// The most bytes kept: an eighth of what [`crate::memory::recycle`] may keep of outputs, at most
/// [`KEEP_AT_MOST`], so `ZARRPIPE_RECYCLE_BYTES` bounds both (`0`: keep nothing).
#[must_use]
pub fn keep_bytes() -> usize {
    (crate::memory::recycle::limit() / 8).min(KEEP_AT_MOST)
}

/// An empty buffer with room for `len` bytes: the smallest kept one that fits, or a new one.
fn take(len: usize) -> Vec<u8> {
    let len = len.min(RESERVE_AT_MOST);
    if len >= MIN_BYTES {
        if let Some(buf) = POOL.take(len..) {
            return buf;
        }
    }
    let mut buf = Vec::new();
    // Rounded up, so that a kept buffer fits any later body of up to its size class (the
    // untouched rest costs address space, not memory). On failure the buffer grows as the
    // bytes arrive, as it would for an unknown length.
    let room = if len >= MIN_BYTES {
        len.next_power_of_two()
    } else {
        len
    };
    let _ = buf.try_reserve_exact(room);
    buf
}

/// Keeps `buf` for a later body, or frees it (small, or too large).
fn give(buf: Vec<u8>) {
    if buf.capacity() >= MIN_BYTES {
        POOL.keep(buf, keep_bytes());
    }
}

/// A body's buffer, handed back by the last `Bytes` that refers to it.
struct Kept(Vec<u8>);

impl AsRef<[u8]> for Kept {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.0));
    }
}

/// The whole body of a response announced as `len` bytes, from its frames. A body of one
/// frame is that frame, uncopied; longer ones are copied into a kept buffer.
pub async fn gather<E>(
    mut frames: impl Stream<Item = Result<Bytes, E>> + Unpin,
    len: u64,
) -> Result<Bytes, E> {
    let Some(first) = frames.next().await.transpose()? else {
        return Ok(Bytes::new());
    };
    let Some(second) = frames.next().await.transpose()? else {
        return Ok(first);
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let mut buf = take(len.max(first.len() + second.len()));
    buf.extend_from_slice(&first);
    buf.extend_from_slice(&second);
    while let Some(frame) = frames.next().await {
        buf.extend_from_slice(&frame?);
    }
    Ok(Bytes::from_owner(Kept(buf)))
}

/// A body of a known length, filled frame by frame, whose filled part can be handed out
/// while the rest arrives (one buffer, from the kept ones, allocated up front).
///
/// This is the one writer of the buffer: it only writes past [`Self::filled`], and the
/// `Bytes` it hands out only see bytes before it, which are never written again.
pub struct ArrivingBody {
    buf: Arc<Filling>,
    filled: usize,
    len: usize,
}

/// The buffer behind an [`ArrivingBody`] body and the `Bytes` it handed out; back to the kept
/// buffers when the last of them goes.
struct Filling {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: `Filling` owns its allocation (a `Vec<u8>`'s); the one writer (`ArrivingBody`) and the
// readers (`Filled`) touch disjoint bytes, as the comments at each access say.
unsafe impl Send for Filling {}
// SAFETY: as for `Send`: the writer and the readers touch disjoint bytes.
unsafe impl Sync for Filling {}

impl Drop for Filling {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `capacity` come from a `Vec<u8>` taken apart in `ArrivingBody::new`;
        // nothing refers to the buffer any more (this was the last `Arc`).
        let buf = unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.capacity) };
        give(buf);
    }
}

/// The first `len` bytes of a [`Filling`], all written.
struct Filled {
    buf: Arc<Filling>,
    len: usize,
}

impl AsRef<[u8]> for Filled {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were written before this was made (`ArrivingBody::head`)
        // and are never written again: the writer only writes past them.
        unsafe { std::slice::from_raw_parts(self.buf.ptr.as_ptr(), self.len) }
    }
}

/// A frame would run past the announced length of an [`ArrivingBody`] body.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLong;

impl ArrivingBody {
    /// An empty body of `len` bytes. The caller bounds `len`: a length header alone must not
    /// make the process allocate any amount.
    #[must_use]
    pub fn new(len: usize) -> Self {
        let mut buf = take(len);
        buf.reserve_exact(len);
        let mut buf = std::mem::ManuallyDrop::new(buf);
        let filling = Filling {
            // A `Vec`'s pointer is never null (dangling when nothing is allocated).
            ptr: NonNull::new(buf.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            capacity: buf.capacity(),
        };
        Self {
            buf: Arc::new(filling),
            filled: 0,
            len,
        }
    }

    /// How many bytes have arrived.
    #[must_use]
    pub fn filled(&self) -> usize {
        self.filled
    }

    /// Whether all the announced bytes have arrived.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.filled == self.len
    }

    /// Appends a frame; fails if it would run past the announced length.
    pub fn push(&mut self, frame: &[u8]) -> Result<(), TooLong> {
        if frame.len() > self.len - self.filled {
            return Err(TooLong);
        }
        // SAFETY: bytes `filled..filled + frame.len()` lie inside the allocation (checked
        // above: `len` is at most the capacity) and no `Filled` sees them yet; `self` is
        // their only writer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.buf.ptr.as_ptr().add(self.filled),
                frame.len(),
            );
        }
        self.filled += frame.len();
        Ok(())
    }

    /// The bytes that have arrived so far, as `Bytes` that stay valid while the rest arrives.
    #[must_use]
    pub fn head(&self) -> Bytes {
        Bytes::from_owner(Filled {
            buf: self.buf.clone(),
            len: self.filled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&[u8]]) -> impl Stream<Item = Result<Bytes, ()>> + Unpin {
        let owned: Vec<Result<Bytes, ()>> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        futures::stream::iter(owned)
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    #[test]
    fn a_body_is_its_frames_in_order_and_its_buffer_serves_the_next_one() {
        if keep_bytes() < 2 * MIN_BYTES {
            return; // keeping turned off in this environment
        }
        let a = vec![1u8; MIN_BYTES];
        let b = vec![2u8; 3];
        let body = run(gather(frames(&[&a, &b]), (MIN_BYTES + 3) as u64)).unwrap();
        assert_eq!(body.len(), MIN_BYTES + 3);
        assert!(body[..MIN_BYTES].iter().all(|&x| x == 1) && body[MIN_BYTES..] == [2, 2, 2]);
        let at = body.as_ptr();
        let slice = body.slice(MIN_BYTES..);
        drop(body);
        // Still referred to by the slice: not kept yet, so the next body gets another buffer.
        let other = run(gather(frames(&[&a, &b]), (MIN_BYTES + 3) as u64)).unwrap();
        assert_ne!(other.as_ptr(), at);
        assert_eq!(&slice[..], &[2, 2, 2]);
        drop(slice);
        let again = run(gather(frames(&[&b, &a]), (MIN_BYTES + 3) as u64)).unwrap();
        assert_eq!(again.as_ptr(), at, "the freed buffer is reused");
        assert!(again[..3] == [2, 2, 2] && again[3..].iter().all(|&x| x == 1));
    }

    #[test]
    fn one_frame_is_not_copied_and_an_error_is_passed_on() {
        let only = Bytes::from(vec![7u8; 100]);
        let at = only.as_ptr();
        let body = run(gather(futures::stream::iter([Ok::<_, ()>(only)]), 100)).unwrap();
        assert_eq!(body.as_ptr(), at);
        let failing = futures::stream::iter([Ok(Bytes::from_static(b"ab")), Err("cut")]);
        assert_eq!(run(gather(failing, 4)), Err("cut"));
        let empty = futures::stream::iter(Vec::<Result<Bytes, ()>>::new());
        assert!(run(gather(empty, 0)).unwrap().is_empty());
    }

    #[test]
    fn an_arriving_body_hands_out_what_has_arrived_while_the_rest_comes() {
        let mut body = ArrivingBody::new(10);
        assert!(body.head().is_empty() && !body.is_complete());
        body.push(b"abcd").unwrap();
        let first = body.head();
        body.push(b"efg").unwrap();
        assert_eq!((&first[..], body.filled()), (&b"abcd"[..], 7));
        assert_eq!(
            body.push(b"hijk"),
            Err(TooLong),
            "past the announced length"
        );
        body.push(b"hij").unwrap();
        assert!(body.is_complete());
        let whole = body.head();
        drop(body);
        assert_eq!((&first[..], &whole[..]), (&b"abcd"[..], &b"abcdefghij"[..]));
        assert_eq!(&whole.slice(3..6)[..], b"def");
    }

    #[test]
    fn an_arriving_body_goes_back_to_the_kept_buffers_when_its_last_bytes_go() {
        if keep_bytes() < 4 * MIN_BYTES {
            return; // keeping turned off in this environment
        }
        let len = MIN_BYTES + 5;
        let mut body = ArrivingBody::new(len);
        body.push(&vec![3u8; len]).unwrap();
        let part = body.head().slice(MIN_BYTES..);
        let at = body.head().as_ptr();
        drop(body);
        // Still referred to: the next body gets another buffer.
        let other = ArrivingBody::new(len);
        assert_ne!(other.head().as_ptr(), at);
        assert_eq!(&part[..], &[3u8; 5]);
        drop(part);
        let again = ArrivingBody::new(len);
        assert_eq!(again.head().as_ptr(), at, "the freed buffer is reused");
        drop(other);
    }

    #[test]
    fn an_announced_length_is_not_trusted_for_the_allocation() {
        let body = run(gather(frames(&[b"ab", b"cd"]), u64::MAX)).unwrap();
        assert_eq!(&body[..], b"abcd");
    }
}

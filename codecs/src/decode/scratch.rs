//! Per-thread reusable byte buffers, so that reading chunk after chunk does not allocate
//! (and page-fault) a fresh buffer each time.
//!
//! Buffers are taken out of the thread's pool and given back, never borrowed across a call:
//! rayon may run another task on this thread while one waits (work stealing), and that task
//! must find the pool usable.

use std::cell::RefCell;

/// Buffers larger than this are freed rather than kept.
const KEEP_AT_MOST: usize = 256 << 20;
/// Enough for the encoded chunk and the piece buffer a decode holds at once.
const POOL_SIZE: usize = 2;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, the smallest in the pool (whatever capacity an earlier user left in it):
/// a job that needs a large one asks for it with [`take_fitting`].
#[must_use]
pub fn take() -> Vec<u8> {
    take_fitting(0)
}

/// Returns a buffer to this thread's pool.
pub fn give(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > KEEP_AT_MOST {
        return;
    }
    buf.clear();
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_SIZE {
            pool.push(buf);
            return;
        }
        // Full: keep the larger buffers, whose memory is the dearer to fault in again.
        if let Some(smallest) = pool.iter_mut().min_by_key(|b| b.capacity()) {
            if smallest.capacity() < buf.capacity() {
                *smallest = buf;
            }
        }
    });
}

/// The pooled buffer that suits `n` bytes best: the smallest holding `n`, else the largest
/// (so a large buffer is not taken for a small job and then regrown for the large one).
#[must_use]
pub fn take_fitting(n: usize) -> Vec<u8> {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        let fits = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= n)
            .min_by_key(|&i| pool[i].capacity());
        let pick = fits.or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].capacity()));
        pick.map(|i| pool.swap_remove(i))
    })
    .unwrap_or_default()
}

/// A pooled buffer that goes back to the pool when dropped.
pub struct Scratch(Vec<u8>);

impl Scratch {
    #[must_use]
    pub fn new() -> Self {
        Self(take())
    }

    /// The pooled buffer that suits `n` bytes best (see [`take_fitting`]).
    #[must_use]
    pub fn fitting(n: usize) -> Self {
        Self(take_fitting(n))
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::ops::Deref for Scratch {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacities() -> Vec<usize> {
        let mut c: Vec<usize> = POOL.with(|p| p.borrow().iter().map(Vec::capacity).collect());
        c.sort_unstable();
        c
    }

    #[test]
    fn large_jobs_get_the_large_buffer_and_small_ones_the_small() {
        give(Vec::with_capacity(100));
        give(Vec::with_capacity(10_000));
        assert_eq!(take_fitting(5_000).capacity(), 10_000);
        give(Vec::with_capacity(10_000));
        assert_eq!(take().capacity(), 100);
        // Nothing holds 20 000 bytes: the largest is the best start.
        assert_eq!(take_fitting(20_000).capacity(), 10_000);
        assert!(take().capacity() == 0 && capacities().is_empty());
    }

    #[test]
    fn a_full_pool_keeps_its_largest_buffers() {
        for cap in [10, 1_000, 100, 5] {
            give(Vec::with_capacity(cap));
        }
        assert_eq!(capacities(), [100, 1_000]);
        give(Vec::with_capacity(KEEP_AT_MOST + 1));
        assert_eq!(capacities(), [100, 1_000]);
    }
}

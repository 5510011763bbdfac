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
        }
    });
}

/// The pooled buffer that suits `n` bytes best: the smallest holding `n`, else the largest.
/// Taking by size matters: a chunk's encoded bytes and the piece its decoder writes through
/// take turns in the pool, and when the small one went to the large job it was regrown there
/// every chunk while the large one held its memory beside it (+37 MiB peak RSS in the
/// benchmark's blosc read-all on two threads).
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
    /// The pooled buffer that suits `n` bytes best (see [`take_fitting`]).
    #[must_use]
    pub fn fitting(n: usize) -> Self {
        Self(take_fitting(n))
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
        assert_eq!(take_fitting(0).capacity(), 100);
        // Nothing holds 20 000 bytes: the largest is the best start.
        assert_eq!(take_fitting(20_000).capacity(), 10_000);
        assert!(take_fitting(1).capacity() == 0 && capacities().is_empty());
    }

    #[test]
    fn a_full_pool_keeps_what_it_has() {
        // Keeping the larger ones instead held more memory between reads (the benchmark's
        // blosc and sharded read-alls: +37 MiB peak RSS on two threads).
        for cap in [10, 1_000, 100, 5] {
            give(Vec::with_capacity(cap));
        }
        assert_eq!(capacities(), [10, 1_000]);
        assert_eq!(take_fitting(1_000).capacity(), 1_000);
        give(Vec::with_capacity(KEEP_AT_MOST + 1));
        assert_eq!(capacities(), [10]);
    }
}

//! A bounded set of freed byte buffers, kept (pages already faulted in) for a later use
//! instead of being handed back to the kernel. [`crate::recycle`] keeps read outputs in one,
//! [`crate::response_body`] object-store response bodies in another.
//!
//! A forked child never touches its parent's buffers: a parent thread may have been changing
//! the set at the instant of the fork.

use std::sync::OnceLock;

use crate::fork::{forked, ProcessLock};

pub struct KeptBuffers {
    buffers: ProcessLock<Vec<Vec<u8>>>,
    /// The process the buffers belong to (set at first use).
    owner: OnceLock<u32>,
}

impl KeptBuffers {
    pub const fn new() -> Self {
        Self {
            buffers: ProcessLock::new(Vec::new()),
            owner: OnceLock::new(),
        }
    }

    fn usable(&self) -> bool {
        !forked(*self.owner.get_or_init(std::process::id))
    }

    /// Keeps `buf` (emptied), then drops the oldest kept buffers until their capacities add
    /// up to at most `limit` bytes. A buffer over `limit` by itself is freed.
    pub fn keep(&self, mut buf: Vec<u8>, limit: usize) {
        if buf.capacity() > limit || !self.usable() {
            return;
        }
        buf.clear();
        let pushed_out = self.buffers.with(|kept| {
            kept.push(buf);
            let mut total: usize = kept.iter().map(Vec::capacity).sum();
            let mut out = Vec::new();
            while total > limit {
                let oldest = kept.remove(0);
                total -= oldest.capacity();
                out.push(oldest);
            }
            out
        });
        // Freed outside the lock: unmapping a GiB takes a while.
        drop(pushed_out);
    }

    /// Takes the kept buffer of the smallest capacity that `fits` accepts (empty, its
    /// capacity untouched), the last kept of those that tie, if there is one.
    pub fn take(&self, fits: impl Fn(usize) -> bool) -> Option<Vec<u8>> {
        if !self.usable() {
            return None;
        }
        self.buffers.with(|kept| {
            let (at, _) = (kept.iter().enumerate().rev())
                .filter(|(_, b)| fits(b.capacity()))
                .min_by_key(|(_, b)| b.capacity())?;
            Some(kept.swap_remove(at))
        })
    }
}

impl Default for KeptBuffers {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_fitting_buffer_is_taken_and_the_oldest_go_first() {
        let kept = KeptBuffers::new();
        kept.keep(Vec::with_capacity(100), 1000);
        kept.keep(Vec::with_capacity(400), 1000);
        kept.keep(Vec::with_capacity(300), 1000);
        let got = kept.take(|c| c >= 250).expect("two fit");
        assert_eq!(got.capacity(), 300);
        kept.keep(Vec::with_capacity(600), 1000); // 100 + 400 + 600 > 1000: 100 goes
        assert!(kept.take(|c| c < 300).is_none());
        kept.keep(Vec::with_capacity(2000), 1000); // over the limit by itself: freed
        assert!(kept.take(|c| c >= 1000).is_none());
        assert_eq!(kept.take(|_| true).map(|b| b.capacity()), Some(400));
        let (first, second) = (Vec::with_capacity(50), Vec::with_capacity(50));
        let second_at = second.as_ptr();
        kept.keep(first, 1000);
        kept.keep(second, 1000);
        assert_eq!(kept.take(|c| c == 50).map(|b| b.as_ptr()), Some(second_at));
    }
}

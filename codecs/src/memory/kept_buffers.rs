//! A bounded set of freed byte buffers, kept (pages already faulted in) for a later use
//! instead of being handed back to the kernel. [`crate::memory::recycle`] keeps read outputs in one,
//! [`crate::store::response_body`] object-store response bodies in another.
//!
//! A forked child never touches its parent's buffers: a parent thread may have been changing
//! the set at the instant of the fork.

use std::collections::{BTreeMap, VecDeque};
use std::ops::RangeBounds;
use std::sync::OnceLock;

use crate::process::fork::{forked, ProcessLock};

pub struct KeptBuffers {
    kept: ProcessLock<Kept>,
    /// The process the buffers belong to (set at first use).
    owner: OnceLock<u32>,
}

/// The kept buffers, found by capacity and by age: a pool may hold thousands of small
/// outputs (a read of every 64³ inner chunk of a GiB), so neither a take nor a keep scans them.
struct Kept {
    /// Buffers by capacity; in each class the oldest first, each with its keeping number.
    by_capacity: BTreeMap<usize, VecDeque<(u64, Vec<u8>)>>,
    /// The capacity of every kept buffer by its keeping number: the oldest first.
    by_age: BTreeMap<u64, usize>,
    total: usize,
    next: u64,
}

impl Kept {
    /// Takes out the newest buffer of capacity `capacity` (a class that is kept).
    fn remove_newest(&mut self, capacity: usize) -> Option<Vec<u8>> {
        let class = self.by_capacity.get_mut(&capacity)?;
        let (number, buf) = class.pop_back()?;
        if class.is_empty() {
            self.by_capacity.remove(&capacity);
        }
        self.by_age.remove(&number);
        self.total -= capacity;
        Some(buf)
    }

    /// Takes out the buffer kept longest ago.
    fn remove_oldest(&mut self) -> Option<Vec<u8>> {
        let (_, capacity) = self.by_age.pop_first()?;
        // The oldest of all is the oldest of its class: classes only gain at the back.
        let class = self.by_capacity.get_mut(&capacity)?;
        let (_, buf) = class.pop_front()?;
        if class.is_empty() {
            self.by_capacity.remove(&capacity);
        }
        self.total -= capacity;
        Some(buf)
    }
}

impl KeptBuffers {
    pub const fn new() -> Self {
        Self {
            kept: ProcessLock::new(Kept {
                by_capacity: BTreeMap::new(),
                by_age: BTreeMap::new(),
                total: 0,
                next: 0,
            }),
            owner: OnceLock::new(),
        }
    }

    fn usable(&self) -> bool {
        !forked(*self.owner.get_or_init(std::process::id))
    }

    /// Keeps `buf` (emptied), then drops the oldest kept buffers until their capacities add
    /// up to at most `limit` bytes. A buffer over `limit` by itself is freed.
    pub fn keep(&self, mut buf: Vec<u8>, limit: usize) {
        let capacity = buf.capacity();
        if capacity > limit || !self.usable() {
            return;
        }
        buf.clear();
        let pushed_out = self.kept.with(|kept| {
            let number = kept.next;
            kept.next += 1;
            (kept.by_capacity.entry(capacity).or_default()).push_back((number, buf));
            kept.by_age.insert(number, capacity);
            kept.total += capacity;
            let mut out = Vec::new();
            while kept.total > limit {
                let Some(oldest) = kept.remove_oldest() else {
                    break;
                };
                out.push(oldest);
            }
            out
        });
        // Freed outside the lock: unmapping a GiB takes a while.
        drop(pushed_out);
    }

    /// Takes the kept buffer of the smallest capacity in `capacities` (empty, its capacity
    /// untouched), the last kept of those that tie, if there is one.
    pub fn take(&self, capacities: impl RangeBounds<usize>) -> Option<Vec<u8>> {
        if !self.usable() {
            return None;
        }
        self.kept.with(|kept| {
            let (&capacity, _) = kept.by_capacity.range(capacities).next()?;
            kept.remove_newest(capacity)
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
        let got = kept.take(250..).expect("two fit");
        assert_eq!(got.capacity(), 300);
        kept.keep(Vec::with_capacity(600), 1000); // 100 + 400 + 600 > 1000: 100 goes
        assert!(kept.take(..300).is_none());
        kept.keep(Vec::with_capacity(2000), 1000); // over the limit by itself: freed
        assert!(kept.take(1000..).is_none());
        assert_eq!(kept.take(..).map(|b| b.capacity()), Some(400));
        let (first, second) = (Vec::with_capacity(50), Vec::with_capacity(50));
        let second_at = second.as_ptr();
        kept.keep(first, 1000);
        kept.keep(second, 1000);
        assert_eq!(kept.take(50..=50).map(|b| b.as_ptr()), Some(second_at));
    }

    #[test]
    fn many_buffers_of_mixed_sizes_leave_oldest_first_and_come_back_smallest_newest_first() {
        let kept = KeptBuffers::new();
        let sizes = [64usize, 96, 128];
        // Any 99 buffers in a row hold 33 of each size: exactly the limit.
        let limit = 33 * sizes.iter().sum::<usize>();
        let mut order = Vec::new();
        for i in 0..300 {
            let buf: Vec<u8> = Vec::with_capacity(sizes[i % 3]);
            order.push((buf.capacity(), i, buf.as_ptr() as usize));
            kept.keep(buf, limit);
        }
        let mut expected = order.split_off(300 - 99);
        expected.sort_by_key(|&(capacity, i, _)| (capacity, std::cmp::Reverse(i)));
        let got: Vec<(usize, usize)> = std::iter::from_fn(|| kept.take(..))
            .map(|b| (b.capacity(), b.as_ptr() as usize))
            .collect();
        let want: Vec<(usize, usize)> = expected.iter().map(|&(c, _, p)| (c, p)).collect();
        assert_eq!(got, want);
    }
}

//! A buffer that one thread fills from a file while another reads what has arrived, so the
//! file read of a large chunk overlaps its decoding instead of coming before it.
//!
//! Why: reading one 256³ zstd chunk by itself is one thread decoding one frame, and the
//! 20 MiB copy out of the page cache before it was 7 % of the time (perf, chunk by chunk
//! through the benchmark's zstd array) while the pool's second thread slept.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use crate::error::Result;
use crate::memory::out::RawTarget;
use crate::store::ranged::ByteSource;

/// Bytes read from the file per step: the reader publishes each step as it lands.
const STEP: usize = 1 << 20;

/// `len` bytes of a source, filled front to back by [`Arriving::fill_from`] on one thread
/// and read as a growing prefix by [`Arriving::wait_past`] on another.
pub struct Arriving<'a> {
    ptr: *mut u8,
    len: usize,
    state: Mutex<State>,
    more: Condvar,
    /// Set by the consumer when it stops early (an error): the reader need not go on.
    abandoned: AtomicBool,
    _buf: PhantomData<&'a mut [MaybeUninit<u8>]>,
}

#[derive(Clone, Copy)]
struct State {
    filled: usize,
    /// The reader stopped on an error before the end.
    failed: bool,
}

// SAFETY: the reader writes only bytes at and past `filled`, the consumer reads only bytes
// before it, and `filled` moves forward under the mutex, which orders the writes before the
// reads.
unsafe impl Sync for Arriving<'_> {}

/// What the consumer gets from [`Arriving::wait_past`].
pub enum Arrived<'a> {
    /// The bytes that have arrived so far (all of them once `complete`).
    Prefix { bytes: &'a [u8], complete: bool },
    /// The reader failed; its error is what the read returns.
    Failed,
}

impl<'a> Arriving<'a> {
    /// Fills `buf` (whose contents may be uninitialised) from the front.
    pub fn new(buf: &'a mut [MaybeUninit<u8>]) -> Self {
        Self {
            ptr: buf.as_mut_ptr().cast(),
            len: buf.len(),
            state: Mutex::new(State {
                filled: 0,
                failed: false,
            }),
            more: Condvar::new(),
            abandoned: AtomicBool::new(false),
            _buf: PhantomData,
        }
    }

    /// Reads the source's first `len` bytes into the buffer step by step, publishing each.
    /// On error the consumer is told to stop, and the error is returned.
    pub fn fill_from(&self, src: &dyn ByteSource) -> Result<()> {
        let mut filled = 0;
        while filled < self.len && !self.abandoned.load(Ordering::Relaxed) {
            let n = STEP.min(self.len - filled);
            let target = RawTarget {
                // SAFETY: `filled + n <= len`, inside the buffer.
                ptr: unsafe { self.ptr.add(filled) },
                len: n,
            };
            if let Err(e) = src.read_to(filled as u64, &target) {
                self.publish(|s| s.failed = true);
                return Err(e);
            }
            filled += n;
            self.publish(|s| s.filled = filled);
        }
        Ok(())
    }

    fn publish(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.more.notify_one();
    }

    /// Waits until more than `have` bytes have arrived (or all have, or the reader failed).
    pub fn wait_past(&self, have: usize) -> Arrived<'_> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.filled <= have && state.filled < self.len && !state.failed {
            state = self
                .more
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let State { filled, failed } = *state;
        drop(state);
        if failed {
            return Arrived::Failed;
        }
        // SAFETY: the first `filled` bytes were written by the reader, which no longer
        // touches them (the mutex ordered its writes before this read).
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, filled) };
        Arrived::Prefix {
            bytes,
            complete: filled == self.len,
        }
    }

    /// Tells the reader to stop early: the consumer has given up.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }
}

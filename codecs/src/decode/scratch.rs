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

/// An empty buffer, with whatever capacity an earlier user left in it.
#[must_use]
pub fn take() -> Vec<u8> {
    POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default()
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

/// A pooled buffer that goes back to the pool when dropped.
pub struct Scratch(Vec<u8>);

impl Scratch {
    #[must_use]
    pub fn new() -> Self {
        Self(take())
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

//! Surviving `fork`: a thread that holds a lock at the instant a process forks does not exist
//! in the child, so an ordinary lock it held is never released there, and the child's first
//! read waits forever (PyTorch's DataLoader forks its workers while other threads may be
//! reading). Two remedies, by what the lock guards:
//!
//! - per-process slots (the decoding pool, the I/O runtime) hold a [`ProcessLock`], which a
//!   child may take over from its parent: what it guards is replaced, never read, there;
//! - state a parent's thread may have been changing (the chunk cache's LRU, a store's table
//!   of open arrays) is not used at all in a child: [`forked`] tells the owner to bypass it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether this process is a fork of the one that made something at `pid`.
#[must_use]
pub fn forked(pid: u32) -> bool {
    std::process::id() != pid
}

/// A spin lock tagged with the holder's process id. A thread of this process waits for
/// another thread of this process; a lock held by another process (the parent, at the
/// fork) is stale, and is taken over.
pub struct ProcessLock<T> {
    holder: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through `with`, which holds the lock.
unsafe impl<T: Send> Sync for ProcessLock<T> {}
// SAFETY: moving the lock moves a `T: Send` and an atomic.
unsafe impl<T: Send> Send for ProcessLock<T> {}

impl<T> ProcessLock<T> {
    pub const fn new(value: T) -> Self {
        Self {
            holder: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with the value, holding the lock. Keep `f` short and free of panics that
    /// matter: the lock is released on unwinding too.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Release<'a>(&'a AtomicU32);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Release);
            }
        }
        let me = std::process::id();
        let mut spins = 0u32;
        loop {
            let held = self.holder.load(Ordering::Relaxed);
            if (held == 0 || held != me)
                && self
                    .holder
                    .compare_exchange(held, me, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let _release = Release(&self.holder);
        // SAFETY: we hold the lock: no other thread of this process reaches the value, and a
        // thread of another process does not exist here.
        f(unsafe { &mut *self.value.get() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_of_one_process_exclude_each_other() {
        let lock = Arc::new(ProcessLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        lock.with(|v| *v += 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(lock.with(|v| *v), 40_000);
    }

    #[test]
    fn a_lock_held_by_another_process_is_taken_over() {
        let lock = ProcessLock::new(1);
        // As a forked child finds it: held by its parent, which has another pid.
        lock.holder.store(std::process::id() + 1, Ordering::Relaxed);
        assert_eq!(lock.with(|v| *v), 1);
        assert_eq!(lock.holder.load(Ordering::Relaxed), 0);
    }
}

//! Turns per stored key, within one process: writers that read, update and store the same
//! key take turns; writers of different keys never wait on each other. Across processes the
//! store's own protocol does the same job (a lock file for local directories, conditional
//! writes for object stores, see `store`); these turns keep the threads of one process from
//! contending there, and are the whole protocol for memory stores.
//!
//! A thread holds at most one turn, and does nothing on the pool while holding it: work done
//! in a turn runs under [`crate::process::pool::sequential`]. Were a holder to wait inside a parallel
//! loop, rayon could hand it another writer's job for the same key, which would wait for a
//! turn its own thread holds, forever. [`take`] refuses a second turn on one thread, so that
//! mistake is an error, never a hang.

use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::process::fork::ProcessLock;

#[derive(Default)]
struct Slot {
    busy: Mutex<bool>,
    free: Condvar,
}

/// Every key with a holder or a waiter: its slot and how many threads use it.
struct Table {
    pid: u32,
    slots: HashMap<String, (Arc<Slot>, usize)>,
}

// A forked child starts a table of its own: its parent's holders do not exist there.
static TABLE: ProcessLock<Option<Table>> = ProcessLock::new(None);

thread_local! {
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

fn with_table<R>(f: impl FnOnce(&mut HashMap<String, (Arc<Slot>, usize)>) -> R) -> R {
    let pid = std::process::id();
    TABLE.with(|table| {
        if table.as_ref().is_some_and(|t| t.pid != pid) {
            // Inherited across fork: slots a parent's thread held stay held, so never use them.
            std::mem::forget(table.take());
        }
        let t = table.get_or_insert_with(|| Table {
            pid,
            slots: HashMap::new(),
        });
        f(&mut t.slots)
    })
}

/// This thread's turn at one key; the next waiter goes when it drops (on this thread: a
/// turn is not `Send`).
pub struct Turn {
    key: String,
    slot: Arc<Slot>,
    pid: u32,
    _this_thread: PhantomData<*const ()>,
}

/// Waits for the turn at `key` (a name unique to the stored value: its store and key).
pub fn take(key: &str) -> Result<Turn> {
    if HOLDING.get() {
        return Err(Error::Internal(format!(
            "a write to {key:?} was started while this thread holds another key's turn"
        )));
    }
    let slot = with_table(|slots| {
        let entry = slots
            .entry(key.to_owned())
            .or_insert_with(|| (Arc::new(Slot::default()), 0));
        entry.1 += 1;
        entry.0.clone()
    });
    let mut busy = slot.busy.lock().unwrap_or_else(PoisonError::into_inner);
    while *busy {
        busy = slot.free.wait(busy).unwrap_or_else(PoisonError::into_inner);
    }
    *busy = true;
    drop(busy);
    HOLDING.set(true);
    Ok(Turn {
        key: key.to_owned(),
        slot,
        pid: std::process::id(),
        _this_thread: PhantomData,
    })
}

impl Drop for Turn {
    fn drop(&mut self) {
        HOLDING.set(false);
        if self.pid != std::process::id() {
            return; // a forked child's copy: the table it belonged to is gone
        }
        *self
            .slot
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = false;
        self.slot.free.notify_one();
        with_table(|slots| {
            if let Some(entry) = slots.get_mut(&self.key) {
                entry.1 -= 1;
                if entry.1 == 0 {
                    slots.remove(&self.key);
                }
            }
        });
    }
}

/// Keys with a holder or waiters now (for tests: the table must not grow).
#[must_use]
pub fn keys_in_use() -> usize {
    with_table(|slots| slots.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn writers_of_one_key_take_turns() {
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (inside, most) = (inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _turn = take("turns-test/k").unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn writers_of_different_keys_do_not_wait() {
        let a = take("turns-test/a").unwrap();
        // Another thread takes another key while this one holds "a".
        std::thread::spawn(|| drop(take("turns-test/b").unwrap()))
            .join()
            .unwrap();
        drop(a);
        assert!(take("turns-test/a").is_ok());
    }

    #[test]
    fn a_second_turn_on_one_thread_is_an_error() {
        let _a = take("turns-test/c").unwrap();
        let err = take("turns-test/d").err().unwrap();
        assert!(
            err.to_string().contains("holds another key's turn"),
            "{err}"
        );
    }
}

//! Stopping long calls early: the binding asks when the user presses Ctrl-C (every call
//! stops) or cancels an awaited call (that call stops: its own flag, which the thread that
//! runs it carries), and reads and writes check before each chunk, so a call ends within a
//! chunk's time with [`Error::Interrupted`](crate::Error::Interrupted) or
//! [`Error::Cancelled`](crate::Error::Cancelled). A write keeps every chunk it stored (each
//! key is replaced whole, so none is torn) and stores no more.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every call in flight to stop at its next chunk.
pub fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Lets calls run again (the one that asked has returned).
pub fn clear() {
    REQUESTED.store(false, Ordering::Relaxed);
}

/// `Err(Interrupted)` once a stop was asked for.
pub fn check() -> crate::Result<()> {
    if REQUESTED.load(Ordering::Relaxed) {
        Err(crate::Error::Interrupted)
    } else {
        Ok(())
    }
}

thread_local! {
    /// The stop flag of the call this thread runs, if it has one.
    static CALL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// The stop flag of the call this thread runs (to hand to the thread that will run it).
#[must_use]
pub fn call_flag() -> Option<Arc<AtomicBool>> {
    CALL.with(|c| c.borrow().clone())
}

/// Runs `f` as a call whose stop flag is `flag` (what [`Stop::current`] sees in it).
pub fn with_call_flag<T>(flag: Option<Arc<AtomicBool>>, f: impl FnOnce() -> T) -> T {
    let before = CALL.with(|c| c.replace(flag));
    struct Restore(Option<Option<Arc<AtomicBool>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take().flatten();
            CALL.with(|c| *c.borrow_mut() = before);
        }
    }
    let _restore = Restore(Some(before));
    f()
}

/// What a call checks before each chunk: Ctrl-C, and its own cancellation. Taken on the
/// thread that runs the call, before its parallel loops (their threads do not carry it).
#[derive(Clone, Default)]
pub struct Stop(Option<Arc<AtomicBool>>);

impl Stop {
    /// The stop of the call this thread runs.
    #[must_use]
    pub fn current() -> Self {
        Self(call_flag())
    }

    /// `Err(Interrupted)` after Ctrl-C, `Err(Cancelled)` once the call was cancelled.
    pub fn check(&self) -> crate::Result<()> {
        check()?;
        match &self.0 {
            Some(flag) if flag.load(Ordering::Relaxed) => Err(crate::Error::Cancelled),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_stops_checks_until_cleared() {
        assert!(check().is_ok());
        request();
        assert!(matches!(check(), Err(crate::Error::Interrupted)));
        clear();
        assert!(check().is_ok());
    }

    #[test]
    fn a_cancelled_call_stops_only_itself() {
        let flag = Arc::new(AtomicBool::new(false));
        let stop = with_call_flag(Some(flag.clone()), Stop::current);
        let other = Stop::current();
        assert!(stop.check().is_ok());
        flag.store(true, Ordering::Relaxed);
        assert!(matches!(stop.check(), Err(crate::Error::Cancelled)));
        assert!(other.check().is_ok());
        assert!(call_flag().is_none(), "the flag outlived its call");
    }
}

//! Stopping long calls early: the binding asks when the user presses Ctrl-C, and reads and
//! writes check before each chunk, so a call ends within a chunk's time with
//! [`Error::Interrupted`](crate::Error::Interrupted). A write keeps every chunk it stored
//! (each key is replaced whole, so none is torn) and stores no more.

use std::sync::atomic::{AtomicBool, Ordering};

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
}

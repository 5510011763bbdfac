//! The one tokio runtime per process that does object stores' network I/O: built on first
//! use, and again in a forked child, whose copy of the parent's runtime has no threads behind
//! it (`process::fork`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::process::fork::ProcessLock;

struct Runtime {
    runtime: Arc<tokio::runtime::Runtime>,
    pid: u32,
}

// A forked child takes this over even if a parent thread held it at the fork (`fork`).
static RUNTIME: ProcessLock<Option<Runtime>> = ProcessLock::new(None);

/// The process's I/O runtime, built on first use and again in a forked child (whose copy of
/// the parent's runtime has no threads behind it).
pub fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    let pid = std::process::id();
    RUNTIME.with(|slot| {
        if let Some(r) = slot.as_ref() {
            if r.pid == pid {
                return Ok(r.runtime.clone());
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("zarrpipe-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the I/O runtime: {e}")))?;
        let runtime = Arc::new(runtime);
        if let Some(old) = slot.replace(Runtime {
            runtime: runtime.clone(),
            pid,
        }) {
            // Inherited across fork: never touch (or drop) the parent's runtime here.
            std::mem::forget(old);
        }
        Ok(runtime)
    })
}

//! The one rayon pool all decoding runs on: sized by `set_num_threads` (or the
//! `ZARRPIPE_NUM_THREADS` environment variable), and rebuilt in a forked child, whose copy
//! of the parent's pool has no threads behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};
use crate::process::fork::ProcessLock;

struct Pool {
    pool: Arc<ThreadPool>,
    pid: u32,
    threads: usize,
}

// A forked child takes this over even if a parent thread held it at the fork (`fork`).
static POOL: ProcessLock<Option<Pool>> = ProcessLock::new(None);
/// Requested thread count; 0 means "decide from the environment".
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

fn default_threads() -> usize {
    std::env::var("ZARRPIPE_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

fn wanted_threads() -> usize {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => n,
    }
}

/// Sets the number of decoding threads (takes effect on the next read).
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidArgument(
            "the number of threads must be at least 1".into(),
        ));
    }
    REQUESTED.store(n, Ordering::Relaxed);
    Ok(())
}

/// The number of threads reads will use.
#[must_use]
pub fn num_threads() -> usize {
    wanted_threads()
}

/// The pool for this process, built on first use, after `set_num_threads`, or after a fork.
pub fn pool() -> Result<Arc<ThreadPool>> {
    let pid = std::process::id();
    let threads = wanted_threads();
    POOL.with(|slot| {
        if let Some(p) = slot.as_ref() {
            if p.pid == pid && p.threads == threads {
                return Ok(p.pool.clone());
            }
        }
        let pool = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("zarrpipe-{i}"))
            .build()
            .map_err(|e| {
                Error::InvalidArgument(format!("cannot start {threads} decoding threads: {e}"))
            })?;
        let pool = Arc::new(pool);
        let old = slot.replace(Pool {
            pool: pool.clone(),
            pid,
            threads,
        });
        if let Some(old) = old {
            if old.pid != pid {
                // Inherited across fork: its threads do not exist here, so never touch it.
                std::mem::forget(old);
            }
        }
        Ok(pool)
    })
}

/// Reads running now, across all callers.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

struct Active;

impl Active {
    fn start() -> Self {
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `f` on the pool.
pub fn install<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T> {
    let _active = Active::start();
    Ok(pool()?.install(f))
}

/// Runs `f` on the pool while the calling thread, which waits for it, calls `poll` every
/// `every` until `f` is done (the binding checks for Ctrl-C there).
pub fn install_polling<T: Send>(
    f: impl FnOnce() -> T + Send,
    every: std::time::Duration,
    mut poll: impl FnMut(),
) -> Result<T> {
    let _active = Active::start();
    let pool = pool()?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let caller = std::thread::current();
    let mut out = None;
    {
        let (done, out, caller) = (&done, &mut out, &caller);
        pool.in_place_scope(|scope| {
            scope.spawn(move |_| {
                *out = Some(f());
                done.store(true, Ordering::Release);
                caller.unpark();
            });
            while !done.load(Ordering::Acquire) {
                std::thread::park_timeout(every);
                if !done.load(Ordering::Acquire) {
                    poll();
                }
            }
        });
    }
    out.ok_or_else(|| Error::Internal("a job of the pool did not run".into()))
}

/// Runs `f` on the calling thread: for work that uses no parallel loop (one chunk through
/// zarrpipe's own decoders), where handing it to a pool thread and waiting for the answer
/// costs more than it saves. Measured on a 2-vCPU VM: the two wake-ups cost about 60 µs,
/// 7 % of reading one 64³ zstd inner chunk. A parallel loop inside `f` would run on rayon's
/// global pool, so `f` must have none.
pub fn run_here<T>(f: impl FnOnce() -> T) -> T {
    let _active = Active::start();
    f()
}

thread_local! {
    static SEQUENTIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every parallel loop of the engine kept on the calling thread: for work
/// done while holding a key's write turn (`key_turns`), which must never wait inside a
/// parallel loop, where rayon could hand the thread a job that waits for that same turn.
pub fn sequential<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SEQUENTIAL.set(self.0);
        }
    }
    let _restore = Restore(SEQUENTIAL.replace(true));
    f()
}

/// Whether a parallel loop may fan out from here (not inside [`sequential`]).
#[must_use]
pub fn parallel_allowed() -> bool {
    !SEQUENTIAL.get()
}

/// `f` over every item, on this thread when there is one item (or inside [`sequential`]),
/// else in parallel on the current pool; each item first checks that nobody asked the call
/// to stop. The one place that decides "one item: run it here; several: fan out".
pub fn try_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync + Send,
) -> Result<Vec<R>> {
    use rayon::prelude::*;
    let stop = crate::process::interrupt::Stop::current();
    let f = |item: &T| {
        stop.check()?;
        f(item)
    };
    if items.len() > 1 && parallel_allowed() {
        items.par_iter().map(f).collect()
    } else {
        items.iter().map(f).collect()
    }
}

/// [`try_map`] for work that returns nothing (a `Vec<()>` allocates nothing).
pub fn try_each<T: Sync>(items: &[T], f: impl Fn(&T) -> Result<()> + Sync + Send) -> Result<()> {
    try_map(items, f).map(|_| ())
}

/// Threads one chunk's codec may use: the outer split is chunks across the pool, so a
/// codec gets the whole pool only when it decodes the only chunk of the only read running
/// (a read of one blosc chunk then decodes its blocks in parallel).
#[must_use]
pub fn codec_threads(chunks_in_read: u64) -> usize {
    // Off the pool (`run_here`) a codec keeps to the calling thread; asking rayon there
    // would start its global pool.
    if chunks_in_read == 1
        && parallel_allowed()
        && ACTIVE.load(Ordering::Relaxed) <= 1
        && rayon::current_thread_index().is_some()
    {
        rayon::current_num_threads()
    } else {
        1
    }
}

//! Faulting in a fresh output buffer before decoding into it: on every pool thread at once,
//! 2 MiB at a time, each step backed by a huge page or by base pages, whichever the kernel
//! currently supplies cheaply.
//!
//! Why (measured on 2-vCPU Firecracker VMs with free page reporting, see BENCHMARKS.md):
//! a first touch costs ~0.25 ms per 2 MiB when the guest page is backed by the host, and
//! ~4.5 ms when the guest hands out memory it had reported free to the hypervisor, whatever
//! the page size. Huge pages come only from free blocks of 2 MiB and more, which are exactly
//! the blocks reported to the host, while base pages come first from smaller free fragments,
//! which are never reported. Which kind is backed depends on what ran before: after a long
//! idle spell huge pages cost 1.2 s per GiB and base pages 0.16 s; right after a process that
//! used huge pages exited, huge pages cost 0.06 s and base pages can cost 1-2 s. So each
//! step is timed, and when the page size in use has been slow lately (a moving average over
//! its steps, and at least a few steps since the last change) the rest of the buffer takes
//! the other page size, unless that one was slower still. `MADV_POPULATE_WRITE` faults a
//! whole step in one call, about 30 % cheaper than touching each page.
//!
//! `ZARRPIPE_HUGE_PAGES=0` always uses base pages, `=1` always huge pages; unset (or `auto`)
//! chooses as above.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

use rayon::prelude::*;

/// The unit of the choice: one huge page on x86-64 and aarch64 (4 KiB base pages).
const STEP: usize = 2 << 20;
/// Steps per task at most: few `madvise` calls on large buffers.
const MAX_STEPS_PER_PART: usize = 32;
/// Tasks per pool thread at least, so that every thread faults its share of a buffer of a
/// few dozen MiB (with 32 steps per task, a 64 MiB buffer was one task: one thread faulted
/// it all while the others waited).
const PARTS_PER_THREAD: usize = 4;
/// A step slower than this met memory the host had to fault in (backed: ~0.25 ms).
const SLOW_NANOS: u64 = 1_500_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Base,
    Huge,
    Adaptive,
}

fn policy() -> Policy {
    static POLICY: std::sync::OnceLock<Policy> = std::sync::OnceLock::new();
    *POLICY.get_or_init(|| {
        match std::env::var("ZARRPIPE_HUGE_PAGES")
            .unwrap_or_default()
            .trim()
        {
            "0" | "off" | "never" => Policy::Base,
            "1" | "on" | "always" => Policy::Huge,
            _ => Policy::Adaptive,
        }
    })
}

/// The page size of the next step (0 = base pages, 1 = huge pages) and what each has cost
/// lately.
struct PageChooser {
    mode: AtomicU8,
    /// A moving average of the nanoseconds each page size's steps took (0 = no figure).
    avg_nanos: [AtomicU64; 2],
    /// The step count when each page size was last measured.
    last_step: [AtomicU64; 2],
    steps: AtomicU64,
    /// The step count at the last switch.
    switched_at: AtomicU64,
}

/// A page size not tried for this many steps is tried again when the current one is slow:
/// which kind of memory the host has backed changes as other processes allocate and free.
const STALE_STEPS: u64 = 32;
/// Steps taken after a switch before the next one. Both page sizes meet a slow step now
/// and then, and switching on each one made the reads that mixed page sizes the slow ones
/// (perhaps because each `madvise` takes the mapping's lock for writing). Measured with
/// interleaved fresh-process reads of 1 GiB uncompressed, 22 per variant (BENCHMARKS.md):
/// median 0.282 s and 90th percentile 0.417 s with this rule, 0.316 s and 0.491 s before.
const MIN_DWELL_STEPS: u64 = 8;

impl PageChooser {
    const fn new() -> Self {
        Self {
            mode: AtomicU8::new(1),
            avg_nanos: [AtomicU64::new(0), AtomicU64::new(0)],
            last_step: [AtomicU64::new(0), AtomicU64::new(0)],
            steps: AtomicU64::new(0),
            switched_at: AtomicU64::new(0),
        }
    }

    fn mode(&self) -> u8 {
        self.mode.load(Ordering::Relaxed)
    }

    /// Records a step's cost. When the page size in use has been slow lately (a moving
    /// average, so one slow step does not decide), and it has been used a while since the
    /// last switch, the other one is taken, unless it was at best half as slow when last
    /// tried, recently.
    fn record(&self, mode: u8, nanos: u64) {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let (m, o) = (mode as usize, 1 - mode as usize);
        // Two threads may update at once and lose a sample: an estimate is all this needs.
        let old = self.avg_nanos[m].load(Ordering::Relaxed);
        let avg = if old == 0 {
            nanos
        } else {
            old - old / 4 + nanos / 4
        };
        self.avg_nanos[m].store(avg.max(1), Ordering::Relaxed);
        self.last_step[m].store(step, Ordering::Relaxed);
        let other = self.avg_nanos[o].load(Ordering::Relaxed);
        let dwelling = step - self.switched_at.load(Ordering::Relaxed).min(step) < MIN_DWELL_STEPS;
        // An untried page size is tried at once: the first steps of a process are the probe.
        if avg <= SLOW_NANOS || (dwelling && other != 0) {
            return;
        }
        let stale = step - self.last_step[o].load(Ordering::Relaxed).min(step) > STALE_STEPS;
        if (other == 0 || other < avg / 2 || stale)
            && self
                .mode
                .compare_exchange(mode, 1 - mode, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.switched_at.store(step, Ordering::Relaxed);
            SWITCHES.fetch_add(1, Ordering::Relaxed);
            if stale {
                // What it cost then says little about now: measure afresh.
                self.avg_nanos[o].store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Kept across reads, so a process starts each buffer with what worked last.
static CHOOSER: PageChooser = PageChooser::new();

/// What first touches have cost this process, per page size (index 0 base, 1 huge).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirstTouchStats {
    /// 2 MiB steps faulted in.
    pub steps: [u64; 2],
    /// Of those, steps slower than the threshold (memory the host had to fault in).
    pub slow_steps: [u64; 2],
    /// Time spent faulting, in nanoseconds (summed over threads).
    pub nanos: [u64; 2],
    /// Changes from one page size to the other.
    pub switches: u64,
}

static STEPS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static SLOW_STEPS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static NANOS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static SWITCHES: AtomicU64 = AtomicU64::new(0);

/// Counters of every first touch so far in this process (for benchmarks and diagnosis).
#[must_use]
pub fn stats() -> FirstTouchStats {
    let load = |a: &[AtomicU64; 2]| [0, 1].map(|i| a[i].load(Ordering::Relaxed));
    FirstTouchStats {
        steps: load(&STEPS),
        slow_steps: load(&SLOW_STEPS),
        nanos: load(&NANOS),
        switches: SWITCHES.load(Ordering::Relaxed),
    }
}

fn count(mode: u8, nanos: u64) {
    let m = mode as usize;
    STEPS[m].fetch_add(1, Ordering::Relaxed);
    NANOS[m].fetch_add(nanos, Ordering::Relaxed);
    if nanos > SLOW_NANOS {
        SLOW_STEPS[m].fetch_add(1, Ordering::Relaxed);
    }
}

/// Faults in `len` bytes at `ptr` on the current rayon pool, for an output buffer about to
/// be filled once. Small buffers are left to fault as they are written.
///
/// # Safety
/// `ptr..ptr + len` must be memory this caller owns, not yet initialised and not yet shared
/// with any other thread; its contents after the call are unspecified (zero or untouched).
pub unsafe fn populate(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { populate_with(ptr, len, false) }
}

/// Like [`populate`], for a buffer a caller handed in (zarr-python's output array, made
/// with `np.empty` and about to be filled): what it holds is kept. Where the kernel cannot
/// populate in place (before Linux 5.14, or memory that is not anonymous), nothing is done
/// and the pages fault as they are written.
///
/// # Safety
/// `ptr..ptr + len` must be valid for writes.
pub unsafe fn populate_keeping(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { populate_with(ptr, len, true) }
}

/// Smaller buffers are left to fault as they are written (and are not touched on the pool).
pub const PARALLEL_AT_LEAST: usize = 16 * STEP;

unsafe fn populate_with(ptr: *mut u8, len: usize, keep: bool) {
    if len < PARALLEL_AT_LEAST || !cfg!(target_os = "linux") {
        return;
    }
    let start = (ptr as usize).next_multiple_of(STEP);
    let end = (ptr as usize + len) & !(STEP - 1);
    let policy = policy();
    let initial = match policy {
        Policy::Base => 0,
        Policy::Huge => 1,
        Policy::Adaptive => CHOOSER.mode(),
    };
    // SAFETY: the range is inside the caller's allocation (contract above).
    unsafe { sys::advise(start, end - start, initial == 1) };
    let steps = (end - start) / STEP;
    let per_part = steps
        .div_ceil(rayon::current_num_threads() * PARTS_PER_THREAD)
        .clamp(1, MAX_STEPS_PER_PART);
    let parts = steps.div_ceil(per_part);
    (0..parts).into_par_iter().for_each(|part| {
        let from = start + part * STEP * per_part;
        let to = (from + STEP * per_part).min(end);
        let mut advised = initial;
        let mut at = from;
        while at < to {
            let mode = if policy == Policy::Adaptive {
                CHOOSER.mode()
            } else {
                initial
            };
            if mode != advised {
                // SAFETY: the rest of this part, inside the caller's allocation.
                unsafe { sys::advise(at, to - at, mode == 1) };
                advised = mode;
            }
            let clock = Instant::now();
            // SAFETY: one step inside the caller's allocation, touched by this task only.
            if !unsafe { sys::fault_in(at, STEP, keep) } {
                return;
            }
            let nanos = u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
            count(mode, nanos);
            if policy == Policy::Adaptive {
                CHOOSER.record(mode, nanos);
            }
            at += STEP;
        }
    });
    // The unaligned head and tail (under 2 MiB each) fault as they are written.
}

#[cfg(target_os = "linux")]
mod sys {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Cleared when the kernel lacks `MADV_POPULATE_WRITE` (before Linux 5.14).
    static POPULATE_WORKS: AtomicBool = AtomicBool::new(true);
    const MADV_POPULATE_WRITE: libc::c_int = 23;

    /// Asks for huge or base pages over `addr..addr + len` (page-aligned).
    pub unsafe fn advise(addr: usize, len: usize, huge: bool) {
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: caller's range; the advice changes how pages are backed, never contents.
        // Failure (THP compiled out) leaves the default, which is still correct.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) };
    }

    /// Allocates the pages of `addr..addr + len` now, writable; false when that is not
    /// possible without changing the contents and `keep` asks to keep them.
    pub unsafe fn fault_in(addr: usize, len: usize, keep: bool) -> bool {
        if POPULATE_WORKS.load(Ordering::Relaxed) {
            // SAFETY: caller's range. POPULATE_WRITE maps zeroed pages where none are,
            // as a write would, and leaves present ones (and their contents) alone.
            let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_POPULATE_WRITE) };
            if rc == 0 {
                return true;
            }
            if keep {
                // Maybe only this memory (file-backed, read-only): do not judge the kernel.
                return false;
            }
            POPULATE_WORKS.store(false, Ordering::Relaxed);
        } else if keep {
            return false;
        }
        for page in (addr..addr + len).step_by(4096) {
            // SAFETY: inside the caller's range, which nobody else reads or writes yet;
            // the byte's value does not matter (it is overwritten by the decode).
            unsafe { std::ptr::write_volatile(page as *mut u8, 0) };
        }
        true
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    pub unsafe fn advise(_: usize, _: usize, _: bool) {}
    pub unsafe fn fault_in(_: usize, _: usize, _: bool) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_size_changes_when_it_stays_slow_and_the_other_was_cheaper() {
        let c = PageChooser::new();
        c.record(1, 200_000);
        c.record(1, 4_500_000);
        assert_eq!(c.mode(), 1, "one slow step among fast ones does not decide");
        c.record(1, 4_500_000);
        assert_eq!(
            c.mode(),
            0,
            "slow lately: untried base pages are tried at once"
        );
        for _ in 0..MIN_DWELL_STEPS - 1 {
            c.record(0, 5_000_000);
        }
        assert_eq!(c.mode(), 0, "no switching back before the dwell is over");
        c.record(0, 5_000_000);
        assert_eq!(
            c.mode(),
            1,
            "huge pages were under half the cost: back to them"
        );
        for _ in 0..MIN_DWELL_STEPS {
            c.record(1, 3_000_000);
        }
        assert_eq!(
            c.mode(),
            1,
            "base pages were not half as slow when just tried: stay"
        );
        for _ in 0..STALE_STEPS {
            c.record(1, 3_000_000);
        }
        assert_eq!(c.mode(), 0, "base pages not tried for a while: try again");
        assert_eq!(
            c.avg_nanos[0].load(Ordering::Relaxed),
            0,
            "a stale figure is dropped, so the retry is judged on what it costs now"
        );
        for _ in 0..2 * MIN_DWELL_STEPS {
            c.record(0, 400_000);
        }
        assert_eq!(c.mode(), 0, "cheap steps never switch");
    }

    #[test]
    fn populating_a_callers_buffer_keeps_what_it_holds() {
        let len = 40 << 20;
        let mut v: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        // SAFETY: `v` is ours and valid for writes.
        unsafe { populate_keeping(v.as_mut_ptr(), len) };
        assert!(v.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }

    #[test]
    fn populated_memory_is_writable_and_kept() {
        let len = 40 << 20;
        let mut v: Vec<u8> = Vec::with_capacity(len);
        // SAFETY: fresh capacity of `len` bytes, untouched and unshared.
        unsafe { populate(v.as_mut_ptr(), len) };
        v.resize(len, 7);
        assert!(v.iter().all(|&b| b == 7));
    }
}

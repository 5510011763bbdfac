"""Ownership under threads and over many exports: one winner per move, and no leaked buffers."""

import gc
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarrpipe
from support.dlpack_ctypes import needs_numpy_negotiation, needs_numpy_read_only_flag
from zarrpipe import Tensor

THREADS = 16
MiB = 1 << 20


def race(fn, n=THREADS):
    """Run fn() on n threads released together by a barrier; return each result or exception."""
    barrier = threading.Barrier(n, timeout=120)  # a hang fails the test instead of the run

    def run(_):
        barrier.wait()
        try:
            return fn()
        except Exception as exc:  # collected and asserted on by the caller
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


@pytest.mark.parametrize("round_", range(20))
def test_exactly_one_thread_moves_the_buffer_out(round_):
    t = Tensor.from_numpy(np.arange(1000, dtype=np.int64) + round_)
    results = race(t.into_dlpack)
    winners = [r for r in results if isinstance(r, zarrpipe.OwnedTensor)]
    losers = [r for r in results if isinstance(r, BufferError)]
    assert len(winners) == 1 and len(losers) == THREADS - 1, results
    np.testing.assert_array_equal(np.from_dlpack(winners[0]), np.arange(1000) + round_)


def test_no_thread_moves_a_shared_buffer():
    t = Tensor.from_numpy(np.arange(1000, dtype=np.int64))
    view = memoryview(t)
    results = race(t.into_dlpack)
    assert all(isinstance(r, BufferError) for r in results), results
    assert all("buffer is shared" in str(r) for r in results), results
    np.testing.assert_array_equal(t.to_numpy(), np.arange(1000))
    del view
    t.into_dlpack()


@needs_numpy_negotiation
def test_views_made_and_dropped_on_many_threads_release_the_buffer():
    t = Tensor.from_numpy(np.arange(1000, dtype=np.float64))

    def export():
        arrays = [np.from_dlpack(t), t.to_numpy(), np.asarray(memoryview(t))]
        return [a.ctypes.data for a in arrays]

    addresses = race(export)
    assert len({a for row in addresses for a in row}) == 1, addresses
    gc.collect()
    t.into_dlpack()


@needs_numpy_read_only_flag
def test_moved_buffer_is_freed_on_another_thread():
    arrays = race(lambda: np.from_dlpack(Tensor.from_numpy(np.full(1000, 3.0)).into_dlpack()))
    assert all(isinstance(a, np.ndarray) and a.flags.writeable and (a == 3.0).all() for a in arrays)
    del arrays  # the deleters run here, on the main thread
    gc.collect()


# --- no leaks ---------------------------------------------------------------------------------

ITERATIONS = 3000
WARMUP = 50
CHECK_EVERY = 100
ALLOWED_GROWTH = 64 * MiB


def rss() -> int:
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


BIG = np.arange(8 * MiB // 8, dtype=np.float64)  # 8 MiB


def _owned_capsule_dropped(t):
    Tensor.from_numpy(BIG).into_dlpack().__dlpack__(max_version=(1, 0))


EXPORTS = {
    "from_dlpack": lambda t: np.from_dlpack(t),
    "from_dlpack_copy": pytest.param(
        lambda t: np.from_dlpack(t, copy=True), marks=needs_numpy_negotiation
    ),
    "into_dlpack_consumed": lambda t: np.from_dlpack(Tensor.from_numpy(BIG).into_dlpack()),
    "into_dlpack_dropped": lambda t: Tensor.from_numpy(BIG).into_dlpack(),
    "owned_capsule_dropped": _owned_capsule_dropped,
    "versioned_copy_capsule_dropped": lambda t: t.__dlpack__(max_version=(1, 0), copy=True),
    "legacy_capsule_dropped": lambda t: t.__dlpack__(),
    "shared_faces": lambda t: (t.to_numpy(), memoryview(t), t.buffer(), np.asarray(t)),
    "array_copy": lambda t: t.__array__(copy=True),
}


@pytest.mark.parametrize("export", EXPORTS.values(), ids=EXPORTS.keys())
def test_exports_do_not_leak(export):
    t = Tensor.from_numpy(BIG)
    for _ in range(WARMUP):
        export(t)
    gc.collect()
    baseline = rss()
    for i in range(1, ITERATIONS + 1):
        export(t)
        if i % CHECK_EVERY == 0:  # fail early rather than exhaust memory
            growth = rss() - baseline
            assert growth < ALLOWED_GROWTH, f"RSS grew {growth / MiB:.0f} MiB after {i} exports"
    t.into_dlpack()  # every shared export gave its buffer clone back

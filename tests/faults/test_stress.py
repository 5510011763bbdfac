"""Concurrency and memory under load (issue 6): many Python threads reading the same and
different arrays at once (with `into_dlpack()`, a chunk cache, corrupt chunks and thread-count
changes mixed in), reads from `asyncio.to_thread`, `fork` after the pool has run, RSS that
stays flat over 10,000 reads, and reads too large for memory raising MemoryError.

Hangs fail the test instead of the run (barrier and join timeouts, pytest-timeout); nothing
asserts on wall time.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarrpipe
from support.faults.checks import assert_raises, outcome
from support.faults.registry import CASES
from support.faults.shard_cases import write_sharded
from support.faults.stores import TESTS_DIR, write_plain
from support.zarr_stores import num_threads, sample_values

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

THREADS = 16
MiB = 1 << 20


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """Five arrays in one store: codecs, dtypes, a sharded one, a v2 one; name -> values."""
    root = str(tmp_path_factory.mktemp("stress"))
    specs = {
        "zstd_f4": ("zstd", "float32", (64, 48), (16, 16), {}),
        "gzip_i8": ("gzip", "int64", (40, 40), (7, 9), {}),
        "blosc_u2": ("blosc", "uint16", (96, 32), (32, 8), {}),
        "v2_zlib_c8": ("zlib-v2", "complex64", (30, 30), (8, 8), {}),
        "raw_i1": ("none", "int8", (128,), (10,), {}),
    }
    values = {}
    for k, (name, (codec, dtype, shape, chunks, kw)) in enumerate(specs.items()):
        data = sample_values(dtype, shape, seed=k)
        write_plain(root, codec, path=name, data=data, chunks=chunks, fill_value=0, **kw)
        values[name] = data
    write_sharded(root, path="sharded")
    from support.faults.stores import DATA

    values["sharded"] = DATA
    return root, values


def _random_selection(rng, shape):
    sel = []
    for n in shape:
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, n + 1))
        sel.append(a if rng.integers(0, 4) == 0 else slice(a, b))
    return tuple(sel)


def _check(got, want, what):
    want = np.asarray(want)
    assert got.shape == want.shape, what
    if want.dtype.kind in "fc":
        np.testing.assert_array_equal(got, want, err_msg=what)  # NaN == NaN here
    else:
        assert np.array_equal(got, want), what


def race(fn, n=THREADS):
    """fn(k) on n threads released together; returns each result or exception."""
    barrier = threading.Barrier(n, timeout=120)

    def run(k):
        barrier.wait()
        try:
            return fn(k)
        except Exception as e:  # collected and asserted on by the caller
            return e

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cache_bytes", [0, 256 << 10])
def test_many_threads_same_and_different_arrays(arrays, cache_bytes):
    root, values = arrays
    shared_store = zarrpipe.Store(root, cache_bytes=cache_bytes)
    shared = {name: shared_store.open_array(name) for name in values}

    def work(k):
        rng = np.random.default_rng(k)
        own_store = zarrpipe.Store(root, cache_bytes=cache_bytes)
        moved = 0
        for i in range(60):
            name = "zstd_f4" if k % 4 == 0 else list(values)[int(rng.integers(0, len(values)))]
            arr = shared[name] if i % 2 else own_store.open_array(name)
            want = values[name]
            sel = _random_selection(rng, want.shape)
            how = i % 4
            if how == 0:  # a fresh read moved out without a copy
                t = arr.read(sel)
                kind, owned = outcome(t.into_dlpack)
                if kind == "raised":  # only a tensor the cache still holds may refuse
                    assert isinstance(owned, BufferError) and cache_bytes, owned
                    got = t.to_numpy()
                else:
                    got = np.from_dlpack(owned)
                    assert got.flags.writeable
                    moved += 1
            elif how == 1:
                got = np.asarray(shared_store.read(name, sel))
            elif how == 2:  # whole chunks, in parallel
                grid = arr.chunk_grid_shape
                idx = [tuple(int(rng.integers(0, g)) for g in grid) for _ in range(3)]
                for ix, t in zip(idx, arr.read_chunks(idx), strict=True):
                    region = tuple(
                        slice(j * c, min((j + 1) * c, s))
                        for j, c, s in zip(ix, arr.chunks, want.shape, strict=True)
                    )
                    _check(t.to_numpy(), want[region], f"{name} chunk {ix}")
                continue
            else:
                got = np.array(arr[sel], copy=True)
            _check(got, want[sel], f"{name}[{sel}]")
        return moved

    results = race(work)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == [], errors[:3]
    assert sum(results) > 0, "into_dlpack() never moved a fresh read out"
    if cache_bytes:
        info = shared_store.cache_info()
        assert info["hits"] > 0 and info["bytes"] <= cache_bytes, info


@pytest.mark.timeout(120)
def test_threads_with_a_corrupt_chunk_and_changing_thread_counts(tmp_path):
    """Reads racing each other, a corrupt chunk and set_num_threads: every read touching the
    bad chunk is a DecodeError naming it, every other read is right."""
    b = CASES["zstd-garbage"].build(str(tmp_path / "s"))
    from support.faults.stores import DATA

    store = zarrpipe.Store(b.root, cache_bytes=64 << 10)
    arr = store.open_array(b.path)
    before = zarrpipe.get_num_threads()

    def work(k):
        rng = np.random.default_rng(100 + k)
        for i in range(80):
            if k == 0 and i % 10 == 0:
                zarrpipe.set_num_threads(1 + i // 10 % 4)
            sel = _random_selection(rng, DATA.shape)
            region = np.zeros(DATA.shape, bool)
            region[sel] = True
            touches_bad = region[4:8, 4:8].any()
            if touches_bad:
                assert_raises(lambda s=sel: arr[s], zarrpipe.DecodeError, key=b.key)
            else:
                _check(np.asarray(arr[sel]), DATA[sel], str(sel))

    try:
        results = race(work)
    finally:
        zarrpipe.set_num_threads(before)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == [], errors[:3]


@pytest.mark.timeout(120)
def test_reads_from_asyncio_to_thread(arrays):
    root, values = arrays
    store = zarrpipe.Store(root)
    arrs = {name: store.open_array(name) for name in values}

    async def main():
        rng = np.random.default_rng(5)
        jobs = []
        for i in range(64):
            name = list(values)[i % len(values)]
            sel = _random_selection(rng, values[name].shape)
            if i % 2:
                jobs.append((name, sel, asyncio.to_thread(store.read, name, sel)))
            else:
                jobs.append((name, sel, asyncio.to_thread(arrs[name].read, sel)))
        results = await asyncio.gather(*(j for *_, j in jobs))
        for (name, sel, _), t in zip(jobs, results, strict=True):
            _check(np.from_dlpack(t.into_dlpack()), values[name][sel], f"{name}[{sel}]")
        return len(results)

    assert asyncio.run(main()) == 64


# ---------------------------------------------------------------------------------------------
# fork


def _child_read(root, names, queue):
    """In the forked child: read through the inherited Store and a fresh one."""
    try:
        out = {}
        inherited = _INHERITED["store"]
        fresh = zarrpipe.Store(root)
        for name in names:
            a = np.asarray(inherited.open_array(name)[...])
            b = np.from_dlpack(fresh.read(name).into_dlpack())
            out[name] = (a, b)
        queue.put(("ok", {k: (a.tobytes(), b.tobytes()) for k, (a, b) in out.items()}))
    except BaseException as e:
        queue.put(("error", repr(e)))


_INHERITED: dict = {}


def _fork_and_read(root, names, timeout=60):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        p = ctx.Process(target=_child_read, args=(root, names, queue))
        p.start()
    p.join(timeout)
    if p.is_alive():  # deadlocked: fail (and clean up) rather than hang the run
        p.kill()
        p.join()
        pytest.fail(f"the forked child did not finish reading within {timeout} s (deadlock?)")
    assert p.exitcode == 0, p.exitcode
    status, payload = queue.get(timeout=10)
    assert status == "ok", payload
    return payload


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_fork_after_the_pool_has_run(arrays, cache_bytes):
    root, values = arrays
    store = zarrpipe.Store(root, cache_bytes=cache_bytes)
    names = ["zstd_f4", "gzip_i8", "sharded"]
    with num_threads(4):
        for name in names:  # the pool has threads, the cache has entries
            _check(np.asarray(store.read(name)), values[name], name)
        _INHERITED["store"] = store
        try:
            payload = _fork_and_read(root, names)
        finally:
            _INHERITED.clear()
        # the parent still reads after the fork
        for name in names:
            _check(np.asarray(store.read(name)), values[name], f"parent {name}")
    for name in names:
        a, b = payload[name]
        want = np.ascontiguousarray(values[name]).tobytes()
        assert a == want and b == want, f"child read {name} wrong"


@pytest.mark.timeout(120)
def test_fork_while_other_threads_are_reading(arrays):
    """Forks while 4 threads keep reading (locks in the pool or the store may be held at the
    instant of the fork): the child, using only the inherited store and a fresh one, still
    reads correctly and does not deadlock."""
    root, values = arrays
    store = zarrpipe.Store(root)
    stop = threading.Event()
    errors = []

    def reader(k):
        rng = np.random.default_rng(k)
        while not stop.is_set():
            name = list(values)[int(rng.integers(0, len(values)))]
            sel = _random_selection(rng, values[name].shape)
            try:
                _check(np.asarray(store.read(name, sel)), values[name][sel], name)
            except BaseException as e:
                errors.append(e)
                return

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        _INHERITED["store"] = store
        for _ in range(3):
            payload = _fork_and_read(root, ["zstd_f4", "sharded"])
            for name, (a, b) in payload.items():
                want = np.ascontiguousarray(values[name]).tobytes()
                assert a == want and b == want, name
    finally:
        _INHERITED.clear()
        stop.set()
        for t in threads:
            t.join(60)
    assert errors == []


@pytest.mark.timeout(300)
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_many_forks_while_cached_reads_run(arrays):
    """A hundred forks while 4 threads read through a store with a chunk cache: the locks a
    parent thread holds at the fork (the cache's, the pool's, the store's table of arrays)
    must not hang the child, which reads through the inherited store. Before the fix about
    one fork in sixty hung on the cache's lock."""
    root, values = arrays
    store = zarrpipe.Store(root, cache_bytes=1 << 20)
    want = np.ascontiguousarray(values["sharded"][:5])
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            store.read("sharded", (slice(0, 7),))
            store.read("zstd_f4")

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    failed = []
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            for i in range(100):
                pid = os.fork()
                if pid == 0:  # the child: a hang is killed by the alarm
                    import signal

                    signal.alarm(20)
                    got = np.asarray(store.read("sharded", (slice(0, 5),)))
                    os._exit(0 if got.tobytes() == want.tobytes() else 3)
                _, status = os.waitpid(pid, 0)
                if status != 0:
                    failed.append((i, status))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert failed == [], f"children that hung (killed by SIGALRM) or read wrong values: {failed}"


# ---------------------------------------------------------------------------------------------
# memory


def _run_child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, RUST_BACKTRACE="0", PYTHONPATH=TESTS_DIR),
    )


@pytest.mark.timeout(180)
def test_rss_stays_flat_over_10000_reads(tmp_path):
    """Small reads of every kind (fresh, moved out, cached, read_chunks, failing, bad
    selections, opening stores) 10,000 times each, in a fresh process: RSS after 10,000 is
    within 4 MiB of RSS after 1,000 (a leak of 512 bytes per call would show as 4.4 MiB)."""
    b = CASES["crc32c-bitflip"].build(str(tmp_path / "s"))
    code = f"""
    import json, numpy as np, zarrpipe
    from support.faults.stores import DATA

    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024

    store = zarrpipe.Store({b.root!r})
    cached = zarrpipe.Store({b.root!r}, cache_bytes=1 << 20)
    arr, carr = store.open_array("a"), cached.open_array("a")
    def fresh(i):
        assert np.asarray(arr[i % 4, i % 8])[()] == DATA[i % 4, i % 8]
    def moved(i):
        np.from_dlpack(arr.read((slice(0, 4), slice(i % 4, i % 4 + 3))).into_dlpack())
    def via_store(i):
        store.read("a", (slice(0, 3), i % 8))
    def cache(i):
        carr.read_chunk((0, i % 2)).to_numpy()
    def chunks(i):
        arr.read_chunks([(0, 0), (1, 0)])
    def failing(i):
        try:
            arr[5, 5]
        except zarrpipe.ChecksumError:
            pass
        else:
            raise AssertionError("no error")
    def bad_selection(i):
        try:
            arr[8 + i % 3]
        except IndexError:
            pass
    def open_many(i):
        zarrpipe.Store({b.root!r}).open_array("a")
    out = {{}}
    for name, fn in [("fresh", fresh), ("moved", moved), ("via_store", via_store),
                     ("cache", cache), ("chunks", chunks), ("failing", failing),
                     ("bad_selection", bad_selection), ("open_many", open_many)]:
        for i in range(1000):
            fn(i)
        r1 = rss()
        for i in range(1000, 10000):
            fn(i)
        out[name] = [r1, rss()]
    out["fds"] = len(__import__("os").listdir("/proc/self/fd"))
    print(json.dumps(out))
    """
    proc = _run_child(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    slack = 4 * MiB
    grew = {k: (v[1] - v[0]) / MiB for k, v in out.items() if k != "fds"}
    assert all(v[1] - v[0] <= slack for k, v in out.items() if k != "fds"), (
        f"RSS growth (MiB) between 1,000 and 10,000 reads: {grew}"
    )
    assert out["fds"] < 50, f"{out['fds']} file descriptors open after 80,000 reads"


_MEMORY_ERROR_CHILD = """
import sys, numpy as np, zarr, zarrpipe
root = sys.argv[1]
store = zarrpipe.Store(root)
arr = store.open_array("a")
try:
    {read}
except MemoryError as e:
    print("MemoryError:", e)
except BaseException as e:
    print("WRONG", type(e).__module__, type(e).__qualname__, e)
    sys.exit(3)
else:
    print("WRONG no error")
    sys.exit(4)
# still healthy: a small read of the same array (fill value only) works
assert (np.asarray(arr[0, 0:8]) == 0).all()
assert (np.asarray(store.read("a", (slice(5, 7), slice(0, 3)))) == 0).all()
print("healthy")
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "shape, chunks, read",
    [
        # the case: 2^60 bytes of output, beyond any address space
        ((2**40, 2**20), (2**20, 2**10), "arr[...]"),
        ((2**40, 2**20), (2**20, 2**10), "store.read('a')"),
        ((2**40, 2**20), (2**20, 2**10), "arr[0:2**30, :]"),
        # 1 TiB of output: addressable, but more than this machine can back
        ((2**20, 2**20), (2**10, 2**10), "arr[...]"),
        # a single chunk of 2^50 bytes
        ((2**40, 2**20), (2**30, 2**20), "arr.read_chunk((0, 0))"),
        ((2**40, 2**20), (2**30, 2**20), "arr.read_chunks([(0, 0), (1, 0)])"),
    ],
    ids=["whole-2^60", "store-read-2^60", "slab-2^50", "whole-1TiB", "chunk-2^50", "chunks-2^50"],
)
def test_output_larger_than_memory_is_memory_error(tmp_path, shape, chunks, read):
    """No chunk is written (fill value only), so the output size is all that matters: the
    read raises MemoryError in a subprocess that then keeps working (no abort, no OOM kill)."""
    import zarr
    from support.faults.checks import might_allocate
    from support.faults.stores import quiet_zarr

    total = int(np.prod(shape, dtype=object))
    if might_allocate(total):
        pytest.skip("this machine might actually hold the output")
    with quiet_zarr():
        zarr.create_array(store=str(tmp_path), name="a", shape=shape, chunks=chunks,
                          dtype="uint8", fill_value=0)  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_ERROR_CHILD.format(read=read), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, RUST_BACKTRACE="0"),
    )
    assert proc.returncode == 0 and "healthy" in proc.stdout, (
        f"exit {proc.returncode}: {proc.stdout[-500:]} {proc.stderr[-1500:]}"
    )
    assert "MemoryError" in proc.stdout

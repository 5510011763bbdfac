"""`zarrpipe.CodecPipeline` under concurrency: many Python threads at once, reads inside asyncio
that leave the event loop free, and forked children (multiprocessing, DataLoader-style workers)
after the parent has started zarrpipe's decoding threads. Values are checked against NumPy."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
import zarr.api.asynchronous as zarr_async
import zarrpipe
from support.zarr_stores import FORK_WARNING, assert_values, quiet_zarr_writes, sample_values
from zarr.codecs import ZstdCodec
from zarr.storage import LocalStore, MemoryStore

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline"}


@pytest.fixture
def ours() -> Iterator[None]:
    with zarr.config.set(OURS):
        yield


def is_ours(a: Any) -> bool:
    pipeline = (a._async_array if isinstance(a, zarr.Array) else a).codec_pipeline
    return type(pipeline).__name__ == "CodecPipeline" and type(pipeline).__module__ == "zarrpipe"


def make_array(store: Any, data: np.ndarray, chunks: tuple[int, ...], **kwargs: Any) -> zarr.Array:
    with quiet_zarr_writes():
        a = zarr.create_array(
            store, shape=data.shape, chunks=chunks, dtype=data.dtype, fill_value=0, **kwargs
        )
    assert is_ours(a)
    a[...] = data
    return a


# ---------------------------------------------------------------------------------------------
# threads


def test_threads_on_different_arrays(ours, tmp_path):
    """16 threads, each creating its own array (local or memory, sharded or not), writing it
    in pieces and reading it back in pieces, all at once."""
    start = threading.Barrier(16)

    def work(i: int) -> None:
        dtype = ["int16", "float32", "uint64", "complex64"][i % 4]
        data = sample_values(dtype, (37, 29), seed=i)
        store = LocalStore(tmp_path / f"a{i}") if i % 2 else MemoryStore()
        kwargs = dict(shards=(16, 20)) if i % 3 == 0 else {}
        with quiet_zarr_writes():
            a = zarr.create_array(
                store, shape=data.shape, chunks=(8, 10), dtype=dtype, fill_value=0,
                compressors=[ZstdCodec(level=1)], **kwargs,
            )  # fmt: skip
        assert is_ours(a)
        start.wait(timeout=60)
        for r in range(0, 37, 5):  # rows of 5: partial chunks, read-modify-write
            a[r : r + 5] = data[r : r + 5]
        for _ in range(3):
            assert_values(np.asarray(a[...]), data, f"array {i}")
            assert_values(np.asarray(a[3:30, 7]), data[3:30, 7], f"array {i} column")
            assert_values(np.asarray(a[-1]), data[-1], f"array {i} last row")

    with ThreadPoolExecutor(16) as pool:
        for f in [pool.submit(work, i) for i in range(16)]:
            f.result(timeout=120)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_threads_on_one_array(ours, tmp_path, kind):
    """8 threads write disjoint chunk-aligned blocks of one array, then 8 threads read
    overlapping regions of it, repeatedly."""
    shape, chunks = (64, 48), (8, 12)
    data = sample_values("float64", shape, seed=3)
    store = LocalStore(tmp_path / "one") if kind == "local" else MemoryStore()
    with quiet_zarr_writes():
        a = zarr.create_array(store, shape=shape, chunks=chunks, dtype="float64", fill_value=0)
    assert is_ours(a)

    def write(block: int) -> None:
        rows = slice(block * 8, block * 8 + 8)
        a[rows, :24] = data[rows, :24]
        a[rows, 24:] = data[rows, 24:]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8), timeout=120))
    assert_values(np.asarray(a[...]), data, "after concurrent writes")

    rng = np.random.default_rng(4)
    regions = []
    for _ in range(64):
        r0, c0 = int(rng.integers(0, 60)), int(rng.integers(0, 44))
        regions.append(
            np.s_[r0 : r0 + int(rng.integers(1, 20)), c0 : c0 + int(rng.integers(1, 30))]
        )

    def read(sel: Any) -> None:
        assert_values(np.asarray(a[sel]), data[sel], f"a[{sel!r}]")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(read, regions, timeout=120))


# ---------------------------------------------------------------------------------------------
# asyncio


@pytest.fixture(scope="module")
def big_local(tmp_path_factory) -> tuple[str, np.ndarray]:
    """A 64 MiB float64 array in 8 MiB chunks (written by zarrpipe)."""
    path = str(tmp_path_factory.mktemp("big") / "big.zarr")
    data = np.random.default_rng(5).standard_normal((2048, 4096))
    with zarr.config.set(OURS):
        make_array(path, data, (512, 2048))
    return path, data


async def read_while_ticking(arr: Any, selection: Any) -> tuple[np.ndarray, int]:
    """Reads `selection` while another task spins on `asyncio.sleep(0)`; returns the values
    and how many times that task ran during the read."""
    done = False
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # let the ticker start
    before = ticks
    try:
        out = await arr.getitem(selection)
    finally:
        done = True
        await task
    return np.asarray(out), ticks - before


def test_async_read_does_not_block_event_loop(ours, big_local):
    """The decoding runs off the event loop: a coroutine spinning on sleep(0) keeps running
    while a 64 MiB read is in progress (a read on the loop thread lets it run ~0 times)."""
    path, data = big_local

    async def main() -> tuple[np.ndarray, int]:
        arr = await zarr_async.open_array(store=path, mode="r")
        assert is_ours(arr)
        return await read_while_ticking(arr, Ellipsis)

    out, ticks = asyncio.run(main())
    assert np.array_equal(out, data)
    assert ticks > 50, f"the event loop ran only {ticks} times during the read"


def test_async_concurrent_reads(ours, big_local, tmp_path):
    """Several reads of different arrays gathered on one event loop all get their values."""
    path, data = big_local
    small = [sample_values("int32", (40, 30), seed=s) for s in range(4)]
    for k, d in enumerate(small):
        make_array(str(tmp_path / f"s{k}.zarr"), d, (7, 8))

    async def main() -> list[np.ndarray]:
        big = await zarr_async.open_array(store=path, mode="r")
        arrays = [
            await zarr_async.open_array(store=str(tmp_path / f"s{k}.zarr"), mode="r")
            for k in range(4)
        ]
        assert all(is_ours(a) for a in [big, *arrays])
        reads = [big.getitem(np.s_[100:1500, 7:4000])]
        reads += [a.getitem(np.s_[3:37, 2:]) for a in arrays]
        return [np.asarray(r) for r in await asyncio.gather(*reads)]

    got = asyncio.run(main())
    assert np.array_equal(got[0], data[100:1500, 7:4000])
    for k, d in enumerate(small):
        assert_values(got[k + 1], d[3:37, 2:], f"array {k}")


def test_async_write_then_read(ours, tmp_path):
    data = sample_values("uint16", (50, 60), seed=6)

    async def main() -> np.ndarray:
        with quiet_zarr_writes():
            arr = await zarr_async.create_array(
                store=str(tmp_path / "w.zarr"), shape=data.shape, chunks=(16, 16),
                dtype="uint16", fill_value=0,
            )  # fmt: skip
        assert is_ours(arr)
        await asyncio.gather(arr.setitem(np.s_[:25], data[:25]), arr.setitem(np.s_[32:], data[32:]))
        await arr.setitem(np.s_[25:32], data[25:32])
        return np.asarray(await arr.getitem(Ellipsis))

    assert_values(asyncio.run(main()), data, "async writes")


# ---------------------------------------------------------------------------------------------
# fork

FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
_SHARED: dict[str, Any] = {}  # what forked children inherit from the test that forked them


@pytest.fixture
def forkable(ours, tmp_path) -> Iterator[tuple[str, np.ndarray]]:
    """A local array, read once with zarrpipe in the parent (so its decoding threads exist)."""
    path = str(tmp_path / "fork.zarr")
    data = sample_values("int32", (96, 80), seed=7)
    a = make_array(path, data, (16, 16), compressors=[ZstdCodec()])
    assert_values(np.asarray(a[...]), data, "parent read")
    zarrpipe.Store(path).read("")  # the Store API's pool too
    _SHARED.update(path=path, data=data, array=a)
    yield path, data
    _SHARED.clear()


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def _native_thread_names() -> list[_Named]:
    """Names of this process's OS threads (Linux), to see zarrpipe's pool exists."""
    try:
        names = [
            Path(f"/proc/self/task/{t}/comm").read_text().strip()
            for t in os.listdir("/proc/self/task")
        ]
    except OSError:
        return []
    return [_Named(n) for n in names]


def _child_read(path: str, out: Any, region: Any) -> None:
    try:
        a = zarr.open_array(path, mode="r")
        inherited = _SHARED["array"]
        out.put(
            (
                "ok",
                is_ours(a),
                np.asarray(a[region]),
                np.asarray(inherited[region]),
                zarrpipe.Store(path).read("", region).to_numpy().copy(),
            )
        )
    except BaseException as e:
        out.put(("error", repr(e)))


def _pool_read(region: tuple[slice, slice]) -> tuple[bool, np.ndarray]:
    a = zarr.open_array(_SHARED["path"], mode="r")
    return is_ours(a), np.asarray(a[region])


def _join(proc: Any) -> None:
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
        pytest.fail("forked child hung")
    assert proc.exitcode == 0


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_fork_child_reads(forkable):
    path, data = forkable
    if os.path.exists("/proc/self/task"):
        assert any(t.name.startswith("zarrpipe") for t in _native_thread_names()), (
            "zarrpipe's decoding threads should exist in the parent before the fork"
        )
    out = FORK.Queue()
    region = np.s_[5:90, 3:77]
    proc = FORK.Process(target=_child_read, args=(path, out, region))
    proc.start()
    try:
        result = out.get(timeout=60)
    except queue.Empty:
        proc.kill()
        pytest.fail("forked child did not report (deadlocked?)")
    _join(proc)
    assert result[0] == "ok", result
    _, child_ours, fresh, inherited, via_store = result
    assert child_ours
    assert_values(fresh, data[region], "child: fresh zarr.Array")
    assert_values(inherited, data[region], "child: zarr.Array inherited from the parent")
    assert_values(via_store, data[region], "child: zarrpipe.Store")
    # the parent still reads after the fork
    assert_values(np.asarray(zarr.open_array(path, mode="r")[...]), data, "parent after fork")


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_fork_pool(forkable):
    _, data = forkable
    regions = [np.s_[r : r + 16, :] for r in range(0, 96, 16)]
    pool = FORK.Pool(3)
    try:
        results = pool.map_async(_pool_read, regions).get(timeout=60)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    for (child_ours, got), region in zip(results, regions, strict=True):
        assert child_ours
        assert_values(got, data[region], f"pool worker {region}")


def _loader_worker(worker: int, n_workers: int, out: Any) -> None:
    """A DataLoader-style worker: opens the dataset itself and reads its share of chunks."""
    try:
        a = zarr.open_array(_SHARED["path"], mode="r")
        rows = a.shape[0] // 16
        for index in range(worker, rows * (a.shape[1] // 16), n_workers):
            r, c = divmod(index, a.shape[1] // 16)
            block = np.asarray(a[r * 16 : (r + 1) * 16, c * 16 : (c + 1) * 16])
            out.put(("ok", worker, (r, c), block, is_ours(a)))
        out.put(("done", worker))
    except BaseException as e:
        out.put(("error", worker, repr(e)))


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_fork_dataloader_pattern(forkable):
    _, data = forkable
    n_workers = 4
    out = FORK.Queue()
    procs = [
        FORK.Process(target=_loader_worker, args=(w, n_workers, out), daemon=True)
        for w in range(n_workers)
    ]
    for p in procs:
        p.start()
    got = np.zeros_like(data)
    seen: set[tuple[int, int]] = set()
    done = 0
    try:
        while done < n_workers:
            msg = out.get(timeout=60)
            assert msg[0] != "error", msg
            if msg[0] == "done":
                done += 1
                continue
            _, worker, (r, c), block, child_ours = msg
            assert child_ours, f"worker {worker} did not use zarrpipe's pipeline"
            assert (r, c) not in seen
            seen.add((r, c))
            got[r * 16 : (r + 1) * 16, c * 16 : (c + 1) * 16] = block
    except queue.Empty:
        pytest.fail("a forked worker did not report (deadlocked?)")
    finally:
        for p in procs:
            if p.is_alive() and done < n_workers:
                p.kill()
    for p in procs:
        _join(p)
    assert len(seen) == (96 // 16) * (80 // 16)
    assert_values(got, data, "assembled from the workers")


def _store_child(out: Any) -> None:
    try:
        store = _SHARED["store"]
        out.put(("ok", store.read("").to_numpy().copy(), store.open_array("")[10:20]))
    except BaseException as e:
        out.put(("error", repr(e)))


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_fork_zarrpipe_store(forkable):
    """A zarrpipe.Store opened and read in the parent reads in the forked child, too."""
    path, data = forkable
    store = zarrpipe.Store(path, cache_bytes=1 << 20)
    assert_values(store.read("").to_numpy(), data, "parent")
    _SHARED["store"] = store
    out = FORK.Queue()
    proc = FORK.Process(target=_store_child, args=(out,))
    proc.start()
    try:
        result = out.get(timeout=60)
    except queue.Empty:
        proc.kill()
        pytest.fail("forked child did not report (deadlocked?)")
    _join(proc)
    assert result[0] == "ok", result
    assert_values(result[1], data, "child: store.read")
    assert_values(result[2], data[10:20], "child: open_array()[10:20]")

"""Ctrl-C reaches a long read or write within a fraction of a second: the engine stops at
its next chunk and the call raises KeyboardInterrupt; an interrupted write leaves every chunk
whole, either as it was or as written."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import num_threads

SHAPE = (128, 512, 512)  # 64 MiB of int16, 128 chunks of 512 KiB
CHUNKS = (1, 512, 512)
# The slow reads' array: twice as many chunks, so that a read alone lasts well over the
# 1.5 s the tests need to tell an interrupt from its end (128 took 1.3 s on a fast day).
SLOW_SHAPE = (256, 512, 512)


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory) -> Path:
    """An array whose read-all takes seconds on one thread: 256 bz2 chunks of random values
    (bz2 decodes them at a few MB/s). One chunk is encoded, its file copied to the others'
    keys (bz2 encodes them slower still)."""
    root = tmp_path_factory.mktemp("interrupt")
    store = zarrpipe.Store(str(root))
    arr = store.create_array(
        "a", shape=SLOW_SHAPE, dtype="int16", chunks=CHUNKS,
        compressors={"name": "numcodecs.bz2", "configuration": {"level": 1}},
    )  # fmt: skip
    arr[0] = np.random.default_rng(0).integers(0, 64, SLOW_SHAPE[1:], dtype="int16")
    first = root / arr.chunk_key((0, 0, 0))
    for k in range(1, SLOW_SHAPE[0]):
        target = root / arr.chunk_key((k, 0, 0))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(first, target)
    return root


def _interrupt_child(code: str, ready_after: float) -> tuple[float, str, int]:
    """Runs `code` in a fresh interpreter (one decode thread), sends SIGINT `ready_after`
    seconds after it says it started, and returns the seconds from the signal to its exit,
    its stderr and its exit status."""
    env = {**os.environ, "ZARRPIPE_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"}
    # Python's own Ctrl-C handler, even when this process was started with SIGINT ignored
    # (a background job of a non-interactive shell is, and its children inherit that).
    handler = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", handler + textwrap.dedent(code)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    time.sleep(ready_after)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the child ignored Ctrl-C for 30 s")
    return time.monotonic() - sent, err, proc.returncode


@pytest.mark.timeout(120)
def test_ctrl_c_stops_a_long_read_at_once(slow_store):
    # How long the read takes when left alone, to check the signal came in the middle.
    took = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time, zarrpipe
            arr = zarrpipe.Store({str(slow_store)!r}).open_array("a")
            t = time.monotonic(); arr.read(); print(time.monotonic() - t)
        """)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "ZARRPIPE_NUM_THREADS": "1"},
    )  # fmt: skip
    alone = float(took.stdout.strip())
    assert alone > 1.5, f"the read is too quick ({alone:.2f} s) to tell an interrupt from its end"
    delay = 0.3
    waited, err, status = _interrupt_child(
        f"""
        import zarrpipe
        arr = zarrpipe.Store({str(slow_store)!r}).open_array("a")
        print("started", flush=True)
        for _ in range(100):
            arr.read()
        """,
        delay,
    )
    assert "KeyboardInterrupt" in err, err
    assert status != 0
    assert waited < 1.0, f"took {waited:.2f} s to stop (a read alone takes {alone:.2f} s)"


@pytest.mark.timeout(120)
def test_an_interrupted_write_leaves_every_chunk_whole(tmp_path):
    root = tmp_path / "w"
    store = zarrpipe.Store(str(root))
    arr = store.create_array(
        "a", shape=SHAPE, dtype="int16", chunks=CHUNKS,
        compressors={"name": "numcodecs.bz2", "configuration": {"level": 9}},
    )  # fmt: skip
    # The old values (0 and 1) in every chunk: one encoded, copied to the other keys.
    arr[0] = np.random.default_rng(2).integers(0, 2, SHAPE[1:], dtype="int16")
    for k in range(1, SHAPE[0]):
        target = root / arr.chunk_key((k, 0, 0))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / arr.chunk_key((0, 0, 0)), target)
    waited, err, _ = _interrupt_child(
        f"""
        import numpy as np, zarrpipe
        arr = zarrpipe.Store({str(root)!r}).open_array("a")
        value = np.random.default_rng(1).integers(2, 64, arr.shape, dtype="int16")
        print("started", flush=True)
        arr[...] = value
        """,
        0.3,
    )
    assert "KeyboardInterrupt" in err, err
    assert waited < 2.0, waited
    got = zarrpipe.Store(str(root)).open_array("a")[...]
    old = [bool((got[k] < 2).all()) for k in range(SHAPE[0])]
    new = [bool((got[k] >= 2).all()) for k in range(SHAPE[0])]
    assert all(o or n for o, n in zip(old, new, strict=True)), "a chunk mixes old and new"
    assert any(old), "the write was not interrupted before it finished"


# ---------------------------------------------------------------------------------------------
# cancelling an awaited call


def _cancel_after(coro_factory, delay: float) -> float:
    """Runs the coroutine as a task, cancels it after `delay` s, and returns how long the
    executor's thread still worked after the cancel (the executor is shut down, which waits
    for it)."""

    async def main() -> float:
        task = asyncio.create_task(coro_factory())
        await asyncio.sleep(delay)
        task.cancel()
        cancelled = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.get_running_loop().shutdown_default_executor()
        return time.monotonic() - cancelled

    return asyncio.run(main())


@pytest.mark.timeout(120)
def test_cancelling_read_async_stops_the_read(slow_store):
    arr = zarrpipe.Store(str(slow_store)).open_array("a")
    with num_threads(1):
        start = time.monotonic()
        arr.read()
        alone = time.monotonic() - start
        assert alone > 1.5, f"the read is too quick ({alone:.2f} s) to tell"
        lingered = _cancel_after(lambda: arr.read_async(), 0.3)
    assert lingered < min(1.0, alone / 2), (
        f"the read went on {lingered:.2f} s after its task was cancelled (alone: {alone:.2f} s)"
    )
    # The store still reads correctly afterwards.
    np.testing.assert_array_equal(arr[5], arr[0])


@pytest.mark.timeout(120)
def test_cancelling_store_read_async_stops_the_read(slow_store):
    store = zarrpipe.Store(str(slow_store))
    with num_threads(1):
        lingered = _cancel_after(lambda: store.read_async("a"), 0.3)
    assert lingered < 1.0, f"the read went on {lingered:.2f} s after the cancel"


@pytest.mark.timeout(120)
def test_cancelling_write_async_stores_whole_chunks_and_stops(tmp_path):
    store = zarrpipe.Store(str(tmp_path / "w.zarr"))
    arr = store.create_array(
        "a", shape=SHAPE, dtype="int16", chunks=CHUNKS,
        compressors={"name": "numcodecs.bz2", "configuration": {"level": 9}},
    )  # fmt: skip
    values = np.random.default_rng(1).integers(0, 1 << 15, SHAPE, dtype="int16")
    with num_threads(1):
        lingered = _cancel_after(lambda: arr.write_async(None, values), 0.5)
    assert lingered < 2.0, f"the write went on {lingered:.2f} s after the cancel"
    back = arr[...]
    written = [k for k in range(SHAPE[0]) if (back[k] == values[k]).all()]
    untouched = [k for k in range(SHAPE[0]) if (back[k] == 0).all()]
    assert 0 < len(written) < SHAPE[0], f"{len(written)} of {SHAPE[0]} chunks written"
    assert len(written) + len(untouched) == SHAPE[0], "a chunk is neither old nor new"


def test_async_calls_are_coroutines_that_start_when_awaited(slow_store):
    arr = zarrpipe.Store(str(slow_store)).open_array("a")
    call = arr.read_async((0, slice(0, 2), slice(0, 3)))
    assert asyncio.iscoroutine(call)
    # Made outside any event loop, started by asyncio.run, as a coroutine function's.
    got = asyncio.run(call)
    np.testing.assert_array_equal(np.asarray(got), arr[0, :2, :3])

    async def gathered():
        return await asyncio.gather(arr.read_async(1), arr.read_async(2))

    one, two = asyncio.run(gathered())
    np.testing.assert_array_equal(np.asarray(one), arr[1])
    np.testing.assert_array_equal(np.asarray(two), arr[2])
    with pytest.raises(RuntimeError, match="already awaited"):
        asyncio.run(call)
    unawaited = arr.read_async(0)
    unawaited.close()  # never started: closing it does nothing else

"""Ctrl-C reaches a long read or write within a fraction of a second: the engine stops at
its next chunk and the call raises KeyboardInterrupt; an interrupted write leaves every chunk
whole, either as it was or as written."""

from __future__ import annotations

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

SHAPE = (128, 512, 512)  # 64 MiB of int16, 128 chunks of 512 KiB
CHUNKS = (1, 512, 512)


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory) -> Path:
    """An array whose read-all takes seconds on one thread: 128 bz2 chunks of random values
    (bz2 decodes them at a few MB/s). One chunk is encoded, its file copied to the others'
    keys (bz2 encodes them slower still)."""
    root = tmp_path_factory.mktemp("interrupt")
    store = zarrpipe.Store(str(root))
    arr = store.create_array(
        "a", shape=SHAPE, dtype="int16", chunks=CHUNKS,
        compressors={"name": "numcodecs.bz2", "configuration": {"level": 1}},
    )  # fmt: skip
    arr[0] = np.random.default_rng(0).integers(0, 64, SHAPE[1:], dtype="int16")
    first = root / arr.chunk_key((0, 0, 0))
    for k in range(1, SHAPE[0]):
        target = root / arr.chunk_key((k, 0, 0))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(first, target)
    return root


def _interrupt_child(code: str, ready_after: float) -> tuple[float, str, int]:
    """Runs `code` in a fresh interpreter (one decode thread), sends SIGINT `ready_after`
    seconds after it says it started, and returns the seconds from the signal to its exit,
    its stderr and its exit status."""
    env = {**os.environ, "ZARRPIPE_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
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

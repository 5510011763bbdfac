"""Recycled read outputs: a read's buffer (128 KiB or more), once nobody holds it, serves the
next read of its size with its pages already in (no page faults), never showing its old
contents and never while anything still sees it."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from zarrpipe._zarrpipe import _first_touch_stats

SHAPE = (4096, 4096)  # uint16: 32 MiB, the smallest output faulted in on the pool (counted)


def faulted_steps() -> int:
    """2 MiB steps of fresh output memory faulted in so far (a reused buffer takes none)."""
    stats = _first_touch_stats()
    return int(stats["base"]["steps"] + stats["huge"]["steps"])


def make_arrays(root: Path):
    store = zarrpipe.Store(root)
    full = store.create_array("full", shape=SHAPE, dtype="u2", chunks=(1024, 4096))
    full[...] = 7
    sparse = store.create_array("sparse", shape=SHAPE, dtype="u2", chunks=(1024, 4096))
    sparse[:1024] = 3  # the other chunks are missing: fill value 0
    return full, sparse


@pytest.fixture
def arrays(tmp_path):
    return make_arrays(tmp_path)


def first_read_faults_then_the_freed_output_serves_the_next(root: Path) -> None:
    full, sparse = make_arrays(root)
    # A read of a size nothing kept: fresh memory, faulted in.
    other = zarrpipe.Store(root).create_array("other", shape=(4160, 4096), dtype="u2")
    before = faulted_steps()
    other.read()
    assert faulted_steps() > before
    first = np.from_dlpack(full.read().into_dlpack())
    assert (first == 7).all()
    del first
    gc.collect()
    before = faulted_steps()
    second = np.from_dlpack(sparse.read().into_dlpack())
    assert faulted_steps() == before, "the freed output was not reused"
    # Every byte is the new read's: the missing chunks are fill value, not the old 7s.
    assert (second[:1024] == 3).all() and (second[1024:] == 0).all()
    second[0, 0] = 9  # still a writable buffer of its own


def test_a_freed_output_serves_the_next_read_without_page_faults(tmp_path):
    # In a new process: in this one, outputs other tests freed are kept, and one of them may
    # serve the read that must meet fresh memory.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from test_recycle import first_read_faults_then_the_freed_output_serves_the_next as t; "
        "t(Path(sys.argv[2]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr


def test_an_output_something_still_sees_is_not_reused(arrays):
    full, sparse = arrays
    t = full.read()
    view = np.asarray(t)  # a shared, read-only face keeps the buffer
    del t
    gc.collect()
    other = sparse.read().to_numpy()
    assert view.ctypes.data != other.ctypes.data
    assert (view == 7).all()  # untouched by the second read
    # An unexported Tensor's buffer is kept when the Tensor goes.
    t = full.read()
    address = np.asarray(t).ctypes.data
    gc.collect()
    del t
    gc.collect()
    before = faulted_steps()
    again = full.read()
    assert faulted_steps() == before
    assert np.asarray(again).ctypes.data == address

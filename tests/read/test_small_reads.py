"""A read of one chunk (or of a selection inside one chunk) from a local store runs on the
calling thread: handing it to a pool thread and waiting costs two wake-ups (about 60 µs on
a 2-vCPU VM, 7 % of decoding one 64³ zstd chunk). Checked with each thread's on-CPU time
(Linux `schedstat`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, numpy as np, zarrpipe

    def cpu_ns():
        # On-CPU time of the calling thread and of the decoding pool's threads.
        me = pool = 0
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            if int(tid) == threading.get_native_id():
                me += ns
            elif name.startswith("zarrpipe-"):
                pool += ns
        return me, pool

    store = zarrpipe.Store(sys.argv[1])
    arrays = [store.open_array(name) for name in ("plain", "sharded")]
    grid = [(i, j) for i in range(4) for j in range(4)]
    me0, pool0 = cpu_ns()
    out = np.empty((200, 250), dtype=np.int32)
    for _ in range(10):
        for a in arrays:
            for i, j in grid:
                np.from_dlpack(a.read_chunk((i, j)).into_dlpack())
                inside = (slice(i * 256 + 3, i * 256 + 203), slice(j * 256, j * 256 + 250))
                np.from_dlpack(a.read(inside).into_dlpack())
                a.read_into(inside, out)
    me1, pool1 = cpu_ns()
    for _ in range(10):
        for a in arrays:
            a.read_chunks(grid)
    me2, pool2 = cpu_ns()
    print(me1 - me0, pool1 - pool0, pool2 - pool1)
    """
)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("small")
    data = np.arange(1024 * 1024, dtype=np.int32).reshape(1024, 1024) % 1000
    group = zarr.open_group(str(root), mode="w")
    for name, shards, codec in [
        ("plain", None, ZstdCodec()),
        ("sharded", (512, 512), ZstdCodec()),
        ("blosc", None, BloscCodec()),
    ]:
        a = group.create_array(
            name,
            shape=data.shape,
            chunks=(256, 256),
            shards=shards,
            dtype="int32",
            compressors=codec,
        )
        a[...] = data
    return str(root)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_one_chunk_reads_run_on_the_calling_thread(root):
    env = {**os.environ, "ZARRPIPE_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, root], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    caller, pool_one, pool_many = map(int, done.stdout.split())
    # One-chunk reads: the decoding is the caller's; the pool threads stay asleep.
    assert pool_one < caller / 10, (caller, pool_one)
    # Reads of many chunks run on the pool (and show that its threads are measured).
    assert pool_many > 5 * pool_one, (pool_one, pool_many)


def test_one_chunk_reads_equal_zarr_python(root):
    import zarrpipe

    store = zarrpipe.Store(root)
    for name in ("plain", "sharded", "blosc"):
        a = store.open_array(name)
        z = zarr.open_array(root, path=name, mode="r")
        for i, j in [(0, 0), (2, 1), (3, 3)]:
            got = np.from_dlpack(a.read_chunk((i, j)).into_dlpack())
            want = z[i * 256 : i * 256 + 256, j * 256 : j * 256 + 256]
            np.testing.assert_array_equal(got, want)
            inside = (slice(i * 256 + 5, i * 256 + 250), 7 + j * 256)
            got = np.from_dlpack(a.read(inside).into_dlpack())
            np.testing.assert_array_equal(got, z[inside])
            out = np.full((245,), -1, dtype=np.int32)
            a.read_into(inside, out)
            np.testing.assert_array_equal(out, z[inside])

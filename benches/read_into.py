"""`Array.read_into` into one reused buffer vs `Array.read` into a fresh one, in one process.

    python benches/read_into.py [STORE] [--arrays uncompressed zstd] [--repeats 10]

STORE defaults to the full-size data `zarrpipe bench --size full` generates
(`$ZARRPIPE_BENCH_DATA` or ~/.cache/zarrpipe/bench-data/bench.zarr). The two ways alternate,
repeat by repeat, after one untimed read of each; the reused buffers are allocated (and
faulted in) once, before the first timed read: one as NumPy places it (16 bytes into a page
for large arrays) and one starting on a 64-byte boundary (`read_into@64`), since the
alignment matters for barely compressed data (see docs/guide/reading.md). Reports seconds
(median, min, max), GB/s of the median, and the minor page faults each way took per read
(`resource.getrusage`).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import zarrpipe


def default_store() -> Path:
    env = os.environ.get("ZARRPIPE_BENCH_DATA")
    base = Path(env) if env else Path.home() / ".cache" / "zarrpipe" / "bench-data"
    return base / "bench.zarr"


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def aligned_empty(shape: tuple[int, ...], dtype, align: int = 64) -> np.ndarray:
    """An uninitialised array whose data starts on an `align`-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path, default=default_store())
    ap.add_argument("--arrays", nargs="+", default=["uncompressed", "zstd"])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    store = zarrpipe.Store(str(args.store))
    print(
        f"{'array':14} {'way':12} {'median s':>9} {'min s':>7} {'max s':>7} {'GB/s':>6} faults/read"
    )
    for name in args.arrays:
        arr = store.open_array(name)
        outs = {
            "read_into": np.empty(arr.shape, dtype=arr.dtype),
            "read_into@64": aligned_empty(arr.shape, arr.dtype),
        }
        for out in outs.values():
            out.fill(0)  # faulted in once, as a training loop's buffer would be
        expected = np.asarray(arr.read())
        ways = ("read", *outs)
        times: dict[str, list[float]] = {way: [] for way in ways}
        faults: dict[str, list[int]] = {way: [] for way in ways}
        for rep in range(args.repeats + 1):
            for way in ways:
                f0, t0 = minor_faults(), time.perf_counter()
                if way == "read":
                    t = arr.read()
                    del t
                else:
                    arr.read_into(None, outs[way])
                dt, df = time.perf_counter() - t0, minor_faults() - f0
                if rep:  # the first round is untimed
                    times[way].append(dt)
                    faults[way].append(df)
        for out in outs.values():
            np.testing.assert_array_equal(out, expected)
        for way, ts in times.items():
            med = statistics.median(ts)
            print(
                f"{name:14} {way:12} {med:9.3f} {min(ts):7.3f} {max(ts):7.3f} "
                f"{expected.nbytes / med / 1e9:6.2f} {statistics.median(faults[way]):.0f}"
            )


if __name__ == "__main__":
    main()

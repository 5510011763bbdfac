"""`Array.read_into` into one reused buffer vs `Array.read` into a fresh one, in one process.

    python benches/read_into.py [STORE] [--arrays uncompressed zstd] [--repeats 10]

STORE defaults to the full-size data `zarrpipe bench --size full` generates
(`$ZARRPIPE_BENCH_DATA` or ~/.cache/zarrpipe/bench-data/bench.zarr). The two ways alternate,
repeat by repeat, after one untimed read of each; the reused buffer is allocated (and faulted
in) once, before the first timed read. Reports seconds (median, min, max), GB/s of the
median, and the minor page faults each way took per read (`resource.getrusage`).
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path, default=default_store())
    ap.add_argument("--arrays", nargs="+", default=["uncompressed", "zstd"])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    store = zarrpipe.Store(str(args.store))
    print(
        f"{'array':14} {'way':8} {'median s':>9} {'min s':>7} {'max s':>7} {'GB/s':>6} faults/read"
    )
    for name in args.arrays:
        arr = store.open_array(name)
        out = np.empty(arr.shape, dtype=arr.dtype)
        out.fill(0)  # faulted in once, as a training loop's buffer would be
        expected = np.asarray(arr.read())
        times: dict[str, list[float]] = {"read": [], "read_into": []}
        faults: dict[str, list[int]] = {"read": [], "read_into": []}
        for rep in range(args.repeats + 1):
            for way in ("read", "read_into"):
                f0, t0 = minor_faults(), time.perf_counter()
                if way == "read":
                    t = arr.read()
                    del t
                else:
                    arr.read_into(None, out)
                dt, df = time.perf_counter() - t0, minor_faults() - f0
                if rep:  # the first round is untimed
                    times[way].append(dt)
                    faults[way].append(df)
        np.testing.assert_array_equal(out, expected)
        for way, ts in times.items():
            med = statistics.median(ts)
            print(
                f"{name:14} {way:8} {med:9.3f} {min(ts):7.3f} {max(ts):7.3f} "
                f"{out.nbytes / med / 1e9:6.2f} {statistics.median(faults[way]):.0f}"
            )


if __name__ == "__main__":
    main()

"""Overlapping readers: what a chunk cache shared by the processes of one machine could save.

    python benches/overlap_bench.py [--data DIR] [--repeats 5] [--processes 2]

On the loader benchmark's array (`benches/loader_bench.py` generates it: 16,384 images of
256 x 256 uint16, zstd, chunks of 64 images; default /work/bench-data/loader), each reader
process reads windows of 256 images (32 MiB) into one reused buffer, on its share of the
cores, all readers at once:

- `one`: a single process reads every window (the work to do once);
- `overlap`: each of `--processes` processes reads every window (the same chunks decoded
  once per process: what DataLoader workers reading overlapping windows, or dask workers
  on one host reading the same data, do without a shared cache);
- `disjoint`: the processes split the windows (what a perfect shared cache would leave to
  decode: every chunk once, the processes sharing the work).

A shared cache of decoded chunks could at best turn `overlap` into `disjoint` (minus the cost
of copying out of it). Reports wall seconds for all readers to finish, median [min-max] of
`--repeats` interleaved rounds, and GB/s of decoded data delivered to the readers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

WINDOW = 256


def read_windows(cfg: dict) -> None:
    import zarrpipe

    zarrpipe.set_num_threads(cfg["threads"])
    arr = zarrpipe.Store(cfg["data"]).open_array("chunked")
    out = np.empty((WINDOW, *arr.shape[1:]), dtype=arr.dtype)
    out.fill(0)
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for w in cfg["windows"]:
        arr.read_into(np.s_[w * WINDOW : (w + 1) * WINDOW], out)
    print("done", flush=True)


def run(data: str, plan: list[list[int]], threads: int) -> float:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--one",
                json.dumps({"data": data, "windows": w, "threads": threads}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in plan
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "done"
        p.wait()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/bench-data/loader")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        read_windows(json.loads(args.one))
        return
    import os

    import zarrpipe

    arr = zarrpipe.Store(args.data).open_array("chunked")
    windows = list(range(arr.shape[0] // WINDOW))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cores or 1) // args.processes)
    n = args.processes
    plans = {
        "one": ([windows], cores or 1),
        "overlap": ([windows] * n, share),
        "disjoint": ([windows[k::n] for k in range(n)], share),
    }
    times: dict[str, list[float]] = {k: [] for k in plans}
    for _ in range(args.repeats):
        for name, (plan, threads) in plans.items():
            times[name].append(run(args.data, plan, threads))
    window_bytes = WINDOW * int(np.prod(arr.shape[1:])) * arr.dtype.itemsize
    print(
        f"# {n} processes, {len(windows)} windows of {window_bytes >> 20} MiB, "
        f"{args.repeats} rounds"
    )
    print(f"{'readers':9} {'seconds':>8} {'range':>13} {'GB/s delivered':>15}")
    for name, (plan, _) in plans.items():
        delivered = sum(len(w) for w in plan) * window_bytes
        med = statistics.median(times[name])
        print(
            f"{name:9} {med:8.2f} {min(times[name]):6.2f}-{max(times[name]):<6.2f} "
            f"{delivered / med / 1e9:15.2f}"
        )


if __name__ == "__main__":
    main()

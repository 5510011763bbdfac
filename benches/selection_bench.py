"""Scattered reads from the 1 GiB arrays of `zarrpipe bench --size full`, every reader in the
same run: 64 random planes along axis 0 (`oindex[idx, :, :]`, 128 MiB, touching every chunk)
and 1,000 random points (`vindex`), with zarrpipe's own read-all of the array for scale.

    python benches/selection_bench.py [STORE] [--arrays zstd zstd-sharded] [--repeats 5]

STORE defaults to the data `zarrpipe bench --size full` generates (`$ZARRPIPE_BENCH_DATA` or
~/.cache/zarrpipe/bench-data/bench.zarr). Each reader runs in its own process (one untimed
read, then the timed repeats, readers taking turns process by process); every result is
checked against zarrpipe's read of the same selection. Reports seconds: median (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

READERS = ["zarrpipe", "zarr", "zarr+zarrs", "tensorstore"]


def default_store() -> Path:
    env = os.environ.get("ZARRPIPE_BENCH_DATA")
    base = Path(env) if env else Path.home() / ".cache" / "zarrpipe" / "bench-data"
    return base / "bench.zarr"


def selections(shape: tuple[int, ...], seed: int = 0) -> dict[str, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(seed)
    planes = rng.choice(shape[0], size=64, replace=False)
    points = tuple(rng.integers(0, n, size=1000) for n in shape)
    return {"planes": (planes,), "points": points}


def opener(reader: str, path: str):
    """A function reading (kind, index arrays) with `reader`, and its description."""
    if reader == "zarrpipe":
        import zarrpipe

        arr = zarrpipe.Store(os.path.dirname(path)).open_array(os.path.basename(path))

        def read(kind, idx):
            if kind == "all":
                return np.from_dlpack(arr.read().into_dlpack())
            t = arr.oindex[idx[0], :, :] if kind == "planes" else arr.vindex[idx]
            return np.from_dlpack(t.into_dlpack())

        return read
    if reader == "tensorstore":
        import tensorstore as ts

        arr = ts.open(
            {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}, read=True
        ).result()

        def read(kind, idx):
            if kind == "planes":
                return arr.oindex[idx[0], :, :].read().result()
            return arr.vindex[idx].read().result()

        return read
    import zarr

    if reader == "zarr+zarrs":
        import zarrs  # noqa: F401

        zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
    z = zarr.open_array(path, mode="r")

    def read(kind, idx):
        return z.oindex[idx[0], :, :] if kind == "planes" else z.vindex[idx]

    return read


def worker(reader: str, path: str, kind: str, repeats: int) -> None:
    """Runs in a child process: prints the timings and a checksum as JSON."""
    import zarrpipe

    shape = zarrpipe.Store(os.path.dirname(path)).open_array(os.path.basename(path)).shape
    idx = selections(shape).get(kind, ())
    read = opener(reader, path)
    got = read(kind, idx)  # untimed
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = read(kind, idx)
        times.append(time.perf_counter() - t0)
    got = np.asarray(got)
    print(json.dumps({"times": times, "sum": int(got.astype(np.int64).sum()), "shape": got.shape}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path, default=default_store())
    ap.add_argument("--arrays", nargs="+", default=["zstd", "zstd-sharded"])
    ap.add_argument("--readers", nargs="+", default=READERS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--worker", nargs=3, metavar=("READER", "PATH", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, args.repeats)
        return
    print(
        f"{'array':13} {'selection':9} {'reader':12} {'median s':>9} {'min-max s':>13}"
        "  vs zarrpipe read-all"
    )
    for name in args.arrays:
        path = str(args.store / name)
        rows = [("all", "zarrpipe")] + [(k, r) for k in ("planes", "points") for r in args.readers]
        results = {}
        for kind, reader in rows:
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                reader,
                path,
                kind,
                "--repeats",
                str(args.repeats),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(
                    f"{name:13} {kind:9} {reader:12} failed: "
                    f"{proc.stderr.strip().splitlines()[-1:]}"
                )
                continue
            results[kind, reader] = json.loads(proc.stdout.strip().splitlines()[-1])
        base = (
            statistics.median(results["all", "zarrpipe"]["times"])
            if ("all", "zarrpipe") in results
            else None
        )
        for (kind, reader), r in results.items():
            ref = results.get((kind, "zarrpipe"))
            ok = ref is None or (r["sum"] == ref["sum"] and r["shape"] == ref["shape"])
            med = statistics.median(r["times"])
            ratio = f"{med / base:.2f}x" if base else "-"
            print(
                f"{name:13} {kind:9} {reader:12} {med:9.3f} "
                f"{min(r['times']):6.3f}-{max(r['times']):6.3f}"
                f"  {ratio}{'' if ok else '  RESULT DIFFERS'}"
            )


if __name__ == "__main__":
    main()

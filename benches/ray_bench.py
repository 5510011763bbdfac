"""Ray Data throughput: `iter_batches` over `zarrpipe.ray.read_zarr`, against Ray's own
`ray.data.read_zarr` (Zarr v2 through zarr-python 2) and zarrpipe's `BatchLoader` (no Ray).

    python benches/ray_bench.py ARRAY [ARRAY ...] [--v2-dir DIR] [--repeats 3] [--passes 2]
        [--batch-size 16] [--ray-zarr-python PYTHON] [--readers ...]

Each ARRAY is a local Zarr array (v3 or v2, e.g. /work/bench-data/bench.zarr/zstd). A Zarr v2
copy of the first one is written once with zarr-python (same chunks, zstd level 3; default
DIR /work/bench-data/ray, or $ZARRPIPE_RAY_BENCH_DATA) so that Ray's reader, which reads v2
only, has the same data. Readers, each pass reading the whole array once, in order:

- `zarrpipe-ray`: `zarrpipe.ray.read_zarr(...).iter_batches(batch_size, "numpy")`, a row per
  sample, over every ARRAY and over the v2 copy;
- `ray-zarr`: `ray.data.read_zarr(v2 copy, align_axis_0=True).iter_batches(batch_size=1)`:
  Ray's reader gives one row per axis-0 chunk (every sample of that chunk), so samples are
  counted as the axis-0 positions delivered. It needs zarr-python < 3: give an interpreter
  that has it and ray (`--ray-zarr-python`), else the row says it was skipped;
- `loader`: `zarrpipe.loader.BatchLoader(arr, batch_size, shuffle=False)`, over every ARRAY.

Every run is a fresh process with a local Ray of 2 CPUs (`ray.init(num_cpus=2)`, not
counted) that makes `--passes` passes, each planning the dataset anew; the first pass also
starts Ray's worker processes (its time is shown apart), the last is timed. The file cache is
warm. Reports samples/s and MB/s (decoded bytes, 10^6) of the last pass as the median
[min-max] of `--repeats` runs, the median first-pass time, the driver's peak RSS, and the
largest peak USS of a Ray worker process (sampled every 0.25 s from /proc: memory the worker
holds alone, not the shared object store).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

READERS = ("zarrpipe-ray", "ray-zarr", "loader")


def default_dir() -> Path:
    env = os.environ.get("ZARRPIPE_RAY_BENCH_DATA")
    return Path(env) if env else Path("/work/bench-data/ray")


def v2_copy(array: Path, root: Path) -> Path:
    """A Zarr v2 copy of `array` under root/<name>-v2.zarr (a group holding array `data`),
    written once with zarr-python: the same shape, dtype and chunks, zstd level 3."""
    import numcodecs
    import zarr
    import zarrpipe

    out = root / f"{array.name}-v2.zarr"
    if (out / "complete").exists():
        return out
    src = zarrpipe.Store(array.parent, mode="r").open_array(array.name)
    group = zarr.open_group(out, mode="w", zarr_format=2)
    dst = group.create_array(
        "data",
        shape=src.shape,
        chunks=src.chunks if not src.shards else src.shards,
        dtype=src.dtype,
        compressors=numcodecs.Zstd(level=3),
        filters=None,
    )
    step = dst.chunks[0]
    for a in range(0, src.shape[0], step):
        dst[a : a + step] = src[a : a + step]
        print(f"v2 copy: {min(a + step, src.shape[0])}/{src.shape[0]} rows", file=sys.stderr)
    zarr.consolidate_metadata(out)
    (out / "complete").write_text("ok\n")
    return out


# ---------------------------------------------------------------------------------------------
# one run, in its own process


class WorkerMemory:
    """The largest USS (private memory: not the shared object store) any Ray worker process
    (`ray::...`) reaches while it runs, read from /proc/<pid>/smaps_rollup every 0.25 s
    (Linux; a cheap read, so that sampling takes little from the run it measures)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def _uss(pid: str) -> int:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if not f.read(5).startswith(b"ray::"):
                return 0
        total = 0
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        self.peak = max(self.peak, self._uss(pid))
                    except OSError:  # gone, or not ours to read
                        pass

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start_ray() -> Any:
    import ray

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Ray 2.60's own DataContext
        import ray.data

        ray.data.DataContext.get_current()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def one_pass(reader: str, source: Any, batch: int) -> tuple[int, int]:
    """(samples, bytes) of one pass over `source` (a dataset, or an Array for the loader)."""
    samples = nbytes = 0
    if reader == "loader":
        from zarrpipe.loader import BatchLoader

        for b in BatchLoader(source, batch, shuffle=False):
            samples += b.shape[0]
            nbytes += b.nbytes
    elif reader == "zarrpipe-ray":
        (column,) = source.columns()
        for b in source.iter_batches(batch_size=batch, batch_format="numpy"):
            samples += len(b[column])
            nbytes += b[column].nbytes
    else:  # Ray's own: one row per axis-0 chunk, every sample of it
        (column,) = [c for c in source.columns() if c not in ("t_start", "t_stop")]
        for b in source.iter_batches(batch_size=1, batch_format="numpy"):
            for slab in b[column]:
                samples += len(slab)
                nbytes += slab.nbytes
    return samples, nbytes


def run_one(cfg: dict[str, Any]) -> dict[str, Any]:
    """`passes` passes over one array in this process; the first pass also starts Ray's
    workers, the last is the steady state."""
    reader, path = cfg["reader"], Path(cfg["array"])
    ray = None
    if reader == "loader":
        import zarrpipe

        source: Any = zarrpipe.open(path.parent, mode="r", path=path.name)
    else:
        ray = start_ray()
    seconds = []
    with WorkerMemory() as memory:
        for _ in range(cfg["passes"]):
            t0 = time.perf_counter()
            if reader == "zarrpipe-ray":
                from zarrpipe.ray import read_zarr

                source = read_zarr(path.parent, path=path.name)
            elif reader == "ray-zarr":
                assert ray is not None
                source = ray.data.read_zarr(str(path.parent), array_paths=[path.name],
                                            align_axis_0=True)  # fmt: skip
            samples, nbytes = one_pass(reader, source, cfg["batch_size"])
            seconds.append(time.perf_counter() - t0)
    if ray is not None:
        ray.shutdown()
    return {
        "samples": samples,
        "bytes": nbytes,
        "seconds": seconds[-1],
        "first": seconds[0],
        "rss_driver": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "uss_worker": memory.peak,
    }


# ---------------------------------------------------------------------------------------------
# the table


def measure(python: str, cfg: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [python, __file__, "--one", json.dumps(cfg)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{cfg['reader']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def has_zarr2(python: str) -> bool:
    probe = "import ray.data, zarr; assert int(zarr.__version__.split('.')[0]) < 3"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def warm(path: Path) -> None:
    for f in path.rglob("*"):
        if f.is_file():
            f.read_bytes()


def spread(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    return f"{med:{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("arrays", nargs="*", type=Path, help="local Zarr arrays")
    ap.add_argument("--v2-dir", type=Path, default=default_dir())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--passes", type=int, default=2, help="passes per run; the last is timed")
    ap.add_argument("--readers", nargs="+", default=list(READERS), choices=READERS)
    ap.add_argument(
        "--ray-zarr-python",
        default=sys.executable,
        help="an interpreter with ray[data] and zarr<3, for ray.data.read_zarr",
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    if not args.arrays:
        ap.error("give at least one Zarr array")
    arrays = [p.resolve() for p in args.arrays]
    v2 = v2_copy(arrays[0], args.v2_dir) / "data"
    runs: list[tuple[str, Path, str]] = []
    for reader in args.readers:
        if reader == "ray-zarr":
            runs.append((reader, v2, args.ray_zarr_python))
        elif reader == "zarrpipe-ray":
            runs += [(reader, a, sys.executable) for a in [*arrays, v2]]
        else:
            runs += [(reader, a, sys.executable) for a in arrays]
    for a in {*arrays, v2}:
        warm(a)
    import zarrpipe

    first = zarrpipe.open(arrays[0].parent, mode="r", path=arrays[0].name)
    print(
        f"# {first.shape} {first.dtype} samples of {first.nbytes // first.shape[0] / 2**20:.1f} "
        f"MiB, batch {args.batch_size}, {args.repeats} runs each, median [min-max]; "
        f"{os.cpu_count()} CPUs, ray.init(num_cpus=2)"
    )
    print(
        f"| {'reader':12} | {'array':24} | {'samples/s':>18} | {'MB/s':>18} | "
        f"{'1st pass s':>10} | {'driver RSS MiB':>14} | {'worker USS MiB':>14} |"
    )
    print(f"|{'-' * 14}|{'-' * 26}|{'-' * 19}:|{'-' * 19}:|{'-' * 11}:|{'-' * 15}:|{'-' * 15}:|")
    for reader, array, python in runs:
        name = f"{array.parent.name}/{array.name}"
        if reader == "ray-zarr" and not has_zarr2(python):
            print(f"| {reader:12} | {name:24} | skipped: {python} lacks ray[data] with zarr<3 |")
            continue
        cfg = {"reader": reader, "array": str(array), "batch_size": args.batch_size,
               "passes": args.passes}  # fmt: skip
        results = [measure(python, cfg) for _ in range(args.repeats)]
        rates = [r["samples"] / r["seconds"] for r in results]
        mbs = [r["bytes"] / r["seconds"] / 1e6 for r in results]
        first = statistics.median(r["first"] for r in results)
        driver = max(r["rss_driver"] for r in results) / 2**20
        worker = f"{max(r['uss_worker'] for r in results) / 2**20:.0f}"
        worker = worker if reader != "loader" else "(no Ray)"
        print(
            f"| {reader:12} | {name:24} | {spread(rates, '.0f'):>18} | {spread(mbs, '.0f'):>18} | "
            f"{first:10.1f} | {driver:14.0f} | {worker:>14} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

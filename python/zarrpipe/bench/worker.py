"""The measuring process: one (implementation, dataset, workload) row per fresh interpreter
(or one timed read of a row, in fresh-process mode), or one dataset's decode limit.

Run as `python -m zarrpipe.bench.worker PARAMS.json`; it writes its result JSON to the path
in the parameters. The runner is the only intended caller.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from zarrpipe.bench import pagecache, usage

Pieces = list[tuple[Any, np.ndarray]]


def verify(dataset, level: str, out: Pieces, pieces: list) -> str | None:
    """None if the read data equal the source, else what is wrong (never a number for the row)."""
    from zarrpipe.bench import checksum
    from zarrpipe.bench.datasets import key

    sums = dataset.checksums
    if level == "all":
        ((_, arr),) = out
        if arr.shape != dataset.shape or arr.dtype != np.dtype(dataset.dtype):
            return (
                f"wrong result: shape {arr.shape} dtype {arr.dtype}, expected "
                f"{dataset.shape} {dataset.dtype}"
            )
        got = checksum.digest(arr)
        if got == sums["whole"]:
            return None
        where = next(
            (idx for idx, sl in pieces if checksum.digest(arr[sl]) != sums["outer"][key(idx)]), None
        )
        return f"checksum mismatch: whole array {got}, expected {sums['whole']}" + (
            f"; first differing chunk {where}" if where is not None else ""
        )
    if len(out) != len(pieces):
        return f"wrong result: {len(out)} pieces returned for {len(pieces)} requested"
    bad = []
    for (idx, arr), (want_idx, sl) in zip(out, pieces, strict=True):
        shape = tuple(s.stop - s.start for s in sl)
        if idx != want_idx or arr.shape != shape or arr.dtype != np.dtype(dataset.dtype):
            return (
                f"wrong result for chunk {want_idx}: shape {arr.shape} dtype {arr.dtype}, "
                f"expected {shape} {dataset.dtype}"
            )
        got = checksum.digest(arr)
        if got != sums[level][key(idx)]:
            bad.append((idx, got, sums[level][key(idx)]))
    if bad:
        idx, got, want = bad[0]
        return (
            f"checksum mismatch in {len(bad)} of {len(out)} chunks; first {idx}: "
            f"{got}, expected {want}"
        )
    return None


def _reader(adapter, workload, pieces, pool) -> Callable[[], Pieces]:
    """The timed call: everything it returns is a NumPy array when it returns."""
    level = workload.level
    if level == "all":
        return lambda: [("all", np.asarray(adapter.read_all()))]

    def some(part):
        return [(idx, np.asarray(adapter.read_piece(level, idx, sl))) for idx, sl in part]

    if workload.mode == "call":
        return lambda: some(pieces)
    if workload.mode == "threads":
        n = pool._max_workers
        parts = [pieces[len(pieces) * i // n : len(pieces) * (i + 1) // n] for i in range(n)]

        def threaded():
            futures = [pool.submit(some, p) for p in parts]
            return [item for f in futures for item in f.result()]

        return threaded

    def batch():
        arrays = adapter.read_batch(level, [i for i, _ in pieces], [s for _, s in pieces])
        return [(idx, np.asarray(a)) for (idx, _), a in zip(pieces, arrays, strict=False)]

    return batch


def probe(params: dict) -> dict:
    """Availability, version and batch APIs of each adapter spec: {spec: info}."""
    out = {}
    for spec in params["adapters"]:
        try:
            out[spec] = _probe_one(spec)
        except Exception as e:
            out[spec] = {
                "status": "failed",
                "available": False,
                "reason": f"{type(e).__name__}: {e}",
            }
    return out


def _probe_one(spec: str) -> dict:
    from zarrpipe.bench.adapters import load

    cls = load(spec)
    reason = cls.available()
    batch = {
        f"{level}/{sharded}": [cls.batch_api(level, sharded), cls.no_batch_reason(level, sharded)]
        for level in ("outer", "inner")
        for sharded in (False, True)
    }
    return {
        "available": reason is None,
        "reason": reason,
        "batch": batch,
        "version": None if reason else cls.version(),
        "description": cls.description,
    }


def measure(params: dict) -> dict:
    from zarrpipe.bench.adapters import load
    from zarrpipe.bench.datasets import open_dataset, pieces
    from zarrpipe.bench.rss import RssProbe
    from zarrpipe.bench.workloads import THREADS, WORKLOADS

    cls = load(params["adapter"])
    reason = cls.available()
    if reason:
        return {"status": "skipped", "reason": reason}
    dataset = open_dataset(params["data_dir"], params["dataset"])
    workload = WORKLOADS[params["workload"]]
    grid = dataset.grid("outer" if workload.level == "all" else workload.level)
    todo = pieces(dataset.shape, grid)
    adapter = cls(params["threads"])
    adapter.open(dataset)
    rss = RssProbe(params.get("rss_method"))
    result: dict[str, Any] = {
        "pid": os.getpid(),
        "version": cls.version(),
        "rss_method": rss.method,
        "rss_method_text": rss.description,
        "pieces": 1 if workload.level == "all" else len(todo),
        "runs": [],
    }
    result["baseline_rss"] = rss.rss()
    cold = params.get("cold", False)
    with ThreadPoolExecutor(THREADS) as pool:
        read = _reader(adapter, workload, todo, pool)
        n_warm = params.get("warmup", 1)
        for r in range(n_warm + params["repeats"]):
            gc.collect()
            if cold and r >= n_warm:
                try:
                    pagecache.drop(params.get("drop_caches_path"))
                except OSError as e:
                    why = f"cold cache: cannot drop the page cache: {type(e).__name__}: {e}"
                    return {**result, "status": "skipped", "reason": why}
            before = rss.start()
            used = usage.snapshot()
            t0 = time.perf_counter()
            try:
                out = read()
            finally:
                seconds = time.perf_counter() - t0
                cost = usage.between(used, usage.snapshot())
                after, peak = rss.stop()
            run = {
                "warmup": r < n_warm,
                "cache": "cold" if cold and r >= n_warm else "warm",
                "seconds": seconds,
                "rss_before": before,
                "rss_after": after,
                "rss_peak": peak,
                **cost,
            }
            error = verify(dataset, workload.level, out, todo)
            del out
            if error:
                return {
                    **result,
                    "status": "failed",
                    "reason": f"{'warm-up' if r < n_warm else 'repeat'} run {r}: {error}",
                }
            result["runs"].append(run)
    return {**result, "status": "ok"}


def decode_limit(params: dict) -> dict:
    """Single-thread decode throughput of the dataset's codec (see `decode_limit.METHOD`)."""
    from zarrpipe.bench import decode_limit
    from zarrpipe.bench.datasets import open_dataset

    dataset = open_dataset(params["data_dir"], params["dataset"])
    return {"status": "ok", **decode_limit.measure(dataset, params.get("repeats", 3))}


def small(params: dict) -> dict:
    """One reader on one small dataset (`small.measure`)."""
    from zarrpipe.bench import small

    return small.measure(params)


MODES = {"probe": probe, "decode-limit": decode_limit, "measure": measure, "small": small}


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        params = json.load(f)
    sys.path.extend(p for p in params.get("sys_path", []) if p not in sys.path)
    try:
        result = MODES[params.get("mode", "measure")](params)
    except Exception as e:
        tb = traceback.format_exc(limit=-3)
        result = {"status": "failed", "reason": f"{type(e).__name__}: {e}", "traceback": tb}
    with open(params["result_path"], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

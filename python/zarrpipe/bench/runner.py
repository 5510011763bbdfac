"""Spawns one fresh worker process per measurement and aggregates their results into a report."""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

from zarrpipe.bench import adapters, checksum
from zarrpipe.bench.datasets import Dataset
from zarrpipe.bench.workloads import THREADS, WORKLOADS

MB = 1e6  # throughput is decoded bytes / 1e6 / seconds
MIB = 2**20
Progress = Callable[[str], None]


def _died_at_import(rc: int, stderr: str) -> bool:
    """A crash that looks like the extension being rebuilt under us (worth one retry)."""
    return rc == -signal.SIGBUS or "ImportError" in stderr or "ModuleNotFoundError" in stderr


def spawn(params: dict, threads: int, timeout: float, retries: int = 1) -> dict:
    """Runs the worker in a fresh interpreter; its JSON result, or a 'failed' result."""
    env = dict(os.environ, ZARRPIPE_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory(prefix="zarrpipe-bench-") as tmp:
        params = {**params, "sys_path": sys.path, "result_path": os.path.join(tmp, "out.json")}
        path = os.path.join(tmp, "params.json")
        with open(path, "w") as f:
            json.dump(params, f)
        cmd = [sys.executable, "-m", "zarrpipe.bench.worker", path]
        for attempt in range(retries + 1):
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=timeout, check=False)  # fmt: skip
            except subprocess.TimeoutExpired:
                return {"status": "failed", "reason": f"timed out after {timeout:.0f} s"}
            if os.path.exists(params["result_path"]):
                with open(params["result_path"]) as f:
                    return json.load(f)
            if attempt < retries and _died_at_import(proc.returncode, proc.stderr):
                time.sleep(20)
                continue
            rc = proc.returncode
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            return {"status": "failed", "reason": f"worker died ({how}): {tail}"}
    raise AssertionError("unreachable")


def summarize(nbytes: int, result: dict) -> dict:
    """A row's numbers from a worker's runs (only for status 'ok': a failed row has none)."""
    if result.get("status") != "ok":
        return {}
    runs = result["runs"]
    timed = [r["seconds"] for r in runs if not r["warmup"]]
    best, median = min(timed), statistics.median(timed)

    def mib(v: float) -> float:
        return round(v / MIB, 1)

    def rss(rs: list[dict]) -> dict:
        return {"peak_mib": mib(max(r["rss_peak"] for r in rs)),
                "peak_minus_before_mib": mib(max(r["rss_peak"] - r["rss_before"] for r in rs)),
                "after_minus_before_mib": mib(max(r["rss_after"] - r["rss_before"] for r in rs))}  # fmt: skip

    return {
        "times_s": timed, "warmup_s": [r["seconds"] for r in runs if r["warmup"]],
        "min_s": best, "median_s": median,
        "mb_s": nbytes / MB / median, "mb_s_best": nbytes / MB / best,
        "rss": {"baseline_mib": mib(result["baseline_rss"]), **rss(runs),
                "first_read": rss(runs[:1])},
    }  # fmt: skip


def _dataset_info(d: Dataset) -> dict:
    return {"shape": list(d.shape), "dtype": d.dtype, "chunks": list(d.chunks),
            "inner": list(d.inner) if d.inner else None, "nbytes": d.nbytes,
            "stored_bytes": d.stored_bytes, "ratio": round(d.ratio, 3), "root": d.root,
            "path": d.path}  # fmt: skip


def run(
    datasets: Sequence[Dataset],
    data_dir: str,
    implementations: Sequence[str] | None = None,
    workloads: Sequence[str] | None = None,
    repeats: int = 3,
    threads: int | None = None,
    warmup: int = 1,
    timeout: float = 900,
    progress: Callable[[int, int, str], None] | None = None,
    size: str = "custom",
) -> dict:
    """Measures every applicable (dataset, workload, implementation) row; returns the report."""
    implementations = list(implementations or adapters.REGISTRY)
    workloads = list(workloads or WORKLOADS)
    threads = threads or os.cpu_count() or 1
    for name in implementations:
        if name not in adapters.REGISTRY:
            raise ValueError(f"unknown implementation {name!r}; known: {list(adapters.REGISTRY)}")
    for name in workloads:
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {name!r}; known: {list(WORKLOADS)}")
    rows = [(d, WORKLOADS[w], i) for d in datasets for w in workloads for i in implementations
            if WORKLOADS[w].applies(d)]  # fmt: skip
    total = len(implementations) + len(rows)
    step = 0

    def tick(label: str) -> None:
        nonlocal step
        if progress:
            progress(step, total, label)
        step += 1

    impls = {}
    for name in implementations:
        tick(f"probing {name}")
        spec = adapters.REGISTRY[name]
        impls[name] = {"spec": spec, **spawn({"mode": "probe", "adapter": spec}, threads, timeout)}
        if "available" not in impls[name]:  # the probe itself failed
            impls[name].update(available=False, version=None, description="")
    out_rows = []
    for d, w, name in rows:
        tick(f"{name} · {d.name} · {w.name}")
        row = {"dataset": d.name, "workload": w.name, "implementation": name,
               "nbytes": d.nbytes}  # fmt: skip
        info = impls[name]
        cls = adapters.load(info["spec"])
        api = cls.batch_api(w.level, d.inner is not None) if w.mode == "batch" else None
        if info.get("status") == "failed":
            result = {"status": "failed", "reason": f"probe failed: {info['reason']}"}
        elif not info["available"]:
            result = {"status": "skipped", "reason": info["reason"]}
        elif w.mode == "batch" and api is None:
            result = {"status": "skipped",
                      "reason": cls.no_batch_reason(w.level, d.inner is not None)}  # fmt: skip
        else:
            params = {"adapter": info["spec"], "data_dir": data_dir, "dataset": d.name,
                      "workload": w.name, "repeats": repeats, "warmup": warmup,
                      "threads": threads}  # fmt: skip
            result = spawn(params, threads, timeout)
        row.update(status=result.get("status", "failed"), reason=result.get("reason"),
                   batch_api=api, pieces=result.get("pieces"), version=result.get("version"),
                   rss_method=result.get("rss_method"))  # fmt: skip
        row.update(summarize(d.nbytes, result))
        out_rows.append(row)
    if progress:
        progress(total, total, "done")
    methods = {r["rss_method"]: None for r in out_rows if r.get("rss_method")}
    from zarrpipe.bench.rss import METHODS

    return {
        "schema": 1,
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "threads": threads, "python_threads": THREADS,
            "repeats": repeats, "warmup": warmup, "size": size, "mb": "1e6 bytes",
            "checksum": checksum.ALGORITHM,
            "rss_methods": {m: METHODS.get(m, m) for m in methods},
        },
        "implementations": {k: {kk: v.get(kk) for kk in
                                ("available", "reason", "version", "description")}
                            for k, v in impls.items()},
        "datasets": {d.name: _dataset_info(d) for d in datasets},
        "workloads": {w: WORKLOADS[w].description for w in workloads},
        "rows": out_rows,
    }  # fmt: skip

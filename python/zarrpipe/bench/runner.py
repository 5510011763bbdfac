"""Spawns one fresh worker process per measurement and aggregates their results into a report."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
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
                proc = subprocess.run(
                    cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
                )
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


def probe(specs: Sequence[str], threads: int, timeout: float = 300) -> dict[str, dict]:
    """{spec: availability, version, batch APIs}, from one worker process (one process per
    spec if that one died, so an implementation that crashes at import fails alone)."""
    result = spawn({"mode": "probe", "adapters": list(specs)}, threads, timeout)
    if result.get("status") == "failed" and len(specs) > 1:
        result = {}
        for s in specs:
            result.update(probe([s], threads, timeout))
    elif result.get("status") == "failed":
        result = {specs[0]: result}
    for spec, info in result.items():
        info.setdefault("available", False)
        info.setdefault("description", "")
        info["spec"] = spec
    return result


def _cpu_seconds() -> tuple[float, float] | None:
    """(CPU seconds all processes have used, CPU seconds this process and its finished children
    have used), to tell how busy *other* processes kept the machine during a row."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    machine = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    mine = sum(
        getattr(resource.getrusage(who), f)
        for f in ("ru_utime", "ru_stime")
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return machine, mine


def _others_share(before, after, seconds: float) -> float | None:
    """Share of the machine's CPU capacity used by other processes (0..1) between two samples."""
    if before is None or after is None or seconds <= 0:
        return None
    others = (after[0] - before[0]) - (after[1] - before[1])
    return round(max(others, 0.0) / (seconds * (os.cpu_count() or 1)), 3)


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
        return {
            "peak_mib": mib(max(r["rss_peak"] for r in rs)),
            "peak_minus_before_mib": mib(max(r["rss_peak"] - r["rss_before"] for r in rs)),
            "after_minus_before_mib": mib(max(r["rss_after"] - r["rss_before"] for r in rs)),
        }

    return {
        "times_s": timed,
        "warmup_s": [r["seconds"] for r in runs if r["warmup"]],
        "min_s": best,
        "median_s": median,
        "mb_s": nbytes / MB / median,
        "mb_s_best": nbytes / MB / best,
        "rss": {
            "baseline_mib": mib(result["baseline_rss"]),
            **rss(runs),
            "first_read": rss(runs[:1]),
        },
    }


def _dataset_info(d: Dataset) -> dict:
    return {
        "shape": list(d.shape),
        "dtype": d.dtype,
        "chunks": list(d.chunks),
        "inner": list(d.inner) if d.inner else None,
        "nbytes": d.nbytes,
        "stored_bytes": d.stored_bytes,
        "ratio": round(d.ratio, 3),
        "root": d.root,
        "path": d.path,
    }


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
    only: Callable[[str, str, str], bool] | None = None,
) -> dict:
    """Measures every applicable (dataset, workload, implementation) row; returns the report."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    implementations = list(implementations or adapters.REGISTRY)
    workloads = list(workloads or WORKLOADS)
    threads = threads or os.cpu_count() or 1
    for name in implementations:
        if name not in adapters.REGISTRY:
            raise ValueError(f"unknown implementation {name!r}; known: {list(adapters.REGISTRY)}")
    for name in workloads:
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {name!r}; known: {list(WORKLOADS)}")
    rows = [
        (d, WORKLOADS[w], i)
        for d in datasets
        for w in workloads
        for i in implementations
        if WORKLOADS[w].applies(d)
    ]
    if only is not None:
        rows = [(d, w, i) for d, w, i in rows if only(d.name, w.name, i)]
    total = 1 + len(rows)
    step = 0

    def tick(label: str) -> None:
        nonlocal step
        if progress:
            progress(step, total, label)
        step += 1

    tick("probing implementations")
    impls = probe([adapters.REGISTRY[n] for n in implementations], threads, timeout)
    impls = {n: impls[adapters.REGISTRY[n]] for n in implementations}
    out_rows = []
    for d, w, name in rows:
        tick(f"{name} · {d.name} · {w.name}")
        row = {
            "dataset": d.name,
            "workload": w.name,
            "implementation": name,
            "nbytes": d.nbytes,
            "other_cpu": None,
        }
        info = impls[name]
        api, no_api = info.get("batch", {}).get(f"{w.level}/{d.inner is not None}", [None, ""])
        api = api if w.mode == "batch" else None
        if info.get("status") == "failed":
            result = {"status": "failed", "reason": f"probe failed: {info['reason']}"}
        elif not info["available"]:
            result = {"status": "skipped", "reason": info["reason"]}
        elif w.mode == "batch" and api is None:
            result = {"status": "skipped", "reason": no_api}
        else:
            params = {
                "adapter": info["spec"],
                "data_dir": data_dir,
                "dataset": d.name,
                "workload": w.name,
                "repeats": repeats,
                "warmup": warmup,
                "threads": threads,
            }
            cpu0, t0 = _cpu_seconds(), time.monotonic()
            result = spawn(params, threads, timeout)
            row["other_cpu"] = _others_share(cpu0, _cpu_seconds(), time.monotonic() - t0)
        row.update(
            status=result.get("status", "failed"),
            reason=result.get("reason"),
            batch_api=api,
            pieces=result.get("pieces"),
            version=result.get("version"),
            rss_method=result.get("rss_method"),
        )
        row.update(summarize(d.nbytes, result))
        out_rows.append(row)
    if progress:
        progress(total, total, "done")
    methods = {r["rss_method"]: None for r in out_rows if r.get("rss_method")}
    from zarrpipe.bench.rss import METHODS

    return {
        "schema": 1,
        "meta": {
            "date": started,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "threads": threads,
            "python_threads": THREADS,
            "repeats": repeats,
            "warmup": warmup,
            "size": size,
            "mb": "1e6 bytes",
            "checksum": checksum.ALGORITHM,
            "rss_methods": {m: METHODS.get(m, m) for m in methods},
        },
        "implementations": {
            k: {kk: v.get(kk) for kk in ("available", "reason", "version", "description")}
            for k, v in impls.items()
        },
        "datasets": {d.name: _dataset_info(d) for d in datasets},
        "workloads": {w: WORKLOADS[w].description for w in workloads},
        "rows": out_rows,
    }

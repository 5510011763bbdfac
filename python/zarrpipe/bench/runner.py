"""Measures every row of a benchmark run, each in fresh worker processes, and aggregates the
results into one report (rows, decode limits, what was installed, how it was measured)."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from zarrpipe.bench import adapters, checksum, machine, pagecache
from zarrpipe.bench.datasets import Dataset
from zarrpipe.bench.spawn import OthersCpu, probe, spawn
from zarrpipe.bench.workloads import THREADS, WORKLOADS

MB = 1e6  # throughput is decoded bytes / 1e6 / seconds
MIB = 2**20
Progress = Callable[[int, int, str], None]

__all__ = ["probe", "run", "spawn", "summarize"]


def summarize(nbytes: int, result: dict) -> dict:
    """A row's numbers from its runs (only for status 'ok': a failed row has none). `result`
    is a worker's result, or the runs of several workers gathered in the same shape."""
    if result.get("status") != "ok":
        return {}
    runs = result["runs"]
    timed_runs = [r for r in runs if not r["warmup"]]
    timed = [r["seconds"] for r in timed_runs]
    best, median, worst = min(timed), statistics.median(timed), max(timed)

    def rss(rs: list[dict]) -> dict:
        return {
            "peak_mib": _mib(max(r["rss_peak"] for r in rs)),
            "peak_minus_before_mib": _mib(max(r["rss_peak"] - r["rss_before"] for r in rs)),
            "after_minus_before_mib": _mib(max(r["rss_after"] - r["rss_before"] for r in rs)),
        }

    return {
        **_usage(timed_runs),
        "times_s": timed,
        "warmup_s": [r["seconds"] for r in runs if r["warmup"]],
        "min_s": best,
        "median_s": median,
        "max_s": worst,
        "spread": worst / best if best > 0 else None,
        "mb_s": nbytes / MB / median,
        "mb_s_best": nbytes / MB / best,
        "mb_s_worst": nbytes / MB / worst,
        "rss": {
            "baseline_mib": _mib(result["baseline_rss"]),
            **rss(runs),
            "first_read": rss(runs[:1]),
        },
    }


def _mib(nbytes: float) -> float:
    return round(nbytes / MIB, 1)


def _usage(timed: list[dict]) -> dict:
    """Medians of the CPU and page faults of a row's timed reads, the most any of them read
    from storage, and the most steal time the machine had during one (None where the workers
    did not record it)."""
    if not timed or any("cpu_user_s" not in r for r in timed):
        return {}
    storage = [r["storage_read_bytes"] for r in timed]
    steal = [r.get("steal_s") for r in timed]
    return {
        "cpu_s": statistics.median(r["cpu_user_s"] + r["cpu_sys_s"] for r in timed),
        "cpu_sys_s": statistics.median(r["cpu_sys_s"] for r in timed),
        "minor_faults": statistics.median(r["minor_faults"] for r in timed),
        "storage_read_mib_max": None if None in storage else _mib(max(storage)),
        "steal_s_max": None if None in steal else max(s for s in steal if s is not None),
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


def _decode_limit(d: Dataset, data_dir: str, threads: int, timeout: float) -> dict:
    from zarrpipe.bench import decode_limit

    if decode_limit.compressor(d) is None:
        return {"status": "skipped", "reason": "no compressor: nothing to decode"}
    params = {"mode": "decode-limit", "data_dir": data_dir, "dataset": d.name, "repeats": 3}
    return spawn(params, threads, timeout)


def _row(d: Dataset, workload: str, name: str, mode: str, cold: bool) -> dict:
    return {
        "dataset": d.name,
        "workload": workload,
        "implementation": name,
        "mode": mode,
        "cache": "cold" if cold else "warm",
        "nbytes": d.nbytes,
        "other_cpu": None,
    }


def _finish(row: dict, result: dict, d: Dataset, api: str | None = None) -> dict:
    row.update(
        status=result.get("status", "failed"),
        reason=result.get("reason"),
        batch_api=api,
        pieces=result.get("pieces"),
        version=result.get("version"),
        rss_method=result.get("rss_method"),
    )
    row.update(summarize(d.nbytes, result))
    return row


PER_READ_COSTS = (
    "cpu_user_s",
    "cpu_sys_s",
    "minor_faults",
    "major_faults",
    "storage_read_bytes",
    "steal_s",
)


def _fresh_rows(
    d: Dataset, impls: dict[str, dict], base: dict, rounds: int, cold_reason, tick
) -> list[dict]:
    """Read-all rows of one dataset, each timed read in its own new worker (no warm-up read
    in it). Round 0 is untimed (a warm page cache and warm libraries); rounds 1..N are timed,
    the implementations taking turns in the same order in every round."""
    cold = base["cold"]
    rows = {n: _row(d, "all", n, "fresh-process", cold) for n in impls}
    state: dict[str, dict] = {n: {"runs": [], "processes": [], "cpu": OthersCpu()} for n in impls}
    active = []
    for name, info in impls.items():
        if info.get("status") == "failed":
            why = f"probe failed: {info['reason']}"
            state[name]["result"] = {"status": "failed", "reason": why}
        elif not info["available"]:
            state[name]["result"] = {"status": "skipped", "reason": info["reason"]}
        elif cold_reason:
            state[name]["result"] = {"status": "skipped", "reason": cold_reason}
        else:
            active.append(name)
    seq = 0
    for rnd in range(rounds + 1):
        for name in list(active):
            tick(f"{name} · {d.name} · all · fresh process {rnd}/{rounds}")
            s = state[name]
            params = {
                **base,
                "adapter": impls[name]["spec"],
                "dataset": d.name,
                "workload": "all",
                "repeats": 1,
                "warmup": 0,
                "cold": cold and rnd > 0,
            }
            with s["cpu"].interval():
                result = spawn(params, base["threads"], base["timeout"])
            if result.get("status") != "ok":
                what = "warm-up process" if rnd == 0 else f"process {rnd}"
                s["result"] = {**result, "reason": f"{what}: {result.get('reason')}"}
                active.remove(name)
                continue
            (run,) = result["runs"]
            run["warmup"] = rnd == 0
            s["runs"].append(run)
            # Each read's own costs too: what a slow one paid for (faults, disk, steal).
            costs = {k: run[k] for k in PER_READ_COSTS if k in run}
            s["processes"].append(
                {"round": rnd, "seq": seq, "pid": result["pid"], "seconds": run["seconds"], **costs}
            )
            s.setdefault("baseline_rss", result["baseline_rss"])
            s["last"] = result
            seq += 1
    out = []
    for name, row in rows.items():
        s = state[name]
        result = s.get("result") or {
            **s["last"],
            "status": "ok",
            "runs": s["runs"],
            "baseline_rss": s["baseline_rss"],
        }
        row["other_cpu"] = s["cpu"].share
        row["processes"] = s["processes"] if result["status"] == "ok" else []
        out.append(_finish(row, result, d))
    return out


def _in_process_rows(
    rows: list, impls: dict[str, dict], base: dict, repeats, warmup, rounds, cold_reason, tick
) -> list[dict]:
    """The in-process rows: per row a worker process (a warm-up, then `repeats` timed reads)
    in each of `rounds` rounds. Within a (dataset, workload) the implementations take turns,
    the order rotated each round, so that the machine's drift over minutes (this project's
    benchmark VM moves by 20 % and more) lands on all of them alike instead of on whichever
    ran last. One round is the classic layout: every row once, in order."""
    groups: dict[tuple, list] = {}
    for d, w, name in rows:
        groups.setdefault((d.name, w.name), []).append((d, w, name))
    out = []
    for group in groups.values():
        state: dict[str, dict[str, Any]] = {}
        for d, w, name in group:
            row = _row(d, w.name, name, "in-process", base["cold"])
            info = impls[name]
            api, no_api = info.get("batch", {}).get(f"{w.level}/{d.inner is not None}", [None, ""])
            api = api if w.mode == "batch" else None
            result: dict[str, Any] | None = None
            if info.get("status") == "failed":
                result = {"status": "failed", "reason": f"probe failed: {info['reason']}"}
            elif not info["available"]:
                result = {"status": "skipped", "reason": info["reason"]}
            elif w.mode == "batch" and api is None:
                result = {"status": "skipped", "reason": no_api}
            elif cold_reason:
                result = {"status": "skipped", "reason": cold_reason}
            state[name] = {"row": row, "api": api, "result": result, "ok": [], "cpu": None}
        for rnd in range(rounds):
            k = rnd % len(group)
            for d, w, name in group[k:] + group[:k]:
                tick(
                    f"{name} · {d.name} · {w.name}"
                    + (f" · round {rnd + 1}/{rounds}" if rounds > 1 else "")
                )
                s = state[name]
                if s["result"] is not None:
                    continue
                params = {
                    **base,
                    "adapter": impls[name]["spec"],
                    "dataset": d.name,
                    "workload": w.name,
                    "repeats": repeats,
                    "warmup": warmup,
                }
                s["cpu"] = s["cpu"] or OthersCpu()
                with s["cpu"].interval():
                    result = spawn(params, base["threads"], base["timeout"])
                if result.get("status") != "ok":
                    if rounds > 1:
                        result = {**result, "reason": f"round {rnd + 1}: {result.get('reason')}"}
                    s["result"] = result
                    continue
                s["ok"].append(result)
        for d, _w, name in group:
            s = state[name]
            row = s["row"]
            result = s["result"]
            if result is None:
                first, last = s["ok"][0], s["ok"][-1]
                result = {
                    **last,
                    "runs": [run for r in s["ok"] for run in r["runs"]],
                    "baseline_rss": first["baseline_rss"],
                }
                if rounds > 1:
                    row["round_medians_s"] = [
                        statistics.median(x["seconds"] for x in r["runs"] if not x["warmup"])
                        for r in s["ok"]
                    ]
            if s["cpu"] is not None:
                row["other_cpu"] = s["cpu"].share
            out.append(_finish(row, result, d, s["api"]))
    return out


def run(
    datasets: Sequence[Dataset],
    data_dir: str,
    implementations: Sequence[str] | None = None,
    workloads: Sequence[str] | None = None,
    repeats: int = 3,
    threads: int | None = None,
    warmup: int = 1,
    timeout: float = 900,
    progress: Progress | None = None,
    size: str = "custom",
    only: Callable[[str, str, str], bool] | None = None,
    fresh_processes: int = 0,
    cold: bool = False,
    drop_caches_path: str | None = None,
    decode_limits: bool = True,
    rounds: int = 1,
) -> dict:
    """Measures every applicable (dataset, workload, implementation) row; returns the report.

    `workloads=[]` measures no in-process rows (only fresh-process ones, if asked for).
    `fresh_processes=N` adds a read-all row per (dataset, implementation) from N timed reads,
    each in its own new process. `cold` drops the page cache before every timed read (root
    only; otherwise every row is skipped with the reason). `decode_limits` measures the
    single-thread decode throughput of each compressed dataset's codec. `rounds=N` measures
    each in-process row in N worker processes (each its own warm-up and `repeats` timed
    reads), the implementations of a (dataset, workload) taking turns round by round in an
    order rotated each round, and summarizes all their timed reads together."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    implementations = list(adapters.REGISTRY if implementations is None else implementations)
    workloads = list(WORKLOADS if workloads is None else workloads)
    threads = threads or os.cpu_count() or 1
    for name in implementations:
        if name not in adapters.REGISTRY:
            raise ValueError(f"unknown implementation {name!r}; known: {list(adapters.REGISTRY)}")
    for name in workloads:
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {name!r}; known: {list(WORKLOADS)}")
    if fresh_processes < 0:
        raise ValueError("fresh_processes must be 0 (off) or more")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    rows = [
        (d, WORKLOADS[w], i)
        for d in datasets
        for w in workloads
        for i in implementations
        if WORKLOADS[w].applies(d)
    ]
    if only is not None:
        rows = [(d, w, i) for d, w, i in rows if only(d.name, w.name, i)]
    n_fresh = (fresh_processes + 1) * len(implementations) * len(datasets) if fresh_processes else 0
    total = 1 + (len(datasets) if decode_limits else 0) + len(rows) * rounds + n_fresh
    step = 0

    def tick(label: str) -> None:
        nonlocal step
        if progress:
            progress(step, total, label)
        step += 1

    tick("probing implementations")
    impls = probe([adapters.REGISTRY[n] for n in implementations], threads, timeout)
    impls = {n: impls[adapters.REGISTRY[n]] for n in implementations}
    cold_reason = pagecache.why_not(drop_caches_path) if cold else None
    limits = {}
    for d in datasets if decode_limits else ():
        tick(f"decode limit · {d.name}")
        limits[d.name] = _decode_limit(d, data_dir, threads, timeout)
    base = {
        "data_dir": data_dir,
        "threads": threads,
        "timeout": timeout,
        "cold": cold,
        "drop_caches_path": drop_caches_path,
    }
    out_rows = _in_process_rows(rows, impls, base, repeats, warmup, rounds, cold_reason, tick)
    if fresh_processes:
        for d in datasets:
            out_rows += _fresh_rows(d, impls, base, fresh_processes, cold_reason, tick)
    if progress:
        progress(total, total, "done")
    methods = {r["rss_method"]: None for r in out_rows if r.get("rss_method")}
    from zarrpipe.bench.rss import METHODS

    return {
        "schema": 2,
        "meta": {
            "date": started,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "threads": threads,
            "python_threads": THREADS,
            "repeats": repeats,
            "warmup": warmup,
            "rounds": rounds,
            "fresh_processes": fresh_processes,
            "cold": cold,
            "cold_skipped": cold_reason,
            "size": size,
            "mb": "1e6 bytes",
            "checksum": checksum.ALGORITHM,
            "rss_methods": {m: METHODS.get(m, m) for m in methods},
            "memory_policies": machine.memory_policies(),
        },
        "implementations": {
            k: {kk: v.get(kk) for kk in ("available", "reason", "version", "description")}
            for k, v in impls.items()
        },
        "datasets": {d.name: _dataset_info(d) for d in datasets},
        "decode_limits": limits,
        "workloads": {w: WORKLOADS[w].description for w in workloads},
        "rows": out_rows,
    }

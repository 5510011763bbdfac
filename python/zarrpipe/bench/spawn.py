"""Runs worker processes (a fresh interpreter each) and tells how busy other processes kept the
machine meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

from zarrpipe.bench import usage


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
    times = usage.machine_cpu_s()
    if times is None:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = times
    machine = user + nice + system + irq + softirq + steal
    mine = sum(
        getattr(resource.getrusage(who), f)
        for f in ("ru_utime", "ru_stime")
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return machine, mine


class OthersCpu:
    """The share of the machine's CPU capacity (0..1) that other processes used during the
    intervals watched with `with watch.interval():` (several, for a row measured in rounds)."""

    def __init__(self) -> None:
        self.others = 0.0  # CPU seconds of other processes
        self.wall = 0.0
        self.known = True

    @contextlib.contextmanager
    def interval(self) -> Iterator[None]:
        before, t0 = _cpu_seconds(), time.monotonic()
        try:
            yield
        finally:
            after, seconds = _cpu_seconds(), time.monotonic() - t0
            if before is None or after is None:
                self.known = False
            else:
                self.others += max((after[0] - before[0]) - (after[1] - before[1]), 0.0)
                self.wall += seconds

    @property
    def share(self) -> float | None:
        if not self.known or self.wall <= 0:
            return None
        return round(self.others / (self.wall * (os.cpu_count() or 1)), 3)

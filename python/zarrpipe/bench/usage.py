"""What one timed read cost the process that made it: CPU seconds (user and system, every
thread), page faults, and bytes fetched from storage; and what the host took from the machine
meanwhile (steal time).

Why: wall time alone cannot tell a slow reader from a slow machine. On a virtual machine that
hands free memory back to its host, faulting in fresh memory shows up as system time (the
host's share included, as the guest sees it), and a page cache emptied behind the benchmark's
back (see `machine`) shows up as bytes read from storage in a row that claims a warm cache,
and a host that runs something else on our virtual CPUs shows up as steal time.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

IO_PATH = "/proc/self/io"
"""Linux's per-process I/O accounting; `read_bytes` counts what the process made the kernel
fetch from storage (page-cache hits do not count)."""

STAT_PATH = "/proc/stat"
"""Linux's CPU time counters; the `steal` column of its `cpu` line is the time, summed over
the machine's virtual CPUs, that they were ready to run while the host ran something else."""


@dataclass(frozen=True)
class Snapshot:
    """The process's totals at one moment (all of its threads so far)."""

    user_s: float
    sys_s: float
    minor_faults: int
    major_faults: int
    storage_read_bytes: int | None  # None where /proc/self/io is missing or unreadable
    steal_s: float | None = None  # the whole machine's; None where /proc/stat has none


def storage_read_bytes(path: str = IO_PATH) -> int | None:
    """`read_bytes` from a /proc/<pid>/io file, None if there is none."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "read_bytes":
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def machine_cpu_s(path: str = STAT_PATH) -> list[float] | None:
    """The machine's CPU time so far, summed over its CPUs, in seconds: user, nice, system,
    idle, iowait, irq, softirq, steal (the first eight columns of the `cpu` line); None where
    there is no such line."""
    try:
        with open(path) as f:
            fields = f.readline().split()
        if len(fields) < 9 or fields[0] != "cpu":
            return None
        tick = os.sysconf("SC_CLK_TCK")
        return [int(v) / tick for v in fields[1:9]]
    except (OSError, ValueError, AttributeError):  # no sysconf name: not Linux
        return None


def machine_steal_s(path: str = STAT_PATH) -> float | None:
    """Seconds of steal time so far, summed over the machine's CPUs; None if unknown."""
    times = machine_cpu_s(path)
    return None if times is None else times[7]


def snapshot(io_path: str = IO_PATH, stat_path: str = STAT_PATH) -> Snapshot:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return Snapshot(
        user_s=ru.ru_utime,
        sys_s=ru.ru_stime,
        minor_faults=ru.ru_minflt,
        major_faults=ru.ru_majflt,
        storage_read_bytes=storage_read_bytes(io_path),
        steal_s=machine_steal_s(stat_path),
    )


def between(before: Snapshot, after: Snapshot) -> dict:
    """What happened between two snapshots, as the fields a benchmark run records."""
    storage = (
        None
        if before.storage_read_bytes is None or after.storage_read_bytes is None
        else after.storage_read_bytes - before.storage_read_bytes
    )
    steal = (
        None
        if before.steal_s is None or after.steal_s is None
        else round(after.steal_s - before.steal_s, 3)
    )
    return {
        "cpu_user_s": after.user_s - before.user_s,
        "cpu_sys_s": after.sys_s - before.sys_s,
        "minor_faults": after.minor_faults - before.minor_faults,
        "major_faults": after.major_faults - before.major_faults,
        "storage_read_bytes": storage,
        "steal_s": steal,
    }

"""The machine's memory policies that change what a read costs, read from sysfs for the
report's header: transparent huge pages, free memory reported to a hypervisor, and DAMON
paging out memory it finds idle.

Why: on the 2-core Firecracker VMs the benchmarks run on, all three are on. Free blocks of
2 MiB and more are handed back to the host, so a fresh process's first touch of its output may
cost the host's page faults too; and DAMON pages out page cache left idle for a minute, so a
dataset not read for a while is partly back on the disk. Readers cannot change either; the
report says they are there so that its numbers can be read for what they are.
"""

from __future__ import annotations

import os

THP = "sys/kernel/mm/transparent_hugepage/enabled"
REPORTING = "sys/module/page_reporting/parameters/page_reporting_order"
KDAMONDS = "sys/kernel/mm/damon/admin/kdamonds"
PAGE = 4096


def _read(root: str, *parts: str) -> str | None:
    try:
        with open(os.path.join(root, *parts)) as f:
            return f.read().strip()
    except OSError:
        return None


def _children(root: str, *parts: str) -> list[str]:
    try:
        names = os.listdir(os.path.join(root, *parts))
    except OSError:
        return []
    return sorted((n for n in names if n.isdigit()), key=int)


def _thp(root: str) -> str | None:
    mode = _read(root, THP)
    if not mode:
        return None
    chosen = next((w[1:-1] for w in mode.split() if w.startswith("[")), mode)
    return f"transparent huge pages: {chosen}"


def _reporting(root: str) -> str | None:
    order = _read(root, REPORTING)
    if order is None or not order.isdigit():
        return None
    size = (PAGE << int(order)) // 2**10
    unit = f"{size // 1024} MiB" if size >= 1024 else f"{size} KiB"
    return (
        f"free page reporting: free blocks of {unit} and more go back to the hypervisor "
        "(fresh memory taken from them may have to be faulted in by the host)"
    )


def _pageout_schemes(root: str) -> list[str]:
    """One line per running DAMON 'pageout' scheme: how idle memory must be, how fast it goes."""
    lines = []
    for k in _children(root, KDAMONDS):
        if _read(root, KDAMONDS, k, "state") != "on":
            continue
        for c in _children(root, KDAMONDS, k, "contexts"):
            ctx = (KDAMONDS, k, "contexts", c)
            aggr_us = _read(root, *ctx, "monitoring_attrs", "intervals", "aggr_us")
            for s in _children(root, *ctx, "schemes"):
                scheme = (*ctx, "schemes", s)
                if _read(root, *scheme, "action") != "pageout":
                    continue
                age = _read(root, *scheme, "access_pattern", "age", "min")
                idle = (
                    f"idle for {int(age) * int(aggr_us) / 1e6:g} s or more"
                    if age and aggr_us and age.isdigit() and aggr_us.isdigit()
                    else "it finds idle"
                )
                quota = _read(root, *scheme, "quotas", "bytes")
                per_ms = _read(root, *scheme, "quotas", "reset_interval_ms")
                rate = (
                    f", up to {int(quota) / 2**20:g} MiB per {int(per_ms) / 1000:g} s"
                    if quota and per_ms and quota.isdigit() and per_ms.isdigit() and int(quota)
                    else ""
                )
                lines.append(f"DAMON pages out {_kinds(root, scheme)} {idle}{rate}")
    return lines


def _kinds(root: str, scheme: tuple[str, ...]) -> str:
    """'memory', or 'page cache' when the scheme's filters keep anonymous memory out."""
    for sub in ("ops_filters", "filters"):
        for f in _children(root, *scheme, sub):
            kind = _read(root, *scheme, sub, f, "type")
            allow = _read(root, *scheme, sub, f, "allow")
            matching = _read(root, *scheme, sub, f, "matching")
            if kind == "anon" and allow == "N" and matching == "Y":
                return "page cache"
    return "memory"


def memory_policies(root: str = "/") -> list[str]:
    """Lines describing the policies in force here; empty where sysfs says nothing."""
    lines = [line for line in (_thp(root), _reporting(root)) if line]
    return lines + _pageout_schemes(root)

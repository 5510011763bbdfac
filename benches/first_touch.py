"""What the first touch of fresh memory costs, 2 MiB at a time, by page size and by what ran
before: the measurement behind zarrpipe's first-touch chooser (`codecs/src/memory/first_touch.rs`)
and behind the spread of fresh-process read-alls on virtual machines (BENCHMARKS.md).

    python benches/first_touch.py [--mib 1024] [--rounds 3] [--gaps 0,1,3] [--idle 10]

Every measurement is a new process that maps --mib MiB, asks for huge or base pages
(`MADV_HUGEPAGE` / `MADV_NOHUGEPAGE`) and faults the mapping in with `MADV_POPULATE_WRITE`,
one 2 MiB step at a time, timing each step, as zarrpipe does before decoding into a fresh
output. The states: "idle" starts after --idle seconds in which this script does nothing;
"gap N s" starts N seconds after another process touched --mib MiB of huge pages and exited.
Each row shows the total, the cost per step, the steps slower than 1.5 ms (zarrpipe's line for
memory the host had to fault in again) and a strip of the steps in order, one character per
eighth of the mapping: `.` under 0.5 ms a step on average, `-` under 1.0, `o` under 1.5, `X`
under 3, `#` slower. Linux only (5.14 or later).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import statistics
import subprocess
import sys
import time

STEP = 2 << 20
MADV_POPULATE_WRITE = 23  # Linux 5.14; not every Python names it
SLOW_MS = 1.5


def touch(mib: int, huge: bool) -> list[float]:
    """Maps `mib` MiB, 2 MiB-aligned, and faults it in step by step: milliseconds per step."""
    steps = mib * 2**20 // STEP
    # Private, as malloc's memory is (a shared anonymous mapping is shmem, faulted otherwise).
    m = mmap.mmap(-1, (steps + 1) * STEP, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(m))
    start = -address % STEP  # huge pages need 2 MiB-aligned steps
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE, start, steps * STEP)
    costs = []
    for i in range(steps):
        t0 = time.perf_counter()
        m.madvise(MADV_POPULATE_WRITE, start + i * STEP, STEP)
        costs.append((time.perf_counter() - t0) * 1e3)
    return costs


def child(kind: str, mib: int) -> list[float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--mib", str(mib)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def strip(costs: list[float], width: int = 8) -> str:
    width = min(width, len(costs))  # a mapping of fewer steps gets one mark a step
    part = max(1, len(costs) // width)
    marks = []
    for i in range(0, part * width, part):
        ms = statistics.fmean(costs[i : i + part])
        marks.append("." if ms < 0.5 else "-" if ms < 1.0 else "o" if ms < 1.5 else
                     "X" if ms < 3 else "#")  # fmt: skip
    return "".join(marks)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=1024, help="mapping size (default 1024)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every state (3)")
    parser.add_argument("--gaps", default="0,1,3", help="seconds after an exit (0,1,3)")
    parser.add_argument("--idle", type=float, default=10.0, help="idle seconds first (10)")
    parser.add_argument("--child", choices=["huge", "base"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("first_touch.py measures Linux's page faults; skipped on", sys.platform)
        return 0
    if args.mib < 2:
        parser.error("--mib must be at least 2 (one step)")
    if args.child:
        print(json.dumps(touch(args.mib, args.child == "huge")))
        return 0
    gaps = [float(g) for g in args.gaps.split(",") if g.strip()]
    print(f"{args.mib} MiB in {args.mib * 2**20 // STEP} steps of 2 MiB, "
          f"{args.rounds} rounds; a new process per row")  # fmt: skip
    head = f"{'state':10s} {'pages':5s} {'total ms':>8s} {'ms/step':>7s} {'slow':>5s}  strip"
    print(head + "\n" + "-" * len(head))
    totals: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for state in ["idle", *(f"gap {g:g} s" for g in gaps)]:
            for kind in ("huge", "base"):
                if state == "idle":
                    time.sleep(args.idle)
                else:
                    child("huge", args.mib)  # another process uses the memory, then exits
                    time.sleep(float(state.split()[1]))
                costs = child(kind, args.mib)
                slow = sum(c > SLOW_MS for c in costs)
                totals.setdefault((state, kind), []).append(sum(costs))
                print(f"{state:10s} {kind:5s} {sum(costs):8.0f} "
                      f"{statistics.median(costs):7.2f} {slow:5d}  {strip(costs)}",
                      flush=True)  # fmt: skip
    print("\nmedian total ms per state: " + "; ".join(
        f"{s} {k} {statistics.median(v):.0f}" for (s, k), v in totals.items()
    ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

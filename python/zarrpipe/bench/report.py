"""Turns a runner report into a terminal table, Markdown and JSON (the chart is in `chart`)."""

from __future__ import annotations

import json
import os
from collections import defaultdict

LONG_HEADERS = [
    "dataset",
    "workload",
    "implementation",
    "min s",
    "median s",
    "max s",
    "max/min",
    "MB/s",
    "best MB/s",
    "of limit",
    "peak RSS MiB",
    "+peak MiB",
    "+after MiB",
    "CPU s",
    "sys s",
    "disk MiB",
    "steal s",
    "others CPU",
    "status",
]
FRESH_HEADERS = [
    "dataset",
    "implementation",
    "reads",
    "min s",
    "median s",
    "max s",
    "slowest/fastest",
    "MB/s",
    "best MB/s",
    "of limit",
    "+peak MiB",
    "CPU s",
    "sys s",
    "disk MiB",
    "steal s",
    "others CPU",
    "status",
]
BUSY = 0.10  # share of the CPUs used by other processes above which a row is flagged noisy
# A warm-cache read that fetched more than this share of its dataset's stored bytes from
# storage, and more than the floor (a fresh process also pages in library code), was not warm.
NOT_WARM_SHARE = 0.02
NOT_WARM_FLOOR_MIB = 16.0
OTHERS_EXCLUDED = ("zarrpipe", "zarr+zarrpipe")  # zarrpipe itself, not another project


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _usage_cells(r: dict) -> list[str]:
    """CPU seconds, system seconds (medians), the most read from storage by one read and the
    most steal time during one."""
    return [
        _num(r.get("cpu_s"), 2),
        _num(r.get("cpu_sys_s"), 2),
        _num(r.get("storage_read_mib_max"), 1),
        _num(r.get("steal_s_max"), 2),
    ]


def _status(r: dict) -> str:
    return "ok" if r["status"] == "ok" else f"FAILED: {r['reason']}"


def limit_of(report: dict, dataset: str) -> float | None:
    """The decode limit of a dataset in MB/s (single-thread decode x cores), None if none."""
    lim = report.get("decode_limits", {}).get(dataset, {})
    return lim.get("limit_mb_s") if lim.get("status") == "ok" else None


def _of_limit(report: dict, r: dict) -> str:
    lim = limit_of(report, r["dataset"])
    return _pct(r["mb_s"] / lim) if lim and r.get("mb_s") else "-"


def _measured(report: dict, mode: str) -> list[dict]:
    return [
        r
        for r in report["rows"]
        if r.get("mode", "in-process") == mode and r["status"] != "skipped"
    ]


def _long_rows(report: dict) -> list[list[str]]:
    rows = []
    for r in _measured(report, "in-process"):
        rss = r.get("rss", {})
        rows.append(
            [
                r["dataset"],
                r["workload"],
                r["implementation"],
                _num(r.get("min_s")),
                _num(r.get("median_s")),
                _num(r.get("max_s")),
                _ratio(r.get("spread")),
                _num(r.get("mb_s"), 0),
                _num(r.get("mb_s_best"), 0),
                _of_limit(report, r),
                _num(rss.get("peak_mib"), 1),
                _num(rss.get("peak_minus_before_mib"), 1),
                _num(rss.get("after_minus_before_mib"), 1),
                *_usage_cells(r),
                _pct(r.get("other_cpu")),
                _status(r),
            ]
        )
    return rows


def _fresh_rows(report: dict) -> list[list[str]]:
    return [
        [
            r["dataset"],
            r["implementation"],
            str(len(r.get("times_s", []))),
            _num(r.get("min_s")),
            _num(r.get("median_s")),
            _num(r.get("max_s")),
            _ratio(r.get("spread")),
            _num(r.get("mb_s"), 0),
            _num(r.get("mb_s_best"), 0),
            _of_limit(report, r),
            _num(r.get("rss", {}).get("peak_minus_before_mib"), 1),
            *_usage_cells(r),
            _pct(r.get("other_cpu")),
            _status(r),
        ]
        for r in _measured(report, "fresh-process")
    ]


def _implementations(report: dict) -> list[str]:
    """Implementations that have at least one row that is not skipped, in report order."""
    seen = {r["implementation"] for r in report["rows"] if r["status"] != "skipped"}
    return [i for i in report["implementations"] if i in seen]


def _cell(r: dict | None) -> str:
    """Median MB/s and the range [slowest run - fastest run]."""
    if r is None or r["status"] == "skipped":
        return "-"
    if r["status"] != "ok":
        return "FAILED"
    return f"{r['mb_s']:.0f} [{r['mb_s_worst']:.0f}-{r['mb_s_best']:.0f}]"


def _pivot_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    impls = _implementations(report)
    cells: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for r in report["rows"]:
        if r.get("mode", "in-process") == "in-process":
            cells[(r["dataset"], r["workload"])][r["implementation"]] = r
    headers = ["dataset", "workload", *impls]
    ratio = "zarrpipe" in impls and len(impls) > 1
    if ratio:
        # zarr+zarrpipe is zarrpipe too: the ratio is against the other projects.
        headers.append("zarrpipe / best other project")
    limits = any(limit_of(report, d) for d in report["datasets"])
    if limits:
        headers.append("decode limit")
        if "zarrpipe" in impls:
            headers.append("zarrpipe / limit")
    rows = []
    for (dataset, workload), by_impl in cells.items():
        line = [dataset, workload, *(_cell(by_impl.get(i)) for i in impls)]
        if all(c == "-" for c in line[2:]):
            continue
        zp = by_impl.get("zarrpipe", {}).get("mb_s")
        if ratio:
            others = [
                (r["mb_s"], i)
                for i, r in by_impl.items()
                if i not in OTHERS_EXCLUDED and r["status"] == "ok"
            ]
            if zp and others:
                best, who = max(others)
                line.append(f"{zp / best:.2f}x (vs {who})")
            else:
                line.append("-")
        if limits:
            lim = limit_of(report, dataset)
            line.append(_num(lim, 0))
            if "zarrpipe" in impls:
                line.append(_pct(zp / lim) if zp and lim else "-")
        rows.append(line)
    return headers, rows


def _skips(report: dict) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in report["rows"]:
        if r["status"] == "skipped":
            fresh = " (fresh processes)" if r.get("mode") == "fresh-process" else ""
            groups[(r["implementation"], r["reason"])].append(
                f"{r['dataset']}/{r['workload']}{fresh}"
            )
    total: dict[str, int] = defaultdict(int)
    for r in report["rows"]:
        total[r["implementation"]] += 1
    out = []
    for (impl, reason), where in groups.items():
        scope = "all rows" if len(where) == total[impl] else ", ".join(where)
        out.append(f"{impl} skipped ({scope}): {reason}")
    return out


def _text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    numeric = [bool(rows) and all(_is_num(row[i]) for row in rows) for i in range(len(headers))]

    def fmt(row):
        return "  ".join(
            str(c).rjust(w) if numeric[i] else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *map(fmt, rows)])


def _is_num(s: str) -> bool:
    """A number, a percentage, a ratio, a number with its [range], or a placeholder."""
    first = s.split(" ", 1)[0].rstrip("%x")
    try:
        float(first)
        return True
    except ValueError:
        return s in ("-", "FAILED")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(c):
        return str(c).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _limit_lines(report: dict) -> list[str]:
    lines = []
    for name, lim in report.get("decode_limits", {}).items():
        if lim.get("status") == "ok":
            lines.append(
                f"decode limit {name}: {lim['codec']}, {lim['chunks']} chunks of "
                f"{tuple(lim['chunk_shape'])}: {lim['single_thread_mb_s']:.0f} MB/s in 1 thread "
                f"(median of {len(lim['seconds'])} passes; best "
                f"{lim['single_thread_mb_s_best']:.0f}) x {lim['cores']} cores = "
                f"{lim['limit_mb_s']:.0f} MB/s"
            )
        elif lim.get("status") == "failed":
            lines.append(f"decode limit {name}: FAILED: {lim.get('reason')}")
    method = next(
        (v["method"] for v in report.get("decode_limits", {}).values() if "method" in v), None
    )
    if method:
        lines.append(f"decode limit, how: {method}")
    return lines


def _not_warm_mib(report: dict, dataset: str) -> float:
    stored = report["datasets"].get(dataset, {}).get("stored_bytes") or 0
    return max(NOT_WARM_FLOOR_MIB, NOT_WARM_SHARE * stored / 2**20)


def _header_lines(report: dict) -> list[str]:
    m = report["meta"]
    in_process = any(r.get("mode", "in-process") == "in-process" for r in report["rows"])
    rounds = m.get("rounds", 1)
    runs = (
        f"{m['repeats']} repeats after {m['warmup']} warm-up"
        + (f" in each of {rounds} rounds" if rounds > 1 else "")
        if in_process
        else "no in-process rows"
    )
    lines = [
        f"{m['date']}  {m['platform']}  python {m['python']}  {m['cpus']} CPUs, "
        f"{m['threads']} decode threads, {runs}, size {m['size']}"
    ]
    if m.get("cold"):
        lines.append(
            f"COLD CACHE: every row skipped: {m['cold_skipped']}"
            if m.get("cold_skipped")
            else "cold cache: the page cache was dropped (sync; 3 > /proc/sys/vm/drop_caches) "
            "before every timed read"
        )
    if in_process and rounds > 1:
        lines.append(
            f"rounds: every in-process row measured in {rounds} worker processes, the "
            "implementations of a dataset and workload taking turns round by round (the order "
            "rotated each round); a row's figures are over the timed runs of all its rounds"
        )
    if m.get("fresh_processes"):
        lines.append(
            f"fresh processes: read-all {m['fresh_processes']} times per implementation and "
            "dataset, each read in its own new process (after one untimed round), the "
            "implementations taking turns round by round"
        )
    for name, d in report["datasets"].items():
        lines.append(
            f"dataset {name}: shape {tuple(d['shape'])} {d['dtype']}, chunks "
            f"{tuple(d['chunks'])}"
            + (f" (inner {tuple(d['inner'])})" if d["inner"] else "")
            + f", {d['nbytes'] / 2**20:.0f} MiB, ratio {d['ratio']:.2f}x"
        )
    lines += _limit_lines(report)
    for name, i in report["implementations"].items():
        if i.get("available"):
            lines.append(f"{name}: {i['version']}")
    busy = [r for r in report["rows"] if (r.get("other_cpu") or 0) > BUSY]
    if busy:
        worst = max(r["other_cpu"] for r in busy)
        lines.append(
            f"WARNING: other processes used more than {BUSY:.0%} of the CPUs during "
            f"{len(busy)} row(s) (up to {worst:.0%}): those numbers are noisy "
            "(column 'others CPU')"
        )
    not_warm = [
        r
        for r in report["rows"]
        if r.get("cache") == "warm"
        and (r.get("storage_read_mib_max") or 0) > _not_warm_mib(report, r["dataset"])
    ]
    if not_warm:
        lines.append(
            f"WARNING: {len(not_warm)} warm-cache row(s) read data from storage during a timed "
            f"read (up to {max(r['storage_read_mib_max'] for r in not_warm):.0f} MiB, column "
            "'disk MiB'): their data was partly out of the page cache"
        )
    lines += [f"machine: {p}" for p in m.get("memory_policies", [])]
    return lines


PIVOT_TITLE = (
    "Throughput, MB/s: median [slowest run - fastest run] (decoded bytes / 1e6 / wall time)"
)
USAGE_NOTE = (
    "CPU s, sys s: median CPU seconds of the reader's process per read, all threads, and "
    "the system part of it (page faults, file reads); disk MiB: the most one read fetched "
    "from storage rather than the page cache; steal s: the most CPU time the host took from "
    "this machine's virtual CPUs during one read (all CPUs, from /proc/stat)"
)
LONG_TITLE = (
    "Every measured row (RSS: +peak = peak - RSS before the read, +after = RSS after - "
    "before; the result itself is held, so both include the decoded size; of limit = MB/s "
    f"/ decode limit; {USAGE_NOTE}):"
)
FRESH_TITLE = (
    "Read-all, one new process per timed read (MB/s by median; slowest/fastest = max s / min "
    f"s; {USAGE_NOTE}):"
)


def _sections(report: dict, table) -> list[str]:
    out = []
    headers, rows = _pivot_rows(report)
    if rows:
        out += ["", PIVOT_TITLE + ":", "", table(headers, rows)]
    long = _long_rows(report)
    if long:
        out += ["", LONG_TITLE, "", table(LONG_HEADERS, long)]
    fresh = _fresh_rows(report)
    if fresh:
        out += ["", FRESH_TITLE, "", table(FRESH_HEADERS, fresh)]
    return out


def text(report: dict) -> str:
    """The terminal report: throughput pivot, every measured row, fresh-process rows, skips."""
    out = _header_lines(report) + _sections(report, _text_table)
    skips = _skips(report)
    if skips:
        out += ["", *skips]
    return "\n".join(out)


def markdown(report: dict, title: str = "Results") -> str:
    out = [f"### {title}", "", *[f"- {line}" for line in _header_lines(report)]]
    out += _sections(report, _md_table)
    skips = _skips(report)
    if skips:
        out += ["", *[f"- {s}" for s in skips]]
    return "\n".join(out) + "\n"


def write(report: dict, out_dir: str) -> dict[str, str]:
    """Writes results.json, results.md and throughput.png; returns {kind: path or message}."""
    from zarrpipe.bench.chart import chart

    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "json": os.path.join(out_dir, "results.json"),
        "markdown": os.path.join(out_dir, "results.md"),
        "chart": os.path.join(out_dir, "throughput.png"),
    }
    with open(paths["json"], "w") as f:
        json.dump(report, f, indent=1)
    with open(paths["markdown"], "w") as f:
        f.write(markdown(report, f"Results ({report['meta']['size']} mode)"))
    why_not = chart(report, paths["chart"])
    if why_not:
        paths["chart"] = why_not
    return paths

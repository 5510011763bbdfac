"""Turns a runner report into a terminal table, Markdown, JSON and a PNG bar chart."""

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
    "MB/s",
    "best MB/s",
    "peak RSS MiB",
    "+peak MiB",
    "+after MiB",
    "others CPU",
    "status",
]
BUSY = 0.10  # share of the CPUs used by other processes above which a row is flagged noisy


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _long_rows(report: dict) -> list[list[str]]:
    rows = []
    for r in report["rows"]:
        if r["status"] == "skipped":
            continue
        rss = r.get("rss", {})
        status = "ok" if r["status"] == "ok" else f"FAILED: {r['reason']}"
        rows.append(
            [
                r["dataset"],
                r["workload"],
                r["implementation"],
                _num(r.get("min_s")),
                _num(r.get("median_s")),
                _num(r.get("mb_s"), 0),
                _num(r.get("mb_s_best"), 0),
                _num(rss.get("peak_mib"), 1),
                _num(rss.get("peak_minus_before_mib"), 1),
                _num(rss.get("after_minus_before_mib"), 1),
                _pct(r.get("other_cpu")),
                status,
            ]
        )
    return rows


def _implementations(report: dict) -> list[str]:
    """Implementations that have at least one row that is not skipped, in report order."""
    seen = {r["implementation"] for r in report["rows"] if r["status"] != "skipped"}
    return [i for i in report["implementations"] if i in seen]


def _pivot_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    impls = _implementations(report)
    cells: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for r in report["rows"]:
        cells[(r["dataset"], r["workload"])][r["implementation"]] = r
    headers = ["dataset", "workload", *impls]
    if "zarrpipe" in impls and len(impls) > 1:
        # zarr+zarrpipe is zarrpipe too: the ratio is against the other projects.
        headers.append("zarrpipe / best other project")
    rows = []
    for (dataset, workload), by_impl in cells.items():
        line = [dataset, workload]
        for i in impls:
            r = by_impl.get(i)
            if r is None or r["status"] == "skipped":
                line.append("-")
            else:
                line.append(f"{r['mb_s']:.0f}" if r["status"] == "ok" else "FAILED")
        if headers[-1].startswith("zarrpipe /"):
            zp = by_impl.get("zarrpipe", {}).get("mb_s")
            others = [
                (r["mb_s"], i)
                for i, r in by_impl.items()
                if i not in ("zarrpipe", "zarr+zarrpipe") and r["status"] == "ok"
            ]
            if zp and others:
                best, who = max(others)
                line.append(f"{zp / best:.2f}x (vs {who})")
            else:
                line.append("-")
        if any(c not in ("-",) for c in line[2 : 2 + len(impls)]):
            rows.append(line)
    return headers, rows


def _skips(report: dict) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in report["rows"]:
        if r["status"] == "skipped":
            groups[(r["implementation"], r["reason"])].append(f"{r['dataset']}/{r['workload']}")
    total = defaultdict(int)
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
    try:
        float(s.rstrip("%"))
        return True
    except ValueError:
        return s in ("-", "FAILED")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(c):
        return str(c).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _header_lines(report: dict) -> list[str]:
    m = report["meta"]
    lines = [
        f"{m['date']}  {m['platform']}  python {m['python']}  {m['cpus']} CPUs, "
        f"{m['threads']} decode threads, {m['repeats']} repeats after {m['warmup']} "
        f"warm-up, size {m['size']}"
    ]
    for name, d in report["datasets"].items():
        lines.append(
            f"dataset {name}: shape {tuple(d['shape'])} {d['dtype']}, chunks "
            f"{tuple(d['chunks'])}"
            + (f" (inner {tuple(d['inner'])})" if d["inner"] else "")
            + f", {d['nbytes'] / 2**20:.0f} MiB, ratio {d['ratio']:.2f}x"
        )
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
    return lines


def text(report: dict) -> str:
    """The terminal report: throughput pivot, then every measured row, then the skips."""
    headers, rows = _pivot_rows(report)
    out = _header_lines(report)
    out += [
        "",
        "Throughput, MB/s (decoded bytes / 1e6 / median wall time; higher is better):",
        _text_table(headers, rows),
        "",
        "Every measured row (RSS: +peak = peak - RSS before the read, +after = RSS after - "
        "before; the result itself is held, so both include the decoded size):",
        _text_table(LONG_HEADERS, _long_rows(report)),
    ]
    skips = _skips(report)
    if skips:
        out += ["", *skips]
    return "\n".join(out)


def markdown(report: dict, title: str = "Results") -> str:
    headers, rows = _pivot_rows(report)
    out = [
        f"### {title}",
        "",
        *[f"- {line}" for line in _header_lines(report)],
        "",
        "Throughput, MB/s (decoded bytes / 1e6 / median wall time):",
        "",
        _md_table(headers, rows),
        "",
        "All measured rows:",
        "",
        _md_table(LONG_HEADERS, _long_rows(report)),
    ]
    skips = _skips(report)
    if skips:
        out += ["", *[f"- {s}" for s in skips]]
    return "\n".join(out) + "\n"


def chart(report: dict, path: str) -> str | None:
    """Writes a PNG of MB/s per workload per implementation; returns why not, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart (pip install 'zarrpipe[bench]')"
    impls = _implementations(report)
    datasets = list(report["datasets"])
    fig, axes = plt.subplots(
        len(datasets), 1, figsize=(11, 2.8 * len(datasets) + 0.6), squeeze=False
    )
    width = 0.8 / max(len(impls), 1)
    for ax, dataset in zip(axes[:, 0], datasets, strict=True):
        rows = [r for r in report["rows"] if r["dataset"] == dataset]
        workloads = list(dict.fromkeys(r["workload"] for r in rows))
        for k, impl in enumerate(impls):
            for x, w in enumerate(workloads):
                r = next(
                    (r for r in rows if r["workload"] == w and r["implementation"] == impl), None
                )
                pos = x - 0.4 + width * (k + 0.5)
                if r and r["status"] == "ok":
                    bars = ax.bar(pos, r["mb_s"], width, color=f"C{k}")
                    ax.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
                elif r and r["status"] == "failed":
                    ax.text(
                        pos,
                        0,
                        "FAILED",
                        rotation=90,
                        color="red",
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
            ax.bar(0, 0, 0, color=f"C{k}", label=impl)
        ax.set_xticks(range(len(workloads)), workloads)
        ax.set_ylabel("MB/s")
        ax.margins(y=0.12)
        ax.set_title(f"{dataset} ({report['datasets'][dataset]['ratio']:.2f}x)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    top = 1 - 0.6 / fig.get_figheight()
    fig.legend(
        uniq.values(),
        uniq.keys(),
        loc="upper center",
        ncol=len(uniq),
        fontsize=8,
        bbox_to_anchor=(0.5, top + 0.3 / fig.get_figheight()),
        frameon=False,
    )
    m = report["meta"]
    fig.suptitle(
        f"zarrpipe bench: decoded MB/s, median of {m['repeats']} ({m['size']} mode, "
        f"{m['threads']} decode threads)",
        y=0.995,
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write(report: dict, out_dir: str) -> dict[str, str]:
    """Writes results.json, results.md and throughput.png; returns {kind: path or message}."""
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

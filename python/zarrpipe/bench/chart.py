"""The PNG chart of a runner report: median MB/s per workload and implementation, the range
from the slowest to the fastest run as an error bar, the decode limit as a dashed line."""

from __future__ import annotations

from zarrpipe.bench.report import limit_of

FRESH = "all (fresh)"  # the x label of the fresh-process read-all rows


def _label(r: dict) -> str:
    return FRESH if r.get("mode") == "fresh-process" else r["workload"]


def title(report: dict) -> str:
    """The chart's title: what each bar's median is over (every timed read of every round)."""
    m = report["meta"]
    in_process = any(r.get("mode", "in-process") == "in-process" for r in report["rows"])
    rounds = m.get("rounds", 1)
    runs = f"of {m['repeats'] * rounds} runs" + (f" in {rounds} rounds" if rounds > 1 else "")
    medians = [runs] if in_process else []
    if m.get("fresh_processes"):
        medians.append(f"of {m['fresh_processes']} fresh processes ('all (fresh)')")
    cold = ", cold cache" if m.get("cold") else ""
    return (
        f"zarrpipe bench: decoded MB/s, median {' / '.join(medians)} (bars: slowest to "
        f"fastest run; {m['size']} mode, {m['threads']} decode threads{cold})"
    )


def chart(report: dict, path: str) -> str | None:
    """Writes a PNG of MB/s per workload per implementation; returns why not, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart (pip install 'zarrpipe[bench]')"
    seen = {r["implementation"] for r in report["rows"] if r["status"] != "skipped"}
    impls = [i for i in report["implementations"] if i in seen]
    if not impls:
        return "every row was skipped: no chart"
    datasets = list(report["datasets"])
    fig, axes = plt.subplots(
        len(datasets), 1, figsize=(11, 2.8 * len(datasets) + 0.6), squeeze=False
    )
    width = 0.8 / max(len(impls), 1)
    for ax, dataset in zip(axes[:, 0], datasets, strict=True):
        rows = [r for r in report["rows"] if r["dataset"] == dataset]
        workloads = list(dict.fromkeys(_label(r) for r in rows))
        for k, impl in enumerate(impls):
            for x, w in enumerate(workloads):
                r = next((r for r in rows if _label(r) == w and r["implementation"] == impl), None)
                pos = x - 0.4 + width * (k + 0.5)
                if r and r["status"] == "ok":
                    mid = r["mb_s"]
                    spread = [[mid - r["mb_s_worst"]], [r["mb_s_best"] - mid]]
                    bars = ax.bar(
                        pos,
                        mid,
                        width,
                        color=f"C{k}",
                        yerr=spread,
                        error_kw={"elinewidth": 0.8, "capsize": 1.5},
                    )
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
        limit = limit_of(report, dataset)
        if limit:
            ax.axhline(limit, color="0.3", linestyle="--", linewidth=0.8)
            ax.annotate(
                f"decode limit {limit:.0f}",
                (1.0, limit),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=6,
                color="0.3",
            )
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
    fig.suptitle(title(report), y=0.995, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None

"""Small arrays (`zarrpipe bench --size small`): where per-call and per-chunk costs show.

The shapes zarrista publishes for its own benchmark: 2-d uint16 images of 8 MiB (2048x2048)
and 64 MiB (4096x8192), zstd level 3, stored as 64x64 chunks ("chunked") or as 512x512 shards
of 64x64 inner chunks ("sharded"). Three reads: the whole chunked array, the whole sharded
array, and an orthogonal pick of every 8th row and every 8th column of the sharded one
(integer index arrays: zarr-python issue #3829's shape).

Each reader runs in its own process per round (opened once, `WARMUPS` untimed reads, then the
timed ones), the readers taking turns in a rotating order; every first read is checked against
the source data's checksum.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zarrpipe.bench import checksum
from zarrpipe.bench.datasets import Dataset, Source, key, pieces
from zarrpipe.bench.report import OTHERS_EXCLUDED

GENERATOR_VERSION = 1
MANIFEST = "small-manifest.json"
STORE = "small.zarr"
SHAPES = {"8MiB": (2048, 2048), "64MiB": (4096, 8192)}
CHUNK = (64, 64)
SHARD = (512, 512)
STEP = 8  # the pick: every STEP-th row and column
WARMUPS = 3
READS = (
    ("chunked", "all"),
    ("sharded", "all"),
    ("sharded", "pick"),
)


def _params(size: str, layout: str, seed: int) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "shape": list(SHAPES[size]),
        "dtype": "uint16",
        "layout": layout,
        "chunks": list(SHARD if layout == "sharded" else CHUNK),
        "inner": list(CHUNK) if layout == "sharded" else None,
        "compressor": "zstd(level=3)",
        "seed": seed,
    }


def _image(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """One plane of the benchmark's microscopy-like volume (`datasets.Source`)."""
    return Source((1, *shape), seed).slab(0, 1)[0]


def _sums(image: np.ndarray, grids: dict[str, tuple[int, ...]]) -> dict:
    out: dict = {"algorithm": checksum.ALGORITHM, "whole": checksum.digest(image)}
    for level, grid in grids.items():
        out[level] = {key(i): checksum.digest(image[sl]) for i, sl in pieces(image.shape, grid)}
    return out


def generate(
    data_dir: str,
    sizes: Sequence[str] = tuple(SHAPES),
    seed: int = 0,
    log: Callable[[str], None] = lambda _m: None,
) -> list[Dataset]:
    """Writes (with zarr-python) or reuses the small datasets; one per size and layout."""
    import zarr
    from zarr.codecs import ZstdCodec

    from zarrpipe.bench.datasets import stored_bytes

    root = Path(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    out = []
    for size in sizes:
        image = None
        for layout in ("chunked", "sharded"):
            name = f"{size}-{layout}"
            params = _params(size, layout, seed)
            entry = manifest.get(name)
            array_dir = root / STORE / name
            if (
                entry is None
                or entry["params"] != params
                or not (array_dir / "zarr.json").exists()
                or stored_bytes(array_dir) != entry["stored_bytes"]
            ):
                if image is None:
                    image = _image(SHAPES[size], seed)
                log(f"writing {name} {SHAPES[size]} uint16 to {root / STORE} ...")
                arr = zarr.create_array(
                    str(root / STORE),
                    name=name,
                    shape=image.shape,
                    dtype="uint16",
                    fill_value=0,
                    overwrite=True,
                    chunks=CHUNK,
                    shards=SHARD if layout == "sharded" else None,
                    compressors=ZstdCodec(level=3),
                )
                arr[...] = image
                grids = {"outer": tuple(params["chunks"])}
                if layout == "sharded":
                    grids["inner"] = CHUNK
                entry = {
                    "params": params,
                    "stored_bytes": stored_bytes(array_dir),
                    "checksums": _sums(image, grids),
                }
                manifest[name] = entry
                tmp = root / (MANIFEST + ".tmp")
                tmp.write_text(json.dumps(manifest))
                tmp.replace(manifest_path)
            else:
                log(f"reusing {name} in {root / STORE}")
            out.append(
                Dataset(
                    name=name,
                    root=str(root / STORE),
                    path=name,
                    shape=tuple(params["shape"]),
                    dtype="uint16",
                    chunks=tuple(params["chunks"]),
                    inner=tuple(params["inner"]) if params["inner"] else None,
                    checksums=entry["checksums"],
                    stored_bytes=entry["stored_bytes"],
                )
            )
    return out


def pick_index(shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Every STEP-th position along each axis, as integer index arrays (an orthogonal pick)."""
    return tuple(np.arange(0, n, STEP, dtype=np.int64) for n in shape)


def pick_checksum(dataset: Dataset, image: np.ndarray) -> str:
    return checksum.digest(image[np.ix_(*pick_index(dataset.shape))])


def measure(params: dict) -> dict:
    """Worker side: one reader, one dataset, the reads asked for; timings in seconds."""
    import time

    from zarrpipe.bench import adapters

    cls = adapters.load(params["adapter"])
    dataset = Dataset(**{**params["dataset"], "shape": tuple(params["dataset"]["shape"])})
    adapter = cls(params["threads"])
    adapter.open(dataset)
    result: dict = {"status": "ok", "reads": {}}
    for read in params["reads"]:
        once: Callable[[], Any]
        if read == "pick":
            index = pick_index(dataset.shape)
            if not adapter.can_pick():
                result["reads"][read] = {"status": "skipped", "reason": adapter.no_pick_reason}
                continue

            def once(index=index):
                return adapter.read_oindex(index)

            want = params["pick_checksum"]
        else:
            once = adapter.read_all
            want = dataset.checksums["whole"]
        try:
            got = checksum.digest(once())
        except Exception as e:  # a reader refusing a read is a row, not a crash
            result["reads"][read] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
            continue
        if got != want:
            result["reads"][read] = {"status": "failed", "reason": "result differs from source"}
            continue
        for _ in range(WARMUPS - 1):
            once()
        times = []
        for _ in range(params["repeats"]):
            t0 = time.perf_counter()
            once()
            times.append(time.perf_counter() - t0)
        result["reads"][read] = {"status": "ok", "seconds": times}
    return result


def summarize(seconds: list[float]) -> dict:
    ms = [s * 1e3 for s in seconds]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "n": len(ms)}


def run(
    datasets: list[Dataset],
    names: Sequence[str],
    specs: dict[str, str],
    threads: int,
    rounds: int,
    repeats: int,
    timeout: float,
    tick: Callable[[str], None] = lambda _m: None,
) -> dict:
    """Every reader x dataset in its own process per round, readers taking turns."""
    from zarrpipe.bench.spawn import spawn

    by_size: dict[str, dict[str, Dataset]] = {}
    for d in datasets:
        size, layout = d.name.split("-")
        by_size.setdefault(size, {})[layout] = d
    picks = {}
    for d in datasets:
        if d.inner is not None:
            picks[d.name] = pick_checksum(d, _image(d.shape, 0))
    times: dict = {}
    failures: dict = {}
    for r in range(rounds):
        order = list(names[r % len(names) :]) + list(names[: r % len(names)])
        for size, layouts in by_size.items():
            for name in order:
                for layout, d in layouts.items():
                    reads = [read for lay, read in READS if lay == layout]
                    tick(f"round {r + 1}/{rounds}: {name} on {d.name}")
                    res = spawn(
                        {
                            "mode": "small",
                            "adapter": specs[name],
                            "threads": threads,
                            "repeats": repeats,
                            "reads": reads,
                            "dataset": {**d.__dict__, "shape": list(d.shape)},
                            "pick_checksum": picks.get(d.name),
                        },
                        threads,
                        timeout,
                    )
                    for read in reads:
                        row = (size, layout, read, name)
                        got = res["reads"][read] if res.get("status") == "ok" else res
                        if got["status"] == "ok":
                            times.setdefault(row, []).extend(got["seconds"])
                        else:
                            failures[row] = (got["status"], got.get("reason", ""))
    rows = []
    for size in by_size:
        for layout, read in READS:
            for name in names:
                row = (size, layout, read, name)
                entry = {"size": size, "layout": layout, "read": read, "reader": name}
                if row in times:
                    entry.update(status="ok", **summarize(times[row]))
                else:
                    status, reason = failures.get(row, ("skipped", "not measured"))
                    entry.update(status=status, reason=reason)
                rows.append(entry)
    return {"rows": rows, "readers": list(names), "rounds": rounds, "repeats": repeats}


def _cell(row: dict) -> str:
    if row["status"] != "ok":
        return "-"
    return f"{row['median_ms']:.1f} [{row['min_ms']:.1f}-{row['max_ms']:.1f}]"


def table(result: dict) -> str:
    """Markdown: one table per size, reads by readers, ms median [min-max], and zarrpipe's
    median against the fastest other reader's."""
    names = result["readers"]
    lines = []
    sizes = list(dict.fromkeys(r["size"] for r in result["rows"]))
    for size in sizes:
        lines += [
            f"**{size}** (ms, median [min-max]; then the fastest other project's median over"
            " zarrpipe's, and zarr-python through zarrpipe's pipeline over zarrpipe)",
            "",
            "| read | "
            + " | ".join(names)
            + " | zarrpipe vs best other | zarr+zarrpipe / zarrpipe |",
            "|---|" + "---|" * (len(names) + 2),
        ]
        for layout, read in READS:
            cells = {
                r["reader"]: r
                for r in result["rows"]
                if (r["size"], r["layout"], r["read"]) == (size, layout, read)
            }
            others = [
                c["median_ms"]
                for n, c in cells.items()
                if n not in OTHERS_EXCLUDED and c["status"] == "ok"
            ]
            mine = cells.get("zarrpipe", {})
            ratio = (
                f"{min(others) / mine['median_ms']:.2f}x"
                if others and mine.get("status") == "ok"
                else "-"
            )
            door = cells.get("zarr+zarrpipe", {})
            door_ratio = (
                f"{door['median_ms'] / mine['median_ms']:.2f}x"
                if door.get("status") == "ok" and mine.get("status") == "ok"
                else "-"
            )
            what = "all" if read == "all" else f"oindex every {STEP}th row and column"
            lines.append(
                f"| {layout}, {what} | "
                + " | ".join(_cell(cells[n]) if n in cells else "-" for n in names)
                + f" | {ratio} | {door_ratio} |"
            )
        lines.append("")
    return "\n".join(lines)


def mib(shape: Sequence[int]) -> float:
    return math.prod(shape) * 2 / 2**20


def bench(
    data_dir: str,
    out_dir: str,
    implementations: Sequence[str] | None,
    threads: int,
    rounds: int,
    repeats: int,
    timeout: float,
    decode_limits: bool,
    log: Callable[[str], None],
) -> dict:
    """`zarrpipe bench --size small`: generate, measure every available reader, write
    results-small.json and results-small.md into `out_dir`; returns the result."""
    from zarrpipe.bench import adapters, decode_limit, spawn

    datasets = generate(data_dir, log=log)
    names = list(implementations or adapters.REGISTRY)
    specs = {n: adapters.REGISTRY[n] for n in names}
    probed = spawn.probe(list(specs.values()), threads)
    skipped = {n: probed[s].get("reason") for n, s in specs.items() if not probed[s]["available"]}
    for n, why in skipped.items():
        log(f"skipping {n}: {why}")
    names = [n for n in names if n not in skipped]
    result = run(datasets, names, specs, threads, rounds, repeats, timeout, tick=log)
    result["versions"] = {n: probed[specs[n]].get("version") for n in names}
    result["skipped"] = skipped
    result["threads"] = threads
    if decode_limits:
        result["decode_limits"] = {}
        for d in datasets:
            lim = decode_limit.measure_batched(d, repeats=5)
            result["decode_limits"][d.name] = {
                "codec": lim["codec"],
                "limit_ms": d.nbytes / 1e6 / lim["limit_mb_s"] * 1e3,
                "limit_mb_s": lim["limit_mb_s"],
            }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results-small.json").write_text(json.dumps(result, indent=1))
    (out / "results-small.md").write_text(text(result))
    return result


def text(result: dict) -> str:
    """The report: the tables, the decode limits, the versions."""
    lines = [
        f"Small arrays: {result['rounds']} round(s) x {result['repeats']} timed reads per reader"
        f" after {WARMUPS} untimed, one process per reader and round, {result['threads']}"
        " threads each.",
        "",
        table(result),
    ]
    if result.get("decode_limits"):
        lines.append("Decode limit (the codec's library alone, one thread x cores):")
        for name, lim in result["decode_limits"].items():
            lines.append(f"- {name}: {lim['limit_ms']:.1f} ms ({lim['codec']})")
        lines.append("")
    lines.append("Versions: " + "; ".join(f"{n}: {v}" for n, v in result["versions"].items()))
    for n, why in result.get("skipped", {}).items():
        lines.append(f"Skipped {n}: {why}")
    return "\n".join(lines) + "\n"

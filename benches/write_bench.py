"""Writes the benchmark volume (the read benchmark's uint16 data, `zarrpipe.bench.datasets`)
as the `zstd` and `zstd-sharded` arrays with each writer, each run in a fresh process, and
reports the seconds (median [min-max]) and how much the process's RSS grew during the write.

    python benches/write_bench.py [--size quick|full] [--repeats 3] [--writers A,B]
                                  [--datasets zstd,zstd-sharded] [--threads N]
                                  [--python-new PYTHON] [--data-dir DIR] [--json FILE]

Writers: `zarrpipe` (native API: `Store.create_array` + `arr[...] = data`),
`zarrpipe+durable` (the same with `Store(..., durable=True)`: every chunk file and its
directory flushed to disk), `zarr+zarrpipe`
(zarr-python on `zarrpipe.CodecPipeline`, strict), `zarr` (zarr-python, default pipeline),
`zarr-fused` (zarr-python >= 3.3's `FusedCodecPipeline`; run with `--python-new`, an
interpreter that has it), `zarr+zarrs` (zarrs-python's `ZarrsCodecPipeline`, strict) and
`tensorstore` (zarr3 driver, file kvstore). Every run creates the array (zstd level 3; full:
256³ chunks, or 64³ inner chunks in 256³ shards) and writes the whole source array from
memory in one call; the clock covers both. The source is read into memory before the clock
starts; just before it starts, the child resets its peak RSS (`/proc/self/clear_refs`), so
"RSS growth" is the peak during the write less the RSS just before it. Afterwards the child
reads the array back with zarrpipe and compares it with the source: a mismatch is a FAILED
row with no numbers. Runs are interleaved: round r runs every writer once, in an order
rotated by r; between runs the parent deletes the output and calls `os.sync()` so that one
writer's dirty pages are not flushed on the next one's clock. "CPU s" is the process's user
and system time during the write (all threads): unlike the wall time, it does not grow when
the host takes the virtual CPUs away.

Each round also measures the encode limit: one thread compresses 8 of the volume's chunks
(every 8th; for the sharded dataset, their inner chunks), already in memory, at the same
level, with numcodecs' Zstd (zstd 1.5.6, a context per call, as the issue that set the
target measured it) and with python-zstandard's compressor (one context reused), when it is
installed; the faster rate times the threads is the limit. No writer can beat it without a
faster compressor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SIZES = {
    # shape, chunks (or shards), inner chunks
    "full": ((512, 1024, 1024), (256, 256, 256), (64, 64, 64)),
    "quick": ((64, 128, 128), (32, 32, 32), (16, 16, 16)),
}
DATASETS = ("zstd", "zstd-sharded")
WRITERS = (
    "zarrpipe",
    "zarrpipe+durable",
    "zarr+zarrpipe",
    "zarr",
    "zarr-fused",
    "zarr+zarrs",
    "tensorstore",
)
# Writers that need zarr-python >= 3.3, run with --python-new.
NEW_ZARR = ("zarr-fused",)
PIPELINES = {
    "zarr": ("BatchedCodecPipeline", None),
    "zarr+zarrpipe": ("CodecPipeline", "zarrpipe.CodecPipeline"),
    "zarr-fused": ("FusedCodecPipeline", "zarr.core.codec_pipeline.FusedCodecPipeline"),
    "zarr+zarrs": ("ZarrsCodecPipeline", "zarrs.ZarrsCodecPipeline"),
}
ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


# ------------------------------------------------------------------ the child: one run


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Starts VmHWM (the peak RSS) again from the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _layout(p: dict) -> dict[str, Any]:
    """chunks/shards as zarr-python's create_array takes them."""
    if p["sharded"]:
        return {"chunks": tuple(p["inner"]), "shards": tuple(p["chunks"])}
    return {"chunks": tuple(p["chunks"]), "shards": None}


def _prepare(p: dict) -> Any:
    """Imports and configures the writer (untimed); returns the timed write."""
    out, shape, threads = Path(p["out"]), tuple(p["shape"]), p["threads"]
    layout = _layout(p)
    if p["writer"] in ("zarrpipe", "zarrpipe+durable"):
        import zarrpipe

        zarrpipe.set_num_threads(threads)
        out.mkdir(parents=True)
        store = zarrpipe.Store(out, durable=p["writer"] == "zarrpipe+durable")

        def write(data: np.ndarray) -> None:
            arr = store.create_array("a", shape=shape, dtype="uint16", compressors=ZSTD, **layout)
            arr[...] = data

        return write
    if p["writer"] in PIPELINES:
        import warnings

        import zarr
        from zarr.storage import LocalStore

        warnings.filterwarnings("ignore", category=UserWarning)
        conf: dict = {"threading.max_workers": threads}
        want, path = PIPELINES[p["writer"]]
        if path is not None:
            conf.update({"codec_pipeline.path": path, "codec_pipeline.strict": True})
        if p["writer"] == "zarr+zarrpipe":
            import zarrpipe

            zarrpipe.set_num_threads(threads)
        zarr.config.set(conf)

        def write(data: np.ndarray) -> None:
            z = zarr.create_array(
                LocalStore(out), name="a", shape=shape, dtype="uint16", compressors=ZSTD, **layout
            )
            got = type(z._async_array.codec_pipeline).__name__
            if got != want:
                raise RuntimeError(f"zarr chose codec pipeline {got}, not {want}")
            z[...] = data

        return write
    if p["writer"] == "tensorstore":
        import tensorstore as ts

        context = ts.Context(
            {"data_copy_concurrency": {"limit": threads}, "cache_pool": {"total_bytes_limit": 0}}
        )
        chain: list = [BYTES, ZSTD]
        if p["sharded"]:
            chain = [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": p["inner"],
                        "codecs": chain,
                        "index_codecs": [BYTES, {"name": "crc32c"}],
                        "index_location": "end",
                    },
                }
            ]
        metadata = {
            "shape": list(shape),
            "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": p["chunks"]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": chain,
        }
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(out / "a")}}

        def write(data: np.ndarray) -> None:
            t = ts.open({**spec, "metadata": metadata}, create=True, context=context).result()
            t.write(data).result()

        return write
    raise ValueError(f"unknown writer {p['writer']!r}")


def load(path: str) -> np.ndarray:
    """A .npy file read straight into one fresh array (np.load's reader keeps a second,
    temporary buffer that would set every writer's peak RSS)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }[version]
        shape, fortran, dtype = read_header(f)
        data = np.empty(shape, dtype, order="F" if fortran else "C")
        view = memoryview(data.reshape(-1, order="A")).cast("B")
        if f.readinto(view) != data.nbytes:
            raise OSError(f"{path} is shorter than its header says")
    return data


def child(p: dict) -> dict:
    data = load(p["source"])
    write = _prepare(p)
    _reset_peak_rss()
    baseline = _status_kib("VmRSS")
    cpu = os.times()
    start = time.perf_counter()
    write(data)
    seconds = time.perf_counter() - start
    cpu_end = os.times()
    peak = _status_kib("VmHWM")
    import zarrpipe  # the check, after the peak was taken

    arr = zarrpipe.Store(p["out"], mode="r").open_array("a")
    got_layout = {"chunks": arr.chunks, "shards": arr.shards}
    if got_layout != {k: (tuple(v) if v else None) for k, v in _layout(p).items()}:
        return {"status": "FAILED", "reason": f"wrong layout {got_layout}"}
    if not np.array_equal(np.from_dlpack(arr.read().into_dlpack()), data):
        return {"status": "FAILED", "reason": "the array read back differs from the source"}
    stored = sum(f.stat().st_size for f in Path(p["out"], "a").rglob("*") if f.is_file())
    return {
        "status": "ok",
        "seconds": seconds,
        "cpu_s": (cpu_end.user - cpu.user) + (cpu_end.system - cpu.system),
        "peak_rss_mib": peak / 1024,
        "baseline_rss_mib": baseline / 1024,
        "stored_bytes": stored,
    }


# ------------------------------------------------------------------ the parent


def encode_limit_child(p: dict) -> dict:
    """One thread's zstd rate, at the benchmark's level, over 8 of the volume's chunks (every
    8th), or over their inner chunks for the sharded dataset, already in memory and
    C-contiguous: numcodecs' Zstd (zstd 1.5.6, a fresh context per call) and, when
    installed, python-zstandard's compressor (one context reused); the faster counts."""
    from numcodecs import Zstd

    data = load(p["source"])
    block = p["chunks"]
    grid = [n // b for n, b in zip(data.shape, block, strict=True)]
    total = int(np.prod(grid))
    chunks = []
    for k in range(0, total, max(1, total // 8))[:8]:
        index = np.unravel_index(k, grid)
        sel = tuple(slice(i * b, (i + 1) * b) for i, b in zip(index, block, strict=True))
        big = data[sel]
        if not p["sharded"]:
            chunks.append(np.ascontiguousarray(big))
            continue
        inner = p["inner"]
        for j in np.ndindex(*(b // i for b, i in zip(block, inner, strict=True))):
            sub = tuple(slice(x * i, (x + 1) * i) for x, i in zip(j, inner, strict=True))
            chunks.append(np.ascontiguousarray(big[sub]))
    del data
    nbytes = sum(c.nbytes for c in chunks)
    level = ZSTD["configuration"]["level"]
    compressors = {"numcodecs": Zstd(level=level, checksum=False).encode}
    try:
        import zstandard

        reused = zstandard.ZstdCompressor(level=level, write_checksum=False)
        compressors["zstandard"] = reused.compress
    except ImportError:
        pass
    rates = {}
    for name, encode in compressors.items():
        encode(chunks[0])  # warm-up
        start = time.perf_counter()
        for c in chunks:
            encode(c)
        rates[name] = nbytes / 1e6 / (time.perf_counter() - start)
    return {"status": "ok", "mbps_per_thread": max(rates.values()), "rates": rates}


def available(writer: str, python_new: str | None) -> str | None:
    """None, or why the writer is skipped."""
    if writer in NEW_ZARR and not python_new:
        return "needs --python-new (an interpreter with zarr-python >= 3.3)"
    modules = {
        "zarrpipe": ["zarrpipe"],
        "zarrpipe+durable": ["zarrpipe"],
        "zarr+zarrpipe": ["zarr", "zarrpipe"],
        "zarr": ["zarr"],
        "zarr-fused": ["zarr"],
        "zarr+zarrs": ["zarr", "zarrs"],
        "tensorstore": ["tensorstore"],
    }[writer]
    python = python_new if writer in NEW_ZARR else sys.executable
    probe = (
        "import importlib.util, sys; "
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    )
    found = subprocess.run(
        [python, "-c", probe, *modules], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        return f"{python} does not run"
    missing = found.stdout.split()
    return f"not installed: {', '.join(missing)}" if missing else None


def source_file(data_dir: Path, shape: tuple[int, ...], chunk: int, log: Any) -> Path:
    """The read benchmark's volume (same generator, seed 0) as a .npy, reused when present."""
    from zarrpipe.bench.datasets import GENERATOR_VERSION, Source

    path = data_dir / f"source-v{GENERATOR_VERSION}-{'x'.join(map(str, shape))}.npy"
    if not path.exists():
        log(f"generating the source volume {shape} uint16 -> {path}")
        out = np.lib.format.open_memmap(path.with_suffix(".tmp"), "w+", np.uint16, shape)
        for z0, slab in Source(shape, seed=0).slabs(chunk):
            out[z0 : z0 + slab.shape[0]] = slab
        out.flush()
        del out
        path.with_suffix(".tmp").rename(path)
    return path


def run_one(params: dict, timeout: float, python: str = sys.executable) -> dict:
    env = {
        **os.environ,
        "ZARRPIPE_NUM_THREADS": str(params["threads"]),
        "RAYON_NUM_THREADS": str(params["threads"]),
    }
    try:
        proc = subprocess.run(
            [python, __file__, "--child", json.dumps(params)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"status": "FAILED", "reason": f"timed out after {timeout} s"}
    finally:
        shutil.rmtree(params["out"], ignore_errors=True)
        os.sync()
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "FAILED", "reason": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def summarise(runs: list[dict], nbytes: int) -> dict:
    ok = [r for r in runs if r["status"] == "ok"]
    if len(ok) < len(runs):
        bad = next(r for r in runs if r["status"] != "ok")
        return {"status": "FAILED", "reason": bad["reason"], "runs": runs}
    seconds = [r["seconds"] for r in ok]
    return {
        "status": "ok",
        "runs": runs,
        "s_median": statistics.median(seconds),
        "s_min": min(seconds),
        "s_max": max(seconds),
        "mbps_median": nbytes / 1e6 / statistics.median(seconds),
        "cpu_s_median": statistics.median(r["cpu_s"] for r in ok),
        "rss_growth_mib": max(r["peak_rss_mib"] - r["baseline_rss_mib"] for r in ok),
        "stored_mib": ok[0]["stored_bytes"] / 2**20,
    }


def table(report: dict) -> str:
    lines = []
    nbytes_mib = report["nbytes"] / 2**20
    for ds in report["datasets"]:
        rows = report["results"][ds]
        limit = report["limits"].get(ds)
        ok = {w: r for w, r in rows.items() if r["status"] == "ok"}
        ours = ok.get("zarrpipe")
        lines += [
            f"\n{ds}: {report['shape']} uint16 ({nbytes_mib:.0f} MiB), "
            f"{report['repeats']} runs per writer, {report['threads']} threads",
            "",
            "| writer | s median [min-max] | MB/s (median) | CPU s (median) | RSS growth MiB | "
            "stored MiB | median / zarrpipe's |",
            "|---|---|---|---|---|---|---|",
        ]
        for w, row in rows.items():
            if row["status"] == "skipped":
                lines.append(f"| {w} | skipped: {row['reason']} | | | | | |")
            elif row["status"] != "ok":
                lines.append(f"| {w} | FAILED: {row['reason']} | | | | | |")
            else:
                ratio = f"{row['s_median'] / ours['s_median']:.2f}" if ours else ""
                lines.append(
                    f"| {w} | {row['s_median']:.2f} [{row['s_min']:.2f}-{row['s_max']:.2f}] | "
                    f"{row['mbps_median']:.0f} | {row['cpu_s_median']:.2f} | "
                    f"{row['rss_growth_mib']:.0f} | {row['stored_mib']:.0f} | {ratio} |"
                )
        others = {w: r["s_median"] for w, r in ok.items() if "zarrpipe" not in w}
        if ours and others:
            fastest = min(others, key=others.__getitem__)
            lines.append(
                f"\nzarrpipe's median is {others[fastest] / ours['s_median']:.2f}x the fastest "
                f"other writer's ({fastest})."
            )
        if limit:
            rates = limit["mbps_per_thread"]
            lines.append(
                f"Encode limit: {statistics.median(rates):.0f} MB/s per thread "
                f"[{min(rates):.0f}-{max(rates):.0f}] (zstd, one thread, chunks in memory, "
                f"the faster of {' and '.join(limit['bindings'])}) x {report['threads']} "
                f"threads = {limit['s_median']:.2f} s, {limit['cpu_s']:.2f} CPU s"
                + (
                    f"; zarrpipe runs at {limit['s_median'] / ours['s_median']:.0%} of it "
                    f"(CPU: {limit['cpu_s'] / ours['cpu_s_median']:.0%})"
                    if ours
                    else ""
                )
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=list(SIZES), default="quick")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--writers", default=",".join(WRITERS))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--data-dir", help="keeps the source volume here (else a temporary dir)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--python-new", help="an interpreter with zarr-python >= 3.3 (zarr-fused)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        params = json.loads(args.child)
        run = encode_limit_child if params.get("writer") == "encode-limit" else child
        print(json.dumps(run(params)))
        return 0

    writers = args.writers.split(",")
    datasets = args.datasets.split(",")
    for name, known in (("writer", WRITERS), ("dataset", DATASETS)):
        chosen = writers if name == "writer" else datasets
        if unknown := set(chosen) - set(known):
            ap.error(f"unknown {name}s {sorted(unknown)}; known: {', '.join(known)}")
    shape, chunks, inner = SIZES[args.size]
    nbytes = int(np.prod(shape)) * 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    tmp = None if args.data_dir else tempfile.TemporaryDirectory(prefix="zarrpipe-write-bench-")
    data_dir = Path(args.data_dir or tmp.name)  # type: ignore[union-attr]
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        source = source_file(data_dir, shape, chunks[0], log)
        skipped = {w: available(w, args.python_new) for w in writers}
        runs: dict = {ds: {w: [] for w in writers} for ds in datasets}
        rates: dict = {ds: [] for ds in datasets}
        bindings: dict = {ds: set() for ds in datasets}
        for r in range(args.repeats):
            order = writers[r % len(writers) :] + writers[: r % len(writers)]
            for ds in datasets:
                base = {
                    "source": str(source), "out": str(data_dir / "out.zarr"), "shape": shape,
                    "chunks": chunks, "inner": inner, "sharded": ds == "zstd-sharded",
                    "threads": args.threads,
                }  # fmt: skip
                limit = run_one({**base, "writer": "encode-limit"}, args.timeout)
                if limit["status"] == "ok":
                    rates[ds].append(limit["mbps_per_thread"])
                    bindings[ds] |= set(limit["rates"])
                log(f"round {r + 1}/{args.repeats} {ds} encode limit: {limit}")
                for w in order:
                    if skipped[w]:
                        continue
                    python = args.python_new if w in NEW_ZARR else sys.executable
                    result = run_one({**base, "writer": w}, args.timeout, python)
                    runs[ds][w].append(result)
                    speed = (
                        f"{nbytes / 1e6 / result['seconds']:.0f} MB/s"
                        if result["status"] == "ok"
                        else f"FAILED: {result['reason']}"
                    )
                    log(f"round {r + 1}/{args.repeats} {ds} {w}: {speed}")
        results = {
            ds: {
                w: {"status": "skipped", "reason": skipped[w]}
                if skipped[w]
                else summarise(runs[ds][w], nbytes)
                for w in writers
            }
            for ds in datasets
        }
        limits = {
            ds: {
                "mbps_per_thread": rates[ds],
                "bindings": sorted(bindings[ds]),
                "s_median": nbytes / 1e6 / (statistics.median(rates[ds]) * args.threads),
                "cpu_s": nbytes / 1e6 / statistics.median(rates[ds]),
            }
            for ds in datasets
            if rates[ds]
        }
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = {
        "size": args.size, "shape": list(shape), "chunks": list(chunks), "inner": list(inner),
        "nbytes": nbytes, "repeats": args.repeats, "threads": args.threads, "results": results,
        "datasets": datasets, "limits": limits,
    }  # fmt: skip
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    failed = any(row["status"] == "FAILED" for ds in results.values() for row in ds.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Reading a rectilinear chunk grid against the regular one it was made from.

    python benches/rectilinear_read.py [--data DIR] [--dataset zstd] [--repeats 3]
        [--readers zarrpipe zarr+zarrpipe zarr fused zarrs]

The regular array is one dataset of the throughput benchmark's store (default
/work/bench-data/bench.zarr, which `zarrpipe bench` generates: 1 GiB of uint16 in 256^3
zstd chunks). Its values are copied once, by zarrpipe, into a rectilinear array beside it
(`<dataset>-rectilinear`) with the same codecs and chunks of uneven sizes around 256 along
every axis (as many chunks, other edges). Each reader then reads each array whole, a fresh
process per read (the file cache warm), the runs interleaved; prints seconds, median
[min-max], GB/s of decoded data, and checks that every read gives the same sum. zarr-python
readers need zarr >= 3.2 (rectilinear grids); a reader that cannot read an array says why.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PIPELINES = {
    "zarr+zarrpipe": "zarrpipe.CodecPipeline",
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
}


def uneven_edges(extent: int, chunk: int) -> list[int]:
    """As many chunks as `chunk` makes of `extent`, alternately shorter and longer by an
    eighth (and a quarter), the last one taking what is left."""
    n = -(-extent // chunk)
    edges = []
    for i in range(n - 1):
        delta = chunk // 8 if i % 2 == 0 else -(chunk // 4)
        edges.append(chunk - delta)
    edges.append(extent - sum(edges))
    if edges[-1] <= 0:
        return [extent // n] * (n - 1) + [extent - (extent // n) * (n - 1)]
    return edges


def make_rectilinear(data: str, dataset: str) -> str:
    """The rectilinear copy of `dataset` (made once); its name."""
    import numpy as np
    import zarrpipe

    name = f"{dataset}-rectilinear"
    store = zarrpipe.Store(data)
    if (Path(data) / name / "zarr.json").exists():
        return name
    src = store.open_array(dataset)
    codecs = src.metadata["codecs"]
    compressors = [c for c in codecs if c["name"] not in ("bytes", "transpose")]
    edges = [uneven_edges(n, c) for n, c in zip(src.shape, src.chunks, strict=True)]
    dst = store.create_array(
        name + ".tmp",
        shape=src.shape,
        dtype=src.dtype,
        chunks=edges,
        compressors=compressors or None,
        overwrite=True,
    )
    dst[...] = np.asarray(src[...])  # whole chunks each: every chunk written once
    os.replace(Path(data) / (name + ".tmp"), Path(data) / name)
    return name


def run_one(cfg: dict) -> dict:
    """One read of one array, in this (fresh) process."""
    import numpy as np

    if cfg["reader"] == "zarrpipe":
        import zarrpipe

        arr = zarrpipe.Store(cfg["data"], mode="r").open_array(cfg["array"])
        t0 = time.perf_counter()
        values = arr[...]
    else:
        import zarr

        zarr.config.set(
            {"codec_pipeline.path": PIPELINES[cfg["reader"]], "array.rectilinear_chunks": True}
        )
        arr = zarr.open_array(cfg["data"], path=cfg["array"], mode="r")
        t0 = time.perf_counter()
        values = arr[...]
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "sum": int(values.sum(dtype=np.uint64)), "nbytes": values.nbytes}


def available(reader: str) -> str | None:
    """Why `reader` cannot run here (None: it can)."""
    if reader == "zarrpipe":
        return None
    try:
        import zarr
    except ImportError:
        return "zarr-python is not installed"
    major, minor = (int(x) for x in zarr.__version__.split(".")[:2])
    if (major, minor) < (3, 2):
        return f"zarr {zarr.__version__} has no rectilinear chunk grids (3.2+)"
    module, _, name = PIPELINES[reader].rpartition(".")
    try:
        getattr(__import__(module, fromlist=[name]), name)
    except (ImportError, AttributeError):
        return f"{PIPELINES[reader]} is not installed"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/bench-data/bench.zarr")
    ap.add_argument("--dataset", default="zstd")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--readers", nargs="+", default=["zarrpipe", *PIPELINES])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    arrays = [args.dataset, make_rectilinear(args.data, args.dataset)]
    readers = []
    for r in args.readers:
        why = available(r)
        if why:
            print(f"{r}: skipped ({why})")
        else:
            readers.append(r)
    runs: dict[tuple[str, str], list[float]] = {}
    sums: dict[tuple[str, str], int] = {}
    nbytes = 0
    for _ in range(args.repeats):
        for reader in readers:
            for array in arrays:
                cfg = {"reader": reader, "data": args.data, "array": array}
                out = subprocess.run(
                    [sys.executable, __file__, "--one", json.dumps(cfg)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode:
                    last = (out.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{reader} on {array}: failed: {last}")
                    continue
                got = json.loads(out.stdout.strip().splitlines()[-1])
                runs.setdefault((reader, array), []).append(got["seconds"])
                sums[(reader, array)] = got["sum"]
                nbytes = got["nbytes"]
    if len(set(sums.values())) > 1:
        raise SystemExit(f"readers disagree: {sums}")
    print(f"{nbytes / 2**30:.2f} GiB decoded per read; {args.repeats} runs each, interleaved")
    print(f"{'reader':<15}{'array':<22}{'median s':>10}  {'[min-max]':<15}{'GB/s':>6}")
    for (reader, array), times in runs.items():
        med = statistics.median(times)
        print(
            f"{reader:<15}{array:<22}{med:>10.3f}  [{min(times):.3f}-{max(times):.3f}]"
            f"{nbytes / med / 1e9:>8.2f}"
        )


if __name__ == "__main__":
    main()

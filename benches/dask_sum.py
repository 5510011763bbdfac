"""dask over Zarr with each codec pipeline: a full `sum` on a local cluster of processes.

    python benches/dask_sum.py [--data DIR] [--dataset zstd-sharded] [--repeats 3]
        [--pipelines zarrpipe zarrs default fused]

`da.from_zarr` (its default chunks, or `--chunks shards`: one dask chunk per stored shard)
on one dataset of the throughput benchmark's store (default
/work/bench-data/bench.zarr, which `zarrpipe bench` generates: 1 GiB of uint16), summed by a
`distributed.LocalCluster` of two worker processes with one thread each; zarr-python in the
workers reads through the pipeline named in `ZARR_CODEC_PIPELINE__PATH` (zarrpipe's,
zarrs-python's, zarr-python's default `BatchedCodecPipeline`, and its `FusedCodecPipeline`
on zarr >= 3.3). Each run is a fresh process with a fresh cluster, started before the clock;
the runs are interleaved, and the file cache is warm. Prints seconds, median [min-max], and
checks that every pipeline gives the same sum.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PIPELINES = {
    "zarrpipe": "zarrpipe.CodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
    "default": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
}


def run_one(cfg: dict) -> dict:
    import dask.array as da
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
        Client(cluster) as client,
    ):
        chunks = _shards(cfg) if cfg["chunks"] == "shards" else None
        arr = da.from_zarr(cfg["data"], component=cfg["dataset"], chunks=chunks)
        client.run(lambda: None)  # workers up
        t0 = time.perf_counter()
        total = int(arr.sum(dtype="uint64").compute())
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "sum": total}


def _shards(cfg: dict) -> tuple[int, ...]:
    """The stored objects' shape: the shard shape of a sharded array, else the chunk shape."""
    import zarr

    z = zarr.open_array(cfg["data"], path=cfg["dataset"], mode="r")
    return tuple(getattr(z, "shards", None) or z.chunks)


def available(pipeline: str) -> bool:
    module, _, name = PIPELINES[pipeline].rpartition(".")
    try:
        return hasattr(__import__(module, fromlist=[name]), name)
    except ImportError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/bench-data/bench.zarr")
    ap.add_argument("--dataset", default="zstd-sharded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipelines", nargs="+", default=list(PIPELINES))
    ap.add_argument(
        "--chunks",
        choices=["zarr", "shards"],
        default="zarr",
        help="dask chunks: from_zarr's default (the array's chunks), or one per stored shard",
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    pipelines = [p for p in args.pipelines if available(p)]
    skipped = sorted(set(args.pipelines) - set(pipelines))
    cfg = {"data": args.data, "dataset": args.dataset, "chunks": args.chunks}
    times: dict[str, list[float]] = {p: [] for p in pipelines}
    sums = set()
    for _ in range(args.repeats):
        for p in pipelines:
            env = {**os.environ, "ZARR_CODEC_PIPELINE__PATH": PIPELINES[p]}
            out = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps(cfg)],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            times[p].append(result["seconds"])
            sums.add(result["sum"])
    import zarr

    print(
        f"# {args.dataset}: dask sum, LocalCluster 2 processes x 1 thread, zarr {zarr.__version__}"
    )
    if skipped:
        print(f"# not installed here: {', '.join(skipped)}")
    print(f"{'pipeline':9} {'median s':>9} {'range':>13}")
    for p in pipelines:
        t = times[p]
        print(f"{p:9} {statistics.median(t):9.2f} {min(t):6.2f}-{max(t):<6.2f}")
    if len(sums) != 1:
        raise SystemExit(f"the pipelines disagree on the sum: {sorted(sums)}")


if __name__ == "__main__":
    main()

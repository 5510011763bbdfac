"""Training-batch throughput: zarrpipe's loader against per-sample torch Datasets.

    python benches/loader_bench.py [--data DIR] [--repeats 3] [--workers 0 2]

On a uint16 array of 16,384 images of 256 x 256 (zstd, chunks of 64 images; and the same
sharded, shards of 1,024 images with inner chunks of 64), generated once into DIR
(default /work/bench-data/loader, or $ZARRPIPE_LOADER_BENCH_DATA) and reused, it measures
samples/s and peak RSS (batch 64) of:

- zarrpipe: `zarrpipe.torch.ZarrDataset`, one shuffled epoch (all 16,384 samples), in a
  `DataLoader(batch_size=None)`; `zarrpipe-copy` the same with `shared_memory=False` (workers
  hand torch fresh batches, which it copies into shared memory); `zarrpipe-anyorder` with
  `DataLoader(in_order=False)` (each worker's batches taken as they come);
- zarr-python, zarr-python with zarrs-python's `ZarrsCodecPipeline`, and TensorStore: a
  plain `torch.utils.data.Dataset` whose `__getitem__` reads one image, in a
  `DataLoader(batch_size=64)` over 2,048 randomly chosen samples;
- zarrpipe's read of the whole array, the ceiling an epoch is held to: `Array.read()` into a
  fresh buffer (`read-all`, which faults its 2 GiB in), and `Array.read_into` a buffer
  faulted in before the clock starts (`read-into`: decoding alone).

each with `num_workers` 0 and 2 (workers forked). Every run is a fresh process (so its peak
RSS is its own: `ru_maxrss` of the process, and of its largest worker); the file cache is
warm. The runs are interleaved (each configuration once per round). Reports the median of
`--repeats` runs and their range. `--touch` makes the loop read
every batch (a sum over it), as a training step would; by default it only counts samples.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

IMAGES, SIDE, CHUNK, SHARD = 16_384, 256, 64, 1_024
SUBSET = 2_048
BATCH = 64
LAYOUTS = ("chunked", "sharded")


def default_dir() -> Path:
    env = os.environ.get("ZARRPIPE_LOADER_BENCH_DATA")
    return Path(env) if env else Path("/work/bench-data/loader")


def images(start: int, count: int) -> np.ndarray:
    """Image-like uint16 data: smooth gradients plus noise (zstd gets ~1.5-2x)."""
    rng = np.random.default_rng(start)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.uint32)
    base = ((yy * 7 + xx * 3) % 4096).astype(np.uint16)
    out = np.empty((count, SIDE, SIDE), dtype=np.uint16)
    for i in range(count):
        noise = rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint16)
        out[i] = base + noise + np.uint16((start + i) % 1000)
    return out


def generate(root: Path) -> None:
    import zarrpipe

    done = root / "complete"
    if done.exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    store = zarrpipe.Store(root)
    arrays = {
        layout: store.create_array(
            layout,
            shape=(IMAGES, SIDE, SIDE),
            dtype="uint16",
            chunks=(CHUNK, SIDE, SIDE),
            shards=(SHARD, SIDE, SIDE) if layout == "sharded" else None,
            compressors={"name": "zstd", "configuration": {"level": 3}},
            overwrite=True,
        )
        for layout in LAYOUTS
    }
    for start in range(0, IMAGES, SHARD):
        block = images(start, SHARD)
        for a in arrays.values():
            a[start : start + SHARD] = block
        print(f"generated {start + SHARD}/{IMAGES} images", file=sys.stderr)
    done.write_text("ok\n")


# ---------------------------------------------------------------------------------------------
# one run, in its own process


class _PerSample:
    """A plain map-style Dataset: `__getitem__` reads one image (opened lazily, per process)."""

    def __init__(self, reader: str, path: str) -> None:
        self.reader, self.path = reader, path
        self._arr: Any = None

    def __len__(self) -> int:
        return IMAGES

    def _open(self) -> Any:
        if self.reader == "tensorstore":
            import tensorstore as ts

            spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": self.path}}
            return ts.open(spec, read=True).result()
        import zarr

        if self.reader == "zarrs":
            zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
        return zarr.open_array(self.path, mode="r")

    def __getitem__(self, i: int) -> Any:
        import torch

        if self._arr is None:
            self._arr = self._open()
        if self.reader == "tensorstore":
            return torch.from_numpy(self._arr[i].read().result())
        return torch.from_numpy(np.asarray(self._arr[i]))


def consume(batch: Any, touch: bool) -> int:
    """The batch's sample count; with `touch`, after reading every byte of it, as a training
    step does (a worker's batch is then read from the memory it arrived in)."""
    if touch:
        import torch

        batch.view(-1).to(dtype=torch.int32).sum()
    return int(batch.shape[0])


def run_one(cfg: dict[str, Any]) -> dict[str, Any]:
    import torch.utils.data
    import zarrpipe

    path = str(Path(cfg["data"]) / cfg["layout"])
    reader, workers = cfg["reader"], cfg["workers"]
    t0 = time.perf_counter()
    if reader == "read-all":
        arr = zarrpipe.Store(cfg["data"]).open_array(cfg["layout"])
        t0 = time.perf_counter()
        t = arr.read()
        samples = t.shape[0]
        del t
    elif reader == "read-into":
        arr = zarrpipe.Store(cfg["data"]).open_array(cfg["layout"])
        out = np.empty(arr.shape, dtype=arr.dtype)
        out.fill(0)  # faulted in before the clock starts: decoding alone
        t0 = time.perf_counter()
        arr.read_into(None, out)
        samples = out.shape[0]
    elif reader in ("zarrpipe", "zarrpipe-copy", "zarrpipe-anyorder"):
        from zarrpipe.torch import ZarrDataset

        arr = zarrpipe.Store(cfg["data"]).open_array(cfg["layout"])
        shared = reader != "zarrpipe-copy"
        dataset = ZarrDataset(arr, BATCH, seed=cfg["seed"], shared_memory=shared)
        t0 = time.perf_counter()
        # `zarrpipe-anyorder`: the DataLoader takes each worker's batch as it comes
        # (`in_order=False`) instead of turn by turn.
        order = {"in_order": False} if reader == "zarrpipe-anyorder" and workers else {}
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, **order)
        samples = sum(consume(b, cfg["touch"]) for b in loader)
    else:
        rng = np.random.default_rng(cfg["seed"])
        subset = rng.choice(IMAGES, SUBSET, replace=False).tolist()
        dataset = _PerSample(reader, path)
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=BATCH,
            sampler=torch.utils.data.SubsetRandomSampler(subset),
            num_workers=workers,
        )
        samples = sum(consume(b, cfg["touch"]) for b in loader)
    seconds = time.perf_counter() - t0
    kib = 1024  # ru_maxrss is in KiB on Linux
    return {
        "samples": samples,
        "seconds": seconds,
        "rss_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib,
        "rss_worker": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * kib,
    }


# ---------------------------------------------------------------------------------------------
# the table


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(cfg)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_dir())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS))
    ap.add_argument(
        "--readers",
        nargs="+",
        default=[
            "read-all",
            "read-into",
            "zarrpipe",
            "zarrpipe-copy",
            "zarr",
            "zarrs",
            "tensorstore",
        ],
    )
    ap.add_argument(
        "--touch", action="store_true", help="read every batch's bytes, as a training step would"
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    generate(args.data)
    for layout in args.layouts:  # warm the file cache
        for f in (args.data / layout).rglob("*"):
            if f.is_file():
                f.read_bytes()
    print(f"# {IMAGES} images {SIDE}x{SIDE} uint16, batch {BATCH}, {args.repeats} runs each")
    print(
        f"{'layout':8} {'reader':13} {'workers':>7} {'samples':>7} {'samples/s':>10} "
        f"{'range':>19} {'peak RSS MiB':>12} {'worker MiB':>10}"
    )
    configs = [
        {
            "data": str(args.data),
            "layout": layout,
            "reader": reader,
            "workers": workers,
            "touch": args.touch,
        }
        for layout in args.layouts
        for reader in args.readers
        for workers in ([0] if reader.startswith("read-") else args.workers)
    ]
    # Interleaved: every configuration once per round, so a drift of the machine's speed
    # spreads over all of them instead of landing on one.
    runs: list[list[dict[str, Any]]] = [[] for _ in configs]
    for rep in range(args.repeats):
        for k, cfg in enumerate(configs):
            runs[k].append(measure({**cfg, "seed": rep}))
    for cfg, done in zip(configs, runs, strict=True):
        rates = [r["samples"] / r["seconds"] for r in done]
        print(
            f"{cfg['layout']:8} {cfg['reader']:13} {cfg['workers']:7d} {done[0]['samples']:7d} "
            f"{statistics.median(rates):10.0f} "
            f"{min(rates):9.0f}-{max(rates):<9.0f} "
            f"{max(r['rss_main'] for r in done) / 2**20:12.0f} "
            f"{max(r['rss_worker'] for r in done) / 2**20 if cfg['workers'] else 0:10.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

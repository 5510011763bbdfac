"""Reads a ~256 MiB sharded array from a local S3 server (moto, started here) with
zarrpipe and with zarr-python (default pipeline, zarrpipe's pipeline, zarrs' pipeline),
and reports time, throughput and the number of requests each made.

    python benches/s3_read.py [--mib 256] [--repeats 2]

Requests are counted by zarrpipe itself (Store.request_counts) and, for zarr-python, by
zarr's LoggingStore around an obstore ObjectStore. moto is a Python server on this machine,
so absolute throughput is moto's; the request counts and the ratios are the point.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from remote_servers import moto_s3, upload_dir

BUCKET = "bench"
KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}


def write_dataset(root: Path, mib: int) -> np.ndarray:
    depth = max(1, mib * 2**20 // (512 * 512 * 2))
    z = np.linspace(0, 1, depth, dtype=np.float32)[:, None, None]
    y = np.linspace(0, 1, 512, dtype=np.float32)[None, :, None]
    x = np.linspace(0, 1, 512, dtype=np.float32)[None, None, :]
    rng = np.random.default_rng(0)
    data = 2000 + 800 * np.sin(6 * z) * np.cos(5 * y) + 600 * np.sin(4 * x + 3 * z)
    data = (data + rng.normal(0, 25, size=(depth, 512, 512))).astype(np.uint16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = zarr.create_array(
            root, shape=data.shape, chunks=(64, 64, 64), shards=(128, 256, 256), dtype="uint16",
            compressors=zarr.codecs.ZstdCodec(level=3),
        )  # fmt: skip
        a[:] = data
    return data


def obstore_store(endpoint: str):
    from obstore.store import S3Store

    return S3Store(
        BUCKET, prefix="data.zarr", endpoint=endpoint, region="us-east-1",
        access_key_id="test", secret_access_key="test", client_options={"allow_http": True},
    )  # fmt: skip


def zarr_read(endpoint: str, pipeline: str | None) -> tuple[np.ndarray, int, str]:
    from zarr.storage import LoggingStore, ObjectStore

    ours = pipeline == "zarrpipe.CodecPipeline"
    objects = ObjectStore(obstore_store(endpoint), read_only=True)
    # zarrpipe's pipeline fetches an ObjectStore's chunks itself (and counts its requests);
    # a LoggingStore around it would hide the ObjectStore, so it is not wrapped.
    store = objects if ours else LoggingStore(objects, log_level="WARNING")
    config = {"codec_pipeline.path": pipeline} if pipeline else {}
    with warnings.catch_warnings(record=True) as caught, zarr.config.set(config):
        warnings.simplefilter("always")
        arr = zarr.open_array(store, mode="r")
        if ours:
            from zarrpipe import pipeline as zp

            zp._REMOTE_STORES.clear()
        else:
            store.counter.clear()
        out = arr[...]
        note = "; ".join(sorted({str(w.message)[:80] for w in caught}))
    if ours:
        counts = [s.request_counts() for s in zp._REMOTE_STORES.values()]
        requests = sum(c["gets"] + c["heads"] for c in counts)
        note = note or "chunks fetched by zarrpipe (Rust); metadata by zarr-python"
    else:
        requests = sum(n for name, n in store.counter.items() if name.startswith("get"))
    return out, requests, note


def zarrpipe_read(endpoint: str) -> tuple[np.ndarray, int, str]:
    import zarrpipe

    options = {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}
    store = zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options=options)
    store.open_array("")
    before = store.request_counts()
    out = np.from_dlpack(store.read("").into_dlpack())
    after = store.request_counts()
    return out, after["gets"] + after["heads"] - before["gets"] - before["heads"], ""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, moto_s3() as endpoint:
        root = Path(tmp) / "data.zarr"
        data = write_dataset(root, args.mib)
        upload_dir(endpoint, BUCKET, root, "data.zarr")
        print(f"dataset: {data.shape} uint16 ({data.nbytes / 2**20:.0f} MiB), chunks 64^3 in "
              f"shards (128, 256, 256), zstd; moto S3 at {endpoint}")  # fmt: skip
        readers = {
            "zarrpipe (Store)": lambda: zarrpipe_read(endpoint),
            "zarr + zarrpipe pipeline": lambda: zarr_read(endpoint, "zarrpipe.CodecPipeline"),
            "zarr (default pipeline)": lambda: zarr_read(endpoint, None),
            "zarr + zarrs pipeline": lambda: zarr_read(endpoint, "zarrs.ZarrsCodecPipeline"),
        }
        print(f"{'reader':28s} {'best s':>8s} {'MB/s':>8s} {'requests':>9s}  notes")
        for name, read in readers.items():
            best, requests, note = float("inf"), 0, ""
            try:
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    out, requests, note = read()
                    best = min(best, time.perf_counter() - t0)
                    if not np.array_equal(out, data):
                        raise AssertionError("wrong values")
            except Exception as e:  # a reader that cannot do it is reported, not fatal
                print(
                    f"{name:28s} {'-':>8s} {'-':>8s} {'-':>9s}  failed: {type(e).__name__}: {e}"[
                        :160
                    ]
                )
                continue
            mbs = data.nbytes / 1e6 / best
            print(f"{name:28s} {best:8.2f} {mbs:8.0f} {requests:9d}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

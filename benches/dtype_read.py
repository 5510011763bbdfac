"""Read throughput of the data types that are not numbers: an array of variable-length strings
(10-character labels) and a datetime64 array, by zarrpipe (`Store.read`), zarr-python's
default pipeline and zarr-python with zarrs-python's pipeline, in one process.

    python benches/dtype_read.py [--strings 10000000] [--datetime-mib 1024] [--repeats 5]
                                 [--data-dir DIR] [--json FILE]

The arrays are written once with zarr-python (zstd level 1, v3) into DATA-DIR (default
$ZARRPIPE_BENCH_DATA or ~/.cache/zarrpipe/bench-data) and reused. Readers alternate, repeat
by repeat, after one untimed read each; every read is checked equal to the first reader's.
Reports seconds per read: median [min-max], and millions of elements per second (strings) or
MB/s of decoded data (datetime64) of the median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def default_dir() -> Path:
    env = os.environ.get("ZARRPIPE_BENCH_DATA")
    return Path(env) if env else Path.home() / ".cache" / "zarrpipe" / "bench-data"


def labels(n: int) -> np.ndarray:
    """n labels of 10 characters ("lbl-000042" ...), cycling through 100,000 distinct ones."""
    ids = np.arange(n) % 100_000
    return np.char.add("lbl-", np.char.zfill(ids.astype(str), 6)).astype(object)


def make_strings(root: Path, n: int) -> str:
    import zarr

    path = root / f"strings-{n}.zarr"
    if not (path / "zarr.json").exists():
        chunk = 1_000_000
        z = zarr.create_array(store=str(path), shape=(n,), chunks=(chunk,), dtype=str,
                              compressors=[zarr.codecs.ZstdCodec(level=1)])  # fmt: skip
        for start in range(0, n, chunk):
            z[start : start + chunk] = labels(min(chunk, n - start))
    return str(path)


def make_datetimes(root: Path, mib: int) -> str:
    import zarr

    n = mib * (1 << 20) // 8
    path = root / f"datetime64-{mib}MiB.zarr"
    if not (path / "zarr.json").exists():
        chunk = 1 << 20  # 8 MiB chunks
        z = zarr.create_array(store=str(path), shape=(n,), chunks=(chunk,),
                              dtype="datetime64[ns]",
                              compressors=[zarr.codecs.ZstdCodec(level=1)])  # fmt: skip
        rng = np.random.default_rng(0)
        base = np.datetime64("2020-01-01T00:00:00", "ns").astype(np.int64)
        for start in range(0, n, chunk):
            k = min(chunk, n - start)
            # one reading a second with jitter: compressible, as real time axes are
            steps = base + (np.arange(start, start + k) * 1_000_000_000) + rng.integers(0, 1000, k)
            z[start : start + k] = steps.view("datetime64[ns]")
    return str(path)


def readers(path: str) -> dict[str, Callable[[], np.ndarray]]:
    import zarr
    import zarrpipe

    store = zarrpipe.Store(path)

    def with_zarrpipe() -> np.ndarray:
        return np.asarray(store.read(""))

    def with_zarr(pipeline: str | None) -> Callable[[], np.ndarray]:
        def read() -> np.ndarray:
            cfg: dict[str, Any] = {}
            if pipeline is not None:
                cfg = {"codec_pipeline.path": pipeline, "codec_pipeline.strict": True}
            with zarr.config.set(cfg), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return np.asarray(zarr.open_array(store=path, mode="r")[...])

        return read

    out = {"zarrpipe": with_zarrpipe, "zarr (default)": with_zarr(None)}
    try:
        import zarrs  # noqa: F401

        out["zarr + zarrs"] = with_zarr("zarrs.ZarrsCodecPipeline")
    except ImportError:
        print("zarrs-python is not installed (pip install zarrs): its column is left out")
    return out


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "OT" or b.dtype.kind in "OT":
        return a.shape == b.shape and a.tolist() == b.tolist()
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def bench(path: str, repeats: int) -> dict[str, Any]:
    ways = readers(path)
    first = None
    for name, read in ways.items():  # one untimed read each, checked
        try:
            got = read()
        except Exception as e:  # a reader that cannot read this array at all
            print(f"  {name}: cannot read ({type(e).__name__}: {e}); left out")
            ways = {k: v for k, v in ways.items() if k != name}
            continue
        if first is None:
            first = got
        assert same(got, first), f"{name} read different values"
        del got
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, read in ways.items():
            t0 = time.perf_counter()
            got = read()
            times[name].append(time.perf_counter() - t0)
            del got
    assert first is not None
    return {"n": int(first.size), "nbytes": int(first.nbytes), "dtype": str(first.dtype),
            "times": times}  # fmt: skip


def report(title: str, result: dict[str, Any], unit: str) -> None:
    print(f"\n{title}: {result['n']:,} elements ({result['dtype']})")
    print(f"{'reader':16} {'median s':>9} {'min s':>7} {'max s':>7} {unit:>10}")
    for name, ts in result["times"].items():
        med = statistics.median(ts)
        rate = result["n"] / med / 1e6 if unit == "Melem/s" else result["nbytes"] / med / 1e6
        print(f"{name:16} {med:9.3f} {min(ts):7.3f} {max(ts):7.3f} {rate:10.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strings", type=int, default=10_000_000)
    ap.add_argument("--datetime-mib", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, default=default_dir())
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    import zarrpipe

    print(f"zarrpipe threads: {zarrpipe.get_num_threads()}, repeats: {args.repeats}")
    results = {}
    if args.strings:
        path = make_strings(args.data_dir, args.strings)
        results["strings"] = bench(path, args.repeats)
        report("variable-length strings (10 characters)", results["strings"], "Melem/s")
    if args.datetime_mib:
        path = make_datetimes(args.data_dir, args.datetime_mib)
        results["datetime64"] = bench(path, args.repeats)
        report("datetime64[ns]", results["datetime64"], "MB/s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

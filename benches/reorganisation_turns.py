"""One process's timings of the paths a reorganisation of the engine and the pipeline
touches: native reads (whole, picks), the zarr-python door (box reads, picks, points,
strings, pick writes of numbers and strings) and native writes (a box, picks, steps). Each
is run once untimed, then N times; prints `name<TAB>median<TAB>min<TAB>max` in milliseconds.

    python benches/reorganisation_turns.py [N] [DATA_DIR]

Compare two builds by installing each into its own venv (same NumPy and zarr-python) and
running this script in the two venvs in turn, several times; the stores are made on the
first run (32 MiB uint16 in 256x256 zstd chunks, 8 MiB in 512x512 shards of 64x64, 200x200
strings).
"""

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr
import zarrpipe

N = int(sys.argv[1]) if len(sys.argv) > 1 else 15
DATA = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/zarrpipe-reorganisation")


def make() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    img = (rng.integers(0, 1000, (4096, 4096))).astype("uint16")  # 32 MiB
    a = zarr.create_array(
        DATA / "chunked",
        shape=img.shape,
        chunks=(256, 256),
        dtype="uint16",
        compressors=zarr.codecs.ZstdCodec(level=3),
        overwrite=True,
    )
    a[...] = img
    s = zarr.create_array(
        DATA / "sharded",
        shape=(2048, 2048),
        chunks=(64, 64),
        shards=(512, 512),
        dtype="uint16",
        compressors=zarr.codecs.ZstdCodec(level=3),
        overwrite=True,
    )
    s[...] = img[:2048, :2048]
    strs = np.array([f"value-{i}" * (1 + i % 5) for i in range(200 * 200)], dtype=object).reshape(
        200, 200
    )
    t = zarr.create_array(
        DATA / "strings", shape=(200, 200), chunks=(50, 50), dtype=str, overwrite=True
    )
    t[...] = strs


def timed(fn: Callable[[], object]) -> tuple[float, float, float]:
    fn()
    out = []
    for _ in range(N):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1e3, min(out) * 1e3, max(out) * 1e3


def main() -> None:
    if not (DATA / "strings").exists():
        make()
    rows = {}
    native_arr = zarrpipe.open(str(DATA / "chunked"))
    rows["native read-all 32 MiB (256² chunks)"] = timed(lambda: native_arr[...])
    native_sh = zarrpipe.open(str(DATA / "sharded"))
    idx = np.arange(0, 2048, 8)
    rows["native oindex every 8th, sharded 8 MiB"] = timed(lambda: native_sh.oindex[idx, idx])
    zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})
    z = zarr.open_array(DATA / "chunked", mode="r")
    rows["door read-all 32 MiB"] = timed(lambda: z[...])
    zs = zarr.open_array(DATA / "sharded", mode="r")
    rows["door oindex every 8th, sharded"] = timed(lambda: zs.oindex[idx, idx])
    rows["door vindex 10k points, sharded"] = timed(
        lambda: zs.vindex[np.arange(0, 2048 * 5, 1) % 2048, np.arange(0, 2048 * 5, 1) * 7 % 2048]
    )
    zt = zarr.open_array(DATA / "strings", mode="r")
    rows["door strings oindex"] = timed(
        lambda: zt.oindex[np.arange(0, 200, 3), np.arange(0, 200, 2)]
    )
    zw = zarr.open_array(DATA / "sharded", mode="r+")
    vals = np.arange(256 * 256, dtype="uint16").reshape(256, 256)

    def write_pick() -> None:
        zw.oindex[idx, idx] = vals

    rows["door oindex write every 8th, sharded"] = timed(write_pick)
    rng = np.random.default_rng(1)
    points = (rng.integers(0, 2048, 10_000), rng.integers(0, 2048, 10_000))
    point_values = np.arange(10_000, dtype="uint16")
    rows["door vindex write 10k points, sharded"] = timed(
        lambda: zw.vindex.__setitem__(points, point_values)
    )
    zt_w = zarr.open_array(DATA / "strings", mode="r+")
    string_points = (rng.integers(0, 200, 2000), rng.integers(0, 200, 2000))
    strings = zt_w.vindex[string_points]  # written back: the store keeps its values
    rows["door strings vindex write 2k"] = timed(
        lambda: zt_w.vindex.__setitem__(string_points, strings)
    )
    nsw = zarrpipe.open(str(DATA / "sharded"), mode="r+")
    rows["native oindex write every 8th, sharded"] = timed(
        lambda: nsw.oindex.__setitem__((idx, idx), vals)
    )
    rows["native vindex write 10k points, sharded"] = timed(
        lambda: nsw.vindex.__setitem__(points, point_values)
    )
    nw = zarrpipe.open(str(DATA / "chunked"), mode="r+")
    block = np.ones((1024, 1024), dtype="uint16")
    rows["native write 2 MiB box"] = timed(
        lambda: nw.__setitem__((slice(512, 1536), slice(512, 1536)), block)
    )
    steps = (slice(None, None, 2), slice(None, None, 2))
    stepped = np.asarray(native_arr[steps])  # written back: the store keeps its values
    rows["native step write [::2, ::2], 32 MiB"] = timed(lambda: nw.__setitem__(steps, stepped))
    for k, (med, lo, hi) in rows.items():
        print(f"{k}\t{med:.2f}\t{lo:.2f}\t{hi:.2f}")


if __name__ == "__main__":
    main()

"""zarrpipe's pipeline under xarray and dask: datasets written and read by xarray (zarr v2 and
v3, eager and dask-chunked) are identical to what zarr-python's own pipeline gives, and a
dask.distributed cluster of worker processes, pointed at zarrpipe by the environment, computes
over a zarr array the same result as NumPy."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

xr = pytest.importorskip("xarray")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

import zarrpipe  # noqa: E402
from support.zarr_stores import quiet_zarr_writes  # noqa: E402

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


@contextlib.contextmanager
def pipeline(which: dict[str, str]) -> Iterator[None]:
    with zarr.config.set(which), quiet_zarr_writes():
        yield


@pytest.fixture
def read_calls(monkeypatch) -> list[int]:
    """Counts reads that go through zarrpipe's pipeline (from any thread)."""
    calls: list[int] = []
    original = zarrpipe.CodecPipeline.read

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(zarrpipe.CodecPipeline, "read", counting)
    return calls


def make_dataset() -> Any:
    rng = np.random.default_rng(0)
    time = np.arange("2000-01-01", "2000-01-31", dtype="datetime64[D]").astype("datetime64[ns]")
    temp = rng.standard_normal((30, 17, 13)).astype("float32")
    temp[3, 4, 5] = np.nan
    temp[7:14] = np.nan  # whole stored chunks of NaN (the fill value)
    packed = rng.uniform(-50, 50, (30, 17)).round(1)
    packed[0, 0] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "x", "y"), temp, {"units": "K", "long_name": "temperature"}),
            "counts": (("time", "x"), rng.integers(-1000, 1000, (30, 17)).astype("int32")),
            "flag": (("x", "y"), rng.integers(0, 2, (17, 13)).astype(bool)),
            "packed": (("time", "x"), packed),
            "wave": (("x",), (rng.standard_normal(17) + 1j * rng.standard_normal(17))),
            "big": (("time", "y"), rng.integers(0, 2**60, (30, 13)).astype("uint64")),
        },
        coords={"time": time, "x": np.arange(17) * 2.5, "y": np.arange(13, dtype="int16")},
        attrs={"title": "zarrpipe test"},
    )
    ds["temp"].encoding = {"chunks": (7, 5, 13)}
    ds["counts"].encoding = {"chunks": (8, 8)}
    ds["packed"].encoding = {
        "chunks": (10, 17),
        "dtype": "int16",
        "scale_factor": 0.1,
        "_FillValue": -32768,
    }
    return ds


def write(ds: Any, path: Path, fmt: int, which: dict[str, str]) -> None:
    with pipeline(which):
        ds.to_zarr(path, zarr_format=fmt, consolidated=fmt == 2, mode="w")


def open_all_ways(path: Path, fmt: int, which: dict[str, str]) -> dict[str, Any]:
    """The dataset loaded every way: open_zarr (dask), open_dataset eagerly, with dask chunks,
    and a lazily indexed subset (orthogonal indexing: zarrpipe falls back silently)."""
    out = {}
    with pipeline(which):
        kw = dict(zarr_format=fmt, consolidated=fmt == 2)
        with xr.open_zarr(path, **kw) as ds:
            assert isinstance(ds["temp"].data, da.Array)
            out["open_zarr"] = ds.compute()
        with xr.open_dataset(path, engine="zarr", chunks=None, **kw) as ds:
            out["eager"] = ds.load()
        with xr.open_dataset(path, engine="zarr", chunks={"time": -1}, **kw) as ds:
            assert isinstance(ds["temp"].data, da.Array)
            out["dask"] = ds.compute()
        with xr.open_dataset(path, engine="zarr", chunks=None, **kw) as ds:
            out["subset"] = ds.isel(time=slice(3, 23), x=[0, 4, 16], y=-1).load()
            out["basic"] = ds.isel(time=slice(5, 29), x=slice(2, 15)).load()
    return out


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("writer", ["ours", "default"])
def test_xarray_round_trip(tmp_path, read_calls, fmt, writer):
    ds = make_dataset()
    if fmt == 2:
        # xarray writes a v2 complex variable with a null fill value, which zarrpipe does not
        # take (FallbackWarning): test_pipeline.py::test_v2_null_fill_value covers that.
        ds = ds.drop_vars("wave")
    path = tmp_path / "ds.zarr"
    write(ds, path, fmt, OURS if writer == "ours" else DEFAULT)
    before = len(read_calls)
    theirs = open_all_ways(path, fmt, DEFAULT)
    assert len(read_calls) == before, "the default pipeline went through zarrpipe"
    ours = open_all_ways(path, fmt, OURS)
    assert len(read_calls) > before, "xarray did not read through zarrpipe's pipeline"
    for how in ours:
        xr.testing.assert_identical(ours[how], theirs[how])
    for how in ("eager", "open_zarr", "dask"):
        assert_like_original(ours[how], ds)


def assert_like_original(got: Any, ds: Any) -> None:
    """Identical to the dataset written, but for the packed variable (int16 with a scale
    factor: equal to within half a step)."""
    xr.testing.assert_identical(got.drop_vars("packed"), ds.drop_vars("packed"))
    xr.testing.assert_allclose(got["packed"], ds["packed"], rtol=0, atol=0.051)
    assert got["packed"].attrs == ds["packed"].attrs


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_append_and_region_writes(tmp_path, fmt):
    """to_zarr appends (resize + partial chunks) and region writes through zarrpipe store what
    zarr-python's pipeline stores for the same writes."""
    ds = make_dataset().drop_vars(["flag", "wave"])
    results = {}
    for name, which in (("ours", OURS), ("default", DEFAULT)):
        path = tmp_path / f"{name}.zarr"
        kw = dict(zarr_format=fmt, consolidated=fmt == 2)
        with pipeline(which):
            ds.isel(time=slice(0, 11)).to_zarr(path, mode="w", **kw)
            ds.isel(time=slice(11, 30)).to_zarr(path, append_dim="time", **kw)
            region = ds[["temp"]].isel(time=slice(2, 9)) * 2
            region.drop_vars(["x", "y"]).to_zarr(
                path, region={"time": slice(2, 9)}, mode="r+", **kw
            )
        with pipeline(DEFAULT), xr.open_zarr(path, **kw) as back:
            results[name] = back.compute()
    xr.testing.assert_identical(results["ours"], results["default"])
    expected = ds.copy(deep=True)
    expected["temp"][2:9] = ds["temp"][2:9] * 2
    assert_like_original(results["ours"], expected)


def test_xarray_strings_are_native(tmp_path):
    """A string variable is read by zarrpipe too (no FallbackWarning); everything is
    identical to the default pipeline's read."""
    ds = make_dataset()[["temp"]]
    ds["name"] = (("x",), np.array([f"station-{i}" for i in range(17)], dtype=object))
    path = tmp_path / "s.zarr"
    write(ds, path, 3, DEFAULT)
    with pipeline(DEFAULT), xr.open_zarr(path, consolidated=False) as d:
        want = d.compute()
    with warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        with pipeline(OURS), xr.open_zarr(path, consolidated=False) as d:
            got = d.compute()
    xr.testing.assert_identical(got, want)
    xr.testing.assert_identical(got, ds)


def test_dask_from_zarr_threads(tmp_path, read_calls):
    """dask.array.from_zarr on the threaded scheduler (many threads reading through zarrpipe)."""
    data = np.random.default_rng(1).integers(-(2**40), 2**40, (400, 300), dtype=np.int64)
    path = str(tmp_path / "d.zarr")
    with pipeline(OURS):
        z = zarr.create_array(path, shape=data.shape, chunks=(37, 41), dtype="int64")
        z[...] = data
        arr = da.from_zarr(path, chunks=(74, 82))
        total = arr.sum().compute(scheduler="threads", num_workers=8)
        block = arr[13:377, 5:290].compute(scheduler="threads")
        doubled = (arr * 2).to_zarr(str(tmp_path / "d2.zarr"), compute=False)
        dask.compute(doubled, scheduler="threads")
    assert read_calls
    assert int(total) == int(data.sum())
    assert np.array_equal(block, data[13:377, 5:290])
    with pipeline(DEFAULT):
        assert np.array_equal(zarr.open_array(str(tmp_path / "d2.zarr"), mode="r")[...], data * 2)


def _worker_pipeline_module(path: str) -> str:
    import zarr

    return type(zarr.open_array(path, mode="r")._async_array.codec_pipeline).__module__


def _worker_block_sum(path: str, rows: tuple[int, int]) -> tuple[str, int]:
    """Opens the array inside the worker (so its own configuration picks the pipeline)."""
    import numpy as np
    import zarr

    a = zarr.open_array(path, mode="r")
    module = type(a._async_array.codec_pipeline).__module__
    return module, int(np.asarray(a[rows[0] : rows[1]]).sum())


@pytest.mark.timeout(300)
def test_dask_distributed_processes(tmp_path):
    distributed = pytest.importorskip("distributed")
    data = np.random.default_rng(2).integers(-(2**40), 2**40, (600, 500), dtype=np.int64)
    path = str(tmp_path / "dist.zarr")
    with pipeline(DEFAULT):
        zarr.create_array(path, shape=data.shape, chunks=(64, 64), dtype="int64")[...] = data
    env = {"ZARR_CODEC_PIPELINE__PATH": "zarrpipe.CodecPipeline", "ZARRPIPE_NUM_THREADS": "2"}
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=env,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        modules = client.run(_worker_pipeline_module, path)
        assert len(modules) == 2
        assert set(modules.values()) == {"zarrpipe"}, modules
        # a graph whose tasks open the array in the workers
        parts = [client.submit(_worker_block_sum, path, (r, r + 100)) for r in range(0, 600, 100)]
        results = client.gather(parts)
        assert {m for m, _ in results} == {"zarrpipe"}
        assert sum(s for _, s in results) == int(data.sum())
        # dask.array.from_zarr, opened here with zarrpipe's pipeline and shipped to the workers
        with pipeline(OURS):
            arr = da.from_zarr(path, chunks=(128, 100))
        assert int(arr.sum().compute()) == int(data.sum())
        assert np.array_equal(arr[50:550:7, 3:480].compute(), data[50:550:7, 3:480])


def _worker_writes(path: str, block: tuple[int, int], value: int) -> str:
    import zarr

    a = zarr.open_array(path, mode="r+")
    a[block[0] : block[1]] = value
    return type(a._async_array.codec_pipeline).__module__


@pytest.mark.timeout(300)
def test_dask_workers_sharing_a_shard_lose_nothing(tmp_path):
    """Dask chunks smaller than the shards (zarr-python issues #3514 and #3682): worker
    processes, pointed at zarrpipe's pipeline by the environment, write 8-row blocks of the
    same 64-row shards, each several times, at once; every block ends with its last value."""
    distributed = pytest.importorskip("distributed")
    path = str(tmp_path / "shared.zarr")
    with pipeline(DEFAULT):
        zarr.create_array(path, shape=(128, 64), chunks=(8, 64), shards=(64, 64), dtype="int32")
    env = {"ZARR_CODEC_PIPELINE__PATH": "zarrpipe.CodecPipeline", "ZARRPIPE_NUM_THREADS": "1"}
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None, env=env
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        blocks = [(r, r + 8) for r in range(0, 128, 8)]
        for rnd in range(3):
            futures = [
                client.submit(_worker_writes, path, b, 100 * rnd + k, pure=False)
                for k, b in enumerate(blocks)
            ]
            assert set(client.gather(futures)) == {"zarrpipe"}
        # dask.array.store: one task per 8-row chunk of a dask array, into the shared shards
        x = da.from_array(np.arange(128 * 64, dtype="int32").reshape(128, 64), chunks=(8, 64))
        with pipeline(OURS):
            target = zarr.open_array(path, mode="r+")
        da.store(x, target, lock=False, scheduler=client)
    with pipeline(DEFAULT):
        got = zarr.open_array(path, mode="r")[...]
    assert np.array_equal(got, np.arange(128 * 64, dtype="int32").reshape(128, 64))

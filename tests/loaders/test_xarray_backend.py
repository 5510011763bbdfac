"""`xr.open_dataset(..., engine="zarrpipe")` against `xr.open_zarr`: datasets xarray writes (Zarr
v2 and v3, consolidated or not) open identical, decoded or not, eagerly or with dask, and
xarray's basic, outer and vectorized selections reach zarrpipe as such, reading only what they
select."""

from __future__ import annotations

import asyncio
import pickle
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import zarr
import zarrpipe

xr = pytest.importorskip("xarray")

from support.zarr_stores import quiet_zarr_writes  # noqa: E402
from zarrpipe.xarray_backend import ZarrpipeBackendArray, ZarrpipeBackendEntrypoint  # noqa: E402

ENGINE = ZarrpipeBackendEntrypoint


def _reports_v2_null_fill() -> bool:
    """Whether zarrpipe says a v2 array has no fill value (`"fill_value": null`, which xarray
    writes for every variable that is not a float and has no `_FillValue`) as zarr-python
    does, with None. Without that the backend cannot tell "no missing value" from 0."""
    with tempfile.TemporaryDirectory() as root, quiet_zarr_writes():
        zarr.create_array(f"{root}/a.zarr", shape=(2,), dtype="int64", fill_value=None,
                          zarr_format=2)  # fmt: skip
        return zarrpipe.Store(f"{root}/a.zarr", mode="r").open_array().fill_value is None


V2_NEEDS_NULL_FILL = pytest.mark.xfail(
    not _reports_v2_null_fill(),
    reason="zarrpipe.Array.fill_value is the dtype's zero for a v2 null fill value",
    strict=True,
)
FORMATS = [pytest.param(2, marks=V2_NEEDS_NULL_FILL, id="v2"), pytest.param(3, id="v3")]


def make_dataset() -> Any:
    """Every kind of variable xarray encodes: floats with NaN and a `_FillValue`, integers with
    a fill value (masked to NaN), CF times (the first one stored as 0), a packed variable
    (scale_factor, add_offset), booleans, a string coordinate, scalars, attributes."""
    rng = np.random.default_rng(7)
    temp = rng.standard_normal((10, 7, 5)).astype("float32")
    temp[1, 2, 3] = np.nan
    counts = rng.integers(0, 100, (10, 7)).astype("int32")
    counts[4, 4] = -1  # the fill value: masked when decoded
    packed = rng.uniform(-50, 50, (10, 7)).round(1)
    packed[0, 1] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "x", "y"), temp, {"units": "K", "_nczarr_note": "kept by v3"}),
            "counts": (("time", "x"), counts, {"long_name": "counts"}),
            "packed": (("time", "x"), packed),
            "flag": (("x", "y"), rng.integers(0, 2, (7, 5)).astype(bool)),
            "version": ((), np.int32(3)),
            "source": ((), np.array("model run 7", dtype=object)),
        },
        coords={
            "time": np.arange("2000-01-01", "2000-01-11", dtype="datetime64[D]").astype(
                "datetime64[ns]"
            ),
            "x": np.arange(7) * 1.5,
            "y": np.arange(5, dtype="int16"),
            "station": ("y", np.array(["a", "bb", "ccc", "dddd", "e"], dtype=object)),
        },
        attrs={"title": "zarrpipe backend", "levels": [1, 2, 3], "_NCProperties": "hidden"},
    )
    ds["temp"].encoding = {"chunks": (4, 3, 5), "_FillValue": -9999.0}
    ds["counts"].encoding = {"chunks": (5, 7), "_FillValue": -1}
    ds["packed"].encoding = {
        "chunks": (10, 4),
        "dtype": "int16",
        "scale_factor": 0.1,
        "add_offset": 20.0,
        "_FillValue": -32768,
    }
    return ds


def write_store(path: Path, fmt: int, consolidated: bool) -> Path:
    """The dataset at the root (v3: `temp` sharded) and a smaller one in the group `sub`."""
    ds = make_dataset()
    if fmt == 3:
        ds["temp"].encoding["shards"] = (8, 6, 5)
    sub = ds[["counts"]].isel(time=slice(0, 3)).assign_attrs(title="sub")
    with quiet_zarr_writes():
        ds.to_zarr(path, zarr_format=fmt, consolidated=False, mode="w")
        sub.to_zarr(path, group="sub", zarr_format=fmt, consolidated=False, mode="w")
        if consolidated:
            zarr.consolidate_metadata(path, zarr_format=fmt)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[tuple[int, bool], Path]:
    root = tmp_path_factory.mktemp("xarray_backend")
    return {
        (fmt, c): write_store(root / f"v{fmt}{'c' if c else ''}.zarr", fmt, c)
        for fmt in (2, 3)
        for c in (False, True)
    }


def open_zarr(path: Path, consolidated: bool, **kwargs: Any) -> Any:
    """The reference: xarray's own zarr backend, loaded (dask arrays with `chunks` given)."""
    with quiet_zarr_writes():
        ds = xr.open_zarr(path, consolidated=consolidated, **{"chunks": None, **kwargs})
        return ds if "chunks" in kwargs else ds.load()


def open_ours(path: Any, **kwargs: Any) -> Any:
    return xr.open_dataset(path, engine=ENGINE, **kwargs)


class Read(NamedTuple):
    kind: str  # "basic", "outer" or "vectorized"
    path: str  # the array's path in the store
    key: tuple[Any, ...]  # what zarrpipe was given
    shape: tuple[int, ...]  # what zarrpipe gave back


@pytest.fixture
def reads(monkeypatch) -> list[Read]:
    """Every selection the backend hands a zarrpipe.Array, from any thread."""
    seen: list[Read] = []
    for kind in ("basic", "outer", "vectorized"):
        original = getattr(ZarrpipeBackendArray, f"_{kind}")

        def spy(self: Any, key: Any, _original: Any = original, _kind: str = kind) -> Any:
            assert isinstance(self._array, zarrpipe.Array)
            value = _original(self, key)
            seen.append(Read(_kind, self._array.path.strip("/"), key, np.shape(value)))
            return value

        monkeypatch.setattr(ZarrpipeBackendArray, f"_{kind}", spy)
    return seen


DECODINGS = {
    "cf": {},
    "no-mask-and-scale": {"mask_and_scale": False},
    "no-decode-cf": {"decode_cf": False},
}
ENCODING_KEYS = ("chunks", "preferred_chunks", "shards", "dtype", "fill_value", "_FillValue",
                 "scale_factor", "add_offset", "units", "calendar")  # fmt: skip


@pytest.mark.parametrize("chunks", [None, {}], ids=["eager", "dask"])
@pytest.mark.parametrize("decoding", list(DECODINGS))
@pytest.mark.parametrize("consolidated", [False, True], ids=["plain", "consolidated"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_identical_to_open_zarr(stores, fmt, consolidated, decoding, chunks):
    path = stores[fmt, consolidated]
    kwargs = DECODINGS[decoding]
    ours = open_ours(path, chunks=chunks, **kwargs)
    theirs = open_zarr(path, consolidated, chunks=chunks, **kwargs)
    loaded, reference = ours.compute(), theirs.compute()
    for name, var in loaded.variables.items():  # assert_identical does not compare dtypes
        assert var.dtype == reference[name].dtype, name
    for name, var in ours.variables.items():
        if chunks is None:
            assert not hasattr(var.data, "dask"), name
        else:
            assert var.chunks == theirs[name].chunks, name
        want = {k: v for k, v in theirs[name].encoding.items() if k in ENCODING_KEYS}
        got = {k: v for k, v in var.encoding.items() if k in ENCODING_KEYS}
        assert set(got) == set(want), name
        for k in want:  # NaN fill values compare equal
            np.testing.assert_equal(got[k], want[k], err_msg=f"{name}.encoding[{k!r}]")
    xr.testing.assert_identical(loaded, reference)


@pytest.mark.parametrize("fmt", FORMATS)
def test_decoded_values_are_the_written_ones(stores, fmt):
    """open_zarr is the reference elsewhere; here the values themselves: times from 0 up,
    the integer fill value masked, packed values unpacked, strings and attributes back."""
    ds = make_dataset()
    got = open_ours(stores[fmt, False]).load()
    assert got.time.values[0] == np.datetime64("2000-01-01")
    assert np.isnan(got.counts.values[4, 4]) and got.counts.dtype == np.float64
    np.testing.assert_allclose(got.packed.values, ds.packed.values, atol=0.051)
    assert np.isnan(got.packed.values[0, 1])
    assert list(got.station.values) == list(ds.station.values)
    assert got.attrs == {"title": "zarrpipe backend", "levels": [1, 2, 3]}
    # v2 hides NCZarr-looking variable attributes as xarray does; v3 keeps them
    want_temp_attrs = {"units": "K"} | ({"_nczarr_note": "kept by v3"} if fmt == 3 else {})
    assert got.temp.attrs == want_temp_attrs
    for name in ("time", "x", "y", "temp", "flag", "version"):
        np.testing.assert_array_equal(got[name].values, ds[name].values, err_msg=name)
        assert got[name].dtype == ds[name].dtype, name


@pytest.mark.parametrize("group", ["sub", "/sub", "sub/"])
@pytest.mark.parametrize("consolidated", [False, True], ids=["plain", "consolidated"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_group(stores, fmt, consolidated, group):
    path = stores[fmt, consolidated]
    ours = open_ours(path, group=group, chunks=None)
    assert ours.attrs["title"] == "sub" and ours.sizes["time"] == 3
    xr.testing.assert_identical(ours.load(), open_zarr(path, consolidated, group="sub"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_drop_variables(stores, fmt, reads):
    path = stores[fmt, False]
    dropped = ["temp", "station"]
    ours = open_ours(path, drop_variables=dropped, chunks=None).load()
    assert not set(dropped) & set(ours.variables)
    assert not {r.path for r in reads} & set(dropped), "a dropped variable was read"
    xr.testing.assert_identical(ours, open_zarr(path, False, drop_variables=dropped))


# What each selection should reach zarrpipe as, and the shape of `temp` it selects
# (10 times, 7 x, 5 y).
SELECTIONS = {
    "basic": ({"time": slice(2, 9, 3), "x": 1, "y": 2}, (3,)),
    "outer": ({"x": [0, 3, 5], "y": [1, 2]}, (10, 3, 2)),
    "vectorized": ({"x": xr.DataArray([0, 2, 6]), "y": xr.DataArray([1, 3, 4])}, (10, 3)),
}


@pytest.mark.parametrize("kind", list(SELECTIONS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_selections_are_read_by_zarrpipe(stores, fmt, kind, reads):
    path = stores[fmt, False]
    selection, shape = SELECTIONS[kind]
    ours = open_ours(path, chunks=None)
    reads.clear()
    got = ours.isel(selection).load()
    xr.testing.assert_identical(got, open_zarr(path, False).isel(selection))
    temp = [r for r in reads if r.path == "temp"]
    assert [r.kind for r in temp] == [kind], temp
    # zarrpipe gave back the selected elements, nothing more
    assert np.prod(temp[0].shape) == np.prod(shape) and got.temp.shape == shape
    if kind == "outer":
        keys = [k for k in temp[0].key if isinstance(k, np.ndarray)]
        assert [k.tolist() for k in keys] == [[0, 3, 5], [1, 2]]


def test_opening_reads_only_index_coordinates(stores, reads):
    ours = open_ours(stores[3, False], chunks=None)
    assert {r.path for r in reads} == {"time", "x", "y"}, "opening read more than the indexes"
    reads.clear()
    part = ours.temp[2, 1:3].values
    assert reads == [Read("basic", "temp", reads[0].key, (2, 5))]
    np.testing.assert_array_equal(part, make_dataset().temp.values[2, 1:3])


def test_dask_reads_only_the_chunks_selected(stores, reads):
    ours = open_ours(stores[3, False], chunks={})
    assert ours.temp.chunks == ((4, 4, 2), (3, 3, 1), (5,))
    reads.clear()
    first = ours.temp[0:2].compute()
    temp = [r for r in reads if r.path == "temp"]
    # the two times lie in the first chunk along time; x has three chunks
    assert len(temp) == 3 and all(r.kind == "basic" and r.shape[0] <= 4 for r in temp), temp
    np.testing.assert_array_equal(first.values, make_dataset().temp.values[0:2])


@pytest.mark.parametrize("fmt", FORMATS)
def test_dask_graph_pickles(stores, fmt):
    """What dask ships to worker processes: the backend arrays, with their zarrpipe arrays."""
    path = stores[fmt, True]
    ours = pickle.loads(pickle.dumps(open_ours(path, chunks={})))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "large graph" or pickling warnings either
        computed = ours.compute(scheduler="threads")
    xr.testing.assert_identical(computed, open_zarr(path, True))


def test_load_async(stores, reads):
    ours = open_ours(stores[3, False], chunks=None)
    reads.clear()
    loaded = asyncio.run(ours.load_async())
    assert {"temp", "counts", "packed", "flag"} <= {r.path for r in reads}
    xr.testing.assert_identical(loaded, open_zarr(stores[3, False], False))


def test_cache_bytes_reaches_the_store(tmp_path):
    """With a chunk cache, a second read is served from memory: deleting the chunks between
    the two reads changes nothing (without one, the second read sees fill values)."""
    path = write_store(tmp_path / "c.zarr", 3, False)
    cached = open_ours(path, chunks=None, cache=False, cache_bytes=1 << 20)
    plain = open_ours(path, chunks=None, cache=False)
    before = cached.temp.values
    np.testing.assert_array_equal(plain.temp.values, before)
    shutil.rmtree(path / "temp" / "c")
    np.testing.assert_array_equal(cached.temp.values, before)
    assert np.isnan(plain.temp.values).all()


def test_missing_store_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no Zarr store at .*nothing\.zarr"):
        open_ours(tmp_path / "nothing.zarr")


@pytest.mark.parametrize("consolidated", [False, True], ids=["plain", "consolidated"])
def test_missing_group_raises_file_not_found(stores, consolidated):
    for group in ("nope", "temp"):  # nothing there; an array
        with pytest.raises(FileNotFoundError, match=f'no group at "{group}"'):
            open_ours(stores[3, consolidated], group=group)


def test_v3_array_without_dimension_names(tmp_path):
    path = tmp_path / "nodims.zarr"
    with quiet_zarr_writes():
        zarr.create_array(path, name="a", shape=(3,), dtype="f4")
    with pytest.raises(KeyError, match="'a' is missing the `dimension_names` metadata"):
        open_ours(path)
    with pytest.raises(KeyError, match="dimension_names"):  # as open_zarr does
        open_zarr(path, False)


def test_consolidated_true_requires_consolidated_metadata(stores):
    with pytest.raises(ValueError, match="has no consolidated metadata"):
        open_ours(stores[3, False], consolidated=True)
    xr.testing.assert_identical(
        open_ours(stores[3, True], consolidated=True, chunks=None).load(),
        open_zarr(stores[3, True], True),
    )


def test_both_option_names_refused(stores):
    with pytest.raises(ValueError, match="as `options` or `storage_options`"):
        open_ours(stores[3, False], options={}, storage_options={})


def test_guess_can_open():
    entry = ENGINE()
    for yes in ["a.zarr", "a.zarr/", Path("d/a.zarr"), "s3://bucket/a.zarr"]:
        assert entry.guess_can_open(yes), yes
    for no in ["a.nc", "a.zarr.zip", 3, b"a.zarr"]:
        assert not entry.guess_can_open(no), no


def test_registered_engine(stores):
    if "zarrpipe" not in xr.backends.list_engines():
        pytest.skip('engine="zarrpipe" is not registered (reinstall with the entry point)')
    assert isinstance(xr.backends.list_engines()["zarrpipe"], ZarrpipeBackendEntrypoint)
    path = stores[3, True]
    ours = xr.open_dataset(path, engine="zarrpipe", chunks={})
    xr.testing.assert_identical(ours.compute(), open_zarr(path, True))


BUCKET = "zarrpipe-xarray"


@pytest.fixture(scope="module")
def s3(stores):
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    from support.remote_servers import moto_s3, upload_dir

    with moto_s3() as endpoint:
        for path in stores.values():
            upload_dir(endpoint, BUCKET, path, path.name)
        yield endpoint


@pytest.mark.parametrize("fmt", FORMATS)
def test_object_store(stores, s3, fmt, monkeypatch):
    """An S3 store through `storage_options` (object_store's settings; booleans as text or
    not); with consolidated metadata, opening lists nothing."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "test")
    options = {"aws_endpoint": s3, "allow_http": True, "aws_region": "us-east-1"}
    path = stores[fmt, True]
    url = f"s3://{BUCKET}/{path.name}"
    ours = open_ours(url, storage_options=options, chunks={})
    xr.testing.assert_identical(ours.compute(), open_zarr(path, True))
    store = zarrpipe.Store(url, mode="r", options={**options, "allow_http": "true"})
    sub = open_ours(store, group="sub", chunks=None)
    assert store.request_counts()["lists"] == 0
    xr.testing.assert_identical(sub.load(), open_zarr(path, True, group="sub"))
    listing = zarrpipe.Store(url, mode="r", options={**options, "allow_http": "true"})
    open_ours(listing, consolidated=False, chunks=None)
    assert listing.request_counts()["lists"] > 0

"""zarrpipe.ray against zarr-python: `read_zarr` / `ZarrDatasource` give zarr-python's values
row by row, with read tasks on shard (chunk) boundaries, and `ZarrDatasink` writes rows
where their row column says, also when tasks' rows share shards. One local Ray of 2 CPUs
serves the whole module."""

from __future__ import annotations

import contextlib
import copy
import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
zarr = pytest.importorskip("zarr")

import zarrpipe  # noqa: E402
from support.zarr_stores import quiet_zarr_writes  # noqa: E402
from zarrpipe.ray import ZarrDatasink, ZarrDatasource, read_zarr  # noqa: E402

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "ray.md"
N = 50  # rows of every test array


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    with warnings.catch_warnings():
        # Ray 2.60's DataContext warns about its own default of a deprecated field.
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ray.data.DataContext.get_current()
    kept = context.execution_options.preserve_order
    context.execution_options.preserve_order = True  # rows in order, to compare them
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()
    context.execution_options.preserve_order = kept


def images(dtype: str = "int16") -> np.ndarray:
    return (np.arange(N * 3 * 2).reshape(N, 3, 2) * 7 - 100).astype(dtype)


def labels() -> np.ndarray:
    return np.arange(N) * 0.5 - 3


def expected(root: Path, path: str) -> np.ndarray:
    with quiet_zarr_writes():
        return np.asarray(zarr.open_array(root / path, mode="r")[...])


LAYOUTS = {
    "v2": dict(chunks=(7, 3, 2)),
    "v3": dict(chunks=(8, 3, 2)),
    "v3-sharded": dict(chunks=(4, 3, 2), shards=(16, 3, 2)),
}
STORED = {"v2": 7, "v3": 8, "v3-sharded": 16}  # stored length along axis 0 of images


def unit(layout: str) -> int:
    """The rows of the smallest read on the stored objects of images and labels (chunks
    of 4)."""
    return int(np.lcm(STORED[layout], 4))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """One group per layout holding `images` (N, 3, 2) and `labels` (N,) with chunks of 4,
    and `short` (N - 1 rows) after them; and a group of strings."""
    root = tmp_path_factory.mktemp("ray") / "data.zarr"
    with quiet_zarr_writes():
        for name, kwargs in LAYOUTS.items():
            fmt = 2 if name == "v2" else 3
            g = zarr.open_group(root / name, mode="w", zarr_format=fmt)
            g.create_array("images", shape=(N, 3, 2), dtype="int16", **kwargs)[:] = images()
            g.create_array("labels", shape=(N,), chunks=(4,), dtype="f8")[:] = labels()
            g.create_array("short", shape=(N - 1,), chunks=(4,), dtype="u1")
        text = zarr.open_group(root / "text", mode="w")
        words = np.array([f"w{i}" * (i % 4) for i in range(N)])
        text.create_array("words", shape=(N,), chunks=(6,), dtype=str)[:] = words
        pairs = np.array([[f"a{i}", f"b{i}é"] for i in range(N)])
        text.create_array("pairs", shape=(N, 2), chunks=(10, 2), dtype=str)[:] = pairs
    return root


def columns(ds) -> dict[str, np.ndarray]:
    """Every column of a dataset, its batches concatenated in order."""
    batches = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rows_equal_zarr_python_in_order(data, layout) -> None:
    # Blocks of one stored row each: 2 (v2), 7 (v3) and 4 (sharded) blocks.
    ds = read_zarr(data, ["images", "labels"], path=layout, row_column="row",
                   rows_per_block=unit(layout))  # fmt: skip
    got = columns(ds)
    assert list(got) == ["images", "labels", "row"]
    np.testing.assert_array_equal(got["images"], expected(data, f"{layout}/images"))
    assert got["images"].dtype == np.int16
    np.testing.assert_array_equal(got["labels"], expected(data, f"{layout}/labels"))
    np.testing.assert_array_equal(got["row"], np.arange(N))
    assert str(ds.schema().types[0]).startswith("ArrowTensorType")  # a tensor column


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_read_tasks_cover_whole_shards_or_chunks(data, layout) -> None:
    # images are stored STORED[layout] rows long, labels 4: blocks are multiples of both.
    rows = unit(layout)
    source = ZarrDatasource(data, ["images", "labels"], path=layout, rows_per_block=rows)
    tasks = source.get_read_tasks(3)
    blocks = [b for t in tasks for b in t.read_fn.blocks]
    assert len(tasks) == min(3, len(blocks))
    assert [a for a, _ in blocks] == list(range(0, N, rows))
    assert [b for _, b in blocks] == [*range(rows, N, rows), N]
    for t in tasks:
        assert t.metadata.num_rows == t.read_fn.blocks[-1][1] - t.read_fn.blocks[0][0]
    # A task's blocks hold exactly its rows, in order.
    read = [block_rows(block) for block in tasks[-1]()]
    first = tasks[-1].read_fn.blocks[0][0]
    np.testing.assert_array_equal(np.concatenate([r["images"] for r in read]), images()[first:])


def block_rows(block) -> dict[str, np.ndarray]:
    from ray.data.block import BlockAccessor

    return BlockAccessor.for_block(block).to_batch_format("numpy")


def test_rows_per_block_off_the_shard_boundaries_is_refused(data) -> None:
    with pytest.raises(ValueError, match=r"rows_per_block=24 is not a multiple of 16.*'images': "
                       r"shards of 16.*'labels': chunks of 4"):  # fmt: skip
        ZarrDatasource(data, ["images", "labels"], path="v3-sharded", rows_per_block=24)
    # The default: whole units of 16 rows, as many as make Ray's target block size (here
    # more than the 50 rows: one block).
    source = ZarrDatasource(data, ["images", "labels"], path="v3-sharded")
    assert source.rows_per_block() % 16 == 0
    assert [t.read_fn.blocks for t in source.get_read_tasks(4)] == [((0, N),)]


def test_read_datasource_and_limit(data) -> None:
    source = ZarrDatasource(data, {"x": "images"}, path="v3", rows_per_block=8)
    ds = ray.data.read_datasource(source)
    assert ds.count() == N
    got = columns(ds.limit(11))
    np.testing.assert_array_equal(got["x"], images()[:11])


def test_a_group_gives_its_arrays_of_the_first_arrays_length(data) -> None:
    # images and labels have N rows; short (N - 1) is left out.
    ds = read_zarr(data, path="v3")
    assert ds.columns() == ["images", "labels"]
    np.testing.assert_array_equal(columns(ds)["labels"], labels())
    # An array path: one column, named after the array.
    one = read_zarr(data / "v3", path="labels")
    assert one.columns() == ["labels"]
    np.testing.assert_array_equal(columns(one)["labels"], labels())


def test_strings_read_as_ray_strings(data) -> None:
    ds = read_zarr(data, path="text")
    assert ds.columns() == ["pairs", "words"]
    assert str(ds.schema().types[1]) == "string"
    rows = ds.take_all()
    words = expected(data, "text/words")
    pairs = expected(data, "text/pairs")
    assert [r["words"] for r in rows] == words.tolist()
    assert [np.asarray(r["pairs"]).tolist() for r in rows] == pairs.tolist()


DTYPES = ["bool", "int8", "uint64", "float16", "float32", "complex64", "datetime64[s]",
          "timedelta64[ms]", "<U3", "|S3", [("a", "<i4"), ("b", "<f8")]]  # fmt: skip


def test_every_dtype_round_trips_its_values(tmp_path) -> None:
    root = tmp_path / "dtypes.zarr"
    values = {}
    with quiet_zarr_writes():
        g = zarr.open_group(root, mode="w")
        for i, dt in enumerate(DTYPES):
            v = (np.arange(12) % 5 + i).astype("int64")
            if dt in ("<U3", "|S3"):
                v = np.array([f"s{x}" for x in v], dtype=dt)
            elif isinstance(dt, list):
                v = np.array([(x, x / 2) for x in v], dtype=dt)
            else:
                v = v.astype(dt)
            g.create_array(f"c{i}", shape=(12, 2), chunks=(4, 2), dtype=dt)[:] = np.stack([v, v], 1)
            values[f"c{i}"] = np.stack([v, v], 1)
    got = columns(read_zarr(root))
    for name, want in values.items():
        # Tensor rows are arrays; Ray's pickled fallback (complex, bytes, records) gives the
        # rows' Python values.
        rows = [r.tolist() if isinstance(r, np.ndarray) else list(r) for r in got[name]]
        assert rows == want.tolist(), name


def test_arrays_of_different_lengths_are_named(data) -> None:
    with pytest.raises(ValueError, match=r"differ in length along axis 0 \('images': 50, "
                       r"'short': 49\)"):  # fmt: skip
        read_zarr(data, ["images", "short"], path="v3")


def test_missing_paths_are_file_not_found(data, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no Zarr store"):
        read_zarr(tmp_path / "nothing.zarr")
    with pytest.raises(FileNotFoundError, match="nope"):
        read_zarr(data, path="nope")
    with pytest.raises(FileNotFoundError, match="v3/absent"):
        read_zarr(data, ["images", "absent"], path="v3")
    with pytest.raises(FileNotFoundError, match="nope"):
        ZarrDatasink(data, path="nope")


def test_a_store_opened_for_overwriting_is_refused(tmp_path) -> None:
    store = zarrpipe.Store(tmp_path / "w.zarr", mode="w")
    with pytest.raises(ValueError, match="would empty the store again"):
        read_zarr(store)


def create_targets(root: Path, **kwargs) -> zarrpipe.Store:
    store = zarrpipe.Store(root, mode="w")
    store.create_array("out/images", shape=(N + 10, 3, 2), dtype="int16", **kwargs)
    store.create_array("out/labels", shape=(N + 10,), chunks=(4,), dtype="f8")
    return store


@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_datasink_round_trip_with_blocks_sharing_shards(data, tmp_path, shuffle) -> None:
    root = tmp_path / "out.zarr"
    create_targets(root, chunks=(2, 3, 2), shards=(16, 3, 2))
    ds = read_zarr(data, ["images", "labels"], path="v2", row_column="row", rows_per_block=28)
    # 9 blocks of ~6 rows: every shard of 16 rows gets rows from several write tasks.
    ds = ds.random_shuffle(seed=1) if shuffle else ds
    ds = ds.repartition(9)
    ds.write_datasink(ZarrDatasink(root, path="out", start=10))
    got = expected(root, "out/images")
    np.testing.assert_array_equal(got[10:], images())
    np.testing.assert_array_equal(got[:10], 0)  # untouched: fill value
    np.testing.assert_array_equal(expected(root, "out/labels")[10:], labels())


def test_datasink_maps_columns_and_writes_strings(tmp_path) -> None:
    root = tmp_path / "s.zarr"
    store = zarrpipe.Store(root, mode="w")
    store.create_array("names", shape=(20,), chunks=(4,), dtype=str)
    store.create_array("values", shape=(20,), chunks=(4,), dtype="i4")
    order = [7, 3, 19, 0, 1, 2, 12, 8]
    ds = ray.data.from_items([{"i": i, "n": f"name {i}", "v": i * 10} for i in order])
    ds.write_datasink(ZarrDatasink(root, {"n": "names", "v": "values"}, row_column="i"))
    names, values = expected(root, "names"), expected(root, "values")
    assert [names[i] for i in order] == [f"name {i}" for i in order]
    assert [int(values[i]) for i in order] == [i * 10 for i in order]
    assert names[4] == "" and values[4] == 0


def test_datasink_without_a_row_column_is_refused(data, tmp_path) -> None:
    root = tmp_path / "out.zarr"
    create_targets(root, chunks=(8, 3, 2))
    ds = read_zarr(data, ["images", "labels"], path="v3")
    with pytest.raises(ValueError, match="no 'row' column of row positions"):
        ds.write_datasink(ZarrDatasink(root, path="out"))


def test_datasink_rows_outside_the_array_raise_index_error(tmp_path) -> None:
    root = tmp_path / "out.zarr"
    zarrpipe.Store(root, mode="w").create_array("a", shape=(5,), chunks=(2,), dtype="i4")
    ds = ray.data.from_items([{"row": 4, "a": 1}, {"row": 5, "a": 2}])
    with pytest.raises(IndexError, match=r"row position 5 .* outside array 'a' of length 5"):
        ds.write_datasink(ZarrDatasink(root))


def test_s3_read_and_write_with_options(data, tmp_path) -> None:
    from support.remote_servers import moto_s3, upload_dir

    pytest.importorskip("boto3")
    keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test",
            "aws_region": "us-east-1", "allow_http": "true"}  # fmt: skip
    out = tmp_path / "out.zarr"
    create_targets(out, chunks=(2, 3, 2), shards=(16, 3, 2))
    with moto_s3(one_request_at_a_time=True) as endpoint:
        upload_dir(endpoint, "ray", data / "v3-sharded", "in.zarr")
        upload_dir(endpoint, "ray", out, "out.zarr")
        options = {"aws_endpoint": endpoint, **keys}  # the tasks get them with the Store
        ds = read_zarr("s3://ray/in.zarr", ["images", "labels"], options=options,
                       row_column="row", rows_per_block=16)  # fmt: skip
        assert ds.count() == N
        ds.repartition(7).write_datasink(
            ZarrDatasink("s3://ray/out.zarr", path="out", options=options)
        )
        store = zarrpipe.Store("s3://ray/out.zarr", options=options)
        np.testing.assert_array_equal(store.open_array("out/images")[:N], images())
        np.testing.assert_array_equal(store.open_array("out/labels")[:N], labels())


def test_the_guide_example_runs(tmp_path, monkeypatch) -> None:
    """docs/guide/ray.md's example (which the doc-example runner skips: it starts Ray) runs
    on this module's Ray and prints what the page shows."""
    if not GUIDE.is_file():
        pytest.skip("the documentation is not beside tests/")
    page = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", page, re.M | re.S)
    code = "".join(src for lang, src in blocks if lang == "python")
    shown = "".join(src for lang, src in blocks if lang == "text")
    assert code and shown, "the guide has no python example with its output"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: None)  # the module's Ray runs
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})
    assert printed.getvalue().strip() == shown.strip()


def test_rectilinear_grids_are_cut_where_every_array_ends_a_stored_object(tmp_path) -> None:
    """Stored objects of different lengths (rectilinear grids): read tasks' blocks end only
    where both arrays end a chunk or shard, so each task reads whole stored objects."""
    store = zarrpipe.Store(tmp_path / "r.zarr")
    a = store.create_array("a", shape=(N, 3, 2), dtype="int16", chunks=[[10, 5, 15, 20], 3, 2])
    a[...] = images()
    b = store.create_array("b", shape=(N,), dtype="f8", chunks=(5,), shards=[[15, 15, 20]])
    b[...] = labels()
    source = ZarrDatasource(tmp_path / "r.zarr", ["a", "b"])
    small = copy.copy(ray.data.DataContext.get_current())
    small.target_max_block_size = 1  # blocks as small as the stored objects allow
    blocks = [blk for t in source.get_read_tasks(8, data_context=small) for blk in t.read_fn.blocks]
    # a ends chunks at 10, 15, 30, 50; b ends shards at 15, 30, 50: blocks end at the
    # common ends only (never at 10, inside b's first shard).
    assert blocks == [(0, 15), (15, 30), (30, 50)]
    got = columns(read_zarr(tmp_path / "r.zarr", ["a", "b"]))
    np.testing.assert_array_equal(got["a"], images())
    np.testing.assert_array_equal(got["b"], labels())

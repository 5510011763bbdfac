"""What is built on arrays takes rectilinear chunk grids too: `BatchLoader` gives every
sample once with its values, whatever the chunk sizes along the sample axis; the xarray
backend hands dask each axis' chunk sizes and the values; `zarrpipe info` prints the sizes
and counts the stored chunks of shards of different sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from zarrpipe.cli import main
from zarrpipe.loader import BatchLoader

EDGES = [[70, 130, 45, 255], 3]  # 500 samples in chunks of four sizes
N = 500


@pytest.fixture
def path(tmp_path: Path) -> str:
    s = zarrpipe.Store(tmp_path / "r.zarr")
    x = s.create_array("x", shape=(N, 3), dtype="int32", chunks=EDGES,
                       dimension_names=["sample", "feature"])  # fmt: skip
    x[...] = np.arange(N * 3, dtype="int32").reshape(N, 3)
    y = s.create_array("y", shape=(N,), dtype="int64", chunks=[[100, 400]],
                       dimension_names=["sample"])  # fmt: skip
    y[...] = np.arange(N, dtype="int64") * 7
    sharded = s.create_array("sharded", shape=(N, 4), dtype="uint8", chunks=(10, 4),
                             shards=[[100, 50, 350], 4],
                             dimension_names=["sample", "band"])  # fmt: skip
    sharded[0:150] = 1
    return str(tmp_path / "r.zarr")


@pytest.mark.parametrize("shuffle", [False, True])
def test_the_loader_gives_every_sample_once(path, shuffle):
    store = zarrpipe.Store(path)
    x, y = store.open_array("x"), store.open_array("y")
    seen = []
    for bx, by in BatchLoader([x, y], 64, shuffle=shuffle, seed=1):
        bx, by = np.asarray(bx), np.asarray(by)
        samples = by // 7
        np.testing.assert_array_equal(bx, np.arange(N * 3).reshape(N, 3)[samples])
        seen.append(samples)
    assert sorted(np.concatenate(seen).tolist()) == list(range(N))


def test_xarray_gets_the_chunk_sizes_and_values(path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    ds = xr.open_dataset(path, engine="zarrpipe", chunks={})
    assert ds["x"].data.chunks == ((70, 130, 45, 255), (3,))
    np.testing.assert_array_equal(ds["x"].values, np.arange(N * 3).reshape(N, 3))
    assert ds["sharded"].data.chunks[0] == (10,) * 50


def test_info_prints_sizes_and_counts_inner_chunks(path, capsys):
    assert main(["info", path, "sharded", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)["nodes"]
    assert record["chunks"] == [10, 4]
    assert record["shards"] == [[100, 50, 350], [4]]
    # Shards 0 (100 rows) and 1 (50 rows) are written: 10 + 5 inner chunks.
    assert (record["stored"], record["stored_of"], record["chunks_stored"]) == (2, 3, 15)
    assert main(["info", path, "x"]) == 0
    assert "(70, 130, 45, 255)" in capsys.readouterr().out


def test_strings_on_a_rectilinear_grid(tmp_path: Path):
    """Variable-length strings take the same grid: a partial write keeps the rest of each
    chunk of its own size, and reads of every kind give the values."""
    store = zarrpipe.Store(tmp_path / "s.zarr")
    a = store.create_array("s", shape=(7, 3), dtype=str, chunks=[[2, 4, 1], [1, 2]])
    words = np.array([[f"w{i}{j}" * (i % 3) for j in range(3)] for i in range(7)])
    a[...] = words
    a[1:4, 1] = ["x", "yy", "zzz"]
    words[1:4, 1] = ["x", "yy", "zzz"]
    fresh = zarrpipe.Store(tmp_path / "s.zarr", mode="r").open_array("s")
    assert fresh[...].tolist() == words.tolist()
    assert fresh[5:, ::2].tolist() == words[5:, ::2].tolist()
    assert fresh.oindex[[6, 0], [2, 0]].tolist() == words[np.ix_([6, 0], [2, 0])].tolist()
    assert fresh.read_chunk_sizes == ((2, 4, 1), (1, 2))

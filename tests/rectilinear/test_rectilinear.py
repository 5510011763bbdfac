"""Rectilinear chunk grids (zarr-extensions `rectilinear`: per-axis chunk edges, run-length
compressed, as zarr-python >= 3.2 writes them with `array.rectilinear_chunks`): zarrpipe
creates them with the `chunk_grid` JSON zarr-python writes and refuses edges that do not fit
the shape; reads every kind of selection (basic, `oindex`, `vindex`, masks, `blocks` over the
stored grid, `read`, `read_into`, `read_chunk`) with zarr-python's values, plain and sharded
(rectilinear shards of regular inner chunks); partial writes equal a NumPy mirror, zarr-python
reads them back, and uncompressed chunks (a shard's inner chunks) are byte for byte
zarr-python's; the shape properties
(`read_chunk_sizes`, `write_chunk_sizes`, `chunks`, `shards`, `nchunks`, ...) are zarr-python's;
arrays shrunk by `resize` (edges summing past the shape) and grown by it are read and written;
the chunk cache, zarr-python on zarrpipe's pipeline (strict: no fallback), and an S3 store see
the same values; hostile metadata is a quick `MetadataError`, never a panic or a huge
allocation.

Tests that need zarr-python to write or read a rectilinear array skip on zarr-python < 3.2
(which has none); those comparing zarrpipe with NumPy (and with expectations worked out by
hand) run everywhere.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import quiet_zarr_writes, sample_values
from zarr.storage import MemoryStore

RECT = {"array.rectilinear_chunks": True}
NAN = float("nan")
ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}


def _zarr_writes_rectilinear() -> bool:
    """A feature probe: zarr-python creates a rectilinear array (3.2+; 3.1 refuses the
    nested chunk lists with a TypeError)."""
    try:
        with zarr.config.set(RECT), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = zarr.create_array(MemoryStore(), shape=(3,), dtype="u1", chunks=[[1, 2]])
            return a.read_chunk_sizes == ((1, 2),)
    except Exception:
        return False


ZARR_RECTILINEAR = _zarr_writes_rectilinear()
needs_zarr = pytest.mark.skipif(
    not ZARR_RECTILINEAR,
    reason=f"zarr-python {zarr.__version__} has no rectilinear chunk grids (3.2+ has)",
)

# id -> create_array keyword arguments, given alike to zarrpipe and zarr-python.
CASES: dict[str, dict[str, Any]] = {
    "2d-int32": {"shape": (10, 13), "dtype": "int32", "chunks": [[3, 3, 4], [2, 5, 6]],
                 "fill_value": -7},
    "2d-float64-nan-zstd": {"shape": (10, 13), "dtype": "float64", "chunks": [[1, 9], [6, 7]],
                            "fill_value": NAN, "compressors": ZSTD},
    "1d-uint8-uncompressed": {"shape": (20,), "dtype": "uint8", "chunks": [[1, 2, 3, 14]],
                              "fill_value": 255, "compressors": None},
    "3d-bool-regular-last-axis": {"shape": (4, 6, 5), "dtype": "bool",
                                  "chunks": [[1, 3], [2, 2, 2], 2], "fill_value": True},
    "2d-int16-regular-first-axis": {"shape": (10, 13), "dtype": "int16", "chunks": [4, [2, 5, 6]]},
    "2d-float32-uniform-lists": {"shape": (10, 13), "dtype": "float32",
                                 "chunks": [[5, 5], [2, 5, 6]], "compressors": None},
    "sharded-2d-int32": {"shape": (20, 15), "dtype": "int32", "chunks": (5, 5),
                         "shards": [[10, 10], [10, 5]]},
    "sharded-2d-float64-nan-uncompressed": {
        "shape": (20, 15), "dtype": "float64", "chunks": (5, 5), "shards": [[5, 15], [5, 10]],
        "fill_value": NAN, "compressors": None},
    "sharded-1d-uint8": {"shape": (24,), "dtype": "uint8", "chunks": (4,),
                         "shards": [[8, 4, 12]], "fill_value": 3},
}  # fmt: skip
SHARDED = [k for k in CASES if "shards" in CASES[k]]


# ---------------------------------------------------------------------------------------------
# helpers: the grids, worked out from the creation arguments alone


def clip(edges: list[int], n: int) -> tuple[int, ...]:
    """Edges of the chunks that start inside an extent of `n`, the last one cut at `n`."""
    out, start = [], 0
    for e in edges:
        if start >= n:
            break
        out.append(min(e, n - start))
        start += e
    return tuple(out)


def axis_edges(spec: int | list[int], n: int) -> list[int]:
    """A creation `chunks` / `shards` entry as edges: a bare int repeats over the extent."""
    return [spec] * -(-n // spec) if isinstance(spec, int) else list(spec)


def grids(case: dict) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """(read grid, write grid): per axis, the edges clipped to the shape. The read grid of a
    sharded array is its regular inner chunks, restarted at every shard."""
    shape = case["shape"]
    if "shards" not in case:
        g = tuple(clip(axis_edges(c, n), n) for c, n in zip(case["chunks"], shape, strict=True))
        return g, g
    write = [axis_edges(s, n) for s, n in zip(case["shards"], shape, strict=True)]
    inner = case["chunks"]
    read = [[c for e in w for _ in range(e // c)] for w, c in zip(write, inner, strict=True)]
    return (
        tuple(clip(r, n) for r, n in zip(read, shape, strict=True)),
        tuple(clip(w, n) for w, n in zip(write, shape, strict=True)),
    )


def region(grid: tuple[tuple[int, ...], ...], index: tuple[int, ...]) -> tuple[slice, ...]:
    """The elements of chunk `index` of a grid of clipped edges."""
    starts = [np.concatenate([[0], np.cumsum(edges)]).astype(int) for edges in grid]
    return tuple(slice(int(s[i]), int(s[i + 1])) for s, i in zip(starts, index, strict=True))


def block_rows(edges: tuple[int, ...], sel: int | slice) -> slice:
    """Rows of block `sel` (an index or a step-1 slice of blocks) along one axis."""
    starts = np.concatenate([[0], np.cumsum(edges)]).astype(int)
    lo, hi = (sel, sel + 1) if isinstance(sel, int) else sel.indices(len(edges))[:2]
    return slice(int(starts[lo]), int(starts[hi]))


def is_fill(block: np.ndarray, fill: Any) -> bool:
    return bool(np.array_equal(block, np.full_like(block, fill), equal_nan=block.dtype.kind == "f"))


def expected_keys(mirror: np.ndarray, case: dict) -> set[str]:
    """Stored chunk (shard) keys: every write-grid chunk not all fill value."""
    _, write = grids(case)
    fill = case.get("fill_value", 0)
    return {
        "c/" + "/".join(map(str, idx))
        for idx in np.ndindex(*map(len, write))
        if not is_fill(mirror[region(write, idx)], fill)
    }


def data_for(case: dict, seed: int = 0) -> np.ndarray:
    """Values of the case's dtype, with the first stored chunk (shard) all fill value, and
    for a sharded array the last inner chunk too (absent from its shard's index)."""
    data = sample_values(case["dtype"], case["shape"], seed)
    read, write = grids(case)
    fill = case.get("fill_value", 0)
    data[region(write, (0,) * data.ndim)] = fill
    if "shards" in case:
        data[region(read, tuple(len(e) - 1 for e in read))] = fill
    return data


# ---------------------------------------------------------------------------------------------
# helpers: stores


def chunk_files(array_dir: Path) -> dict[str, bytes]:
    """Every stored chunk (shard) file of an array, by key."""
    return {
        p.relative_to(array_dir).as_posix(): p.read_bytes()
        for p in sorted(array_dir.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def inner_chunks(raw: bytes, n: int) -> list[bytes | None]:
    """A shard's `n` inner chunks in C order, found through its index at the end (`n`
    little-endian (offset, nbytes) u64 pairs, then a crc32c); None for a missing one."""
    index = np.frombuffer(raw[-(16 * n + 4) : -4], "<u8").reshape(n, 2)
    return [None if off == 2**64 - 1 else raw[off : off + size] for off, size in index.tolist()]


def stored_chunks(array_dir: Path, case: dict) -> dict[str, Any]:
    """`chunk_files`, with each shard of a sharded array as its length and its inner chunks'
    bytes: zarrpipe's native writes lay inner chunks out in C order, zarr-python 3.4 in
    Morton order (for regular shards too); every inner chunk must be the same bytes."""
    files = chunk_files(array_dir)
    if "shards" not in case:
        return files
    shard_edges = [axis_edges(s, n) for s, n in zip(case["shards"], case["shape"], strict=True)]
    out = {}
    for key, raw in files.items():
        idx = [int(i) for i in key.split("/")[1:]]
        n = int(np.prod([e[i] // c for e, i, c in zip(shard_edges, idx, case["chunks"],
                                                        strict=True)]))  # fmt: skip
        out[key] = (len(raw), inner_chunks(raw, n))
    return out


def doc(array_dir: Path) -> dict:
    return json.loads((array_dir / "zarr.json").read_text())


def native_create(root: Path, name: str, case: dict, **kwargs: Any) -> zarrpipe.Array:
    root.mkdir(parents=True, exist_ok=True)
    return zarrpipe.Store(str(root)).create_array(name, **{**case, **kwargs})


def native_open(root: Path, name: str, **kwargs: Any) -> zarrpipe.Array:
    return zarrpipe.Store(str(root), **kwargs).open_array(name)


def zarr_create(path: Path, case: dict, **kwargs: Any) -> zarr.Array:
    with zarr.config.set(RECT), quiet_zarr_writes():
        return zarr.create_array(path, **{**case, **kwargs})


def zarr_open(path: Path, mode: str = "r") -> zarr.Array:
    with zarr.config.set(RECT), quiet_zarr_writes():
        return zarr.open_array(path, mode=mode)


def outcome(fn) -> tuple[str, Any]:
    """("value", v) or ("raises", exception type name), whatever the exception's base."""
    try:
        return "value", fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return "raises", type(e).__name__


# ---------------------------------------------------------------------------------------------
# helpers: selections, generic over the number of axes


def basic_selections(shape: tuple[int, ...]) -> dict[str, tuple]:
    n0, rest = shape[0], len(shape) - 1
    return {
        "all": (Ellipsis,),
        "slices-step-2": (slice(1, n0 - 3), *[slice(None, None, 2)] * rest),
        "int": (3,),
        "last-on-last-axis": (Ellipsis, -1),
        "negative-step": (slice(n0 - 2, None, -3),),
    }


def orthogonal_selections(shape: tuple[int, ...]) -> list[tuple]:
    n0, n_last = shape[0], shape[-1]
    rows = np.array([n0 - 1, 0, n0 // 2, 0])  # unsorted, a repeat
    mask = np.arange(n_last) % 3 == 0
    sels = [(rows, *[slice(None)] * (len(shape) - 1))]
    if len(shape) > 1:
        sels.append((*[slice(None)] * (len(shape) - 1), mask))
    return sels


def coordinate_selections(shape: tuple[int, ...], rng: np.random.Generator) -> list[tuple]:
    corners = tuple(np.array([0, n - 1]) for n in shape)
    picks = np.unravel_index(rng.choice(int(np.prod(shape)), 6, replace=False), shape)
    return [corners, tuple(np.asarray(p) for p in picks), (rng.random(shape) < 0.3,)]


def block_selections(write: tuple[tuple[int, ...], ...]) -> list[tuple]:
    nb0 = len(write[0])
    one = min(1, nb0 - 1)
    span = slice(one, min(3, nb0))
    return [(one,), (span, *[0] * (len(write) - 1))]


def outer(shape: tuple[int, ...], sel: tuple) -> tuple:
    """NumPy's index for an orthogonal selection (one integer array or slice per axis)."""
    return np.ix_(*[np.arange(n)[s] for n, s in zip(shape, sel, strict=True)])


def block_region(write: tuple[tuple[int, ...], ...], sel: tuple) -> tuple[slice, ...]:
    """Elements of a block selection, worked out from the edges (missing axes: every block)."""
    sel = sel + (slice(None),) * (len(write) - len(sel))
    return tuple(block_rows(edges, s) for edges, s in zip(write, sel, strict=True))


# ---------------------------------------------------------------------------------------------
# creation: the metadata zarr-python writes


GRID_JSON = {
    "run-and-explicit": ({"shape": (10, 13), "chunks": [[3, 3, 4], [2, 5, 6]]},
                         [[[3, 2], 4], [2, 5, 6]]),
    "uniform-list-stays-a-list": ({"shape": (10, 13), "chunks": [[5, 5], [2, 5, 6]]},
                                  [[[5, 2]], [2, 5, 6]]),
    "all-uniform-lists": ({"shape": (10, 10), "chunks": [[5, 5], [5, 5]]}, [[[5, 2]], [[5, 2]]]),
    "bare-int-axis": ({"shape": (10, 13), "chunks": [5, [2, 5, 6]]}, [5, [2, 5, 6]]),
    "bare-int-ragged-axis": ({"shape": (10, 13), "chunks": [4, [2, 5, 6]]}, [4, [2, 5, 6]]),
    "two-runs": ({"shape": (10, 13), "chunks": [[1, 1, 1, 1, 1, 1, 2, 2], [13]]},
                 [[[1, 6], [2, 2]], [13]]),
    "one-chunk": ({"shape": (10,), "chunks": [[10]]}, [[10]]),
    "3d-mixed": ({"shape": (4, 6, 5), "chunks": [[1, 3], [2, 2, 2], 5]}, [[1, 3], [[2, 3]], 5]),
    "sharded": ({"shape": (20, 15), "chunks": (5, 5), "shards": [[10, 10], [10, 5]]},
                [[[10, 2]], [10, 5]]),
    "sharded-bare-int": ({"shape": (20, 15), "chunks": (5, 5), "shards": [10, [10, 5]]},
                         [10, [10, 5]]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GRID_JSON))
def test_chunk_grid_json_is_zarr_pythons(tmp_path, case):
    """The exact `chunk_grid` zarr-python 3.4.2 writes (run-length pairs `[edge, count]`, a
    bare int for an axis given as one; a list given stays a list even when uniform)."""
    kwargs, chunk_shapes = GRID_JSON[case]
    want = {
        "name": "rectilinear",
        "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes},
    }
    native_create(tmp_path / "ours", "x", {"dtype": "int32", **kwargs})
    assert doc(tmp_path / "ours" / "x")["chunk_grid"] == want
    if ZARR_RECTILINEAR:  # the literal above is what zarr-python writes
        zarr_create(tmp_path / "theirs", {"dtype": "int32", **kwargs})
        assert doc(tmp_path / "theirs")["chunk_grid"] == want


@needs_zarr
@pytest.mark.parametrize("case", list(CASES))
def test_metadata_equals_zarr_pythons(tmp_path, case):
    native_create(tmp_path / "ours", "x", CASES[case])
    zarr_create(tmp_path / "theirs", CASES[case])
    ours, theirs = doc(tmp_path / "ours" / "x"), doc(tmp_path / "theirs")
    assert ours["chunk_grid"] == theirs["chunk_grid"]
    assert ours == theirs


BAD_CREATIONS = {
    "edges-sum-short": {"shape": (10, 13), "chunks": [[3, 3, 3], [2, 5, 6]]},
    "edges-sum-long": {"shape": (10, 13), "chunks": [[3, 3, 5], [2, 5, 6]]},
    "zero-edge": {"shape": (10, 13), "chunks": [[0, 10], [13]]},
    "negative-edge": {"shape": (10, 13), "chunks": [[-3, 13], [13]]},
    "fewer-axes": {"shape": (10, 13), "chunks": [[3, 3, 4]]},
    "shard-edge-not-a-multiple": {"shape": (20, 15), "chunks": (5, 5),
                                  "shards": [[10, 10], [10, 4, 1]]},
    "shard-edges-sum-short": {"shape": (20, 15), "chunks": (5, 5), "shards": [[10, 5], [10, 5]]},
    "rectilinear-inner-chunks": {"shape": (20, 15), "chunks": [[5, 15], [5, 10]],
                                 "shards": (20, 15)},
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_CREATIONS))
def test_creations_that_do_not_fit_raise_value_error_and_write_nothing(tmp_path, case):
    kwargs = {"dtype": "int32", **BAD_CREATIONS[case]}
    with pytest.raises(ValueError):
        native_create(tmp_path, "x", kwargs)
    assert not (tmp_path / "x" / "zarr.json").exists()
    if ZARR_RECTILINEAR:  # zarr-python refuses the same arguments alike
        with pytest.raises(ValueError):
            zarr_create(tmp_path / "theirs", kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"chunks": [[3, 3, 4], [2, 5, 6]]}, {"chunks": (5, 5), "shards": [[5, 5], [10, 3]]}],
    ids=["rectilinear-chunks", "rectilinear-shards"],
)
def test_zarr_v2_cannot_store_rectilinear_grids(tmp_path, kwargs):
    with pytest.raises(ValueError, match="zarr_format 2 cannot store a rectilinear chunk grid"):
        native_create(tmp_path, "x", {"shape": (10, 13), "dtype": "int32", **kwargs},
                      zarr_format=2)  # fmt: skip
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


# ---------------------------------------------------------------------------------------------
# reads of what zarr-python wrote


@pytest.fixture
def written_by_zarr(tmp_path, request):
    """(case, store root, zarr-python's array, the values it wrote) for case `request.param`."""
    case = CASES[request.param]
    data = data_for(case)
    z = zarr_create(tmp_path / "a", case)
    with zarr.config.set(RECT):
        z[...] = data
    # zarr-python is the reference: it reads back what it was given.
    np.testing.assert_array_equal(zarr_open(tmp_path / "a")[...], data)
    return case, tmp_path, zarr_open(tmp_path / "a"), data


@needs_zarr
@pytest.mark.parametrize("written_by_zarr", list(CASES), indirect=True)
def test_reads_equal_zarr_pythons(written_by_zarr):
    case, root, z, _ = written_by_zarr
    a = native_open(root, "a", mode="r")
    assert a.shape == tuple(case["shape"]) and a.dtype == np.dtype(case["dtype"])
    full = np.asarray(z[...])
    with zarr.config.set(RECT):
        for name, sel in basic_selections(a.shape).items():
            steps = [s.step for s in sel if isinstance(s, slice)]
            want = full[sel] if any(s is not None and s < 0 for s in steps) else z[sel]
            np.testing.assert_array_equal(np.asarray(a[sel]), want, err_msg=name)
            np.testing.assert_array_equal(np.asarray(a.read(sel)), want, err_msg=f"read {name}")
            np.testing.assert_array_equal(a.read(sel).to_numpy(), want, err_msg=name)
            out = np.empty(np.shape(want), dtype=a.dtype)
            a.read_into(sel, out)
            np.testing.assert_array_equal(out, want, err_msg=f"read_into {name}")
        for sel in orthogonal_selections(a.shape):
            want = z.oindex[sel]
            np.testing.assert_array_equal(a.oindex[sel], want, err_msg=f"oindex {sel}")
        for sel in coordinate_selections(a.shape, np.random.default_rng(3)):
            want = z.vindex[sel]
            np.testing.assert_array_equal(full[sel], want)  # zarr-python's meaning is NumPy's
            np.testing.assert_array_equal(a.vindex[sel], want, err_msg=f"vindex {sel}")
        _, write = grids(case)
        for sel in block_selections(write):
            want = z.blocks[sel]
            np.testing.assert_array_equal(full[block_region(write, sel)], want, err_msg=str(sel))
            np.testing.assert_array_equal(a.blocks[sel], want, err_msg=f"blocks {sel}")


@needs_zarr
@pytest.mark.parametrize("written_by_zarr", list(CASES), indirect=True)
def test_read_chunk_gives_each_chunk_of_the_read_grid(written_by_zarr):
    """Every chunk of the read grid (inner chunks of a sharded array), clipped to the shape."""
    case, root, _, data = written_by_zarr
    a = native_open(root, "a")
    read, _ = grids(case)
    for idx in np.ndindex(*map(len, read)):
        want = data[region(read, idx)]
        got = np.asarray(a.read_chunk(idx))
        assert got.shape == tuple(read[k][i] for k, i in enumerate(idx)), idx
        np.testing.assert_array_equal(got, want, err_msg=str(idx))
    with pytest.raises(IndexError):
        a.read_chunk(tuple(len(e) for e in read))


# ---------------------------------------------------------------------------------------------
# shape properties


@needs_zarr
@pytest.mark.parametrize("case", list(CASES))
def test_shape_properties_equal_zarr_pythons(tmp_path, case):
    native_create(tmp_path, "x", CASES[case])
    a, z = native_open(tmp_path, "x"), zarr_open(tmp_path / "x")
    assert a.read_chunk_sizes == z.read_chunk_sizes
    assert a.write_chunk_sizes == z.write_chunk_sizes
    assert a.chunk_grid_shape == z.cdata_shape
    assert a.nchunks == z.nchunks
    assert a.nshards == int(np.prod([len(e) for e in z.write_chunk_sizes]))
    for attr in ("chunks", "shards"):
        assert outcome(lambda n=attr: getattr(a, n)) == outcome(lambda n=attr: getattr(z, n)), attr


REGULAR = {
    "regular-2d": ({"shape": (37, 50), "chunks": (8, 16)},
                   ((8, 8, 8, 8, 5), (16, 16, 16, 2)), ((8, 8, 8, 8, 5), (16, 16, 16, 2))),
    "regular-sharded": ({"shape": (37, 50), "chunks": (4, 8), "shards": (16, 32)},
                        ((4,) * 9 + (1,), (8,) * 6 + (2,)), ((16, 16, 5), (32, 18))),
    "regular-1d": ({"shape": (37,), "chunks": (8,)}, ((8, 8, 8, 8, 5),), ((8, 8, 8, 8, 5),)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REGULAR))
def test_chunk_sizes_of_regular_arrays(tmp_path, case):
    kwargs, read, write = REGULAR[case]
    a = native_create(tmp_path, "x", {"dtype": "int32", **kwargs})
    assert a.read_chunk_sizes == read
    assert a.write_chunk_sizes == write
    assert a.chunk_grid_shape == tuple(map(len, read))
    assert a.nchunks == int(np.prod(list(map(len, read))))
    assert a.nshards == int(np.prod(list(map(len, write))))
    if ZARR_RECTILINEAR:
        z = zarr_open(tmp_path / "x")
        assert (z.read_chunk_sizes, z.write_chunk_sizes) == (read, write)


@pytest.mark.parametrize("case", list(CASES))
def test_shape_properties_worked_out_by_hand(tmp_path, case):
    """Sizes from the edges; `chunks` / `shards` as zarr-python 3.4.2 has them: whichever
    grid is rectilinear raises NotImplementedError (the inner chunks of rectilinear shards
    are regular: `chunks` gives them), and `shards` of an unsharded array is None."""
    kwargs = CASES[case]
    a = native_create(tmp_path, "x", kwargs)
    read, write = grids(kwargs)
    assert a.read_chunk_sizes == read
    assert a.write_chunk_sizes == write
    assert a.chunk_grid_shape == tuple(map(len, read))
    assert a.nchunks == int(np.prod(list(map(len, read))))
    assert a.nshards == int(np.prod(list(map(len, write))))
    if "shards" in kwargs:
        assert a.chunks == tuple(kwargs["chunks"])
        with pytest.raises(NotImplementedError):
            _ = a.shards
    else:
        assert a.shards is None
        with pytest.raises(NotImplementedError):
            _ = a.chunks


# ---------------------------------------------------------------------------------------------
# writes


def write_steps(case: dict, rng: np.random.Generator) -> list[tuple[str, tuple | None, Any]]:
    """(door, selection, value): every write door, across chunk (and shard) boundaries,
    ending with the first stored chunk set back to all fill value (then deleted)."""
    shape, dtype = tuple(case["shape"]), np.dtype(case["dtype"])
    fill = case.get("fill_value", 0)
    n0, ndim = shape[0], len(shape)
    _, write = grids(case)

    def vals(sel_shape: tuple[int, ...]) -> np.ndarray:
        return sample_values(dtype, sel_shape, int(rng.integers(1 << 30)))

    probe = np.empty(shape, dtype=np.int8)
    steps: list[tuple[str, tuple | None, Any]] = [("setitem", (Ellipsis,), vals(shape))]
    sel: tuple = (slice(1, n0 - 2), *[slice(None, None, 2)] * (ndim - 1))
    steps.append(("setitem", sel, vals(probe[sel].shape)))
    steps.append(("setitem", (n0 - 1,), vals(())[()]))  # a scalar over a row
    sel = tuple(slice(1, min(n, 4)) for n in shape)
    steps.append(("write", sel, vals(probe[sel].shape)))
    for sel in orthogonal_selections(shape):
        rows = sel[0] if isinstance(sel[0], np.ndarray) else None
        if rows is not None:
            sel = (np.unique(rows), *sel[1:])  # no repeats: one value per position
        steps.append(("oindex", sel, vals(probe[outer(shape, sel)].shape)))
    for sel in coordinate_selections(shape, rng)[1:]:
        steps.append(("vindex", sel, vals(probe[sel].shape)))
    for sel in block_selections(write)[:1]:
        steps.append(("blocks", sel, vals(probe[block_region(write, sel)].shape)))
    steps.append(("write", region(write, (0,) * ndim), fill))
    return steps


def apply(a: zarrpipe.Array, door: str, sel: tuple | None, value: Any) -> None:
    if door == "setitem":
        a[sel] = value
    elif door == "write":
        a.write(sel, value)
    elif door == "oindex":
        a.oindex[sel] = value
    elif door == "vindex":
        a.vindex[sel] = value
    else:
        a.blocks[sel] = value


def mirror_apply(mirror: np.ndarray, write: tuple, door: str, sel: tuple, value: Any) -> None:
    if door == "oindex":
        mirror[outer(mirror.shape, sel)] = value
    elif door == "blocks":
        mirror[block_region(write, sel)] = value
    else:
        mirror[sel] = value


@pytest.mark.parametrize("case", list(CASES))
def test_partial_writes_equal_a_numpy_mirror(tmp_path, case):
    """Every write door, through one open array; after each, a fresh read-only store reads
    the mirror. Chunks left all fill value are deleted; zarr-python reads the result."""
    kwargs = CASES[case]
    a = native_create(tmp_path, "x", kwargs)
    fill = kwargs.get("fill_value", 0)
    mirror = np.full(kwargs["shape"], fill, dtype=kwargs["dtype"])
    _, write = grids(kwargs)
    for step, (door, sel, value) in enumerate(write_steps(kwargs, np.random.default_rng(5))):
        apply(a, door, sel, value)
        mirror_apply(mirror, write, door, sel, value)
        got = native_open(tmp_path, "x", mode="r")[...]
        np.testing.assert_array_equal(got, mirror, err_msg=f"step {step}: {door} {sel}")
    assert set(chunk_files(tmp_path / "x")) == expected_keys(mirror, kwargs)
    assert not is_fill(mirror, fill)  # the test wrote something
    if ZARR_RECTILINEAR:
        np.testing.assert_array_equal(zarr_open(tmp_path / "x")[...], mirror)


@needs_zarr
@pytest.mark.parametrize("case", list(CASES))
def test_uncompressed_chunks_are_zarr_pythons_bytes(tmp_path, case):
    """The same writes by each: the same chunk files, byte for byte (the same inner chunks
    of each shard, byte for byte)."""
    kwargs = {**CASES[case], "compressors": None}
    data = data_for(kwargs, seed=2)
    read, _ = grids(kwargs)
    ndim = data.ndim
    inside = region(read, (1,) * ndim)  # part of one read chunk, then a whole one to fill
    part = tuple(slice(s.start, s.start + 1) for s in inside)
    ours = native_create(tmp_path / "ours", "x", kwargs)
    theirs = zarr_create(tmp_path / "theirs", kwargs)
    fill = kwargs.get("fill_value", 0)
    for sel, value in [((Ellipsis,), data), (part, data[(0,) * ndim]), (inside, fill)]:
        ours[sel] = value
        with zarr.config.set(RECT):
            theirs[sel] = value
    theirs_files = stored_chunks(tmp_path / "theirs", kwargs)
    assert len(theirs_files) > 1
    assert stored_chunks(tmp_path / "ours" / "x", kwargs) == theirs_files


# ---------------------------------------------------------------------------------------------
# arrays shrunk (edges summing past the shape) and grown by zarr-python's resize


SHRUNK = {
    "1d": ({"shape": (15,), "dtype": "int32", "chunks": [[5, 5, 5]], "compressors": None},
           (7,), ((5, 2),), ((5, 2),)),
    "sharded-2d": ({"shape": (20, 15), "dtype": "int32", "chunks": (5, 5),
                    "shards": [[10, 10], [10, 5]], "compressors": None},
                   (12, 15), ((5, 5, 2), (5, 5, 5)), ((10, 2), (10, 5))),
}  # fmt: skip


def shrink_by_hand(array_dir: Path, shape: tuple[int, ...]) -> None:
    """What zarr-python's `resize` to a smaller shape does: the new shape in zarr.json (the
    chunk grid kept as it was), and the chunks starting past it deleted."""
    meta = doc(array_dir)
    grid = meta["chunk_grid"]["configuration"]["chunk_shapes"]
    meta["shape"] = list(shape)
    (array_dir / "zarr.json").write_text(json.dumps(meta, indent=2))
    starts = []
    for axis in grid:
        edges = [e for item in axis for e in ([item[0]] * item[1] if isinstance(item, list)
                                              else [item])]  # fmt: skip
        starts.append(np.concatenate([[0], np.cumsum(edges)]))
    for key in chunk_files(array_dir):
        idx = [int(i) for i in key.split("/")[1:]]
        if any(s[i] >= n for s, i, n in zip(starts, idx, shape, strict=True)):
            (array_dir / key).unlink()


def shrunk_by_zarrpipe(root: Path, case: str) -> tuple[dict, np.ndarray]:
    kwargs, shape, *_ = SHRUNK[case]
    data = sample_values(kwargs["dtype"], kwargs["shape"], 11)
    native_create(root, "x", kwargs)[...] = data
    shrink_by_hand(root / "x", shape)
    return kwargs, data[tuple(slice(0, n) for n in shape)].copy()


@needs_zarr
@pytest.mark.parametrize("case", list(SHRUNK))
def test_zarr_python_shrinks_as_the_hand_edit_does(tmp_path, case):
    """zarr-python's resize keeps the grid (`[[[5, 3]]]` for shape 7) and drops the chunks
    past the new shape: the stores the other tests build by hand are the same."""
    kwargs, shape, *_ = SHRUNK[case]
    shrunk_by_zarrpipe(tmp_path / "ours", case)
    z = zarr_create(tmp_path / "theirs", kwargs)
    with zarr.config.set(RECT):
        z[...] = sample_values(kwargs["dtype"], kwargs["shape"], 11)
        z.resize(shape)
    assert doc(tmp_path / "ours" / "x") == doc(tmp_path / "theirs")
    assert stored_chunks(tmp_path / "ours" / "x", kwargs) == stored_chunks(
        tmp_path / "theirs", kwargs
    )


@pytest.mark.parametrize("case", list(SHRUNK))
def test_shrunk_arrays_read_and_write(tmp_path, case):
    """Only chunks starting inside the shape count; a clipped chunk is still stored whole
    (its edge's length), so that zarr-python decodes it."""
    kwargs, mirror = shrunk_by_zarrpipe(tmp_path, case)
    _, shape, read, write = SHRUNK[case]
    a = native_open(tmp_path, "x")
    assert a.shape == shape
    np.testing.assert_array_equal(a[...], mirror)
    assert (a.read_chunk_sizes, a.write_chunk_sizes) == (read, write)
    assert a.chunk_grid_shape == tuple(map(len, read))
    assert a.nchunks == int(np.prod(list(map(len, read))))
    last = tuple(len(e) - 1 for e in read)
    np.testing.assert_array_equal(np.asarray(a.read_chunk(last)), mirror[region(read, last)])
    last_block = (len(write[0]) - 1,)
    np.testing.assert_array_equal(a.blocks[last_block], mirror[block_region(write, last_block)])
    with pytest.raises(IndexError):
        _ = a.blocks[len(write[0])]
    # A part of the clipped chunk (read, update, write), then a position at the very end.
    edge = region(read, last)
    part = tuple(slice(s.start, s.start + 1) for s in edge)
    a[part] = 99
    mirror[part] = 99
    a[(-1,) * mirror.ndim] = -99
    mirror[(-1,) * mirror.ndim] = -99
    np.testing.assert_array_equal(native_open(tmp_path, "x")[...], mirror)
    assert set(chunk_files(tmp_path / "x")) <= {
        "c/" + "/".join(map(str, i)) for i in np.ndindex(*map(len, write))
    }
    if not kwargs.get("shards"):
        key = "c/" + "/".join(map(str, last))
        full_edge = kwargs["chunks"][0][len(read[0]) - 1]
        stored = np.frombuffer(chunk_files(tmp_path / "x")[key], "<i4")
        assert stored.size == full_edge
        np.testing.assert_array_equal(stored[: read[0][-1]], mirror[edge])
    if ZARR_RECTILINEAR:
        z = zarr_open(tmp_path / "x")
        assert (z.read_chunk_sizes, z.write_chunk_sizes) == (read, write)
        np.testing.assert_array_equal(z[...], mirror)


GROWN = {
    "1d": ({"shape": (15,), "dtype": "int32", "chunks": [[5, 5, 5]]}, [(7,), (20,)],
           [[[5, 4]]]),
    "bare-int-and-list": ({"shape": (13, 13), "dtype": "float64", "chunks": [5, [2, 5, 6]]},
                          [(20, 20)], [5, [2, 5, 6, 7]]),
    "sharded": ({"shape": (20, 15), "dtype": "uint8", "chunks": (5, 5),
                 "shards": [[10, 10], [10, 5]]}, [(12, 15), (30, 15)], [[[10, 3]], [10, 5]]),
}  # fmt: skip


@needs_zarr
@pytest.mark.parametrize("case", list(GROWN))
def test_arrays_grown_by_zarr_python(tmp_path, case):
    """zarr-python's resize past the edges' sum appends one chunk covering the difference
    (`[2, 5, 6]` for 13 grows to `[2, 5, 6, 7]` for 20); zarrpipe reads and writes it."""
    kwargs, shapes, chunk_shapes = GROWN[case]
    z = zarr_create(tmp_path / "x", kwargs)
    with zarr.config.set(RECT):
        z[...] = sample_values(kwargs["dtype"], kwargs["shape"], 4)
        for shape in shapes:
            z.resize(shape)
        z[-3:] = sample_values(kwargs["dtype"], z[-3:].shape, 5)
    assert doc(tmp_path / "x")["chunk_grid"]["configuration"]["chunk_shapes"] == chunk_shapes
    a = native_open(tmp_path, "x")
    mirror = np.asarray(zarr_open(tmp_path / "x")[...])
    np.testing.assert_array_equal(a[...], mirror)
    assert (a.read_chunk_sizes, a.write_chunk_sizes) == (z.read_chunk_sizes, z.write_chunk_sizes)
    a[1:-1] = mirror[:-2]
    mirror[1:-1] = mirror[:-2].copy()
    np.testing.assert_array_equal(zarr_open(tmp_path / "x")[...], mirror)


# ---------------------------------------------------------------------------------------------
# the chunk cache


@pytest.mark.parametrize("case", ["2d-int32", "sharded-2d-int32"])
def test_cached_reads_and_writes(tmp_path, case):
    kwargs = CASES[case]
    data = data_for(kwargs, seed=6)
    store = zarrpipe.Store(str(tmp_path), cache_bytes=1 << 20)
    a = store.create_array("x", **kwargs)
    a[...] = data
    read, _ = grids(kwargs)
    for _ in range(2):
        np.testing.assert_array_equal(a[...], data)
        np.testing.assert_array_equal(a[2:9, 1:12], data[2:9, 1:12])
        np.testing.assert_array_equal(np.asarray(a.read_chunk((1, 1))), data[region(read, (1, 1))])
    assert store.cache_info()["hits"] > 0  # the second round was served from the cache
    new = sample_values(kwargs["dtype"], (6, 8), 7)
    a[2:8, 1:9] = new
    data[2:8, 1:9] = new
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(np.asarray(a.read_chunk((1, 1))), data[region(read, (1, 1))])
    other = store.open_array("x")  # another array of the same store shares the cache
    np.testing.assert_array_equal(other[...], data)


# ---------------------------------------------------------------------------------------------
# zarr-python on zarrpipe's pipeline


OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline", "codec_pipeline.strict": True, **RECT}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline", **RECT}
PIPELINE_CASES = {
    "plain": {**CASES["2d-int32"], "compressors": None},
    "zstd": CASES["2d-float64-nan-zstd"],
    "sharded": CASES["sharded-2d-int32"],
}


@contextlib.contextmanager
def pipeline(config: dict):
    """zarr-python on a pipeline; a FallbackWarning (zarrpipe handing the array back to
    zarr-python's codecs) fails the test."""
    with zarr.config.set(config), warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        yield


@needs_zarr
@pytest.mark.parametrize("case", list(PIPELINE_CASES))
def test_zarr_python_through_zarrpipes_pipeline(tmp_path, case):
    kwargs = PIPELINE_CASES[case]
    data = data_for(kwargs, seed=8)
    for name, config in (("ours", OURS), ("theirs", DEFAULT)):
        with pipeline(config), quiet_zarr_writes():
            z = zarr.create_array(tmp_path / name, **kwargs)
            z[...] = data
            z[1:4, 3:9] = data[0, 0]  # parts of chunks: read, update, write
            z.vindex[[0, 9], [12, 0]] = data[1, 1]
    assert chunk_files(tmp_path / "ours") == chunk_files(tmp_path / "theirs")
    want = data.copy()
    want[1:4, 3:9] = data[0, 0]
    want[[0, 9], [12, 0]] = data[1, 1]
    for name in ("ours", "theirs"):
        for config in (OURS, DEFAULT):
            with pipeline(config), quiet_zarr_writes():
                z = zarr.open_array(tmp_path / name, mode="r")
                np.testing.assert_array_equal(z[...], want, err_msg=f"{name} {config}")
                np.testing.assert_array_equal(z[2:7, 1::3], want[2:7, 1::3])
        np.testing.assert_array_equal(native_open(tmp_path, name)[...], want)


# ---------------------------------------------------------------------------------------------
# an object store


@pytest.fixture
def s3_endpoint():
    pytest.importorskip("boto3")
    from support.remote_servers import moto_s3

    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(moto_s3())
        except RuntimeError as e:
            pytest.skip(f"no local S3 server: {e}")
        yield endpoint


@needs_zarr
def test_s3_reads_what_zarr_python_wrote(tmp_path, s3_endpoint):
    from support.remote_servers import upload_dir

    root = tmp_path / "data.zarr"
    wanted = {}
    for name in ("2d-int32", "sharded-2d-int32"):
        data = data_for(CASES[name], seed=9)
        z = zarr_create(root / name, CASES[name])
        with zarr.config.set(RECT):
            z[...] = data
        wanted[name] = np.asarray(zarr_open(root / name)[...])
    upload_dir(s3_endpoint, "zarrpipe-rect", root, "data.zarr")
    options = {"aws_endpoint": s3_endpoint, "allow_http": "true", "aws_access_key_id": "test",
               "aws_secret_access_key": "test", "aws_region": "us-east-1"}  # fmt: skip
    store = zarrpipe.Store("s3://zarrpipe-rect/data.zarr", options=options)
    for name, want in wanted.items():
        a = store.open_array(name)
        np.testing.assert_array_equal(a[...], want, err_msg=name)
        np.testing.assert_array_equal(a[1:7, ::2], want[1:7, ::2], err_msg=name)
        _, write = grids(CASES[name])
        np.testing.assert_array_equal(a.blocks[1], want[block_region(write, (1,))], err_msg=name)
        assert a.read_chunk_sizes == grids(CASES[name])[0]
        # Writes on the object store (conditional puts, read-modify-write of a part of a
        # chunk or shard), read back by zarrpipe from a fresh store.
        a[2:5, 1:9] = want[0, 0]
        a.oindex[[0, 9], :] = want[1, 1]
        want = want.copy()
        want[2:5, 1:9] = want[0, 0]
        want[[0, 9], :] = want[1, 1]
        fresh = zarrpipe.Store("s3://zarrpipe-rect/data.zarr", options=options)
        np.testing.assert_array_equal(fresh.open_array(name)[...], want, err_msg=name)


# ---------------------------------------------------------------------------------------------
# hostile metadata: a quick MetadataError in a child process with bounded memory


def rectilinear_doc(shape: list[int], chunk_shapes: Any, kind: str = "inline") -> dict:
    return {
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "uint8",
        "chunk_grid": {"name": "rectilinear",
                       "configuration": {"kind": kind, "chunk_shapes": chunk_shapes}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": {},
        "storage_transformers": [],
    }  # fmt: skip


_OPEN_IN_A_CHILD = textwrap.dedent(
    """
    import resource, sys
    limit = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import zarrpipe
    try:
        zarrpipe.Store(sys.argv[1], mode="r").open_array(sys.argv[2])
    except zarrpipe.MetadataError as e:
        print("MetadataError", e)
    except BaseException as e:
        print("other", type(e).__module__, type(e).__qualname__, e)
    else:
        print("opened")
    """
)


def open_in_a_child(root: Path, meta: dict) -> str:
    """Writes `meta` as array "x" under `root` and opens it in a child limited to 4 GiB of
    address space and 60 s; its one line of output (a crash fails here)."""
    (root / "x").mkdir(parents=True)
    (root / "x" / "zarr.json").write_text(json.dumps(meta))
    proc = subprocess.run(
        [sys.executable, "-c", _OPEN_IN_A_CHILD, str(root), "x"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout.strip()


HOSTILE = {
    "edges-sum-short": rectilinear_doc([10, 13], [[3, 3, 3], [2, 5, 6]]),
    "run-sum-short": rectilinear_doc([10, 13], [[[3, 3]], [2, 5, 6]]),
    "zero-edge": rectilinear_doc([10, 13], [[0, 10], [13]]),
    "negative-edge": rectilinear_doc([10, 13], [[-3, 13], [13]]),
    "zero-bare-int": rectilinear_doc([10, 13], [0, [13]]),
    "run-count-0": rectilinear_doc([10, 13], [[[5, 0], 10], [13]]),
    "run-edge-0": rectilinear_doc([10, 13], [[[0, 3], 10], [13]]),
    "kind-other": rectilinear_doc([10, 13], [[3, 3, 4], [2, 5, 6]], kind="other"),
    "fewer-axes": rectilinear_doc([10, 13], [[3, 3, 4]]),
    "not-a-list": rectilinear_doc([10, 13], "3,3,4"),
    "10**15-chunks": rectilinear_doc([10**15], [[[1, 10**15]]]),
    "2**62-chunks": rectilinear_doc([2**62], [[[1, 2**62]]]),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_metadata_is_a_quick_metadata_error(tmp_path, case):
    out = open_in_a_child(tmp_path, HOSTILE[case])
    assert out.startswith("MetadataError"), out


def test_edges_summing_past_u64_are_refused_or_opened_never_a_crash(tmp_path):
    out = open_in_a_child(tmp_path, rectilinear_doc([10], [[2**63, 2**63, 5]]))
    assert out.startswith(("MetadataError", "opened")), out


@pytest.mark.parametrize(
    "meta",
    [
        rectilinear_doc([10, 13], [[[3, 2], 4], [2, 5, 6]]),
        rectilinear_doc([7], [[[5, 3]]]),  # edges past the shape: a shrunk array
        rectilinear_doc([10, 13], [4, [2, 5, 6]]),
    ],
    ids=["runs", "edges-past-the-shape", "bare-int"],
)
def test_valid_metadata_opens_in_the_bounded_child(tmp_path, meta):
    """The control for the hostile cases: the child's limits let valid arrays open."""
    assert open_in_a_child(tmp_path, meta) == "opened"

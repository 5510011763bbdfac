"""Property tests (hypothesis) for rectilinear chunk grids: random shapes (1-3 dims), random
edges per axis (or a regular edge), with or without shards of different sizes; random writes
of every selection kind (slices with steps, integers, `oindex`, `vindex`, masks) keep a NumPy
mirror, and random reads of every kind equal it, through the native API alone (so they run
whatever zarr-python is installed)."""

from __future__ import annotations

import tempfile

import numpy as np
import zarrpipe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def edges(draw, extent: int, unit: int = 1) -> int | list[int]:
    """An axis: a regular edge, or explicit edges (multiples of `unit`) summing to `extent`
    (a multiple of `unit`)."""
    if draw(st.booleans()):
        return unit * draw(st.integers(1, max(1, extent // unit)))
    out, left = [], extent // unit
    while left:
        e = draw(st.integers(1, left))
        out.append(e * unit)
        left -= e
    return out


@st.composite
def layouts(draw) -> dict:
    ndim = draw(st.integers(1, 3))
    sharded = draw(st.booleans())
    if sharded:
        inner = [draw(st.integers(1, 3)) for _ in range(ndim)]
        shape = [i * draw(st.integers(1, 5)) for i in inner]
        shards = [draw(edges(n, i)) for n, i in zip(shape, inner, strict=True)]
        if all(isinstance(s, int) for s in shards):  # keep the grid rectilinear
            shards[0] = [shape[0]]
        return {"shape": shape, "chunks": inner, "shards": shards}
    shape = [draw(st.integers(1, 12)) for _ in range(ndim)]
    chunks = [draw(edges(n)) for n in shape]
    if all(isinstance(c, int) for c in chunks):
        chunks[0] = [shape[0]]
    return {"shape": shape, "chunks": chunks}


def axis_key(draw, n: int):
    """One axis of a basic selection: an integer or a slice of any step."""
    if draw(st.booleans()):
        return draw(st.integers(-n, n - 1))
    start = draw(st.none() | st.integers(-n, n))
    stop = draw(st.none() | st.integers(-n, n))
    step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
    return slice(start, stop, step)


@st.composite
def selections(draw, shape: list[int]):
    """(kind, key): a basic key, an orthogonal one, coordinates or a mask."""
    kind = draw(st.sampled_from(["basic", "oindex", "vindex", "mask"]))
    if kind == "basic":
        return kind, tuple(axis_key(draw, n) for n in shape)
    if kind == "oindex":
        key = []
        for n in shape:
            if draw(st.booleans()):
                key.append(np.array(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4))))
            else:
                key.append(axis_key(draw, n))
        return kind, tuple(k if not isinstance(k, int) else slice(k, k + 1) for k in key)
    if kind == "vindex":
        count = draw(st.integers(1, 5))
        return kind, tuple(
            np.array(draw(st.lists(st.integers(0, n - 1), min_size=count, max_size=count)))
            for n in shape
        )
    mask = np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape))))).reshape(shape)  # fmt: skip
    return kind, mask


def numpy_index(shape: list[int], kind: str, key):
    """The NumPy key that selects what `kind` selects (`oindex`: an open mesh)."""
    if kind != "oindex":
        return key
    return np.ix_(*[np.arange(n)[k] if isinstance(k, slice) else k
                    for k, n in zip(key, shape, strict=True)])  # fmt: skip


def target(arr: zarrpipe.Array, kind: str):
    return {"basic": arr, "oindex": arr.oindex, "vindex": arr.vindex, "mask": arr.vindex}[kind]


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_random_writes_and_reads_equal_a_numpy_mirror(layout, data):
    shape = layout["shape"]
    with tempfile.TemporaryDirectory() as tmp:
        store = zarrpipe.Store(tmp)
        arr = store.create_array("a", dtype="int32", fill_value=-1, **layout)
        mirror = np.full(shape, -1, dtype="int32")
        for step in range(data.draw(st.integers(1, 4))):
            kind, key = data.draw(selections(shape))
            index = numpy_index(shape, kind, key)
            want = mirror[index]
            # Repeated positions: NumPy keeps the last value, and so do zarrpipe's writes.
            values = np.arange(want.size, dtype="int32").reshape(want.shape) + 100 * step
            target(arr, kind)[key] = values
            mirror[index] = values
        fresh = zarrpipe.Store(tmp, mode="r").open_array("a")
        np.testing.assert_array_equal(fresh[...], mirror)
        for _ in range(3):
            kind, key = data.draw(selections(shape))
            got = np.asarray(target(fresh, kind)[key])
            np.testing.assert_array_equal(got, mirror[numpy_index(shape, kind, key)])
        assert tuple(map(sum, fresh.write_chunk_sizes)) == tuple(shape)

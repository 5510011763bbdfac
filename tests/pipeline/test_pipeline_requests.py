"""zarr-python's batches become the engine's box requests in Rust (`_ChunkRequests`): which
selections are boxes (step-1 slices, non-negative integers of Python or NumPy) and which are
not (index arrays, masks, steps, bools), what each request covers, and that the pipeline's
reads and writes of boxes go through them, with no selection taken apart in Python."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from zarrpipe._zarrpipe import _ChunkRequests, _PickRequests

PIPELINE = Path(__file__).parents[2] / "python" / "zarrpipe"


def _item(path, shape, chunk_sel, out_sel, complete=False):
    return (SimpleNamespace(path=path), SimpleNamespace(shape=shape), chunk_sel, out_sel, complete)


def test_boxes_parse_and_report_what_they_cover():
    batch = [
        _item("c/0/0", (4, 6), (slice(0, 4), slice(0, 6)), (slice(0, 4), slice(0, 6))),
        _item("c/0/1", (4, 6), (slice(1, 3, 1), np.int64(2)), (slice(4, 6),)),
        _item("c/1/0", (4, 6), (slice(None), slice(2, 99)), (slice(6, 10), slice(0, 4))),
    ]
    full = _ChunkRequests.from_batch(batch[:1], (4, 6))
    assert full is not None and len(full) == 1
    assert full.covers_chunk() == [True]
    mixed = _ChunkRequests.from_batch(batch[1:2], (10,))
    assert mixed is not None and mixed.covers_chunk() == [False]
    # Out selections must match the output's rank.
    assert _ChunkRequests.from_batch(batch[1:2], (10, 4)) is None
    clipped = _ChunkRequests.from_batch(batch[2:], (10, 6))
    assert clipped is not None and clipped.covers_chunk() == [False]


@pytest.mark.parametrize(
    "chunk_sel",
    [
        (slice(0, 4, 2), slice(0, 6)),
        (np.array([0, 2]), slice(0, 6)),
        (np.array([True, False, True, False]), slice(0, 6)),
        (True, slice(0, 6)),
        (-1, slice(0, 6)),
        (slice(0, 4),),
    ],
    ids=["step", "index-array", "mask", "bool", "negative", "rank"],
)
def test_what_is_not_a_box_goes_to_the_pick_path(chunk_sel):
    batch = [_item("c/0", (4, 6), chunk_sel, (slice(0, 2), slice(0, 6)))]
    assert _ChunkRequests.from_batch(batch, (2, 6)) is None


def test_subset_keeps_order_and_refuses_unknown_indices():
    batch = [
        _item(f"c/{i}", (2,), (slice(0, 2 if i else 1),), (slice(2 * i, 2 * i + 2),))
        for i in range(3)
    ]
    requests = _ChunkRequests.from_batch(batch, (6,))
    assert requests is not None
    assert requests.subset([2, 0]).covers_chunk() == [True, False]
    with pytest.raises(IndexError, match="request 3 of 3"):
        requests.subset([3])


def test_no_python_module_of_the_pipeline_takes_selections_apart():
    """The box selections are parsed in Rust: no `slice.indices`, `operator.index` or
    per-chunk request building is left in the pipeline's Python."""
    for name in ("pipeline.py", "_pipeline_selections.py", "_pipeline_arrays.py"):
        tree = ast.parse((PIPELINE / name).read_text())
        calls = {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        assert "indices" not in calls, name
        assert "index" not in calls, name
        defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defs & {"_requests", "_chunk_selection", "_out_selection"}, name


# ---------------------------------------------------------------- every other selection


def test_picks_parse_both_sides_as_numpy_reads_them():
    chunk = (np.array([[3], [1]]), np.array([[0, 2]]))  # zarr-python's `ix_` form
    batch = [
        _item("c/0", (4, 3), chunk, (slice(0, 2), slice(0, 2)), False),
        _item("c/1", (4, 3), (slice(None), 1), (slice(2, 6), 1), True),
    ]
    requests = _PickRequests.from_batch(batch, (6, 2), True)
    assert len(requests) == 2
    assert requests.complete() == [False, True]
    assert requests.subset([1, 1]).complete() == [True, True]
    with pytest.raises(IndexError, match="request 2 of 2"):
        requests.subset([2])
    # A read's two sides must hold the same elements (squeezed axes aside).
    with pytest.raises(IndexError, match=r"shape \(2, 2\) does not fit .* shape \(3, 2\)"):
        _PickRequests.from_batch(
            [_item("c", (4, 3), chunk, (slice(0, 3), slice(0, 2)))], (6, 2), True
        )
    # What NumPy refuses, refused the same way: an index past the chunk, a float.
    with pytest.raises(IndexError):
        _PickRequests.from_batch(
            [_item("c", (4, 3), (np.array([4]), 0), (slice(0, 1),))], (1,), True
        )
    with pytest.raises(IndexError):
        _PickRequests.from_batch([_item("c", (4, 3), (1.5, 0), (slice(0, 1),))], (1,), True)
    # A 0-d value (None): no output side to parse.
    assert len(_PickRequests.from_batch(batch, None, False)) == 2


def test_no_python_module_of_the_pipeline_computes_positions():
    """Every selection kind is parsed and placed in Rust (`_PickRequests`): the pipeline's
    Python never indexes an array with zarr-python's chunk or output selections, builds
    positions (`arange`, `cumprod`, `put`, `.flat`) or squeezes dropped axes."""
    selection_names = {"chunk_sel", "out_sel", "chunk_selection", "out_selection", "sel"}
    for name in ("pipeline.py", "_pipeline_selections.py", "_pipeline_arrays.py"):
        tree = ast.parse((PIPELINE / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name):
                assert node.slice.id not in selection_names, f"{name}:{node.lineno}"
            if isinstance(node, ast.Attribute):
                assert node.attr not in {"arange", "cumprod", "put", "flat", "squeeze"}, (
                    f"{name}:{node.lineno}: {node.attr}"
                )
        defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defs & {"chunk_positions", "_write_points"}, name

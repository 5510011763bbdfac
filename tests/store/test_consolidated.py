"""Consolidated metadata: read as zarr-python reads it (v2 `.zmetadata`, v3 inline), with its
choice of members; written as `zarr.consolidate_metadata` writes it; and walking a
consolidated hierarchy of 100 arrays on an S3 server in one or two GETs and no LIST."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from support.remote_servers import moto_s3, upload_dir
from support.zarr_stores import quiet_zarr_writes

KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}


def consolidate_with_zarr(root: Path) -> None:
    with quiet_zarr_writes(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(root))


def open_with_zarr(root: Path, **kwargs) -> zarr.Group:
    with quiet_zarr_writes(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(str(root), mode="r", **kwargs)


def build(root: Path, zarr_format: int, n_arrays: int = 3) -> None:
    with quiet_zarr_writes():
        g = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
        g.attrs["title"] = "root"
        for i in range(n_arrays):
            a = g.create_array(
                f"a{i:03d}", shape=(4,), chunks=(2,), dtype="int16", attributes={"i": i}
            )
            a[:] = np.arange(4) + i
        s = g.create_group("sub", attributes={"k": "v"})
        b = s.create_array("b", shape=(3,), chunks=(3,), dtype="float32", fill_value=1.5)
        b[:2] = [7.0, 8.0]
        s.create_group("inner").create_group("leaf")


def members(group, max_depth=None) -> dict[str, tuple]:
    out = {}
    for name, node in group.members(max_depth=max_depth):
        if hasattr(node, "shape"):
            out[name] = ("array", tuple(node.shape), str(node.dtype), dict(node.attrs))
        else:
            out[name] = ("group", dict(node.attrs))
    return out


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def consolidated(tmp_path: Path, request) -> Path:
    root = tmp_path / f"c{request.param}.zarr"
    build(root, request.param)
    consolidate_with_zarr(root)
    return root


def test_reads_zarr_pythons_consolidated_metadata(consolidated):
    g = zarrpipe.Store(consolidated, mode="r").open_group()
    z = open_with_zarr(consolidated)
    assert members(g) == members(z)
    assert members(g, None) == members(z, None)
    assert dict(g.attrs) == dict(z.attrs)
    np.testing.assert_array_equal(g["sub/b"][:], z["sub/b"][:])
    np.testing.assert_array_equal(g["a002"][:], z["a002"][:])


def test_consolidated_members_are_the_ones_it_lists(consolidated):
    """As zarr-python: an array added after consolidation is not a member of the group
    opened with consolidated metadata (only without it)."""
    with quiet_zarr_writes():
        late = zarr.open_group(str(consolidated), mode="a", use_consolidated=False)
        late.create_array("late", shape=(1,), chunks=(1,), dtype="int8")
    z = open_with_zarr(consolidated)
    g = zarrpipe.Store(consolidated, mode="r").open_group()
    assert "late" not in members(z)
    assert members(g) == members(z)
    assert "late" not in g
    fresh = zarrpipe.Store(consolidated, mode="r").open_group(use_consolidated=False)
    assert "late" in fresh and "late" in list(fresh)
    assert members(fresh) == members(open_with_zarr(consolidated, use_consolidated=False))


def test_use_consolidated_true_requires_it(tmp_path):
    root = tmp_path / "plain.zarr"
    build(root, 3)
    with pytest.raises(ValueError, match="no consolidated metadata"):
        zarrpipe.Store(root, mode="r").open_group(use_consolidated=True)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidate_writes_what_zarr_python_writes(tmp_path, zarr_format):
    ours = tmp_path / "ours.zarr"
    build(ours, zarr_format)
    theirs = tmp_path / "theirs.zarr"
    shutil.copytree(ours, theirs)
    consolidate_with_zarr(theirs)
    g = zarrpipe.Store(ours).consolidate()
    assert isinstance(g, zarrpipe.Group)
    if zarr_format == 3:
        mine = json.loads((ours / "zarr.json").read_text())
        want = json.loads((theirs / "zarr.json").read_text())
        assert mine == want
    else:
        mine = json.loads((ours / ".zmetadata").read_text())
        want = json.loads((theirs / ".zmetadata").read_text())
        assert mine["zarr_consolidated_format"] == 1
        # zarr-python 3 adds `consolidated_metadata` to member groups' `.zgroup` in v2's
        # `.zmetadata` (a v3 idea that v2 readers ignore); every other document is equal.
        strip = {
            k: {kk: vv for kk, vv in v.items() if kk != "consolidated_metadata"}
            for k, v in want["metadata"].items()
        }
        assert mine["metadata"] == strip
    z = open_with_zarr(ours, use_consolidated=True)
    assert members(z, None) == members(open_with_zarr(theirs, use_consolidated=True), None)
    assert members(g, None) == members(z, None)


def test_consolidate_refuses_arrays_and_read_only_stores(consolidated):
    with pytest.raises(PermissionError):
        zarrpipe.Store(consolidated, mode="r").consolidate()
    with pytest.raises(ValueError, match=r"/a000 in .* is an array; consolidate a group") as info:
        zarrpipe.Store(consolidated).consolidate("a000")
    assert info.type is ValueError


def test_attributes_of_a_consolidated_group_stay_consolidated(tmp_path):
    root = tmp_path / "k.zarr"
    build(root, 3)
    g = zarrpipe.Store(root).consolidate()
    g.attrs["after"] = 1
    doc = json.loads((root / "zarr.json").read_text())
    assert doc["attributes"]["after"] == 1
    assert "a000" in doc["consolidated_metadata"]["metadata"]
    assert dict(open_with_zarr(root, use_consolidated=True).attrs)["after"] == 1


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_walking_a_consolidated_remote_hierarchy_does_not_list(tmp_path, zarr_format):
    root = tmp_path / "remote.zarr"
    build(root, zarr_format, n_arrays=100)
    consolidate_with_zarr(root)
    with moto_s3() as endpoint:
        upload_dir(endpoint, "walk", root, "h.zarr")
        store = zarrpipe.Store(
            "s3://walk/h.zarr",
            mode="r",
            options={"aws_endpoint": endpoint, "allow_http": "true", **KEYS},
        )
        g = store.open_group()
        arrays = dict(g.arrays())
        shapes = {name: (a.shape, dict(a.attrs)) for name, a in arrays.items()}
        walked = members(g, None)
        counts = store.request_counts()
        assert counts["lists"] == 0, counts
        # v3: zarr.json; v2: zarr.json (missing), then .zmetadata.
        assert counts["gets"] <= (1 if zarr_format == 3 else 2), counts
        assert len(arrays) == 100
        assert shapes["a042"] == ((4,), {"i": 42})
        assert len(walked) == 100 + 4  # a000..a099, sub, sub/b, sub/inner, sub/inner/leaf
        assert store.list()[:2] == [("", "group"), ("a000", "array")]
        assert store.request_counts()["lists"] == 0
        # Reading data from a member opened this way is correct.
        np.testing.assert_array_equal(arrays["a099"][:], np.arange(4) + 99)

"""Groups and attributes against zarr-python: members, paths, tree; attributes written by
zarrpipe read back by zarr-python and the reverse, for v2 and v3, and concurrent writers of
different attributes all keeping theirs."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import quiet_zarr_writes


def build(root: Path, zarr_format: int) -> None:
    """/ (title) -> a (array), sub/ (k) -> sub/b (array), sub/empty/ (group)."""
    with quiet_zarr_writes():
        g = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
        g.attrs["title"] = "t"
        a = g.create_array("a", shape=(4,), chunks=(2,), dtype="int32", attributes={"u": "m"})
        a[:] = [1, 2, 3, 4]
        s = g.create_group("sub", attributes={"k": 1})
        b = s.create_array("b", shape=(2, 3), chunks=(1, 3), dtype="float64")
        b[:] = np.arange(6.0).reshape(2, 3)
        s.create_group("empty")


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def hierarchy(tmp_path: Path, request) -> Path:
    root = tmp_path / f"h{request.param}.zarr"
    build(root, request.param)
    return root


def zarr_members(group: zarr.Group, max_depth: int | None = 0) -> dict[str, str]:
    return {
        name: "array" if isinstance(node, zarr.Array) else "group"
        for name, node in group.members(max_depth=max_depth)
    }


def our_members(group: zarrpipe.Group, max_depth: int | None = 0) -> dict[str, str]:
    return {
        name: "array" if isinstance(node, zarrpipe.Array) else "group"
        for name, node in group.members(max_depth=max_depth)
    }


def test_group_names_match_zarr_python(hierarchy):
    store = zarrpipe.Store(hierarchy, mode="r")
    g = store.open_group()
    with quiet_zarr_writes():
        z = zarr.open_group(str(hierarchy), mode="r")
        assert our_members(g) == zarr_members(z)
        assert our_members(g, None) == zarr_members(z, None)
        assert sorted(g.array_keys()) == sorted(z.array_keys())
        assert sorted(g.group_keys()) == sorted(z.group_keys())
        assert sorted(g) == sorted(z)
        assert len(g) == len(list(z))
        assert dict(g.attrs) == dict(z.attrs) == {"title": "t"}
        sub = g["sub"]
        assert isinstance(sub, zarrpipe.Group)
        assert (sub.path, sub.name, sub.basename) == ("sub", "/sub", "sub")
        assert dict(sub.attrs) == dict(z["sub"].attrs)
        assert [n for n, _ in sub.arrays()] == ["b"]
        assert [n for n, _ in sub.groups()] == ["empty"]
        b = g["sub/b"]
        assert isinstance(b, zarrpipe.Array) and b.path == "sub/b"
        np.testing.assert_array_equal(b[:], z["sub/b"][:])
        np.testing.assert_array_equal(g["a"][1:3], z["a"][1:3])
        assert dict(g["a"].attrs) == dict(z["a"].attrs) == {"u": "m"}
    assert "a" in g and "sub/b" in g and "sub/empty" in g
    assert "nope" not in g and "sub/nope" not in g
    with pytest.raises(KeyError):
        g["nope"]
    assert g.get("nope") is None and g.get("nope", 3) == 3
    assert g.zarr_format == int(hierarchy.name[1])


def test_tree_shows_every_member(hierarchy):
    g = zarrpipe.Store(hierarchy, mode="r").open_group()
    tree = g.tree()
    lines = tree.splitlines()
    assert lines[0] == "/"
    assert lines[1] == "├── a (4,) int32"
    assert lines[2] == "└── sub"
    assert lines[3] == "    ├── b (2, 3) float64"
    assert lines[4] == "    └── empty"
    assert len(lines) == 5
    assert g.tree(level=1).splitlines() == lines[:3]


def test_created_groups_and_arrays_read_back_in_zarr_python(tmp_path):
    store = zarrpipe.Store(tmp_path / "made.zarr")
    root = store.create_group(attributes={"made_by": "zarrpipe"})
    assert isinstance(root, zarrpipe.Group)
    sub = root.create_group("g2")
    assert sub.zarr_format == 3 and sub.path == "g2"
    x = root.create_array("x", shape=(5,), chunks=(2,), dtype="int64")
    x[:] = np.arange(5)
    deep = root.create_group("deep/er", attributes={"d": [1, 2]})
    assert deep.path == "deep/er"
    assert root.require_group("deep") is not None
    with pytest.raises(TypeError, match="is an array"):
        root.require_group("x")
    assert sorted(root) == ["deep", "g2", "x"]
    with quiet_zarr_writes():
        z = zarr.open_group(str(tmp_path / "made.zarr"), mode="r")
        assert dict(z.attrs) == {"made_by": "zarrpipe"}
        np.testing.assert_array_equal(z["x"][:], np.arange(5))
        assert dict(z["deep/er"].attrs) == {"d": [1, 2]}
        assert sorted(z.group_keys()) == ["deep", "g2"]


# ---------------------------------------------------------------------------------------------
# attributes


def test_attributes_written_by_zarrpipe_are_read_by_zarr_python(hierarchy):
    store = zarrpipe.Store(hierarchy)
    g = store.open_group()
    a = g["a"]
    g.attrs["n"] = np.int64(3)
    g.attrs.update({"list": [1, 2.5, None], "nested": {"x": True}}, more="yes")
    a.attrs["units"] = "km"
    del a.attrs["u"]
    assert a.attrs.pop("missing", "dflt") == "dflt"
    assert a.attrs.setdefault("s", "v") == "v"
    g["sub"].attrs.put({"only": 1})
    with quiet_zarr_writes():
        z = zarr.open_group(str(hierarchy), mode="r")
        assert dict(z.attrs) == {
            "title": "t",
            "n": 3,
            "list": [1, 2.5, None],
            "nested": {"x": True},
            "more": "yes",
        }
        assert dict(z["a"].attrs) == {"units": "km", "s": "v"}
        assert dict(z["sub"].attrs) == {"only": 1}
        # The array's data and metadata are untouched.
        np.testing.assert_array_equal(z["a"][:], [1, 2, 3, 4])
    # The same object, and a fresh opening, see the change.
    assert a.attrs == {"units": "km", "s": "v"}
    assert dict(zarrpipe.Store(hierarchy, mode="r").open_array("a").attrs) == {
        "units": "km",
        "s": "v",
    }
    g["sub"].attrs.clear()
    assert dict(zarrpipe.Store(hierarchy, mode="r").open_group("sub").attrs) == {}


def test_attributes_written_by_zarr_python_are_read_by_zarrpipe(hierarchy):
    with quiet_zarr_writes():
        z = zarr.open_group(str(hierarchy), mode="a")
        z.attrs["from_zarr"] = {"deep": [1, "two"]}
        z["sub/b"].attrs["scale"] = 0.5
    g = zarrpipe.Store(hierarchy, mode="r").open_group()
    assert g.attrs["from_zarr"] == {"deep": [1, "two"]}
    assert g["sub/b"].attrs["scale"] == 0.5
    assert "title" in g.attrs and "nope" not in g.attrs
    assert sorted(g.attrs.keys()) == ["from_zarr", "title"]
    assert g.attrs.asdict() == {"title": "t", "from_zarr": {"deep": [1, "two"]}}


def test_attributes_are_a_mutable_mapping_with_clear_errors(tmp_path):
    from collections.abc import MutableMapping

    g = zarrpipe.Store(tmp_path / "e.zarr").create_group()
    assert isinstance(g.attrs, MutableMapping)
    with pytest.raises(KeyError):
        g.attrs["missing"]
    with pytest.raises(KeyError):
        del g.attrs["missing"]
    with pytest.raises(ValueError, match="JSON"):
        g.attrs["bad"] = float("nan")
    with pytest.raises(TypeError, match="JSON"):
        g.attrs["bad"] = object()
    with pytest.raises(TypeError, match="str"):
        g.attrs["bad"] = {1: 2}
    assert dict(g.attrs) == {}, "a refused value must leave nothing written"
    with pytest.raises(ValueError, match="JSON"):
        zarrpipe.Store(tmp_path / "e.zarr").create_group("sub", attributes={"x": float("inf")})
    assert not (tmp_path / "e.zarr" / "sub").exists()
    g.attrs["arr"] = np.arange(3)
    assert g.attrs["arr"] == [0, 1, 2]
    ro = zarrpipe.Store(tmp_path / "e.zarr", mode="r").open_group()
    with pytest.raises(PermissionError):
        ro.attrs["x"] = 1
    assert dict(zarrpipe.Store(tmp_path / "e.zarr", mode="r").open_group().attrs) == {
        "arr": [0, 1, 2]
    }


def _set_many(root: str, path: str, who: int, n: int) -> None:
    arr = zarrpipe.Store(root).open_array(path)
    for i in range(n):
        arr.attrs[f"w{who}_{i}"] = i


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_concurrent_attribute_writers_keep_every_attribute(tmp_path, zarr_format):
    root = tmp_path / "c.zarr"
    store = zarrpipe.Store(root)
    store.create_array("x", shape=(2,), chunks=(2,), dtype="int8", zarr_format=zarr_format)
    n = 15
    threads = [threading.Thread(target=_set_many, args=(str(root), "x", w, n)) for w in range(3)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_set_many, args=(str(root), "x", w, n)) for w in range(3, 5)]
    for t in threads + procs:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    want = {f"w{w}_{i}": i for w in range(5) for i in range(n)}
    with quiet_zarr_writes():
        assert dict(zarr.open_array(str(root / "x"), mode="r").attrs) == want
    assert dict(zarrpipe.Store(root, mode="r").open_array("x").attrs) == want


def test_groups_pickle(hierarchy):
    g = zarrpipe.Store(hierarchy, mode="r").open_group("sub")
    copy = pickle.loads(pickle.dumps(g))
    assert copy.path == "sub" and dict(copy.attrs) == {"k": 1}
    assert sorted(copy) == ["b", "empty"]


def test_open_group_on_an_array_or_nothing_says_so(hierarchy):
    store = zarrpipe.Store(hierarchy, mode="r")
    with pytest.raises(FileNotFoundError, match="an array is there"):
        store.open_group("a")
    with pytest.raises(FileNotFoundError, match="no group"):
        store.open_group("nope")

"""zarr-python's modes on `Store(mode=...)` and `zarrpipe.open(mode=...)`: each mode against a
missing path, an existing array and an existing group, and no open creating anything."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import quiet_zarr_writes

MODES = ["r", "r+", "a", "w", "w-"]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file and directory under `root` (its parent's view: `root` itself included)."""
    out: dict[str, bytes] = {}
    if not root.exists():
        return out
    out["."] = b"<dir>"
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = b"<dir>"
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


@pytest.fixture
def array_store(tmp_path: Path) -> Path:
    root = tmp_path / "array.zarr"
    with quiet_zarr_writes():
        z = zarr.create_array(str(root), shape=(6,), chunks=(3,), dtype="int32", fill_value=-1)
        z[:] = np.arange(6)
    return root


@pytest.fixture
def group_store(tmp_path: Path) -> Path:
    root = tmp_path / "group.zarr"
    with quiet_zarr_writes():
        g = zarr.open_group(str(root), mode="w", attributes={"title": "g"})
        a = g.create_array("a", shape=(4,), chunks=(2,), dtype="float64")
        a[:] = [1.0, 2.0, 3.0, 4.0]
    return root


# ---------------------------------------------------------------------------------------------
# opening creates nothing


@pytest.mark.parametrize("mode", ["r", "r+", "a"])
def test_opening_a_missing_store_creates_nothing(tmp_path, mode):
    missing = tmp_path / "nope.zarr"
    if mode in ("r", "r+"):
        with pytest.raises(FileNotFoundError, match=r"nope\.zarr"):
            zarrpipe.Store(missing, mode=mode)
    else:
        store = zarrpipe.Store(missing, mode=mode)
        assert store.mode == "a"
        assert store.list() == []
        with pytest.raises(FileNotFoundError):
            store.open_array("x")
        with pytest.raises(FileNotFoundError):
            store.open_group()
    assert not missing.exists(), f"mode={mode!r} created {missing}"


@pytest.mark.parametrize("mode", ["r", "r+", "a"])
def test_open_on_a_missing_path_creates_nothing(tmp_path, mode):
    missing = tmp_path / "nope.zarr"
    if mode in ("r", "r+"):
        with pytest.raises(FileNotFoundError):
            zarrpipe.open(missing, mode=mode)
    else:
        g = zarrpipe.open(missing, mode=mode)
        assert isinstance(g, zarrpipe.Group)
        assert list(g) == [] and len(g) == 0 and dict(g.attrs) == {}
        assert g.path == "" and g.zarr_format == 3
    assert not missing.exists()


def test_the_default_mode_creates_on_first_write(tmp_path):
    where = tmp_path / "new" / "deeper.zarr"
    store = zarrpipe.Store(where)
    assert not where.exists()
    arr = store.create_array("x", shape=(4,), chunks=(2,), dtype="uint8")
    arr[:] = 7
    with quiet_zarr_writes():
        np.testing.assert_array_equal(zarr.open_array(str(where / "x"), mode="r")[:], [7] * 4)


def test_an_unstored_group_is_created_by_its_first_write(tmp_path):
    root = tmp_path / "lazy.zarr"
    g = zarrpipe.open(root, mode="a", zarr_format=2)
    assert not root.exists()
    g.attrs["title"] = "made"
    with quiet_zarr_writes():
        z = zarr.open_group(str(root), mode="r")
        assert z.metadata.zarr_format == 2
        assert dict(z.attrs) == {"title": "made"}

    # Another writer created the group meanwhile: its attributes are kept, not replaced.
    root3 = tmp_path / "lazy3.zarr"
    g3 = zarrpipe.open(root3, mode="a")
    with quiet_zarr_writes():
        zarr.open_group(str(root3), mode="w", attributes={"theirs": 1})
    g3.attrs["ours"] = 2
    with quiet_zarr_writes():
        assert dict(zarr.open_group(str(root3), mode="r").attrs) == {"theirs": 1, "ours": 2}

    root2 = tmp_path / "lazy2.zarr"
    g2 = zarrpipe.open(root2, mode="a", path="sub/group")
    assert not root2.exists()
    a = g2.create_array("x", shape=(3,), chunks=(3,), dtype="int8")
    a[:] = [1, 2, 3]
    with quiet_zarr_writes():
        z = zarr.open_group(str(root2), mode="r")
        assert isinstance(z["sub/group"], zarr.Group)
        np.testing.assert_array_equal(z["sub/group/x"][:], [1, 2, 3])
    assert list(g2) == ["x"]


# ---------------------------------------------------------------------------------------------
# every mode against an existing array and an existing group


@pytest.mark.parametrize("mode", MODES)
def test_store_modes_on_an_existing_store(array_store, mode):
    before = snapshot(array_store)
    if mode == "w-":
        with pytest.raises(FileExistsError, match="not empty"):
            zarrpipe.Store(array_store, mode=mode)
        assert snapshot(array_store) == before
        return
    store = zarrpipe.Store(array_store, mode=mode)
    assert store.mode == mode
    assert store.read_only == (mode == "r")
    if mode == "w":
        assert store.list() == []
        assert not any(array_store.rglob("*")), "mode='w' left values behind"
        return
    assert snapshot(array_store) == before
    np.testing.assert_array_equal(store.open_array()[:], np.arange(6))
    if mode == "r":
        with pytest.raises(PermissionError, match="read-only"):
            store.open_array()[0] = 5
    else:
        store.open_array()[0] = 5
        with quiet_zarr_writes():
            assert zarr.open_array(str(array_store), mode="r")[0] == 5


@pytest.mark.parametrize("mode", MODES)
def test_open_modes_on_an_existing_array(array_store, mode):
    before = snapshot(array_store)
    if mode == "w-":
        with pytest.raises(FileExistsError):
            zarrpipe.open(array_store, mode=mode)
        assert snapshot(array_store) == before
        return
    node = zarrpipe.open(array_store, mode=mode)
    if mode == "w":
        # Deleted, then created: a new empty group, as zarr.open(mode="w") gives.
        assert isinstance(node, zarrpipe.Group) and list(node) == []
        with quiet_zarr_writes():
            assert isinstance(zarr.open(str(array_store), mode="r"), zarr.Group)
        return
    assert isinstance(node, zarrpipe.Array)
    np.testing.assert_array_equal(node[:], np.arange(6))
    assert snapshot(array_store) == before


@pytest.mark.parametrize("mode", MODES)
def test_open_modes_on_an_existing_group(group_store, mode):
    before = snapshot(group_store)
    if mode == "w-":
        with pytest.raises(FileExistsError):
            zarrpipe.open(group_store, mode=mode)
        with pytest.raises(FileExistsError):
            zarrpipe.open(group_store, mode=mode, path="a")
        assert snapshot(group_store) == before
        return
    node = zarrpipe.open(group_store, mode=mode)
    assert isinstance(node, zarrpipe.Group)
    if mode == "w":
        assert list(node) == [] and dict(node.attrs) == {}
        return
    assert list(node) == ["a"] and node.attrs["title"] == "g"
    child = zarrpipe.open(group_store, mode=mode, path="a")
    assert isinstance(child, zarrpipe.Array)
    np.testing.assert_array_equal(child[:], [1.0, 2.0, 3.0, 4.0])
    assert snapshot(group_store) == before


def test_w_below_the_root_deletes_only_that_node(group_store):
    with quiet_zarr_writes():
        zarr.open_group(str(group_store), mode="a").create_array(
            "b", shape=(2,), chunks=(2,), dtype="int8"
        )[:] = [5, 6]
    node = zarrpipe.open(group_store, mode="w", path="a", shape=(3,), dtype="uint16", chunks=(3,))
    assert isinstance(node, zarrpipe.Array) and node.shape == (3,)
    np.testing.assert_array_equal(node[:], [0, 0, 0])
    root = zarrpipe.open(group_store, mode="r")
    np.testing.assert_array_equal(root["b"][:], [5, 6])
    assert root.attrs["title"] == "g"


def test_w_dash_creates_where_nothing_is(group_store):
    g = zarrpipe.open(group_store, mode="w-", path="new", zarr_format=2)
    assert isinstance(g, zarrpipe.Group) and g.zarr_format == 2
    with quiet_zarr_writes():
        assert zarr.open_group(str(group_store / "new"), mode="r").metadata.zarr_format == 2


def test_open_refuses_unknown_modes_and_stray_arguments(group_store):
    before = snapshot(group_store)
    with pytest.raises(ValueError, match="mode must be"):
        zarrpipe.Store(group_store, mode="rw")
    with pytest.raises(ValueError, match="mode must be"):
        zarrpipe.open(group_store, mode="x+")
    with pytest.raises(TypeError, match="unexpected keyword"):
        zarrpipe.open(group_store, mode="a", cache_byts=10)
    assert snapshot(group_store) == before


def test_a_store_object_keeps_its_own_mode(group_store):
    store = zarrpipe.Store(group_store, mode="r")
    g = zarrpipe.open(store, mode="r", path="")
    assert isinstance(g, zarrpipe.Group) and g.read_only
    with pytest.raises(TypeError, match="Store keyword"):
        zarrpipe.open(store, cache_bytes=1)


def test_w_and_w_dash_stores_reopen_without_deleting(tmp_path):
    root = tmp_path / "w.zarr"
    store = zarrpipe.Store(root, mode="w")
    store.create_array("x", shape=(2,), chunks=(2,), dtype="int8")[:] = [1, 2]
    copy = pickle.loads(pickle.dumps(store))
    assert copy.mode == "a"
    np.testing.assert_array_equal(copy.open_array("x")[:], [1, 2])


def test_info_on_a_missing_store_fails_and_creates_nothing(tmp_path):
    missing = tmp_path / "nope3.zarr"
    proc = subprocess.run(
        [sys.executable, "-m", "zarrpipe", "info", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope3.zarr" in lines[0], proc.stderr
    assert not missing.exists()

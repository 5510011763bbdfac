"""Fault cases of paths, stores and permissions (nothing outside the store is ever read) and of
selections and chunk indices out of range."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import METADATA, Built, case
from .stores import (
    BAD,
    BAD_REGION,
    DATA,
    DTYPE,
    SHAPE,
    key_file,
    stored_key,
    write_json,
    write_plain,
)

# paths, stores and permissions

SECRET = 0xBEEF


def _secret_and_store(root: str) -> str:
    """root/secret: a valid array full of 0xBEEF (a valid v2 chunk "0" too, for chunk keys
    that escape); root/store: the store (a group with array "a"). Returns the store root."""
    store = os.path.join(root, "store")
    secret = np.full(SHAPE, SECRET, dtype=DTYPE)
    write_plain(root, "none", path="secret", data=secret)
    with open(os.path.join(root, "secret", "0"), "wb") as f:
        f.write(secret[:4, :4].tobytes())
    write_plain(store, "zstd")
    return store


def _path_case(
    name: str, array_path: Callable[[str], str], what: str, expect: type = ValueError
) -> None:
    def build(root: str) -> Built:
        store = _secret_and_store(root)
        return Built(store, array_path(root), Ellipsis, good=None, original=None)

    case(name, "paths", expect, what, stage="open", tags=("secret",))(build)


# A path with `.`, `..` or `\` in it is refused as such; an absolute one is a name under the store.
_path_case("path-dotdot", lambda r: "../secret", "array path '../secret'")
_path_case("path-dotdot-nested", lambda r: "a/../../secret", "array path 'a/../../secret'")
_path_case("path-dot-dotdot", lambda r: "./../secret", "array path './../secret'")
_path_case(
    "path-absolute",
    lambda r: os.path.join(r, "secret"),
    "absolute array path",
    expect=FileNotFoundError,
)
_path_case("path-backslash", lambda r: "..\\secret", "array path '..\\\\secret'")
_path_case("path-trailing-dotdot", lambda r: "a/..", "array path 'a/..' (the store root)")


@case(
    "meta-v2-dimension-separator-escape",
    "paths",
    METADATA,
    "v2 root array whose dimension_separator '/../../secret/' makes chunk (0, 0) the key "
    "'0/../../secret/0' (outside the store)",
    stage="open",
    tags=("secret",),
)
def _separator_escape(root: str) -> Built:
    store = _secret_and_store(root)
    shutil.rmtree(store)
    write_plain(store, "none", path="", data=DATA, zarr_format=2)
    file = os.path.join(store, ".zarray")
    with open(file) as f:
        doc = json.load(f)
    doc["dimension_separator"] = "/../../secret/"
    write_json(file, doc)
    os.makedirs(os.path.join(store, "0"))  # so that the OS resolves "0/.." too
    assert os.path.exists(os.path.join(store, "0", "..", "..", "secret", "0"))
    return Built(store, "", (slice(0, 4), slice(0, 4)), good=None)


@case("store-missing", "paths", FileNotFoundError, "store directory does not exist",
      stage="open")  # fmt: skip
def _missing_store(root: str) -> Built:
    return Built(os.path.join(root, "no", "such", "store"), "a", Ellipsis, good=None)


@case("array-missing", "paths", FileNotFoundError, "no array at the path", stage="open")
def _missing_array(root: str) -> Built:
    write_plain(root, "zstd")
    return Built(root, "nope", Ellipsis, good=None)


@case("store-is-a-file", "paths", FileNotFoundError, "store path is a regular file",
      stage="open")  # fmt: skip
def _store_file(root: str) -> Built:
    os.makedirs(root, exist_ok=True)
    file = os.path.join(root, "file")
    with open(file, "wb") as f:
        f.write(b"not a store")
    return Built(file, "a", Ellipsis, good=None)


@case("chunk-is-a-directory", "paths", OSError,
      "the chunk's key is a directory (with a file inside)")  # fmt: skip
def _chunk_dir(root: str) -> Built:
    z = write_plain(root, "zstd")
    key = stored_key("a", z, BAD)
    file = key_file(root, key)
    os.remove(file)
    os.makedirs(file)
    with open(os.path.join(file, "x"), "wb") as f:
        f.write(b"x")
    return Built(root, "a", BAD_REGION, key=key)


def _permission_case(name: str, which: str, what: str, stage: str) -> None:
    def build(root: str) -> Built:
        z = write_plain(root, "zstd")
        key = stored_key("a", z, BAD)
        target = key_file(root, key) if which == "chunk" else os.path.join(root, "a", "zarr.json")
        os.chmod(target, 0)
        if which == "chunk":
            return Built(root, "a", BAD_REGION, key=key)
        return Built(root, "a", BAD_REGION, good=None)

    case(name, "paths", PermissionError, what, stage=stage, tags=("unprivileged",))(build)


_permission_case("chunk-permission-denied", "chunk", "chunk file chmod 000", "read")
_permission_case("metadata-permission-denied", "meta", "zarr.json chmod 000", "open")


# ---------------------------------------------------------------------------------------------
# selections


def _selection_case(name: str, sel: Any, expect: Any, what: str) -> None:
    def build(root: str) -> Built:
        write_plain(root, "zstd")
        try:  # NumPy's answer, to tell a supported selection from a wrong one
            original = np.asarray(DATA[sel])
        except Exception:
            original = None
        return Built(root, "a", sel, original=original)

    case(name, "selections", expect, what)(build)


_selection_case("sel-int-out-of-range", (8, 0), IndexError, "a[8, 0] (axis 0 has 8)")
_selection_case("sel-negative-out-of-range", (-9,), IndexError, "a[-9]")
_selection_case("sel-too-many-indices", (0, 0, 0), IndexError, "a[0, 0, 0] on a 2-d array")
_selection_case("sel-step-0", (slice(None, None, 0),), ValueError, "a[::0] (NumPy: ValueError)")
_selection_case("sel-float", (1.5,), IndexError, "a[1.5] (NumPy: IndexError)")
_selection_case("sel-str", ("a",), IndexError, "a['a'] (NumPy: IndexError)")
_selection_case("sel-array-out-of-range", ([0, 8],), IndexError, "a[[0, 8]]")
_selection_case("sel-mask-wrong-length", (np.ones(3, bool),), IndexError, "a[mask of 3]")
_selection_case("sel-two-ellipses", (Ellipsis, Ellipsis), IndexError, "a[..., ...]")
_selection_case("sel-huge-int", (1 << 70,), IndexError, "a[2**70]")

"""Fault cases of metadata written by hand: invalid JSON, missing and wrong fields, unknown
codecs and data types, absurd shapes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import METADATA, UNSUPPORTED, Built, case
from .stores import DTYPE, FILL, ZSTD_V3, v3_metadata, write_json, write_plain

# metadata written by hand


def _meta_case(
    name: str,
    what: str,
    expect: Any,
    edit: Callable[[dict], Any],
    *,
    v2: bool = False,
    bad: Any = Ellipsis,
    stage: str = "open",
) -> None:
    """A valid array written by zarr-python whose metadata document is then replaced by
    `edit(document)` (a dict to dump, or a string written as is)."""

    def build(root: str) -> Built:
        write_plain(root, "zlib-v2" if v2 else "zstd")
        file = os.path.join(root, "a", ".zarray" if v2 else "zarr.json")
        with open(file) as f:
            doc = json.load(f)
        new = edit(doc)
        write_json(file, doc if new is None else new)
        return Built(root, "a", bad, good=None, original=None)

    case(name, "metadata", expect, what, stage=stage)(build)


def _set(**kv: Any) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        for k, v in kv.items():
            if v is _DELETE:
                del d[k]
            else:
                d[k] = v

    return edit


_DELETE = object()


def _chunk_shape(shape: list[int]) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        d["chunk_grid"]["configuration"]["chunk_shape"] = shape

    return edit


def _codec(name: str) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        d["codecs"].append({"name": name, "configuration": {}})

    return edit


_meta_case("meta-invalid-json", "zarr.json is not JSON", METADATA, lambda d: "{not json")
_meta_case("meta-empty-file", "zarr.json is empty", METADATA, lambda d: "")
_meta_case("meta-json-array", "zarr.json is a JSON list", METADATA, lambda d: "[1, 2]")
for _field in ("shape", "data_type", "chunk_grid", "codecs", "fill_value", "zarr_format"):
    _meta_case(
        f"meta-missing-{_field}",
        f"zarr.json without {_field!r}",
        METADATA,
        _set(**{_field: _DELETE}),
    )
_meta_case("meta-unknown-codec", "codecs list names an unknown codec", UNSUPPORTED,
           _codec("no_such_codec"))  # fmt: skip
_meta_case("meta-unknown-dtype", "data_type 'no_such_type'", UNSUPPORTED,
           _set(data_type="no_such_type"))  # fmt: skip
_meta_case("meta-negative-shape", "shape [-8, 8]", METADATA, _set(shape=[-8, 8]))
_meta_case("meta-shape-2^64", "shape [2^64, 8] (not a u64)", METADATA, _set(shape=[1 << 64, 8]))
_meta_case("meta-shape-float", "shape [8.5, 8]", METADATA, _set(shape=[8.5, 8]))
_meta_case("meta-zero-chunk", "chunk_shape [0, 4]", METADATA, _chunk_shape([0, 4]))
_meta_case("meta-negative-chunk", "chunk_shape [-4, 4]", METADATA, _chunk_shape([-4, 4]))
_meta_case("meta-rank-mismatch", "chunk_shape [4] for a 2-d shape", METADATA, _chunk_shape([4]))
_meta_case("meta-fill-value-type", "fill_value 'abc' for uint16", METADATA,
           _set(fill_value="abc"))  # fmt: skip
_meta_case("meta-fill-value-range", "fill_value 70000 for uint16", METADATA,
           _set(fill_value=70000))  # fmt: skip
_meta_case("meta-zarr-format-4", "zarr_format 4", METADATA, _set(zarr_format=4))
_meta_case(
    "meta-chunk-key-separator",
    "chunk_key_encoding separator '/../../'",
    METADATA,
    lambda d: d["chunk_key_encoding"]["configuration"].update(separator="/../../"),
)
_meta_case("meta-v2-invalid-json", ".zarray is not JSON", METADATA, lambda d: "{not json", v2=True)
_meta_case(
    "meta-v2-unknown-compressor",
    ".zarray compressor id 'no_such_codec'",
    UNSUPPORTED,
    _set(compressor={"id": "no_such_codec"}),
    v2=True,
)
_meta_case(
    "meta-v2-object-dtype",
    ".zarray dtype '|O' with numcodecs' JSON object codec (valid v2, Python objects)",
    UNSUPPORTED,
    _set(dtype="|O", fill_value=None, filters=[{"id": "json2", "encoding": "utf-8"}]),
    v2=True,
)
_meta_case("meta-v2-missing-chunks", ".zarray without 'chunks'", METADATA,
           _set(chunks=_DELETE), v2=True)  # fmt: skip
_meta_case("meta-v2-negative-shape", ".zarray shape [-8, 8]", METADATA,
           _set(shape=[-8, 8]), v2=True)  # fmt: skip
_meta_case(
    "meta-v2-dimension-separator",
    ".zarray dimension_separator '/../../secret/' (chunk keys escaping the store)",
    METADATA,
    _set(dimension_separator="/../../secret/"),
    v2=True,
)


@case(
    "meta-absurd-shape",
    "metadata",
    METADATA,
    "shape [2^62, 2^62] in chunks [2^31, 2^31], no chunks written: read [0:2, 0:2]",
    stage="open",
)
def _absurd_shape(root: str) -> Built:
    meta = v3_metadata((1 << 62, 1 << 62), (1 << 31, 1 << 31), "uint16", [ZSTD_V3], FILL)
    write_json(os.path.join(root, "a", "zarr.json"), meta)
    return Built(
        root, "a", (slice(0, 2), slice(0, 2)), good=None, expected=np.full((2, 2), FILL, DTYPE)
    )

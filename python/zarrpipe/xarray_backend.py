"""xarray's `open_dataset(..., engine="zarrpipe")`: one Zarr group as a lazy Dataset whose reads
and selections are done by zarrpipe, and whose CF decoding is xarray's own.

Why: `xr.open_zarr` plans every read through zarr-python, even with zarrpipe's codec pipeline
configured. Here xarray hands its basic, outer and vectorized selections straight to
`zarrpipe.Array` (`arr[key]`, `arr.oindex[key]`, `arr.vindex[key]`), and the metadata comes
from `zarrpipe.Store.open_group`, so zarr-python is not used at all. The variables xarray
decodes are the ones its own zarr backend builds (xarray's `backends/zarr.py`,
`ZarrStore.open_store_variable`), so that both engines give identical Datasets;
docs/guide/xarray.md says what is done where.
"""

from __future__ import annotations

import asyncio
import base64
import os
import struct
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from xarray.backends.common import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing
from xarray.core.utils import FrozenDict

import zarrpipe

# Where xarray keeps a Zarr v2 array's dimension names (v3 has `dimension_names`).
DIMENSION_KEY = "_ARRAY_DIMENSIONS"


class ZarrpipeBackendArray(BackendArray):
    """One zarrpipe array behind xarray's lazy indexing: each selection xarray makes of it is
    read by zarrpipe, only the elements selected. Pickles (for dask's worker processes) as
    its zarrpipe array does."""

    __slots__ = ("_array", "dtype", "shape")

    def __init__(self, array: zarrpipe.Array) -> None:
        self._array = array
        self.shape = tuple(array.shape)
        self.dtype = array.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        """Reads a selection: a basic one with `arr[key]`, an outer one with `arr.oindex[key]`,
        a vectorized one with `arr.vindex[key]`.

        Args:
            key: xarray's explicit indexer.

        Returns:
            The selected elements, in a fresh NumPy array of the array's dtype.
        """
        if isinstance(key, indexing.BasicIndexer):
            read = self._basic
        elif isinstance(key, indexing.OuterIndexer):
            read = self._outer
        elif isinstance(key, indexing.VectorizedIndexer):
            read = self._vectorized
        else:
            raise TypeError(f"unexpected indexer {type(key).__name__} for a zarrpipe array")
        value = indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.VECTORIZED, read
        )
        return self._as_array(value)

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        """`__getitem__` on a worker thread, for `Dataset.load_async`: zarrpipe releases the
        GIL while it reads, so the variables of a dataset are read concurrently.

        Args:
            key: xarray's explicit indexer.

        Returns:
            What `__getitem__` returns.
        """
        return await asyncio.to_thread(self.__getitem__, key)

    def _basic(self, key: tuple[Any, ...]) -> Any:
        return self._array[key]

    def _outer(self, key: tuple[Any, ...]) -> Any:
        return self._array.oindex[key]

    def _vectorized(self, key: tuple[Any, ...]) -> Any:
        return self._array.vindex[key]

    def _as_array(self, value: Any) -> np.ndarray:
        """A 0-d array reads as a NumPy scalar (a `str` for StringDType); xarray's lazy arrays
        expect an ndarray of the array's dtype."""
        if isinstance(value, np.ndarray):
            return value
        return np.asarray(value, dtype=self.dtype)


def _decode_fill_attribute(value: Any, dtype: np.dtype) -> Any:
    """A v3 array's `_FillValue` attribute as xarray writes it: floats as the base64 of a
    little-endian double (so that NaN and infinities survive JSON), complex numbers as two of
    those, byte strings as base64; other values as they are."""
    if dtype.kind == "f" and isinstance(value, str | bytes):
        return struct.unpack("<d", base64.standard_b64decode(value))[0]
    if dtype.kind == "c" and isinstance(value, list | tuple) and len(value) == 2:
        real, imag = (struct.unpack("<d", base64.standard_b64decode(v))[0] for v in value)
        return complex(real, imag)
    if dtype.kind == "S" and isinstance(value, str):
        return base64.standard_b64decode(value)
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu" and isinstance(value, int | float):
        return int(value)
    return value


def _is_netcdf_attribute(name: str) -> bool:
    """NCZarr's own bookkeeping (`_nczarr_group`, `_NCProperties`...), which xarray hides."""
    return name.lower().startswith("_nc")


def _dimensions_and_attributes(name: str, array: zarrpipe.Array) -> tuple[tuple, dict]:
    attributes = dict(array.attrs)
    if array.zarr_format == 3:
        dimensions = tuple(array.dimension_names or ())
        if len(dimensions) != len(array.shape):
            raise KeyError(
                f"Zarr array {name!r} is missing the `dimension_names` metadata which xarray "
                "needs for its dimensions; read it with zarrpipe.Store.open_array instead"
            )
        return dimensions, attributes
    if DIMENSION_KEY not in attributes:
        raise KeyError(
            f"Zarr array {name!r} is missing the attribute `{DIMENSION_KEY}`, which xarray "
            'needs for its dimensions (engine="zarr" reads NCZarr\'s dimension metadata too)'
        )
    dimensions = tuple(attributes.pop(DIMENSION_KEY))
    return dimensions, {k: v for k, v in attributes.items() if not _is_netcdf_attribute(k)}


def _open_variable(name: str, array: zarrpipe.Array, fill_is_missing: bool) -> xr.Variable:
    """The variable, still CF-encoded, that xarray's zarr backend gives for the same array: the
    same dimensions, attributes and `_FillValue`, and `chunks`, `preferred_chunks`, `shards`
    (and, for v3, `fill_value`) in its encoding."""
    dimensions, attributes = _dimensions_and_attributes(name, array)
    try:
        chunks = tuple(array.chunks)
        encoding: dict[str, Any] = {
            "chunks": chunks,
            "preferred_chunks": dict(zip(dimensions, chunks, strict=True)),
            "shards": array.shards,
        }
    except NotImplementedError:
        # A rectilinear grid: dask takes each axis' chunk sizes; writing picks new chunks.
        sizes = array.read_chunk_sizes
        encoding = {"preferred_chunks": dict(zip(dimensions, sizes, strict=True))}
    if array.dtype.kind == "T":  # keep NumPy's StringDType through decoding
        encoding["dtype"] = array.dtype
    fill_value = array.fill_value
    if fill_is_missing:
        # v2 has no `_FillValue` attribute of its own: the array's fill value is the
        # missing value to mask. None is v2's `"fill_value": null`, nothing to mask.
        if fill_value is not None:
            attributes["_FillValue"] = fill_value
    else:
        # v3 keeps the two apart: the fill value of unwritten chunks goes to the encoding
        # (for writing back), the `_FillValue` attribute is the CF missing value.
        if array.zarr_format == 3:
            encoding["fill_value"] = fill_value
        if "_FillValue" in attributes:
            attributes["_FillValue"] = _decode_fill_attribute(attributes["_FillValue"], array.dtype)
    data = indexing.LazilyIndexedArray(ZarrpipeBackendArray(array))
    return xr.Variable(dimensions, data, attributes, encoding)


class _GroupStore(AbstractDataStore):
    """One zarrpipe.Group as xarray's undecoded variables and attributes."""

    __slots__ = ("_group",)

    def __init__(self, group: zarrpipe.Group) -> None:
        self._group = group

    def get_variables(self) -> Mapping[str, xr.Variable]:
        # As xarray does by default: a v2 group's fill values are missing values, a v3's not.
        fill_is_missing = self._group.zarr_format == 2
        return FrozenDict(
            (name, _open_variable(name, array, fill_is_missing))
            for name, array in self._group.arrays()
        )

    def get_attrs(self) -> dict[str, Any]:
        return {k: v for k, v in dict(self._group.attrs).items() if not _is_netcdf_attribute(k)}


def _store_options(options: Mapping[str, Any] | None) -> dict[str, str] | None:
    """object_store takes every setting as text; `True` is `"true"`."""
    if options is None:
        return None
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


def _open_store(
    filename_or_obj: str | os.PathLike[str] | zarrpipe.Store,
    options: Mapping[str, Any] | None,
    cache_bytes: int,
) -> zarrpipe.Store:
    """A read-only zarrpipe.Store for a path or URL (a Store given is used as it is)."""
    if isinstance(filename_or_obj, zarrpipe.Store):
        return filename_or_obj
    location = os.fspath(filename_or_obj)
    if "://" not in location:
        location = os.path.expanduser(location)
    return zarrpipe.Store(
        location, mode="r", options=_store_options(options), cache_bytes=cache_bytes
    )


def _open_group(store: zarrpipe.Store, path: str, consolidated: bool | None) -> zarrpipe.Group:
    """The group at `path`, found as xarray finds it: through the root, whose consolidated
    metadata (when it has some, or `consolidated` requires it) covers the whole hierarchy,
    where a subgroup's own metadata has none; so opening a subgroup lists nothing."""
    if consolidated is False or not path:
        return store.open_group(path, use_consolidated=consolidated)
    member = store.open_group("", use_consolidated=consolidated).get(path)
    if not isinstance(member, zarrpipe.Group):
        raise FileNotFoundError(f'no group at "{path}" in {store!r}')
    return member


class ZarrpipeBackendEntrypoint(BackendEntrypoint):
    """`xr.open_dataset(path_or_url, engine="zarrpipe")`: a Zarr v2 or v3 group, local or in an
    object store, opened lazily; zarrpipe reads and selects, xarray decodes (CF conventions).
    See docs/guide/xarray.md."""

    description = "Open Zarr v2/v3 groups (.zarr) with zarrpipe's Rust reader"
    url = "https://github.com/zarrpipe/zarrpipe/blob/main/docs/guide/xarray.md"
    # xarray reads these off the signature for an engine found by its entry point, but not
    # for a class given as `engine=`, and `decode_cf=False` needs them.
    open_dataset_parameters: ClassVar[tuple[str, ...]] = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters",
        "decode_coords", "drop_variables", "use_cftime", "decode_timedelta", "group",
        "consolidated", "storage_options", "options", "cache_bytes",
    )  # fmt: skip

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Whether `open_dataset` without an engine should try zarrpipe.

        Args:
            filename_or_obj: What was given to `xr.open_dataset`.

        Returns:
            True for a path or URL ending in `.zarr` (or `.zarr/`) and for a zarrpipe.Store.
        """
        if isinstance(filename_or_obj, zarrpipe.Store):
            return True
        if not isinstance(filename_or_obj, str | os.PathLike):
            return False
        return os.fspath(filename_or_obj).rstrip("/").endswith(".zarr")

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str] | zarrpipe.Store,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool | str = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        cache_bytes: int = 0,
    ) -> xr.Dataset:
        """Opens a group of a Zarr store as a Dataset; called by `xr.open_dataset`, which
        takes all these arguments and `chunks`.

        Args:
            filename_or_obj: A local path, a `file://`, `s3://`, `gs://`, `az://` or
                `http(s)://` URL, or a zarrpipe.Store.
            mask_and_scale: As `xr.open_dataset`'s (CF decoding is xarray's).
            decode_times: As `xr.open_dataset`'s.
            concat_characters: As `xr.open_dataset`'s.
            decode_coords: As `xr.open_dataset`'s.
            drop_variables: As `xr.open_dataset`'s.
            use_cftime: As `xr.open_dataset`'s.
            decode_timedelta: As `xr.open_dataset`'s.
            group: The group's path in the store (None: the root).
            consolidated: None uses the consolidated metadata when the store has some,
                True requires it, False lists the group's members from the store.
            storage_options: The object-store settings `zarrpipe.Store` takes as `options`
                (`aws_endpoint`, `aws_region`, `allow_http`, ...); values are turned into
                text (`True` into `"true"`).
            options: Another name for `storage_options`.
            cache_bytes: Above 0, an LRU cache of decoded chunks of at most this many bytes,
                for this dataset's reads.

        Returns:
            The Dataset, its variables read only when their values are needed.

        Raises:
            FileNotFoundError: No store at the path, or no group at `group`.
            KeyError: An array without dimension names.
            ValueError: Both `storage_options` and `options`.
        """
        if storage_options is not None and options is not None:
            raise ValueError("give the object-store settings as `options` or `storage_options`")
        store = _open_store(filename_or_obj, options or storage_options, cache_bytes)
        zarr_group = _open_group(store, (group or "").strip("/"), consolidated)
        return StoreBackendEntrypoint().open_dataset(
            _GroupStore(zarr_group),
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

"""`read_zarr` and `ZarrDatasource`: a `ray.data.Dataset` of Zarr arrays, one row per
position along axis 0, read by tasks cut on the stored objects' boundaries."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import ray.data
from ray.data.block import Block, BlockAccessor, BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from zarrpipe._zarrpipe import Array, Store
from zarrpipe._zarrpipe import open as _open_node
from zarrpipe.ray._common import Location, checked_count, join_path, open_store

if TYPE_CHECKING:
    from ray.data.context import DataContext

# Rows per block when a row is small: Ray's default target block size (128 MiB), used when
# the DataContext sets none.
_DEFAULT_BLOCK_BYTES = 128 * 2**20


def _stored_rows(array: Array) -> int:
    """The length along axis 0 of one stored object (a shard, else a chunk; the longest
    of a rectilinear grid's)."""
    return max(array.write_chunk_sizes[0], default=1)


def _common_cuts(arrays: Sequence[Array], length: int) -> list[int] | None:
    """Where every array's stored objects (shards, else chunks) end along axis 0, when
    some array has objects of different lengths there (a rectilinear grid); None when
    all are regular (their cuts are the multiples of the lengths' lcm)."""
    sizes = [a.write_chunk_sizes[0] for a in arrays]
    if all(len(set(s[:-1])) <= 1 and (len(s) < 2 or s[-1] <= s[0]) for s in sizes):
        return None
    ends = [set(itertools.accumulate(s)) for s in sizes]
    return sorted(c for c in set.intersection(*ends) | {length} if 0 < c <= length)


def _blocks_on_cuts(cuts: list[int], rows: int) -> list[tuple[int, int]]:
    """Consecutive blocks ending on `cuts`, each of at most `rows` rows where one cut to
    the next allows (else one stretch between two cuts)."""
    blocks: list[tuple[int, int]] = []
    start = 0
    i = 0
    while i < len(cuts):
        end = cuts[i]
        while i + 1 < len(cuts) and cuts[i + 1] - start <= rows:
            i += 1
            end = cuts[i]
        blocks.append((start, end))
        start = end
        i += 1
    return blocks


def _stored_kind(array: Array) -> str:
    """What the array stores under each key: "shards" or "chunks"."""
    try:
        return "shards" if array.shards is not None else "chunks"
    except NotImplementedError:  # shards of different sizes
        return "shards"


def _describe(columns: Sequence[tuple[str, Array]]) -> str:
    return ", ".join(f"{name!r}: {a.shape[0] if a.ndim else 'no axis'}" for name, a in columns)


def _select(
    store: Store, path: str, arrays: str | Sequence[str] | Mapping[str, str] | None
) -> list[tuple[str, Array]]:
    """(column, array) pairs that `read_zarr`'s `path` and `arrays` name."""
    node = _open_node(store, mode="r", path=path)
    if arrays is None:
        if isinstance(node, Array):
            name = path.strip("/").rsplit("/", 1)[-1] or "data"
            if node.ndim == 0:
                raise ValueError(f"array {node.path!r} has no axis 0 to make rows of")
            return [(name, node)]
        members = [(name, a) for name, a in node.arrays() if a.ndim > 0]
        if not members:
            raise ValueError(f"the group at {path!r} holds no array with an axis 0")
        length = members[0][1].shape[0]
        return [(name, a) for name, a in members if a.shape[0] == length]
    if isinstance(node, Array):
        raise ValueError(
            f"{path!r} is an array: `arrays` names members of a group (give the group's path)"
        )
    if isinstance(arrays, str):
        named = {arrays: arrays}
    elif isinstance(arrays, Mapping):
        named = dict(arrays)
    else:
        named = {name: name for name in arrays}
    if not named:
        raise ValueError("arrays names no array")
    chosen = [(c, store.open_array(join_path(path, member))) for c, member in named.items()]
    flat = [(c, a) for c, a in chosen if a.ndim == 0]
    if flat:
        raise ValueError(f"arrays without an axis 0 cannot make rows: {_describe(flat)}")
    if len({a.shape[0] for _, a in chosen}) > 1:
        raise ValueError(f"arrays differ in length along axis 0 ({_describe(chosen)})")
    return chosen


def _ray_column(values: np.ndarray) -> np.ndarray:
    """NumPy's StringDType as Python `str` objects, which Ray takes (it would store an N-d
    StringDType array's raw 16-byte cells, which are pointers)."""
    return values.astype(object) if values.dtype.kind == "T" else values


@dataclass(frozen=True)
class _Column:
    """One array of a read: its column, its path, and its shape as planned. Tasks open the
    array by path (its metadata is read again: `Array.metadata` does not yet round-trip
    every data type, datetimes and records among them) and refuse a changed shape."""

    name: str
    path: str
    shape: tuple[int, ...]

    def open(self, store: Store) -> Array:
        array = store.open_array(self.path)
        if tuple(array.shape) != self.shape:
            raise ValueError(
                f"array {self.path!r} is now of shape {tuple(array.shape)}, not "
                f"{self.shape} as when the dataset was planned: read it again"
            )
        return array


@dataclass(frozen=True)
class _ReadRows:
    """One read task: `blocks`, each a `(start, stop)` range of rows on stored-object
    boundaries, read with one `arr[start:stop]` per array; yielded in pieces of at most
    `max_block_bytes` (views of that read, not copies)."""

    store: Store
    columns: tuple[_Column, ...]
    blocks: tuple[tuple[int, int], ...]
    row_column: str | None
    row_bytes: int
    max_block_bytes: int | None
    limit: int | None

    def __call__(self) -> Iterator[Block]:
        arrays = [(c.name, c.open(self.store)) for c in self.columns]
        left = self.limit
        for start, stop in self.blocks:
            if left is not None:
                if left <= 0:
                    return
                stop = min(stop, start + left)
                left -= stop - start
            data = {name: _ray_column(np.asarray(a[start:stop])) for name, a in arrays}
            if self.row_column is not None:
                data[self.row_column] = np.arange(start, stop, dtype=np.int64)
            step = stop - start
            if self.max_block_bytes:
                step = max(1, min(step, self.max_block_bytes // max(self.row_bytes, 1)))
            for a in range(0, stop - start, step):
                yield BlockAccessor.batch_to_block({k: v[a : a + step] for k, v in data.items()})


class ZarrDatasource(Datasource):
    """A `ray.data.Datasource` of Zarr arrays of one length along axis 0, for
    `ray.data.read_datasource` (`read_zarr` makes one and reads it).

    Each array is a column, each position along axis 0 a row holding the array's (N-1)-d
    slice there (a tensor column for N > 1, as `ray.data.from_numpy` makes). Strings become
    Ray's strings; types Arrow lacks (complex, bfloat16, records, raw bytes) take Ray's own
    fallback, pickled Python objects. Read tasks cover whole blocks of `rows_per_block`
    rows, on the boundaries of every array's stored objects (shards, else chunks) along
    axis 0: a task reads each object it needs entirely, and no other task reads it.
    """

    def __init__(
        self,
        path_or_url: Location,
        arrays: str | Sequence[str] | Mapping[str, str] | None = None,
        *,
        path: str = "",
        options: Mapping[str, str] | None = None,
        rows_per_block: int | None = None,
        row_column: str | None = None,
    ) -> None:
        """Opens the arrays and checks them; nothing is read until the dataset runs.

        Args:
            path_or_url: A local directory, an object store URL (`s3://bucket/prefix`,
                `gs://`, `az://`, `http(s)://`), or a `zarrpipe.Store` (opened with mode
                `"r"`, `"r+"` or `"a"`: tasks unpickle it, which opens it again).
            arrays: The arrays to read, as paths relative to `path`: a sequence (each
                column named by its path), a mapping from column name to path, or one
                path. None: the array at `path` if it is one (its column named by the last
                part of `path`, or `"data"` for an array at the store's root), else every
                array directly in the group at `path` as long along axis 0 as its first
                array (by name), each a column of its name.
            path: The group (or array) in the store.
            options: Object-store settings, as `zarrpipe.Store` takes them (they travel
                with the tasks, credentials included); None for a local directory or for
                credentials from the environment.
            rows_per_block: Rows each read covers: a multiple of every array's stored
                length along axis 0 (shards, else chunks), or at least the arrays' length.
                None: the smallest such multiple whose rows reach Ray's target block size
                (`DataContext.target_max_block_size`), at least one shard (or chunk).
            row_column: When given, a column of that name holds each row's position along
                axis 0 (int64), the index `ZarrDatasink` places rows by.

        Raises:
            FileNotFoundError: Nothing at `path`, or no array at a path `arrays` names.
            ValueError: Arrays of different lengths along axis 0 (each named with its
                length); an array without an axis; `rows_per_block` off the stored
                objects' boundaries; a Store opened with mode `"w"` or `"w-"`.
            TypeError: `options` given with a Store.
        """
        super().__init__()
        self._store = open_store(path_or_url, options, "r")
        chosen = _select(self._store, path, arrays)
        self._columns = tuple(_Column(name, a.path, tuple(a.shape)) for name, a in chosen)
        self._length = chosen[0][1].shape[0]
        units = [_stored_rows(a) for _, a in chosen]
        self._unit = math.lcm(*units)
        self._cuts = _common_cuts([a for _, a in chosen], self._length)
        self._row_bytes = sum(a.nbytes // a.shape[0] if a.shape[0] else 0 for _, a in chosen)
        if row_column is not None:
            if row_column in {c.name for c in self._columns}:
                raise ValueError(f"row_column {row_column!r} is also the column of an array")
            self._row_bytes += 8
        self._row_column = row_column
        self._rows_per_block = None
        if rows_per_block is not None:
            n = checked_count("rows_per_block", rows_per_block, 1)
            if n % self._unit and n < self._length:
                stored = ", ".join(
                    f"{name!r}: {_stored_kind(a)} of {u}"
                    for (name, a), u in zip(chosen, units, strict=True)
                )
                raise ValueError(
                    f"rows_per_block={n} is not a multiple of {self._unit}, the stored "
                    f"objects' length along axis 0 ({stored}): a shard or chunk would be "
                    f"read by two tasks"
                )
            self._rows_per_block = n

    def rows_per_block(self, data_context: DataContext | None = None) -> int:
        """The rows each read covers.

        Args:
            data_context: The Ray Data context whose `target_max_block_size` sizes the
                default; None for the current one.

        Returns:
            `rows_per_block` as given, else the smallest multiple of the stored objects'
            length along axis 0 whose rows reach the target block size.
        """
        if self._rows_per_block is not None:
            return self._rows_per_block
        target = _target_block_bytes(data_context) or _DEFAULT_BLOCK_BYTES
        unit_bytes = self._unit * max(self._row_bytes, 1)
        return self._unit * max(1, target // unit_bytes)

    def estimate_inmemory_data_size(self) -> int | None:
        """The size of every row, decoded.

        Returns:
            Bytes, from the arrays' `nbytes`.
        """
        return self._length * self._row_bytes

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: DataContext | None = None,
    ) -> list[ReadTask]:
        """Cuts the rows into blocks on the stored objects' boundaries and the blocks into
        at most `parallelism` tasks of consecutive blocks.

        Args:
            parallelism: The number of tasks Ray asks for (fewer when there are fewer
                blocks).
            per_task_row_limit: Rows each task reads at most (Ray's limit pushdown).
            data_context: The Ray Data context (its target block size bounds the blocks a
                task yields).

        Returns:
            Read tasks in row order, each reading its blocks in order; `task.read_fn.blocks`
            holds its `(start, stop)` row ranges.
        """
        per_block = self.rows_per_block(data_context)
        if self._cuts is not None and self._rows_per_block is None:
            # Stored objects of different lengths: blocks end where every array's do.
            blocks = _blocks_on_cuts(self._cuts, per_block)
        else:
            blocks = [
                (a, min(a + per_block, self._length)) for a in range(0, self._length, per_block)
            ]
        if not blocks:
            return []
        count = max(1, min(int(parallelism), len(blocks)))
        cuts = np.linspace(0, len(blocks), count + 1).round().astype(int)
        tasks = []
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
            mine = tuple(blocks[lo:hi])
            rows = mine[-1][1] - mine[0][0]
            read = _ReadRows(
                store=self._store,
                columns=self._columns,
                blocks=mine,
                row_column=self._row_column,
                row_bytes=self._row_bytes,
                max_block_bytes=_target_block_bytes(data_context),
                limit=per_task_row_limit,
            )
            meta = BlockMetadata(
                num_rows=rows if per_task_row_limit is None else min(rows, per_task_row_limit),
                size_bytes=int(rows * self._row_bytes),
                input_files=None,
                exec_stats=None,
            )
            tasks.append(ReadTask(read, meta, per_task_row_limit=per_task_row_limit))
        return tasks


def _target_block_bytes(data_context: DataContext | None) -> int | None:
    if data_context is None:
        data_context = ray.data.DataContext.get_current()
    target = getattr(data_context, "target_max_block_size", None)
    return int(target) if target else None


def read_zarr(
    path_or_url: Location,
    arrays: str | Sequence[str] | Mapping[str, str] | None = None,
    *,
    path: str = "",
    options: Mapping[str, str] | None = None,
    rows_per_block: int | None = None,
    row_column: str | None = None,
    **read_args: Any,
) -> ray.data.Dataset:
    """A Ray dataset of Zarr arrays: a column per array, a row per position along axis 0.

    Args:
        path_or_url: As for `ZarrDatasource`, which reads the dataset.
        arrays: As for `ZarrDatasource`.
        path: As for `ZarrDatasource`.
        options: As for `ZarrDatasource`.
        rows_per_block: As for `ZarrDatasource`.
        row_column: As for `ZarrDatasource`.
        **read_args: `ray.data.read_datasource`'s arguments (`override_num_blocks`,
            `concurrency`, `ray_remote_args`, ...).

    Returns:
        A lazy `ray.data.Dataset`: nothing is read until it runs.

    Raises:
        FileNotFoundError: See `ZarrDatasource`, which raises the same exceptions.
    """
    source = ZarrDatasource(
        path_or_url, arrays, path=path, options=options, rows_per_block=rows_per_block,
        row_column=row_column,
    )  # fmt: skip
    return ray.data.read_datasource(source, **read_args)


# -- writing ------------------------------------------------------------------------------

"""`ZarrDatasink`: a dataset's rows written into existing Zarr arrays, each at the position
its row column holds."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.data.block import Block, BlockAccessor
from ray.data.datasource import Datasink

from zarrpipe._zarrpipe import Array
from zarrpipe._zarrpipe import open as _open_node
from zarrpipe.ray._common import Location, checked_count, join_path, open_store

if TYPE_CHECKING:
    import pyarrow as pa


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """`(i, j)` spans of sorted `rows` that are consecutive positions, one apart."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    edges = [0, *breaks.tolist(), len(rows)]
    return list(itertools.pairwise(edges))


def _write_rows(array: Array, rows: np.ndarray, values: np.ndarray) -> None:
    """Writes `values[k]` at position `rows[k]` (sorted) of axis 0: each run of
    consecutive rows a chunk long or longer as a slice, the rest in one `oindex` write. A
    chunk two writes share is updated by each in turn, read, updated and stored as one
    step."""
    scattered: list[np.ndarray] = []
    for i, j in _runs(rows):
        if j - i >= max(array.read_chunk_sizes[0], default=1):
            array[int(rows[i]) : int(rows[j - 1]) + 1] = values[i:j]
        else:
            scattered.append(np.arange(i, j))
    if scattered:
        pick = np.concatenate(scattered)
        array.oindex[rows[pick]] = values[pick]


def _column_values(values: np.ndarray, array: Array, column: str) -> np.ndarray:
    """A column of a Ray batch as the array's rows: object columns of per-row arrays (Ray's
    pickled or variable-shaped tensors) are stacked; the row shape must be the array's."""
    if values.dtype == object and array.ndim > 1:
        values = np.stack([np.asarray(v) for v in values]) if len(values) else values
    if tuple(values.shape[1:]) != tuple(array.shape[1:]):
        raise ValueError(
            f"column {column!r} has rows of shape {tuple(values.shape[1:])}, array "
            f"{array.path!r} rows of shape {tuple(array.shape[1:])}"
        )
    return values


class ZarrDatasink(Datasink):
    """A `ray.data.Datasink` that writes a dataset's rows into existing Zarr arrays, for
    `Dataset.write_datasink`.

    A row goes to the position along axis 0 that its `row_column` holds, plus `start`:
    neither the dataset's order nor which task writes a block matters, so the rule holds
    under Ray's parallel, out-of-order execution (`read_zarr(..., row_column="row")` gives
    the column). A position given twice gets one of its rows, which one is not defined.
    Each block is written as slices (runs of consecutive positions a chunk long or longer)
    and one orthogonal-index write (the rest). Tasks whose rows share a chunk or shard are
    safe: zarrpipe updates a partly written chunk or shard as one step no other writer
    interleaves with.
    """

    def __init__(
        self,
        path_or_url: Location,
        arrays: Mapping[str, str] | None = None,
        *,
        path: str = "",
        options: Mapping[str, str] | None = None,
        start: int = 0,
        row_column: str = "row",
    ) -> None:
        """Checks that the target exists; the arrays must be created beforehand.

        Args:
            path_or_url: A local directory, an object store URL, or a `zarrpipe.Store`
                (opened with mode `"r+"` or `"a"`).
            arrays: A mapping from column name to array path (relative to `path`); other
                columns are not written. None: every column but `row_column` goes to the
                array of its name in the group at `path`, or, when `path` is an array, the
                dataset's one other column goes to it.
            path: The group (or array) in the store.
            options: Object-store settings, as `zarrpipe.Store` takes them.
            start: Added to every row position (to write a dataset into a part of larger
                arrays).
            row_column: The column holding each row's position along axis 0.

        Raises:
            FileNotFoundError: Nothing at `path`, or no array at a path `arrays` names.
            PermissionError: A read-only store (an http(s) URL, or a Store opened with
                mode `"r"`).
            ValueError: `start` is negative.
        """
        self._store = open_store(path_or_url, options, "r+")
        if self._store.read_only:
            raise PermissionError(f"{self._store!r} is read-only: it cannot take writes")
        node = _open_node(self._store, mode="r+", path=path)
        self._path = path
        self._single = node.path if isinstance(node, Array) else None
        self._arrays = dict(arrays) if arrays is not None else None
        if self._arrays is not None:
            for column in self._arrays:
                self._open(column)  # FileNotFoundError now, not in a task
        self._start = checked_count("start", start, 0)
        self._row_column = row_column

    def _open(self, column: str) -> Array:
        if self._arrays is not None:
            return self._store.open_array(join_path(self._path, self._arrays[column]))
        if self._single is not None:
            return self._store.open_array(self._single)
        return self._store.open_array(join_path(self._path, column))

    def _targets(self, columns: Iterable[str]) -> list[tuple[str, Array]]:
        columns = list(columns)
        if self._row_column not in columns:
            raise ValueError(
                f"the dataset has no {self._row_column!r} column of row positions (it has "
                f"{columns}): ZarrDatasink places each row by it; read with "
                f"read_zarr(..., row_column={self._row_column!r}) or add one"
            )
        data = [c for c in columns if c != self._row_column]
        if self._arrays is not None:
            data = [c for c in data if c in self._arrays]
            missing = [c for c in self._arrays if c not in columns]
            if missing:
                raise ValueError(f"the dataset has no column {missing} (it has {columns})")
        elif self._single is not None and len(data) != 1:
            raise ValueError(
                f"{self._single!r} is one array, the dataset has {len(data)} data columns "
                f"{data}: map the one to write with arrays={{column: path}}"
            )
        return [(c, self._open(c)) for c in data]

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Checks, before any task starts, that the columns match arrays.

        Args:
            schema: The dataset's Arrow schema, when Ray knows it.

        Raises:
            ValueError: No row column, or a data column with no array (see `write`).
            FileNotFoundError: No array for a column.
        """
        if schema is not None:
            self._targets(schema.names)

    def write(self, blocks: Iterable[Block], ctx: Any) -> dict[str, int]:
        """Writes the rows of one task's blocks (called by Ray in the write task).

        Args:
            blocks: The task's blocks.
            ctx: Ray's `TaskContext` (not used).

        Returns:
            `{"rows": n}`: the rows this task wrote.

        Raises:
            ValueError: No row column; a column whose rows do not have the array's shape.
            TypeError: Row positions that are not integers.
            IndexError: A position (plus `start`) outside an array.
        """
        targets: list[tuple[str, Array]] | None = None
        written = 0
        for block in blocks:
            access = BlockAccessor.for_block(block)
            if access.num_rows() == 0:
                continue
            batch = access.to_batch_format("numpy")
            if targets is None:
                targets = self._targets(batch)
            rows = np.asarray(batch[self._row_column])
            if rows.dtype.kind not in "iu":
                raise TypeError(
                    f"column {self._row_column!r} holds {rows.dtype}, not integer positions"
                )
            order = np.argsort(rows, kind="stable")
            rows = rows[order].astype(np.int64) + self._start
            for column, array in targets:
                if rows[0] < 0 or rows[-1] >= array.shape[0]:
                    bad = rows[0] if rows[0] < 0 else rows[-1]
                    raise IndexError(
                        f"row position {int(bad) - self._start} (+ start {self._start}) is "
                        f"outside array {array.path!r} of length {array.shape[0]}"
                    )
                values = _column_values(np.asarray(batch[column]), array, column)
                _write_rows(array, rows, values[order])
            written += len(rows)
        return {"rows": written}

"""What pickled `Store`s and `Array`s unpickle through: open the same store, then the same
array in it (DataLoader workers, forked or spawned, get their own handles this way)."""

from __future__ import annotations

from typing import Any

from zarrpipe._zarrpipe import Array, Store


def open_store(location: str, kwargs: dict[str, Any]) -> Store:
    """Opens a store again from the arguments it was created with."""
    return Store(location, **kwargs)


def open_array(store: Store, path: str, metadata: str | None, write_empty_chunks: bool) -> Array:
    """Opens an array again in its (unpickled) store."""
    return store.open_array(path, metadata=metadata, write_empty_chunks=write_empty_chunks)

"""In-process assertions the fault tests share: the exact exception (naming the key), the
process still healthy afterwards, the memory a hostile read may take."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .stores import CHUNK_NBYTES, MiB, write_plain

# assertions shared by the tests


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("value", result) or ("raised", exception) — whatever the exception's base class is
    (a pyo3 PanicException derives from BaseException only and must be caught to be seen)."""
    try:
        return "value", fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return "raised", e


def assert_raises(
    fn: Callable[[], Any], types: Any, *, key: str | None = None, what: str = ""
) -> BaseException:
    """`fn()` raises an Exception (not a BaseException-only panic) that is an instance of
    `types` and, when `key` is given, names it in its message."""
    kind, v = outcome(fn)
    assert kind == "raised", f"{what}: expected {types}, got a value {v!r}"
    assert isinstance(v, Exception), (
        f"{what}: {type(v).__module__}.{type(v).__qualname__} is not an Exception subclass "
        f"(a panic crossing into Python?): {v}"
    )
    assert isinstance(v, types), f"{what}: expected {types}, got {type(v).__qualname__}: {v}"
    if key is not None:
        assert key in str(v), f"{what}: the error should name {key!r}: {v}"
    return v


def might_allocate(nbytes: int) -> bool:
    """Whether this machine might actually grant (and then fill) `nbytes`: more than a quarter
    of its RAM is refused by the kernel's default overcommit heuristic, but not under
    "always overcommit" (vm.overcommit_memory = 1), where filling it would summon the OOM
    killer instead of raising MemoryError."""
    with open("/proc/meminfo") as f:
        mem_total = int(f.read().split("MemTotal:")[1].split()[0]) * 1024
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            always = f.read().strip() == "1"
    except OSError:
        always = False
    return nbytes <= 4 * mem_total or (always and nbytes < 1 << 47)


def assert_healthy(scratch: str) -> None:
    """The process still reads correctly: a fresh array, a fresh Store, several threads."""
    import zarrpipe

    os.makedirs(scratch, exist_ok=True)
    data = (np.arange(12 * 10, dtype="<i4").reshape(12, 10) - 50) * 7
    if not os.path.exists(os.path.join(scratch, "healthy", "zarr.json")):
        write_plain(scratch, "zstd", path="healthy", data=data, chunks=(5, 3), fill_value=0)
    arr = zarrpipe.Store(scratch).open_array("healthy")
    np.testing.assert_array_equal(np.asarray(arr[...]), data)
    np.testing.assert_array_equal(np.asarray(arr[3:11, 2:9]), data[3:11, 2:9])
    (t,) = arr.read_chunks([(1, 1)])
    np.testing.assert_array_equal(np.asarray(t), data[5:10, 3:6])


def memory_bound(chunk_nbytes: int = CHUNK_NBYTES) -> int:
    """Peak RSS growth allowed for reading a hostile chunk: 64 MiB + a few chunks."""
    return 64 * MiB + 4 * chunk_nbytes

"""Cold-cache reads: dropping the kernel's page cache before a timed read, and why it may not."""

from __future__ import annotations

import os

DROP_CACHES = "/proc/sys/vm/drop_caches"
"""Writing 3 here frees the page cache, dentries and inodes (clean pages only: sync first)."""


def drop(path: str | None = None) -> None:
    """`sync`, then write 3 to `path` (default /proc/sys/vm/drop_caches): every later read of
    a file comes from the disk. Raises OSError when the write is refused (not root)."""
    os.sync()
    with open(path or DROP_CACHES, "w") as f:
        f.write("3\n")


def why_not(path: str | None = None) -> str | None:
    """None if the page cache can be dropped here (it is dropped once to find out), else the
    reason, fit to stand as the reason of every skipped cold-cache row."""
    try:
        drop(path)
    except OSError as e:
        who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}, not root"
        return (
            f"cold cache: cannot drop the page cache ({who}): writing 3 to "
            f"{path or DROP_CACHES} failed: {type(e).__name__}: {e.strerror or e}"
        )
    return None

"""A dependency-free progress bar on stderr (one line per step when stderr is not a terminal)."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


class ProgressBar:
    """Call it as `bar(done, total, label)`; `done == total` finishes the line."""

    def __init__(self, stream: TextIO | None = None, width: int = 24):
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        elapsed = time.monotonic() - self.start
        frac = done / total if total else 1.0
        fill = int(self.width * frac)
        bar = "#" * fill + "-" * (self.width - fill)
        clock = f"{int(elapsed // 60)}:{int(elapsed % 60):02d}"
        line = f"[{bar}] {done}/{total} {clock} {label}"
        if self.tty:
            cols = shutil.get_terminal_size((100, 20)).columns
            self.stream.write("\r" + line[: cols - 1].ljust(cols - 1))
            if done >= total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

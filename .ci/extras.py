"""Prints the requirements of pyproject.toml's optional-dependency groups (extras), one a
line, with `zarrpipe[other]` references expanded: the Makefile installs a venv's tools from
the extras without building zarrpipe first.

    python .ci/extras.py test dev > requirements.txt
"""

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extras: list[str]) -> list[str]:
    groups = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    out: list[str] = []
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in groups:
            raise SystemExit(f"extras.py: pyproject.toml has no extra {extra!r}")
        seen.add(extra)
        for req in groups[extra]:
            own = re.fullmatch(r"zarrpipe\[([\w,\s-]+)\]", req)
            if own:
                todo += [e.strip() for e in own.group(1).split(",")]
            elif req not in out:
                out.append(req)
    return out


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))

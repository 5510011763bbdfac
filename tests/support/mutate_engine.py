"""Delete one feature from a copy of the engine and run the engine's tests: each deletion must
fail one of them. This builds, so it is a script and not a test
(tests/docs/test_guards_see_losses.py is its fast half: the same deletions, checked against the
tests that name each feature).

    CARGO_TARGET_DIR=/path/to/target python tests/support/mutate_engine.py  # every mutation
    CARGO_TARGET_DIR=/path/to/target python tests/support/mutate_engine.py lz4::create w-

Each mutation is one codec plugin registration (`lz4::create`, by its `create` function;
codec/plugins/mod.rs) or one store mode (`w-`; store/open_mode.rs's `Mode::parse`). The
tracked files are copied once into a temporary directory, each mutation is written there, the
copy is built and tested, and the file is put back; the working tree is never touched. Plugins
are tested with `cargo test -p zarrpipe-codecs --test plugins --test dtypes`, modes with the
store's unit tests. Python tests that would also fail need a wheel and are not run here.
Prints one line per mutation (the tests that failed, or "NOT CAUGHT") and exits 1 if any
mutation is not caught or the unmutated copy fails. Builds go to $CARGO_TARGET_DIR/mutants,
kept apart from real builds and reused by the next run (one run at a time); without
CARGO_TARGET_DIR every run compiles the dependencies again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# tests/, for `support.…` when this runs as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.feature_tables import (
    OPEN_MODE,
    PLUGINS,
    ROOT,
    registrations,
    store_modes,
    without_mode,
    without_registration,
)

PLUGIN_TESTS = ["--test", "plugins", "--test", "dtypes"]
MODE_TESTS = ["--lib", "store::open_mode"]


def _copy_tracked(to: Path) -> None:
    """The files git tracks (the work tree's contents, edits included) under `to`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in listed.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            # Fresh times: cargo judges freshness by them, and a build of another copy may
            # be newer than the originals' times.
            shutil.copy(ROOT / name, to / name)


def _cargo_test(copy: Path, targets: list[str], target_dir: Path) -> tuple[bool, list[str]]:
    """Whether `cargo test` passed in `copy`, and what failed: the failing tests, or the
    build's errors."""
    run = subprocess.run(
        ["cargo", "test", "-q", "-p", "zarrpipe-codecs", *targets],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**os.environ, "CARGO_TARGET_DIR": str(target_dir)},
    )
    out = run.stdout + run.stderr
    # libtest's closing "failures:" list: one indented test name a line.
    failed = [
        name
        for block in re.findall(r"^failures:\n((?:    \S+\n)+)", out, re.MULTILINE)
        for name in block.split()
    ]
    failed += [
        f"build: {e}"
        for e in re.findall(r"^error(?:\[\w+\])?: (.*)$", out, re.MULTILINE)
        if not e.startswith("test failed")
    ]
    if run.returncode != 0 and not failed:
        failed = [f"cargo exited {run.returncode}: {out.strip().splitlines()[-1:]}"]
    return run.returncode == 0, failed


def main(wanted: list[str]) -> int:
    plugin_source, mode_source = PLUGINS.read_text(), OPEN_MODE.read_text()
    mutations = [
        (r.create, PLUGINS, without_registration(plugin_source, r.create), PLUGIN_TESTS)
        for r in registrations(plugin_source)
    ] + [
        (mode, OPEN_MODE, without_mode(mode_source, mode), MODE_TESTS)
        for mode in store_modes(mode_source)
    ]
    if wanted:
        unknown = set(wanted) - {name for name, *_ in mutations}
        if unknown:
            sys.exit(f"no such mutation: {', '.join(sorted(unknown))}")
        mutations = [m for m in mutations if m[0] in wanted]
    if "CARGO_TARGET_DIR" not in os.environ:
        print("CARGO_TARGET_DIR is not set: the dependencies are compiled again", file=sys.stderr)
    uncaught = 0
    with tempfile.TemporaryDirectory(prefix="zarrpipe-mutants-") as tmp:
        copy = Path(tmp)
        _copy_tracked(copy)
        # Never the target directory of real builds: cargo does not tell copies of the crate
        # apart, and a mutant left there would pass for a fresh build of the real code.
        target_dir = Path(os.environ.get("CARGO_TARGET_DIR") or copy / "target") / "mutants"
        for targets in {tuple(t) for *_, t in mutations}:
            passed, failed = _cargo_test(copy, list(targets), target_dir)
            print(f"{'unmutated':<36} {' '.join(targets)}: {'pass' if passed else failed}")
            if not passed:
                return 1
        for name, path, mutated, targets in mutations:
            target = copy / path.relative_to(ROOT)
            original = target.read_text()
            target.write_text(mutated)
            try:
                passed, failed = _cargo_test(copy, targets, target_dir)
            finally:
                target.write_text(original)
            uncaught += passed
            print(f"{name:<36} {'NOT CAUGHT' if passed else 'caught by:'}", flush=True)
            for what in failed:
                print(f"    {what}", flush=True)
    return 1 if uncaught else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

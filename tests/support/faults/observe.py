"""Runs one fault case in a fresh subprocess, with a timeout, so that a crash or a hang in the
reader cannot take the caller down, and reports what happened: the exception or the data,
the peak-RSS growth, and whether a valid read still works afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

from .path_cases import SECRET
from .registry import CASES, Built
from .stores import DTYPE, FILL, TESTS_DIR

# running one case in a subprocess


def build_case(name: str, root: str) -> Built:
    return CASES[name].build(root)


_CHILD = r"""
import json, os, sys, traceback, warnings
sys.path.insert(0, {tests!r})
warnings.simplefilter("ignore")
args = json.loads(sys.argv[1])
import numpy as np
from support.faults.observe import child_read
import zarrpipe
if args["reader"] != "zarrpipe":
    import zarr
if args.get("unprivileged"):  # after the imports: the interpreter may live under /root
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
print(json.dumps(child_read(args)), flush=True)
"""


def _status(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field_name)


def _eval_selection(text: str) -> Any:
    return eval(text, {"__builtins__": {}, "slice": slice, "Ellipsis": Ellipsis})


def _describe_exception(e: BaseException) -> dict[str, Any]:
    return {
        "type": type(e).__module__ + "." + type(e).__qualname__,
        "message": str(e)[:300],
        "is_exception": isinstance(e, Exception),
        "mro": [t.__qualname__ for t in type(e).__mro__],
    }


def _plain(a: np.ndarray | None) -> Any:
    """An array as JSON for the child: nested lists, `bytes` spelled "bytes:<hex>" (the
    variable-length cases hold strings and bytes)."""
    if a is None:
        return None
    if a.dtype.kind not in "OT":
        return a.tolist()
    return np.vectorize(lambda x: "bytes:" + x.hex() if isinstance(x, bytes) else x,
                        otypes=[object])(a).tolist()  # fmt: skip


def _same(value: np.ndarray, want: Any) -> bool:
    """A read's result equals `want` (what `_plain` made of the expected array)."""
    want_arr = np.asarray(want, dtype=object)
    if value.dtype.kind in "OT" or (
        want_arr.dtype.kind == "O" and want_arr.size and isinstance(want_arr.flat[0], str)
    ):
        return value.shape == want_arr.shape and _plain(value.astype(object)) == want
    want_num = np.asarray(want, dtype=DTYPE)
    return bool(value.shape == want_num.shape and np.array_equal(value, want_num))


def child_read(args: dict[str, Any]) -> dict[str, Any]:
    """In the subprocess: open and read as `args` says, with the reader named there."""
    reader = args["reader"]
    out: dict[str, Any] = {"reader": reader}
    sel = _eval_selection(args["bad"])
    if reader == "zarrpipe":
        import zarrpipe

        def open_(root: str, path: str) -> Any:
            # Read-only, as zarr-python opens it below (read-write creates a missing store).
            return zarrpipe.Store(root, mode="r").open_array(path)

        def read(arr: Any, s: Any) -> np.ndarray:
            return np.asarray(arr[s])
    else:
        import zarr

        if reader == "zarr-zarrpipe-pipeline":
            zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"})

        def open_(root: str, path: str) -> Any:
            return zarr.open_array(store=root, path=path, mode="r")

        def read(arr: Any, s: Any) -> np.ndarray:
            return np.asarray(arr[s])

    try:
        with open("/proc/self/clear_refs", "w") as f:  # reset the peak-RSS mark
            f.write("5")
    except OSError:  # not allowed (an unprivileged child): growth is then relative to the peak
        out["rss_peak_not_reset"] = True
    rss0 = _status("VmRSS")
    stage = "open"
    try:
        arr = open_(args["store"], args["path"])
        stage = "read"
        value = read(arr, sel)
    except BaseException as e:  # recorded, whatever it is
        out.update(outcome="raised", stage=stage, **_describe_exception(e))
    else:
        out.update(outcome="returned", shape=list(value.shape), dtype=str(value.dtype))
        for what in ("expected", "original"):
            if args.get(what) is not None:
                out[what + "_equal"] = _same(value, args[what])
        numeric = value.dtype.kind not in "OTUSV"
        out["secret_seen"] = bool(numeric and value.size and (value == SECRET).any())
        out["fill_only"] = bool(numeric and value.size and (value == FILL).all())
    out["rss_growth"] = _status("VmHWM") - rss0
    if args.get("good") is not None:
        try:
            arr = open_(args["store"], args["path"])
            value = read(arr, _eval_selection(args["good"]))
            out["after_ok"] = _same(value, args["good_value"])
        except BaseException as e:
            out["after_ok"] = False
            out["after_error"] = repr(e)[:200]
    return out


def observe(name: str, reader: str = "zarrpipe", *, timeout: float = 120) -> dict[str, Any]:
    """Builds case `name` in a fresh directory and reads it with `reader` ("zarrpipe",
    "zarr" = zarr-python's default pipeline, or "zarr-zarrpipe-pipeline") in a subprocess.
    Returns the child's report, or {"outcome": "timeout"} / {"outcome": "crashed", ...}."""
    c = CASES[name]
    tmp = tempfile.mkdtemp(prefix="zp-fault-")
    try:
        os.chmod(tmp, 0o755)  # an unprivileged child must reach the store
        built = c.build(tmp)
        args = {
            "reader": reader,
            "store": built.store_path or built.root,
            "path": built.path,
            "bad": repr(built.bad),
            "good": repr(built.good) if built.good is not None else None,
            "good_value": _plain(built.good_value),
            "expected": _plain(built.expected),
            "original": _plain(built.original),
            "unprivileged": "unprivileged" in c.tags and os.geteuid() == 0,
        }
        env = dict(os.environ, RUST_BACKTRACE="0", PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD.format(tests=TESTS_DIR), json.dumps(args)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return {"outcome": "timeout", "timeout": timeout, "key": built.key}
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {
                "outcome": "crashed",
                "returncode": proc.returncode,
                "stderr": proc.stderr[-2000:],
                "key": built.key,
            }
        report = json.loads(lines[-1])
        report["key"] = built.key
        return report
    finally:
        _force_rmtree(tmp)


def _force_rmtree(path: str) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, n), 0o755, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)

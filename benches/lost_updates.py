"""Lost updates: N writers each rewrite only their own rows of one stored object (the inner
chunks of one shard, or part of one Zarr v2 chunk), many times, at once; afterwards, a
writer whose last value is not there lost an update to another writer's read-modify-write.

    python benches/lost_updates.py [--writers zarrpipe,zarr,...] [--layouts shard,chunk]
                                          [--procs 8] [--rounds 30] [--threads] [--dir DIR]
                                          [--store URL] [--json FILE]

Writers: `zarrpipe` (native API, `arr[rows] = block`), `zarr+zarrpipe` (zarr-python on
`zarrpipe.CodecPipeline`), `zarr` (zarr-python's default pipeline), `zarr-fused`
(zarr-python >= 3.3's `FusedCodecPipeline`), `zarr+zarrs` (zarrs-python's pipeline) and
`tensorstore`. Processes start with the "spawn" method; `--threads` runs the writers as
threads of one process instead (each with its own handle of the array). The tests
(`tests/write/test_concurrent_writes.py`) use this module for zarrpipe's writers; the counts for
the others are what `BENCHMARKS.md` reports.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

WRITERS = ("zarrpipe", "zarr+zarrpipe", "zarr", "zarr-fused", "zarr+zarrs", "tensorstore")
LAYOUTS = ("shard", "chunk")
ROWS = 8  # rows per writer; the array has ROWS * writers rows of 64 int32 values


def shape_of(writers: int) -> tuple[int, int]:
    return (ROWS * writers, 64)


def create(location: str, layout: str, writers: int, options: dict[str, str] | None = None) -> None:
    """The array "a": one shard of `writers` inner chunks (v3), or one v2 chunk, all 0."""
    import zarrpipe

    store = zarrpipe.Store(location, options=options)
    shape = shape_of(writers)
    if layout == "shard":
        store.create_array(
            "a", shape=shape, dtype="int32", chunks=(ROWS, 64), shards=shape, overwrite=True
        )
    else:
        store.create_array(
            "a", shape=shape, dtype="int32", chunks=shape, zarr_format=2, overwrite=True
        )


def value(writer: int, round_: int) -> int:
    return writer * 1000 + round_ + 1


def lost(
    location: str, writers: int, rounds: int, options: dict[str, str] | None = None
) -> list[int]:
    """The writers whose last value is not (all) in their rows."""
    import zarrpipe

    data = zarrpipe.Store(location, options=options).open_array("a").read().to_numpy()
    return [
        w
        for w in range(writers)
        if not np.all(data[w * ROWS : (w + 1) * ROWS] == value(w, rounds - 1))
    ]


def _zarr_store(location: str, options: dict[str, str] | None) -> Any:
    if "://" not in location:
        from zarr.storage import LocalStore

        return LocalStore(location)
    import obstore.store
    from zarr.storage import ObjectStore

    config = dict(options or {})
    client = {"allow_http": config.pop("allow_http")} if "allow_http" in config else None
    return ObjectStore(obstore.store.from_url(location, config=config, client_options=client))


def _setter(kind: str, location: str, options: dict[str, str] | None) -> Any:
    """A function (rows, block) that writes `block` into `rows` of the array with `kind`."""
    if kind == "zarrpipe":
        import zarrpipe

        arr = zarrpipe.Store(location, options=options).open_array("a")

        def write(rows: slice, block: np.ndarray) -> None:
            arr[rows] = block

        return write
    if kind == "tensorstore":
        import tensorstore as ts

        if "://" in location:
            raise SystemExit("lost_updates: tensorstore runs on local directories only here")
        probe = Path(location, "a", "zarr.json")
        driver = "zarr3" if probe.exists() else "zarr"
        t = ts.open(
            {"driver": driver, "kvstore": {"driver": "file", "path": str(Path(location, "a"))}},
            open=True,
        ).result()

        def write(rows: slice, block: np.ndarray) -> None:
            t[rows].write(block).result()

        return write
    z = open_zarr(location, kind, options)

    def write(rows: slice, block: np.ndarray) -> None:
        z[rows] = block

    return write


# zarr-python's configuration is global to the process: set it only while an array opens (it
# keeps the pipeline it opened with), one thread at a time, and put it back after.
_ZARR_CONFIG = threading.Lock()


def open_zarr(location: str, kind: str, options: dict[str, str] | None = None) -> Any:
    """The array "a" opened read-write by zarr-python on the pipeline `kind` names."""
    import zarr

    conf: dict[str, Any] = {}
    if kind == "zarr+zarrpipe":
        conf = {"codec_pipeline.path": "zarrpipe.CodecPipeline", "codec_pipeline.strict": True}
    elif kind == "zarr+zarrs":
        conf = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}
    elif kind == "zarr-fused":
        conf = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}
    elif kind != "zarr":
        raise SystemExit(f"lost_updates: unknown writer {kind!r} (one of {', '.join(WRITERS)})")
    with _ZARR_CONFIG, zarr.config.set(conf):
        return zarr.open_array(_zarr_store(location, options), path="a", mode="r+")


def _write_rounds(
    kind: str, location: str, writer: int, rounds: int, barrier: Any, options: dict[str, str] | None
) -> None:
    write = _setter(kind, location, options)
    rows = slice(writer * ROWS, (writer + 1) * ROWS)
    barrier.wait()
    for r in range(rounds):
        write(rows, np.full((ROWS, 64), value(writer, r), dtype="int32"))


def _process_main(errors: Any, *args: Any) -> None:
    try:
        _write_rounds(*args)
    except BaseException as e:  # reported by the parent, in one line
        errors.put(f"{type(e).__name__}: {e}")
        sys.exit(1)


def run(
    kind: str,
    location: str,
    layout: str,
    *,
    writers: int = 8,
    rounds: int = 30,
    threads: bool = False,
    kinds: list[str] | None = None,
    options: dict[str, str] | None = None,
    timeout: float = 600.0,
) -> list[int]:
    """Creates the array, lets `writers` writers (of `kind`, or of `kinds[i]` each) rewrite
    their rows `rounds` times at once, and returns the writers that lost their last value.
    A writer that fails or hangs raises RuntimeError."""
    create(location, layout, writers, options)
    kinds = kinds or [kind] * writers
    if threads:
        barrier: Any = threading.Barrier(writers)
        errors: list[BaseException] = []

        def body(w: int) -> None:
            try:
                _write_rounds(kinds[w], location, w, rounds, barrier, options)
            except BaseException as e:  # reported below
                errors.append(e)
                barrier.abort()

        pool = [threading.Thread(target=body, args=(w,)) for w in range(writers)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout)
        if any(t.is_alive() for t in pool):
            raise RuntimeError(f"{kind}: a writer thread did not finish in {timeout} s")
        if errors:
            raise RuntimeError(f"{kind}: a writer failed: {errors[0]!r}") from errors[0]
    else:
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(writers)
        failures = ctx.Queue()
        procs = [
            ctx.Process(
                target=_process_main,
                args=(failures, kinds[w], location, w, rounds, barrier, options),
            )
            for w in range(writers)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.kill()
                raise RuntimeError(f"{kind}: a writer process did not finish in {timeout} s")
        failed = [p.exitcode for p in procs if p.exitcode != 0]
        if failed:
            why = failures.get(timeout=5) if not failures.empty() else "no message"
            raise RuntimeError(f"{len(failed)} of {writers} writers failed, e.g. {why}")
    return lost(location, writers, rounds, options)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benches/lost_updates.py", description=__doc__)
    ap.add_argument("--writers", default=",".join(WRITERS))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--procs", type=int, default=8, help="writers at once")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", action="store_true", help="threads of one process")
    ap.add_argument("--dir", help="where the arrays go (default: a temporary directory)")
    ap.add_argument("--json", help="write the counts here too")
    args = ap.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix="lost-updates-"))
    results = []
    print(f"{args.procs} {'threads' if args.threads else 'processes'}, {args.rounds} rounds each")
    print("| writer | layout | lost writes per run |")
    print("|---|---|---|")
    for kind in args.writers.split(","):
        for layout in args.layouts.split(","):
            counts: list[Any] = []
            for rep in range(args.repeats):
                location = str(base / f"{kind}-{layout}-{rep}")
                shutil.rmtree(location, ignore_errors=True)
                os.makedirs(location)
                try:
                    counts.append(
                        len(
                            run(
                                kind,
                                location,
                                layout,
                                writers=args.procs,
                                rounds=args.rounds,
                                threads=args.threads,
                            )
                        )
                    )
                except (RuntimeError, ImportError, SystemExit) as e:
                    counts.append(f"failed: {str(e).splitlines()[0][:120]}")
            cells = ", ".join(f"{c} of {args.procs}" if isinstance(c, int) else c for c in counts)
            print(f"| {kind} | {layout} | {cells} |", flush=True)
            results.append({"writer": kind, "layout": layout, "lost": counts})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `zarrpipe` command line: `zarrpipe bench` (throughput benchmark) and `zarrpipe info`."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zarrpipe", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="{bench,info}")

    b = sub.add_parser(
        "bench",
        help="read throughput of zarrpipe and the other Zarr readers",
        description="Generates (or reuses) the benchmark datasets, measures each "
        "installed implementation in a fresh process per row, checks every "
        "result against the source checksum, and prints/writes the results.",
    )
    b.add_argument(
        "--size",
        choices=["quick", "full"],
        default="quick",
        help="quick: 256x512x512 uint16 (128 MiB); full: 512x1024x1024 (1 GiB)",
    )
    b.add_argument(
        "--datasets",
        type=_csv,
        metavar="A,B",
        help="dataset variants (default: all of uncompressed,zstd,blosc,zstd-sharded)",
    )
    b.add_argument(
        "--implementations",
        type=_csv,
        metavar="A,B",
        help="implementations to measure (default: all; see --list)",
    )
    b.add_argument(
        "--workloads",
        type=_csv,
        metavar="A,B",
        help="workloads (default: all; 'none' for no in-process rows, e.g. with --fresh-processes)",
    )
    b.add_argument("--repeats", type=int, default=3, help="timed runs after one warm-up")
    b.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="measure every in-process row in N worker processes (each a warm-up and "
        "--repeats timed runs), the implementations taking turns round by round in a rotating "
        "order, so that the machine's drift lands on all of them alike (default 1)",
    )
    b.add_argument(
        "--fresh-processes",
        type=int,
        default=0,
        metavar="N",
        help="also measure read-all with N timed reads per implementation and dataset, each "
        "in its own new process (no warm-up read inside it), implementations taking turns "
        "round by round (default 0: off)",
    )
    b.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache (sync; 3 > /proc/sys/vm/drop_caches) before every timed "
        "read, so data come from the disk; needs root, otherwise every row is skipped",
    )
    b.add_argument(
        "--no-decode-limit",
        dest="decode_limit",
        action="store_false",
        help="do not measure the single-thread decode throughput of each compressed "
        "dataset's codec (the 'decode limit' column)",
    )
    b.add_argument(
        "--data-dir",
        help="where the datasets are kept and reused "
        "(default: a temporary directory, deleted afterwards)",
    )
    b.add_argument(
        "--out-dir",
        default="bench-out",
        help="where results.json, results.md and throughput.png go (default ./bench-out)",
    )
    b.add_argument(
        "--threads",
        type=int,
        help="decode threads per implementation (default: the number of CPUs)",
    )
    b.add_argument("--timeout", type=float, default=900, help="seconds allowed per row")
    b.add_argument(
        "--list",
        action="store_true",
        help="list implementations (with availability), workloads and datasets",
    )

    i = sub.add_parser("info", help="list a store's arrays and groups, or show an array")
    i.add_argument(
        "store",
        help="a Zarr store, as zarrpipe.Store opens it: a local directory, or a file://, "
        "s3://, gs://, az:// or https:// URL (credentials come from the environment; no "
        "store options can be given here, so an http:// URL, which needs allow_http, fails)",
    )
    i.add_argument("path", nargs="?", help="an array in the store: print its metadata")
    return p


def _list(threads: int) -> int:
    from zarrpipe.bench import adapters, spawn
    from zarrpipe.bench.datasets import SIZES, VARIANTS
    from zarrpipe.bench.workloads import WORKLOADS

    print("implementations:")
    probed = spawn.probe(list(adapters.REGISTRY.values()), threads)
    for name, spec in adapters.REGISTRY.items():
        info = probed[spec]
        state = info.get("version") if info.get("available") else f"skipped: {info.get('reason')}"
        print(f"  {name:14s} {state}\n  {'':14s} {info.get('description', '')}")
    print("workloads:")
    for w in WORKLOADS.values():
        print(f"  {w.name:14s} {w.description}")
    print(f"datasets: {', '.join(VARIANTS)}")
    print(f"sizes: {', '.join(f'{k} {v}' for k, v in SIZES.items())}")
    return 0


def bench(args: argparse.Namespace) -> int:
    from zarrpipe.bench import datasets, report, runner
    from zarrpipe.bench.progress import ProgressBar

    threads = args.threads or os.cpu_count() or 1
    if args.list:
        return _list(threads)
    if args.repeats < 1:
        raise SystemExit("zarrpipe bench: --repeats must be at least 1")
    if args.fresh_processes < 0:
        raise SystemExit("zarrpipe bench: --fresh-processes must be 0 (off) or more")
    if args.rounds < 1:
        raise SystemExit("zarrpipe bench: --rounds must be at least 1")
    if args.workloads == ["none"]:
        args.workloads = []
        if not args.fresh_processes:
            raise SystemExit(
                "zarrpipe bench: --workloads none measures nothing without --fresh-processes"
            )
    from zarrpipe.bench.adapters import REGISTRY
    from zarrpipe.bench.workloads import WORKLOADS

    for what, given, known in [
        ("dataset", args.datasets, datasets.VARIANTS),
        ("implementation", args.implementations, REGISTRY),
        ("workload", args.workloads, WORKLOADS),
    ]:
        unknown = [g for g in given or [] if g not in known]
        if unknown:
            raise SystemExit(
                f"zarrpipe bench: unknown {what} {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(known)}"
            )
    temporary = args.data_dir is None
    data_dir = tempfile.mkdtemp(prefix="zarrpipe-bench-data-") if temporary else args.data_dir
    try:
        ds = datasets.generate(
            data_dir,
            datasets.SIZES[args.size],
            variants=args.datasets or datasets.VARIANTS,
            log=lambda m: print(m, file=sys.stderr),
        )
        rep = runner.run(
            ds,
            data_dir,
            implementations=args.implementations,
            workloads=args.workloads,
            repeats=args.repeats,
            rounds=args.rounds,
            threads=threads,
            timeout=args.timeout,
            progress=ProgressBar(),
            size=args.size,
            fresh_processes=args.fresh_processes,
            cold=args.cold,
            decode_limits=args.decode_limit,
        )
    except ValueError as e:
        raise SystemExit(f"zarrpipe bench: {e}") from None
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(report.text(rep))
    paths = report.write(rep, args.out_dir)
    print()
    print(f"JSON:     {paths['json']}")
    print(f"Markdown: {paths['markdown']}")
    print(f"chart:    {paths['chart']}")
    if temporary:
        print("(datasets were generated in a temporary directory: pass --data-dir to keep them)")
    failed = [r for r in rep["rows"] if r["status"] == "failed"]
    if failed:
        print(f"{len(failed)} row(s) FAILED", file=sys.stderr)
    return 1 if failed else 0


def _describe(array) -> list[str]:
    lines = [
        f"path:        /{array.path}",
        f"zarr_format: {array.zarr_format}",
        f"shape:       {tuple(array.shape)}",
        f"dtype:       {array.dtype}",
        f"chunks:      {tuple(array.chunks)}",
    ]
    if array.shards is not None:
        lines.append(f"shards:      {tuple(array.shards)}")
    lines += [
        f"chunk grid:  {tuple(array.chunk_grid_shape)}",
        f"fill_value:  {array.fill_value}",
        f"nbytes:      {array.nbytes} ({array.nbytes / 2**20:.1f} MiB decoded)",
    ]
    if array.dimension_names is not None:
        lines.append(f"dims:        {tuple(array.dimension_names)}")
    if array.attrs:
        lines.append(f"attributes:  {array.attrs}")
    if array.fallback_reason:
        lines.append(f"decoder:     zarrs fallback ({array.fallback_reason})")
    return lines


def info(args: argparse.Namespace) -> int:
    import zarrpipe

    try:
        store = zarrpipe.Store(args.store)
        if args.path is not None:
            print("\n".join(_describe(store.open_array(args.path))))
            return 0
        for path, kind in store.list():
            if kind == "array":
                a = store.open_array(path)
                shards = f" shards={tuple(a.shards)}" if a.shards is not None else ""
                print(
                    f"array  /{path:30s} {tuple(a.shape)} {a.dtype} "
                    f"chunks={tuple(a.chunks)}{shards}"
                )
            else:
                print(f"group  /{path}")
    except (OSError, zarrpipe.ZarrpipeError) as e:
        print(f"zarrpipe info: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `zarrpipe` command (also `python -m zarrpipe`).

    `zarrpipe info STORE [ARRAY]` lists a store's arrays and groups, or prints one array's
    metadata (STORE is what `zarrpipe.Store` opens without options: a local directory or a
    `file://`, `s3://`, `gs://`, `az://` or `https://` URL); `zarrpipe bench [options]` runs
    the throughput benchmark (see `zarrpipe bench -h`).

    Args:
        argv: The arguments after the program name; None reads `sys.argv`.

    Returns:
        The exit status: 0 on success, 1 when `info` fails or a benchmark row fails.

    Raises:
        SystemExit: On a usage error (from argparse), or an invalid benchmark option.
    """
    args = _parser().parse_args(argv)
    return {"bench": bench, "info": info}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

"""The `zarrpipe` command line: `zarrpipe bench` (throughput benchmark) and `zarrpipe info`."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    from zarrpipe import __version__

    p = argparse.ArgumentParser(prog="zarrpipe", description=__doc__)
    p.add_argument("--version", action="version", version=f"zarrpipe {__version__}")
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
        choices=["quick", "full", "small"],
        default="quick",
        help="quick: 256x512x512 uint16 (128 MiB); full: 512x1024x1024 (1 GiB); small: "
        "2-d images of 8 and 64 MiB, chunked and sharded, read whole and picked "
        "(every 8th row and column), by every reader",
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
    b.add_argument(
        "--repeats",
        type=int,
        help="timed runs after one warm-up (default 3; --size small: 10 after 3 warm-ups)",
    )
    b.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="measure every in-process row in N worker processes (each a warm-up and "
        "--repeats timed runs), the implementations taking turns round by round in a rotating "
        "order, so that the machine's drift lands on all of them alike (default 1; "
        "--size small: 3)",
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

    i = sub.add_parser(
        "info",
        help="list a store's arrays and groups, or show one",
        description="Lists every array (shape, dtype, chunks, codecs, chunks stored and "
        "bytes stored) and group of a store, or describes the array or group at PATH. "
        "Opens the store read-only: nothing is created.",
    )
    i.add_argument(
        "store",
        help="a Zarr store, as zarrpipe.Store opens it: a local directory, or a file://, "
        "s3://, gs://, az:// or http(s):// URL (credentials come from the environment or "
        "--option)",
    )
    i.add_argument("path", nargs="?", help="an array or group in the store: describe it")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
    i.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an object-store option, as Store(options=...) takes it (aws_endpoint, "
        "aws_region, aws_skip_signature, allow_http...); repeat for more",
    )
    return p
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
    small = args.size == "small"
    if args.repeats is None:
        args.repeats = 10 if small else 3
    if args.rounds is None:
        args.rounds = 3 if small else 1
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
    if small:
        return _bench_small(args, threads)
    with _data_dir(args.data_dir) as data_dir:
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
    print(report.text(rep))
    paths = report.write(rep, args.out_dir)
    print()
    print(f"JSON:     {paths['json']}")
    print(f"Markdown: {paths['markdown']}")
    print(f"chart:    {paths['chart']}")
    if args.data_dir is None:
        print("(datasets were generated in a temporary directory: pass --data-dir to keep them)")
    failed = [r for r in rep["rows"] if r["status"] == "failed"]
    if failed:
        print(f"{len(failed)} row(s) FAILED", file=sys.stderr)
    return _exit_status([r["implementation"] for r in failed])


def _exit_status(failed: Sequence[str]) -> int:
    """1 when zarrpipe (natively or through its zarr-python pipeline) failed a row, else 0:
    another reader failing is a result, and its row says why."""
    from zarrpipe.bench.report import OTHERS_EXCLUDED

    return 1 if any(name in OTHERS_EXCLUDED for name in failed) else 0


@contextlib.contextmanager
def _data_dir(given: str | None) -> Iterator[str]:
    """Where the benchmark's datasets go: `given`, or a temporary directory deleted
    afterwards. A ValueError inside (what the benchmark refuses) is the command's error."""
    data_dir = given or tempfile.mkdtemp(prefix="zarrpipe-bench-data-")
    try:
        yield data_dir
    except ValueError as e:
        raise SystemExit(f"zarrpipe bench: {e}") from None
    finally:
        if given is None:
            shutil.rmtree(data_dir, ignore_errors=True)


def _bench_small(args: argparse.Namespace, threads: int) -> int:
    from zarrpipe.bench import small

    with _data_dir(args.data_dir) as data_dir:
        result = small.bench(
            data_dir,
            args.out_dir,
            implementations=args.implementations,
            threads=threads,
            rounds=args.rounds,
            repeats=args.repeats,
            timeout=args.timeout,
            decode_limits=args.decode_limit,
            log=lambda m: print(m, file=sys.stderr),
        )
    print(small.text(result))
    print(f"JSON:     {os.path.join(args.out_dir, 'results-small.json')}")
    print(f"Markdown: {os.path.join(args.out_dir, 'results-small.md')}")
    failed = [r for r in result["rows"] if r["status"] == "failed"]
    for r in failed:
        reason = " ".join(r["reason"].split())[:200]
        print(f"FAILED {r['size']} {r['layout']} {r['read']} {r['reader']}: {reason}")
    return _exit_status([r["reader"] for r in failed])


def _codec_names(metadata: dict) -> list[str]:
    """The codec chain of an array's metadata document, one short name each: v3 codecs
    (a shard's inner chain in brackets), or v2 filters and compressor."""

    def v3(codec: dict) -> str:
        name = codec.get("name", "?")
        config = codec.get("configuration") or {}
        if name == "sharding_indexed":
            inner = ", ".join(v3(c) for c in config.get("codecs", []))
            return f"sharding_indexed[{inner}]"
        shown = {k: v for k, v in config.items() if k in ("level", "cname", "clevel", "typesize")}
        args = ",".join(f"{k}={v}" for k, v in shown.items())
        return f"{name}({args})" if args else name

    if metadata.get("zarr_format") == 3:
        return [v3(c) for c in metadata.get("codecs", [])]
    chain = [f.get("id", "?") for f in metadata.get("filters") or []]
    compressor = metadata.get("compressor")
    if compressor:
        shown = {k: v for k, v in compressor.items() if k in ("level", "cname", "clevel")}
        args = ",".join(f"{k}={v}" for k, v in shown.items())
        chain.append(f"{compressor.get('id', '?')}({args})" if args else compressor.get("id", "?"))
    return chain


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _array_record(array) -> dict:
    """What `info` says of an array, JSON-ready."""
    metadata = array.metadata
    stored = array.nshards_initialized  # one listing (nchunks_initialized would be another)
    regular = array.metadata.get("chunk_grid", {}).get("name", "regular") == "regular"
    per_shard = 1
    if regular and array.shards is not None:
        for s, c in zip(array.shards, array.chunks, strict=True):
            per_shard *= s // max(c, 1)
    codecs = [c.get("name") for c in metadata.get("codecs", []) if isinstance(c, dict)]
    sharded = array.shards is not None if regular else codecs == ["sharding_indexed"]
    return {
        "path": "/" + array.path,
        "kind": "array",
        "zarr_format": array.zarr_format,
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        # Chunks (shards) of different sizes as their sizes along each axis.
        "chunks": _shape_or_sizes(lambda: array.chunks, array.read_chunk_sizes),
        "shards": (
            _shape_or_sizes(lambda: array.shards, array.write_chunk_sizes) if sharded else None
        ),
        "fill_value": metadata.get("fill_value"),
        "codecs": _codec_names(metadata),
        "dimension_names": (
            list(array.dimension_names) if array.dimension_names is not None else None
        ),
        "attributes": dict(array.attrs),
        "nbytes": array.nbytes,
        # Stored values: shards of a sharded array, else chunks.
        "stored": stored,
        "stored_of": array.nshards,
        "chunks_stored": stored * per_shard if regular else array.nchunks_initialized,
        "chunks_total": array.nchunks,
        "bytes_stored": array.nbytes_stored(),
        "decoder": "zarrs fallback: " + array.fallback_reason
        if array.fallback_reason
        else "zarrpipe",
    }


def _as_tuple(value):
    """Lists as tuples, nested too: a shape, or per axis the sizes."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def _shape_or_sizes(shape, sizes) -> list:
    """`shape()` as a list, or per axis the list of sizes when the grid has no one shape."""
    try:
        return list(shape())
    except NotImplementedError:
        return [list(s) for s in sizes]


def _group_record(group) -> dict:
    return {
        "path": "/" + group.path,
        "kind": "group",
        "zarr_format": group.zarr_format,
        "attributes": dict(group.attrs),
    }


def _describe(r: dict) -> list[str]:
    if r["kind"] == "group":
        lines = [
            f"path:        {r['path']}",
            "kind:        group",
            f"zarr_format: {r['zarr_format']}",
        ]
        if r["attributes"]:
            lines.append(f"attributes:  {r['attributes']}")
        return lines
    lines = [
        f"path:        {r['path']}",
        f"zarr_format: {r['zarr_format']}",
        f"shape:       {tuple(r['shape'])}",
        f"dtype:       {r['dtype']}",
        f"chunks:      {_as_tuple(r['chunks'])}",
    ]
    if r["shards"] is not None:
        lines.append(f"shards:      {_as_tuple(r['shards'])}")
    stored = "shards" if r["shards"] is not None else "chunks"
    lines += [
        f"codecs:      {', '.join(r['codecs']) or '(none)'}",
        f"fill_value:  {r['fill_value']}",
        f"nbytes:      {r['nbytes']} ({_size(r['nbytes'])} decoded)",
        f"stored:      {r['stored']} of {r['stored_of']} {stored}, "
        f"{r['bytes_stored']} bytes ({_size(r['bytes_stored'])})",
    ]
    if r["dimension_names"] is not None:
        lines.append(f"dims:        {tuple(r['dimension_names'])}")
    if r["attributes"]:
        lines.append(f"attributes:  {r['attributes']}")
    lines.append(f"decoder:     {r['decoder']}")
    return lines


def _line(r: dict) -> str:
    if r["kind"] == "group":
        return f"group  {r['path']}"
    shards = f" shards={tuple(r['shards'])}" if r["shards"] is not None else ""
    stored = "shards" if r["shards"] is not None else "chunks"
    return (
        f"array  {r['path']:31s} {tuple(r['shape'])} {r['dtype']} "
        f"chunks={tuple(r['chunks'])}{shards} codecs=[{', '.join(r['codecs'])}] "
        f"stored={r['stored']}/{r['stored_of']} {stored}, {_size(r['bytes_stored'])}"
    )


def info(args: argparse.Namespace) -> int:
    import json

    import zarrpipe

    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"zarrpipe info: --option takes KEY=VALUE, not {item!r}", file=sys.stderr)
            return 2
        options[key] = value
    try:
        store = zarrpipe.Store(args.store, mode="r", options=options or None)
        if args.path is not None:
            node = zarrpipe.open(store, mode="r", path=args.path)
            records = [
                _array_record(node) if isinstance(node, zarrpipe.Array) else _group_record(node)
            ]
            if isinstance(node, zarrpipe.Group):
                records += [
                    _array_record(m) if isinstance(m, zarrpipe.Array) else _group_record(m)
                    for _, m in node.members(max_depth=None)
                ]
        else:
            nodes = store.list()
            if not nodes:
                raise FileNotFoundError(f"no Zarr array or group in {args.store}")
            root = store.open_group() if ("", "group") in nodes else None
            records = []
            for path, kind in nodes:
                if kind == "group":
                    group = root if path == "" else store.open_group(path)
                    records.append(_group_record(group))
                elif root is not None and path:
                    records.append(_array_record(root[path]))
                else:
                    records.append(_array_record(store.open_array(path)))
    except (OSError, KeyError, zarrpipe.ZarrpipeError) as e:
        print(f"zarrpipe info: {args.store}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"store": args.store, "nodes": records}, indent=2))
    elif args.path is not None:
        print("\n".join(_describe(records[0])))
        for r in records[1:]:
            print(_line(r))
    else:
        for r in records:
            print(_line(r))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `zarrpipe` command (also `python -m zarrpipe`).

    `zarrpipe info STORE [PATH] [--json] [--option KEY=VALUE ...]` lists a store's arrays
    (with codecs, chunks stored and bytes stored) and groups, or describes the node at PATH
    (STORE is what `zarrpipe.Store` opens: a local directory or a `file://`, `s3://`,
    `gs://`, `az://` or `http(s)://` URL; it is opened read-only and nothing is created);
    `zarrpipe bench [options]` runs the throughput benchmark (see `zarrpipe bench -h`);
    `zarrpipe --version` prints the version.

    Args:
        argv: The arguments after the program name; None reads `sys.argv`.

    Returns:
        The exit status: 0 on success, 1 when `info` fails (a missing store, array or
        group, or metadata that does not parse) or a benchmark row fails, 2 for a bad
        `--option`.

    Raises:
        SystemExit: On a usage error (from argparse), or an invalid benchmark option.
    """
    args = _parser().parse_args(argv)
    return {"bench": bench, "info": info}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

"""Reads a ~256 MiB sharded array from a local S3 server (moto, started here) over a slow
network (a delaying proxy in its own process: 20 ms per request, 1000 Mbit/s per request by
default) with zarrpipe and with zarr-python (default pipeline, zarrpipe's pipeline, zarrs'
pipeline, each over an obstore-backed zarr ObjectStore), and reports the time (min, median,
max over the repeats), throughput and the requests each read made.

    python benches/s3_read.py [--mib 256] [--repeats 3] [--latency-ms 20] [--bandwidth-mbps 1000]
                              [--one-shard]

Every read opens the array (metadata included) and reads all of it; every result is compared
with the source. The readers take turns, round by round, after one untimed round. Requests are
counted by the proxy, the same way for every reader (zarrpipe's own count is shown beside).
moto is a Python server on this machine, so without the proxy absolute throughput is moto's;
with it, the latency and the bandwidth cap dominate, as on a real network. moto and the proxy
share the machine's cores with the reader, so every read also reports the CPU seconds it took
in the reader's process and in the servers' (Linux), and the CPU floor: both together divided
by the core count, the least time the read could take with every core busy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from delaying_proxy import proxy_process
from remote_servers import moto_s3, upload_dir

BUCKET = "bench"
KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}
Read = Callable[[], tuple[np.ndarray, int | None, str]]  # -> (array, own request count, note)


def write_dataset(root: Path, mib: int, one_shard: bool = False) -> np.ndarray:
    depth = max(1, mib * 2**20 // (512 * 512 * 2))
    z = np.linspace(0, 1, depth, dtype=np.float32)[:, None, None]
    y = np.linspace(0, 1, 512, dtype=np.float32)[None, :, None]
    x = np.linspace(0, 1, 512, dtype=np.float32)[None, None, :]
    rng = np.random.default_rng(0)
    data = 2000 + 800 * np.sin(6 * z) * np.cos(5 * y) + 600 * np.sin(4 * x + 3 * z)
    data += 25 * rng.standard_normal((depth, 512, 512), dtype=np.float32)
    data = data.astype(np.uint16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = zarr.create_array(
            root, shape=data.shape, chunks=(64, 64, 64),
            shards=data.shape if one_shard else (128, 256, 256), dtype="uint16",
            compressors=zarr.codecs.ZstdCodec(level=3),
        )  # fmt: skip
        a[:] = data
    return data


def servers_cpu_s() -> float | None:
    """CPU seconds used so far by this process's children (moto and the proxy, with their
    threads), from /proc; None where there is no /proc."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    me, total = os.getpid(), 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is fields[0]
        if int(fields[1]) == me:  # ppid
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / tick


def obstore_store(endpoint: str):
    from obstore.store import S3Store

    return S3Store(
        BUCKET, prefix="data.zarr", endpoint=endpoint, region="us-east-1",
        access_key_id="test", secret_access_key="test", client_options={"allow_http": True},
    )  # fmt: skip


def zarr_read(endpoint: str, pipeline: str | None) -> tuple[np.ndarray, int | None, str]:
    from zarr.storage import ObjectStore

    ours = pipeline == "zarrpipe.CodecPipeline"
    store = ObjectStore(obstore_store(endpoint), read_only=True)
    config = {"codec_pipeline.path": pipeline} if pipeline else {}
    with warnings.catch_warnings(record=True) as caught, zarr.config.set(config):
        warnings.simplefilter("always")
        arr = zarr.open_array(store, mode="r")
        if ours:
            from zarrpipe import pipeline as zp

            zp.ENGINE_STORES.clear()
        out = arr[...]
        note = "; ".join(sorted({str(w.message)[:80] for w in caught}))
    if not ours:
        return out, None, note
    counts = [s.request_counts() for s in zp.ENGINE_STORES.values()]
    note = note or "chunks fetched by zarrpipe (Rust); metadata by zarr-python"
    return out, sum(c["gets"] + c["heads"] for c in counts), note


def zarrpipe_read(endpoint: str) -> tuple[np.ndarray, int | None, str]:
    import zarrpipe

    options = {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}
    store = zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options=options)
    store.open_array("")
    out = np.from_dlpack(store.read("").into_dlpack())
    counts = store.request_counts()
    return out, counts["gets"] + counts["heads"], ""


def readers(endpoint: str) -> dict[str, Read]:
    return {
        "zarrpipe (Store)": lambda: zarrpipe_read(endpoint),
        "zarr + zarrpipe pipeline": lambda: zarr_read(endpoint, "zarrpipe.CodecPipeline"),
        "zarr (default pipeline)": lambda: zarr_read(endpoint, None),
        "zarr + zarrs pipeline": lambda: zarr_read(endpoint, "zarrs.ZarrsCodecPipeline"),
    }


def measure(read: Read, data: np.ndarray, stats: Callable[[], dict] | None) -> dict:
    """One timed read: seconds, CPU seconds (the reader's process, the servers), requests
    through the proxy, the reader's own count."""
    before = stats() if stats else None
    servers0, cpu0 = servers_cpu_s(), time.process_time()
    t0 = time.perf_counter()
    out, own, note = read()
    seconds = time.perf_counter() - t0
    cpu, servers1 = time.process_time() - cpu0, servers_cpu_s()
    after = stats() if stats else None
    if not np.array_equal(out, data):
        raise AssertionError("wrong values")
    got = {"seconds": seconds, "cpu_s": cpu, "own_requests": own, "note": note}
    if servers0 is not None and servers1 is not None:
        got["servers_cpu_s"] = servers1 - servers0
        got["cpu_floor_s"] = (cpu + got["servers_cpu_s"]) / (os.cpu_count() or 1)
    if before and after:
        got["requests"] = after["requests"] - before["requests"]
        got["mib"] = (after["body_bytes"] - before["body_bytes"]) / 2**20
    return got


def rounds(todo: dict[str, Read], data, stats, repeats: int, warmup: int) -> dict[str, dict]:
    """The readers take turns, round by round; one that fails leaves with the reason."""
    results: dict[str, dict] = {name: {"runs": []} for name in todo}
    for r in range(warmup + repeats):
        for name, read in todo.items():
            if "error" in results[name]:
                continue
            try:
                run = measure(read, data, stats)
            except Exception as e:  # a reader that cannot do it is reported, not fatal
                results[name]["error"] = f"{type(e).__name__}: {e}"[:160]
                continue
            if r >= warmup:
                results[name]["runs"].append(run)
    return results


def table(results: dict[str, dict], nbytes: int) -> list[str]:
    head = (f"{'reader':26s} {'min s':>7s} {'median s':>8s} {'max s':>7s} {'MB/s':>6s} "
            f"{'CPU s':>6s} {'servers':>7s} {'floor s':>7s} "
            f"{'requests':>8s} {'own count':>9s} {'MiB sent':>8s}  notes")  # fmt: skip
    lines = [head, "-" * len(head)]
    for name, res in results.items():
        if "error" in res:
            lines.append(f"{name:26s} failed: {res['error']}")
            continue
        s = [r["seconds"] for r in res["runs"]]
        res.update(min_s=min(s), median_s=statistics.median(s), max_s=max(s))
        res["mb_s"] = nbytes / 1e6 / res["median_s"]
        for key in ("cpu_s", "servers_cpu_s", "cpu_floor_s"):
            got = [r[key] for r in res["runs"] if key in r]
            res[f"median_{key}"] = statistics.median(got) if got else None
        cpu = [_secs(res[f"median_{k}"]) for k in ("cpu_s", "servers_cpu_s", "cpu_floor_s")]
        last = res["runs"][-1]
        req = "/".join(sorted({str(r.get("requests", "-")) for r in res["runs"]}))
        own = "-" if last["own_requests"] is None else str(last["own_requests"])
        mib = f"{last['mib']:.1f}" if "mib" in last else "-"
        lines.append(
            f"{name:26s} {res['min_s']:7.2f} {res['median_s']:8.2f} {res['max_s']:7.2f} "
            f"{res['mb_s']:6.0f} {cpu[0]:>6s} {cpu[1]:>7s} {cpu[2]:>7s} "
            f"{req:>8s} {own:>9s} {mib:>8s}  {last['note']}"
        )
    ok = {n: r for n, r in results.items() if "median_s" in r}
    zp = ok.get("zarrpipe (Store)")
    others = {n: r for n, r in ok.items() if "zarrpipe" not in n}
    if zp and others:
        who = min(others, key=lambda n: others[n]["median_s"])
        ratio = others[who]["median_s"] / zp["median_s"]
        lines.append(f"zarrpipe (Store) / fastest other reader by median: {ratio:.2f}x (vs {who})")
        if zp.get("median_cpu_floor_s") is not None:
            lines.append(
                f"2x the fastest other reader would be {others[who]['median_s'] / 2:.2f} s; "
                f"zarrpipe's reads had a CPU floor of {zp['median_cpu_floor_s']:.2f} s (median)"
            )
    return lines


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=256, help="array size (default 256 MiB)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="per request (default 20)")
    parser.add_argument(
        "--bandwidth-mbps", type=float, default=1000.0,
        help="cap per request (response body), Mbit/s; 0 = none (default 1000)",
    )  # fmt: skip
    parser.add_argument(
        "--link-mbps", type=float, default=0.0,
        help="cap on all responses together, Mbit/s; 0 = none (default)",
    )  # fmt: skip
    parser.add_argument("--direct", action="store_true", help="no proxy: read moto directly")
    parser.add_argument(
        "--one-shard", action="store_true",
        help="the whole array in one shard (default: shards of 128x256x256)",
    )  # fmt: skip
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    with tempfile.TemporaryDirectory() as tmp, moto_s3() as moto:
        root = Path(tmp) / "data.zarr"
        data = write_dataset(root, args.mib, args.one_shard)
        upload_dir(moto, BUCKET, root, "data.zarr")  # directly: the upload is not measured
        shards = "one shard" if args.one_shard else "shards (128, 256, 256)"
        print(f"dataset: {data.shape} uint16 ({data.nbytes / 2**20:.0f} MiB), chunks 64^3 in "
              f"{shards}, zstd; moto S3 at {moto}")  # fmt: skip
        if args.direct:
            network, proxy = "no proxy (moto directly)", None
        else:
            network = (f"delaying proxy: {args.latency_ms:g} ms per request, "
                       f"{args.bandwidth_mbps:g} Mbit/s per request, link "
                       f"{args.link_mbps:g} Mbit/s (0 = no cap)")  # fmt: skip
            proxy = proxy_process(moto, args.latency_ms, args.bandwidth_mbps, args.link_mbps)
        print(f"network: {network}; {args.repeats} timed rounds after {args.warmup} untimed")
        if proxy is None:
            results = rounds(readers(moto), data, None, args.repeats, args.warmup)
        else:
            with proxy as (endpoint, stats):
                results = rounds(readers(endpoint), data, stats, args.repeats, args.warmup)
        print("\n".join(table(results, data.nbytes)))
        print(
            "requests: counted by the proxy for each timed read (metadata included); own "
            "count: zarrpipe's Store.request_counts() (chunk data only under zarr-python)\n"
            "CPU s: the reader's process (all its threads); servers: moto and the proxy; "
            f"floor s: both together / {os.cpu_count()} cores (medians over the timed reads)"
        )
    if args.json:
        meta = {k: getattr(args, k) for k in ("mib", "repeats", "warmup", "latency_ms",
                                              "bandwidth_mbps", "link_mbps", "direct",
                                              "one_shard")}  # fmt: skip
        Path(args.json).write_text(json.dumps({"meta": meta, "readers": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

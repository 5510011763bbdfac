"""How fast a long read stops: the seconds from Ctrl-C (SIGINT) to the exit of a child
process in the middle of a read, and from cancelling the task that awaits `read_async` to the
executor's thread being free, against the read's time alone. The array: 128 chunks of 512 KiB
int16 compressed with bz2 (which decodes at a few MB/s), read with one decode thread.

    python benches/stop_latency.py [--repeats 5] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import zarrpipe

SHAPE, CHUNKS = (128, 512, 512), (1, 512, 512)


def make_array(root: str) -> zarrpipe.Array:
    arr = zarrpipe.Store(root).create_array(
        "a", shape=SHAPE, dtype="int16", chunks=CHUNKS,
        compressors={"name": "numcodecs.bz2", "configuration": {"level": 1}},
    )  # fmt: skip
    arr[0] = np.random.default_rng(0).integers(0, 64, SHAPE[1:], dtype="int16")
    first = os.path.join(root, arr.chunk_key((0, 0, 0)))
    for k in range(1, SHAPE[0]):
        target = os.path.join(root, arr.chunk_key((k, 0, 0)))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(first, target)
    return arr


def sigint_to_exit(root: str, delay: float) -> float:
    code = f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignored
        import zarrpipe
        zarrpipe.set_num_threads(1)
        a = zarrpipe.Store({root!r}).open_array("a")
        print("started", flush=True)
        a.read()
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    if "KeyboardInterrupt" not in err:
        raise SystemExit(f"the child did not stop with KeyboardInterrupt: {err}")
    return took


def cancel_to_free(arr: zarrpipe.Array, delay: float) -> float:
    async def main() -> float:
        task = asyncio.create_task(arr.read_async())
        await asyncio.sleep(delay)
        task.cancel()
        cancelled = time.monotonic()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await asyncio.get_running_loop().shutdown_default_executor()
        return time.monotonic() - cancelled

    return asyncio.run(main())


def summary(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s [{min(xs):.3f}-{max(xs):.3f}] over {len(xs)}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--delay", type=float, default=0.5, help="seconds into the read to stop it")
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="zarrpipe-stop-")
    try:
        arr = make_array(root)
        zarrpipe.set_num_threads(1)
        start = time.monotonic()
        arr.read()
        print(f"read alone (1 thread): {time.monotonic() - start:.2f} s")
        print(
            "Ctrl-C to exit:",
            summary([sigint_to_exit(root, args.delay) for _ in range(args.repeats)]),
        )
        print(
            "cancel to executor free:",
            summary([cancel_to_free(arr, args.delay) for _ in range(args.repeats)]),
        )
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()

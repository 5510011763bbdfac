"""Requests made to open and walk a hierarchy of N arrays on a local S3 server (moto, started
here): `Store.open_group()`, `Group.arrays()` and every array's `attrs`, for Zarr v3 and v2,
without and with consolidated metadata (written by zarr-python). Prints one line per case:
GETs, LISTs and HEADs (zarrpipe's own request counts) and the wall time.

    python benches/hierarchy_requests.py [--arrays 100]

Needs moto[server], boto3 and zarr (the test extra); run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import zarr
import zarrpipe

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from remote_servers import moto_s3, upload_dir

KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arrays", type=int, default=100)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in (3, 2):
            root = Path(tmp) / f"h{fmt}.zarr"
            g = zarr.open_group(str(root), mode="w", zarr_format=fmt)
            for i in range(args.arrays):
                g.create_array(f"a{i:03d}", shape=(4,), chunks=(2,), dtype="int16")[:] = i
            for consolidated in (False, True):
                if consolidated:
                    zarr.consolidate_metadata(str(root))
                with moto_s3() as endpoint:
                    upload_dir(endpoint, "walkbucket", root, "h")
                    options = {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}
                    store = zarrpipe.Store("s3://walkbucket/h", mode="r", options=options)
                    start = time.perf_counter()
                    arrays = store.open_group().arrays()
                    for _, a in arrays:
                        dict(a.attrs)
                    took = time.perf_counter() - start
                    c = store.request_counts()
                    print(
                        f"v{fmt} consolidated={consolidated!s:5}: {len(arrays)} arrays: "
                        f"gets={c['gets']} lists={c['lists']} heads={c['heads']} "
                        f"in {took * 1000:.0f} ms"
                    )


if __name__ == "__main__":
    main()

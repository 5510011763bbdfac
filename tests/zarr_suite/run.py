"""Runs zarr-python's own test suite (from the installed zarr's sdist) with zarrpipe's
codec pipeline as the configured default, or with zarr-python's default for comparison.

    python tests/zarr_suite/run.py                     # the whole suite, zarrpipe pipeline
    python tests/zarr_suite/run.py --pipeline default  # the same suite, zarr-python's pipeline
    python tests/zarr_suite/run.py --subset            # the fast subset that .ci/run uses

The suite resets zarr's config between tests, so the pipeline is chosen with the
ZARR_CODEC_PIPELINE__PATH environment variable, which zarr reads on every reset. The suite
turns warnings into errors; zarrpipe's FallbackWarning (an array it hands to zarr-python's
pipeline, e.g. for string dtypes) is expected behaviour and is ignored.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from pathlib import Path

PIPELINES = {
    "zarrpipe": "zarrpipe.CodecPipeline",
    "default": "zarr.core.codec_pipeline.BatchedCodecPipeline",
}

# Representative and fast: array and indexing semantics, codecs incl. sharding, v2, stores.
SUBSET = [
    "tests/test_array.py",
    "tests/test_indexing.py",
    "tests/test_codecs",
    "tests/test_v2.py",
    "tests/test_api.py",
    "tests/test_group.py",
]

SHARDING = "tests/test_codecs/test_sharding.py::"

# Tests that check zarr-python's own implementation rather than behaviour a pipeline must
# share; each fails with any other pipeline. Deselected with --skip-known (as CI does).
KNOWN_DIFFERENCES = {
    "tests/test_array.py::test_create_array_with_data_num_gets": (
        "counts store gets: zarrpipe writes whole shards without the extra get per shard "
        "that the test's own comment calls unnecessary"
    ),
    "tests/test_config.py::test_config_codec_implementation": (
        "turns every warning into an error while it registers its own codec class; zarrpipe "
        "hands such an array to zarr-python's pipeline with a FallbackWarning, never silently"
    ),
    "tests/test_config.py::test_config_codec_pipeline_class": (
        "asserts that the default codec_pipeline.path is zarr-python's own pipeline"
    ),
    SHARDING + "test_sharding_partial_shard_read__index_chunk_slice_fails": (
        "monkeypatches zarr-python's private shard-index lookup"
    ),
    SHARDING + "test_sharding_partial_shard_read__chunk_load_fails": (
        "injects failures into zarr-python's get_ranges calls, which zarrpipe does not make"
    ),
    SHARDING + "test_sharding_multiple_chunks_partial_shard_read": (
        "counts zarr-python's coalesced get_ranges calls"
    ),
    SHARDING + "test_sharding_duplicate_read_indexes": (
        "counts zarr-python's shard-index and coalesced get_ranges calls on a mocked store; "
        "zarrpipe fetches a shard from a store it does not read itself in one get"
    ),
    "tests/test_codecs/test_sharding_unit.py::test_load_partial_shard": (
        "checks how zarr-python's private _load_partial_shard forwards its config"
    ),
    "tests/test_examples.py::test_scripts_can_run": "needs the `uv` tool (fails with any pipeline)",
}

PYTEST_DEPS = [
    "pytest-asyncio",
    "pytest-timeout",
    "hypothesis",
    "tomlkit",
    "numpydoc",
]


def sdist_tests(cache: Path) -> Path:
    """The extracted sdist of the installed zarr (downloaded once into `cache`)."""
    import zarr

    version = zarr.__version__
    root = cache / f"zarr-{version}"
    if not (root / "tests").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"zarr=={version}", "--no-binary", ":all:",
             "--no-deps", "--quiet", "-d", str(cache)],
            check=True,
        )  # fmt: skip
        with tarfile.open(cache / f"zarr-{version}.tar.gz") as tar:
            tar.extractall(cache, filter="data")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pipeline", choices=sorted(PIPELINES), default="zarrpipe")
    parser.add_argument("--subset", action="store_true", help="run the fast representative subset")
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "zarrpipe" / "zarr-sdist"
    )
    parser.add_argument(
        "--skip-known",
        action="store_true",
        help="deselect the tests in KNOWN_DIFFERENCES (they test zarr-python's internals)",
    )
    parser.add_argument(
        "--install-deps", action="store_true", help="pip install the suite's test deps first"
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()

    if args.install_deps:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", *PYTEST_DEPS], check=True
        )
    root = sdist_tests(args.cache)
    env = dict(os.environ, ZARR_CODEC_PIPELINE__PATH=PIPELINES[args.pipeline])
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    targets = SUBSET if args.subset else ["tests"]
    known: list[str] = []  # --deselect matches node-id prefixes
    if args.skip_known:
        for test, why in KNOWN_DIFFERENCES.items():
            print(f"deselected {test}*: {why}")
            known += ["--deselect", test]
    cmd = [
        sys.executable, "-m", "pytest", *targets,
        "-p", "zarrpipe_suite_plugin", "-p", "no:cacheprovider",
        "-o", "addopts=", "--ignore=tests/benchmarks", "--timeout=600", "-q", "-rfE",
        *known, *args.pytest_args,
    ]  # fmt: skip
    print(f"zarr {root.name} with {PIPELINES[args.pipeline]}: {' '.join(cmd)}", flush=True)
    return subprocess.run(cmd, cwd=root, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())

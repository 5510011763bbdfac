"""pytest plugin loaded into zarr-python's own test suite: checks that the configured codec
pipeline is really in use and lets zarrpipe's expected FallbackWarning through."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore::zarrpipe.pipeline.FallbackWarning")


def pytest_report_header(config: pytest.Config) -> str:
    import zarr
    from zarr.registry import get_pipeline_class

    cls = get_pipeline_class(reload_config=True)
    wanted = os.environ.get("ZARR_CODEC_PIPELINE__PATH", "")
    if wanted and f"{cls.__module__}.{cls.__qualname__}" != wanted:
        raise pytest.UsageError(f"zarr resolved codec pipeline {cls}, expected {wanted}")
    return f"zarr {zarr.__version__}, codec pipeline: {cls.__module__}.{cls.__qualname__}"

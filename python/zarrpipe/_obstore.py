"""Turns an `obstore` store object into the URL and options zarrpipe's Rust side opens.

obstore and zarrpipe each link their own copy of the object_store crate, so a store cannot
be shared across the two extensions; its configuration can, and is, read from the object.
"""

from __future__ import annotations

from typing import Any

_SCHEMES = {"S3Store": "s3", "GCSStore": "gs", "AzureStore": "az"}
_BUCKET_KEYS = {"s3": "bucket", "gs": "bucket", "az": "container_name"}
# object_store's builders accept these keys prefixed: "endpoint" -> "aws_endpoint".
_PREFIX = {"s3": "aws_", "gs": "google_", "az": "azure_"}


def url_and_options(store: Any) -> tuple[str, dict[str, str]]:
    """(URL, object_store options) for an obstore store object."""
    kind = type(store).__name__
    prefix = str(getattr(store, "prefix", None) or "").strip("/")
    client = {k: _text(v) for k, v in (getattr(store, "client_options", None) or {}).items()}
    if kind == "LocalStore":
        return "file://" + "/" + prefix, {}
    if kind == "HTTPStore":
        return str(store.url), client
    scheme = _SCHEMES.get(kind)
    if scheme is None:
        raise TypeError(f"zarrpipe cannot read obstore's {kind}; use S3/GCS/Azure/HTTP/Local")
    config = {k: _text(v) for k, v in (getattr(store, "config", None) or {}).items()}
    bucket = config.pop(_BUCKET_KEYS[scheme], None)
    if bucket is None:
        raise ValueError(f"obstore {kind} has no {_BUCKET_KEYS[scheme]} in its config")
    options = {_key(scheme, k): v for k, v in config.items()}
    options.update(client)
    url = f"{scheme}://{bucket}" + (f"/{prefix}" if prefix else "")
    return url, options


def _key(scheme: str, key: str) -> str:
    prefix = _PREFIX[scheme]
    return key if key.startswith(prefix) else prefix + key


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

"""Helpers the tests share (stores, servers, fault cases, the source parsers of the guards);
`tests/` is on the path (pyproject.toml's pytest `pythonpath`), so they import as `support.…`."""

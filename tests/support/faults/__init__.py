"""Hostile and corrupt Zarr stores for the reliability tests, and the zarr-python comparison.

Every builder writes a valid store with zarr-python (or writes metadata by hand), then breaks
it on disk, and returns a `Built`: which array to open, what to read, which stored key a
corrupt-chunk error must name, a selection that must still read correctly afterwards, and what
a correct reader returns where the format defines an answer (e.g. the fill value for an empty
shard index entry).

By job: `stores` writes the stores and the bytes that break them, `registry` holds the cases
(`CASES`), the `*_cases` modules register them by what they break, `checks` has the
in-process assertions the tests share, and `observe` runs one case in a subprocess.
`python tests/support/gen_reliability_table.py` runs every case against zarrpipe and
zarr-python's default pipeline and writes the table of docs/reliability.md.
"""

import importlib

# Importing the package registers every case, module by module in this order (the order of
# the cases within a section of the table).
CASE_MODULES = ("chunk_cases", "shard_cases", "metadata_cases", "vlen_cases", "path_cases")
for _module in CASE_MODULES:
    importlib.import_module(f".{_module}", __name__)

"""Ray Data: `read_zarr` makes a `ray.data.Dataset` of Zarr arrays, one row per position
along axis 0; `ZarrDatasink` writes a dataset's rows back into existing arrays.

Why a datasource of its own: Ray's `ray.data.read_zarr` reads Zarr v2 through zarr-python 2
and gives a row per chunk; this one reads v2 and v3, sharded or not, through zarrpipe, and
gives a row per sample. Its read tasks are cut on the stored objects' boundaries along axis 0
(shards, else chunks, of every array), so that each task reads whole objects, each once, with
one `arr[a:b]` per array and block. A task carries the `Store` (which pickles as its location
and options) and each array's path, and opens the arrays where it runs.
Importing this module imports ray.
"""

from zarrpipe.ray.read import ZarrDatasource, read_zarr
from zarrpipe.ray.sink import ZarrDatasink

__all__ = ["ZarrDatasink", "ZarrDatasource", "read_zarr"]

"""The installed wheel's smoke test, for runners that do not run the whole suite (macOS,
Windows, emulated aarch64, musl): the package imports from site-packages, its versions agree,
and a write-read round trip through each store kind the platform has gives back the values,
chunked, sharded and compressed.

    python .ci/smoke.py            (run from outside the checkout, so the import is the wheel's)
"""

import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarrpipe


def main() -> None:
    where = Path(zarrpipe.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents, f"zarrpipe imported from {where}"
    version = importlib.metadata.version("zarrpipe")
    assert zarrpipe.__version__ == version, (zarrpipe.__version__, version)
    cli = subprocess.run(
        [sys.executable, "-m", "zarrpipe", "--version"], capture_output=True, text=True, check=True
    )
    assert cli.stdout.strip() == f"zarrpipe {version}", cli.stdout

    rng = np.random.default_rng(0)
    values = rng.normal(size=(96, 80)).astype("float32")
    with tempfile.TemporaryDirectory() as root:
        store = zarrpipe.Store(str(Path(root) / "smoke.zarr"))
        cases = {
            "chunked": {"chunks": (32, 32)},
            "sharded": {"chunks": (16, 16), "shards": (48, 80)},
        }
        for name, layout in cases.items():
            arr = store.create_array(name, shape=values.shape, dtype="float32", **layout)
            arr[:] = values
            back = zarrpipe.Store(str(Path(root) / "smoke.zarr")).open_array(name)
            np.testing.assert_array_equal(back[:], values)
            np.testing.assert_array_equal(
                back.oindex[[3, 50, 95], 7:70:9], values[[3, 50, 95], 7:70:9]
            )
            t = back.read((slice(10, 20), slice(0, 80)))
            np.testing.assert_array_equal(np.from_dlpack(t.into_dlpack()), values[10:20])
    print(f"smoke: zarrpipe {version} on Python {sys.version.split()[0]} ({sys.platform}): ok")


if __name__ == "__main__":
    main()

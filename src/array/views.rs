//! `arr.oindex`, `arr.vindex` and `arr.blocks`: the objects their `[...]` reads and writes
//! go through, as zarr-python has them.

use pyo3::prelude::*;

use super::Array;
use crate::errors::BindResult;

/// Defines a view class over an array whose `[key]` reads and writes select as `$kind`.
macro_rules! selection_view {
    ($name:ident, $py_name:literal, $kind:literal, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(frozen, module = "zarrpipe._zarrpipe", name = $py_name)]
        pub struct $name {
            array: Py<Array>,
        }

        impl $name {
            pub fn new(array: &Bound<'_, Array>) -> Self {
                Self {
                    array: array.clone().unbind(),
                }
            }
        }

        #[pymethods]
        impl $name {
            /// A writable NumPy array of the selection (the fresh read's buffer, no copy).
            fn __getitem__<'py>(
                &self,
                py: Python<'py>,
                key: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let array = self.array.get();
                let request = array.kind_request($kind, key)?;
                array.read_numpy(py, request, false)
            }

            fn __setitem__(
                &self,
                py: Python<'_>,
                key: &Bound<'_, PyAny>,
                value: &Bound<'_, PyAny>,
            ) -> BindResult<()> {
                let array = self.array.get();
                let request = array.kind_request($kind, key)?;
                array.write_request(py, request, value)
            }
        }
    };
}

selection_view!(
    OIndex,
    "OIndex",
    "orthogonal",
    "`arr.oindex[...]`: per axis an integer, a slice, a 1-d integer array or a 1-d mask."
);
selection_view!(
    VIndex,
    "VIndex",
    "numpy",
    "`arr.vindex[...]`: integer arrays broadcast together (coordinates), or one mask."
);
selection_view!(
    BlockIndex,
    "BlockIndex",
    "block",
    "`arr.blocks[...]`: integers and step-1 slices over the stored chunk grid (shards)."
);

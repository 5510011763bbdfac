//! `Store`'s data calls: reading and writing selections of the array at a path, straight
//! or on asyncio's executor.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::Store;
use crate::errors::BindResult;

// The Python methods that read and write data.
#[pymethods]
impl Store {
    /// `read` on asyncio's default executor: awaiting it never blocks the event loop.
    /// Nothing starts until it is awaited; cancelling the awaiting task stops the read at
    /// its next chunk.
    ///
    /// Args:
    ///     path: The array's path in the store.
    ///     selection: As for `Array.read`.
    ///
    /// Returns:
    ///     What `read` returns.
    ///
    /// Raises:
    ///     FileNotFoundError: See `read`, which raises the same exceptions.
    #[pyo3(signature = (path, selection = None))]
    fn read_async(
        slf: &Bound<'_, Self>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::async_call::AsyncCall> {
        let py = slf.py();
        let selection = selection.map_or_else(|| py.None().into_bound(py), Clone::clone);
        let args = PyTuple::new(
            py,
            [pyo3::types::PyString::new(py, path).into_any(), selection],
        )?;
        Ok(crate::async_call::AsyncCall::new(
            slf.getattr("read")?,
            args,
        ))
    }

    /// Writes values into a selection of the array at `path` (see `Array.write`).
    ///
    /// Args:
    ///     path: The array's path in the store.
    ///     selection: As for `Array.write`; None writes everything.
    ///     value: A scalar or an array, broadcast like NumPy to the selection's shape.
    ///
    /// Raises:
    ///     FileNotFoundError: No array at `path`.
    ///     PermissionError: See `Array.write`, which raises the same exceptions.
    #[pyo3(signature = (path, selection, value))]
    fn write(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
    ) -> BindResult<()> {
        self.array(py, path, false)?
            .write_selection(py, selection, value)
    }

    /// Decodes a selection of the array at `path` straight into `out` (see
    /// `Array.read_into`).
    ///
    /// Args:
    ///     path: The array's path in the store.
    ///     selection: As for `Array.read`; None reads everything.
    ///     out: A writable buffer of the selection's shape and the array's dtype.
    ///
    /// Raises:
    ///     FileNotFoundError: No array at `path`.
    ///     ValueError: See `Array.read_into`, which raises the same exceptions.
    #[pyo3(signature = (path, selection, out))]
    fn read_into(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.array(py, path, false)?
            .read_selection_into(py, selection, out)
    }

    /// Reads a selection of the array at `path` into a fresh Tensor (see `Array.read`;
    /// a NumPy array for variable-length strings and bytes).
    ///
    /// Args:
    ///     path: The array's path in the store.
    ///     selection: As for `Array.read`; None (the default) reads everything.
    ///
    /// Returns:
    ///     A Tensor of the selection's shape.
    ///
    /// Raises:
    ///     FileNotFoundError: No array at `path`.
    ///     IndexError: See `Array.read`, which raises the same exceptions.
    #[pyo3(signature = (path, selection = None))]
    fn read(
        &self,
        py: Python<'_>,
        path: &str,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.array(py, path, false)?.read_selection(py, selection)
    }

    /// Reads whole chunks of the array at `path`, decoded in parallel (see
    /// `Array.read_chunks`).
    ///
    /// Args:
    ///     path: The array's path in the store.
    ///     indices: Chunk positions in the array's `chunks` grid.
    ///
    /// Returns:
    ///     One Tensor per index, in order.
    ///
    /// Raises:
    ///     FileNotFoundError: No array at `path`.
    ///     IndexError: See `Array.read_chunks`, which raises the same exceptions.
    fn read_chunks(
        &self,
        py: Python<'_>,
        path: &str,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        self.array(py, path, false)?.read_chunk_list(py, indices)
    }
}

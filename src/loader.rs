//! `zarrpipe._Rows` (internal): the batch loader's two engine calls. `read` decodes a window of
//! row ranges of an array once, in parallel, straight into one buffer; `gather` copies chosen
//! rows of one or more windows into a fresh, uniquely held `Tensor` (a batch whose
//! `into_dlpack()` always succeeds), and `gather_into` into the caller's buffer (a
//! DataLoader worker's shared memory). All run detached on the decoding pool.

use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use numpy::PyUntypedArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use zarrpipe_codecs::memory::out::OutPtr;
use zarrpipe_codecs::read::rows::{gather_rows, gather_rows_into, RowSource};
use zarrpipe_codecs::ElementType;

use crate::array::Array;
use crate::numpy_layout::numpy_layout;
use crate::runtime::run;
use crate::tensor::Tensor;

/// Decoded rows of one array, for `zarrpipe.loader.BatchLoader` (internal).
#[pyclass(frozen, module = "zarrpipe", name = "_Rows")]
pub struct Rows {
    /// `None` once handed to another read for reuse.
    bytes: Mutex<Option<Bytes>>,
    shape: Vec<u64>,
    axis: usize,
    dtype: ElementType,
}

impl Rows {
    fn bytes(&self) -> PyResult<Bytes> {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| PyValueError::new_err("these rows were recycled into another read"))
    }

    /// The buffer, for another read to decode into, when nobody else holds it.
    fn recycle(&self) -> Option<Vec<u8>> {
        let taken = self
            .bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        taken.try_into_mut().ok().map(Vec::from)
    }
}

#[pymethods]
impl Rows {
    /// Reads the rows `ranges` along `axis`, stacked in order, every other axis whole
    /// (into the buffer of `reuse`, then spent, when it fits).
    #[staticmethod]
    #[pyo3(signature = (array, axis, ranges, reuse = None))]
    fn read(
        py: Python<'_>,
        array: PyRef<'_, Array>,
        axis: usize,
        ranges: Vec<(u64, u64)>,
        reuse: Option<PyRef<'_, Rows>>,
    ) -> PyResult<Self> {
        let engine = array.engine().clone();
        let cache = array.cache().cloned();
        let ranges: Vec<_> = ranges.into_iter().map(|(a, b)| a..b).collect();
        let spare = reuse.and_then(|r| r.recycle());
        let (bytes, shape) = run(py, move || {
            engine.read_rows(axis, &ranges, cache.as_deref(), spare)
        })?;
        Ok(Self {
            bytes: Mutex::new(Some(bytes)),
            shape,
            axis,
            dtype: array.engine().info.dtype,
        })
    }

    /// The number of rows held.
    #[getter]
    fn rows(&self) -> u64 {
        self.shape[self.axis]
    }

    /// The shape of the buffer.
    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.shape.clone()
    }

    /// A fresh Tensor of the chosen rows of each part, in order.
    #[staticmethod]
    fn gather(py: Python<'_>, parts: Vec<(PyRef<'_, Rows>, Vec<u64>)>) -> PyResult<Tensor> {
        let owned = owned_parts(parts)?;
        let (axis, dtype) = (owned.axis, owned.dtype);
        let (bytes, shape) = run(py, move || {
            gather_rows(&owned.sources(), axis, dtype.size())
        })?;
        Ok(Tensor::new(
            bytes,
            shape.iter().map(|&d| d as usize).collect(),
            dtype,
        ))
    }

    /// The chosen rows of each part, in order, into `out` (writable, C-contiguous, of
    /// exactly the batch's size); returns the batch's shape.
    #[staticmethod]
    fn gather_into(
        py: Python<'_>,
        parts: Vec<(PyRef<'_, Rows>, Vec<u64>)>,
        out: Bound<'_, PyUntypedArray>,
    ) -> PyResult<Vec<u64>> {
        let owned = owned_parts(parts)?;
        let (axis, dtype) = (owned.axis, owned.dtype);
        let contiguous: bool = out.getattr("flags")?.getattr("c_contiguous")?.extract()?;
        if !contiguous {
            return Err(PyValueError::new_err(
                "gather_into: out is not C-contiguous",
            ));
        }
        let (ptr, layout) = numpy_layout(&out, true)?;
        // SAFETY: `out` stays alive (borrowed here) while the copy runs detached, and the
        // engine checks its size before writing.
        let out_ptr = unsafe { OutPtr::new(ptr, layout.len) };
        let shape = run(py, move || {
            gather_rows_into(&owned.sources(), axis, dtype.size(), &out_ptr)
        })?;
        drop(out);
        Ok(shape)
    }
}

/// The parts of a gather: clones of their buffers (reference counts, no copy), which cross
/// into detached work, with the axis and dtype they share.
struct Parts {
    parts: Vec<(Bytes, Vec<u64>, Vec<u64>)>,
    axis: usize,
    dtype: ElementType,
}

impl Parts {
    fn sources(&self) -> Vec<RowSource<'_>> {
        self.parts
            .iter()
            .map(|(bytes, shape, rows)| RowSource { bytes, shape, rows })
            .collect()
    }
}

fn owned_parts(parts: Vec<(PyRef<'_, Rows>, Vec<u64>)>) -> PyResult<Parts> {
    let Some((first, _)) = parts.first() else {
        return Err(PyValueError::new_err("gather needs at least one part"));
    };
    let (axis, dtype) = (first.axis, first.dtype);
    if parts
        .iter()
        .any(|(r, _)| r.axis != axis || r.dtype != dtype)
    {
        return Err(PyValueError::new_err(
            "gather: parts read along different axes or of different dtypes",
        ));
    }
    let parts = parts
        .into_iter()
        .map(|(r, idx)| Ok((r.bytes()?, r.shape.clone(), idx)))
        .collect::<PyResult<_>>()?;
    Ok(Parts { parts, axis, dtype })
}

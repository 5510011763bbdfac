//! `OwnedTensor`: a buffer moved out of a `Tensor` by `into_dlpack()`, which nobody else
//! holds. Its `__dlpack__` hands that buffer, writable and without a copy, to one consumer.

use std::sync::{Mutex, PoisonError};

use bytes::BytesMut;
use dlpark::DlpackFlags;
use numpy::PyArrayDescr;
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zarrpipe_codecs::ElementType;

use super::dlpack::{self, Layout, CPU};
use super::recycle_owned;
use crate::dtype::numpy_dtype;

const EXPORTED: &str =
    "OwnedTensor already exported: its buffer goes to exactly one DLPack consumer";

/// A buffer moved out of a Tensor by `Tensor.into_dlpack()`, handed to exactly one DLPack
/// consumer, writable.
#[pyclass(frozen, module = "zarrpipe", name = "OwnedTensor")]
pub struct OwnedTensor {
    shape: Vec<usize>,
    dtype: ElementType,
    /// `None` once `__dlpack__` has handed the buffer to a consumer.
    slot: Mutex<Option<BytesMut>>,
    /// A read's output, kept for the next read of its size when freed (see `Tensor`).
    recycle: bool,
}

impl OwnedTensor {
    /// `buffer` must be uniquely owned memory of the tensor's size.
    pub fn new(buffer: BytesMut, shape: Vec<usize>, dtype: ElementType) -> Self {
        Self {
            shape,
            dtype,
            slot: Mutex::new(Some(buffer)),
            recycle: false,
        }
    }

    /// Whether the buffer is a read's output, kept for the next read when freed.
    #[must_use]
    pub fn recycled(mut self, recycle: bool) -> Self {
        self.recycle = recycle;
        self
    }
}

impl Drop for OwnedTensor {
    fn drop(&mut self) {
        let buffer = self
            .slot
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (true, Some(buffer)) = (self.recycle, buffer) {
            recycle_owned(buffer);
        }
    }
}

/// The buffer a DLPack consumer holds; when it frees the capsule, a read's output is kept
/// for the next read of its size.
struct Exported {
    buffer: BytesMut,
    recycle: bool,
}

impl Drop for Exported {
    fn drop(&mut self) {
        if self.recycle {
            recycle_owned(std::mem::take(&mut self.buffer));
        }
    }
}

#[pymethods]
impl OwnedTensor {
    /// The shape, one length per axis.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type, in native byte order.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        numpy_dtype(py, self.dtype)
    }

    /// The number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The size of the buffer in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }

    fn __repr__(&self) -> String {
        let exported = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none();
        format!(
            "OwnedTensor(shape={:?}, dtype={}{})",
            self.shape,
            self.dtype,
            if exported { ", exported" } else { "" }
        )
    }

    /// The one writable, zero-copy DLPack export: the buffer moves into the capsule.
    ///
    /// Args:
    ///     stream: Must be `None` (or -1): the memory is on the CPU.
    ///     max_version: The highest DLPack version the consumer understands
    ///         (`>= (1, 0)` gives a versioned capsule with no flags set).
    ///     dl_device: The device the consumer wants; only `(1, 0)`, the CPU.
    ///     copy: `True` is refused (the point of an OwnedTensor is not to copy).
    ///
    /// Returns:
    ///     A PyCapsule owning the buffer; its deleter frees it.
    ///
    /// Raises:
    ///     BufferError: A second export, a device other than the CPU, or `copy=True`.
    ///     ValueError: A `stream` other than `None` or -1.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = dlpack::parse_request(stream, max_version, dl_device, copy)?;
        let buffer = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyBufferError::new_err(EXPORTED))?;
        let mut owner = Box::new(Exported {
            buffer,
            recycle: self.recycle,
        });
        let data = owner.buffer.as_mut_ptr();
        // A moved, uniquely owned buffer is exactly what `copy=True` asks for: memory the
        // consumer alone owns. So it is flagged IS_COPIED then, and moved either way.
        let flags = if request.copy == Some(true) {
            DlpackFlags::IS_COPIED
        } else {
            DlpackFlags::empty()
        };
        let layout = Layout {
            shape: &self.shape,
            dtype: self.dtype,
        };
        // SAFETY: `owner` is the only handle on this memory (it came from a unique `Bytes`
        // and was taken out of the slot), so the consumer may write through `data`.
        unsafe { dlpack::export(py, owner, data, &layout, request.abi, flags) }
    }

    /// The DLPack device of the memory.
    ///
    /// Returns:
    ///     Always `(1, 0)`: CPU memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        CPU
    }
}

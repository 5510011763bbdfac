//! `Tensor`'s two DLPack doors as Python methods: `__dlpack__` (shared, read-only, any
//! number of times) and `into_dlpack` (the buffer moved out, writable, once); the capsules
//! are built by `dlpack`.

use std::ffi::c_int;

use dlpark::DlpackFlags;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use super::dlpack::{Abi, CPU};
use super::owned::OwnedTensor;
use super::{dlpack, export_copy, HeldBuffer, Tensor, CONSUMED, SHARED};
use crate::dtype::buffer_format;

// The DLPack doors.
#[pymethods]
impl Tensor {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "Tensor buffers are read-only; use into_dlpack() or __dlpack__(copy=True) to write",
            ));
        }
        let this = slf.get();
        if let Some(d) = &this.descr {
            // No PEP 3118 format says "datetime64" (or UTF-32, or a record as zarr-python
            // types it): refusing makes numpy.asarray use __array__, which keeps the dtype.
            return Err(PyBufferError::new_err(format!(
                "dtype {} has no buffer-protocol format; use to_numpy(), numpy.asarray(tensor) or buffer()",
                d.bind(slf.py())
            )));
        }
        let format = buffer_format(this.dtype)?;
        let bytes = this.shared()?;
        let held = Box::new(HeldBuffer::new(bytes, &this.shape, this.dtype)?);
        if flags & ffi::PyBUF_F_CONTIGUOUS == ffi::PyBUF_F_CONTIGUOUS && !held.is_f_contiguous() {
            return Err(PyBufferError::new_err(
                "Tensor buffers are C-contiguous, not Fortran-contiguous",
            ));
        }
        let held = Box::into_raw(held);
        // SAFETY: `view` is a valid Py_buffer from CPython. Every pointer we store points
        // into `held`, which `__releasebuffer__` frees; `held.bytes` keeps the memory alive.
        unsafe {
            let h = &mut *held;
            (*view).buf = h.bytes.as_ptr().cast_mut().cast();
            (*view).len = h.len;
            (*view).readonly = 1;
            (*view).itemsize = h.itemsize;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                format.as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = h.ndim;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                h.shape.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                h.strides.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = held.cast();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: `internal` was set by `__getbuffer__` from `Box::into_raw` and is released
        // exactly once, here.
        unsafe {
            let held = (*view).internal.cast::<HeldBuffer>();
            if !held.is_null() {
                drop(Box::from_raw(held));
                (*view).internal = std::ptr::null_mut();
            }
        }
    }

    /// The DLPack export (what `np.from_dlpack(t)` and `torch.from_dlpack(t)` call).
    ///
    /// With `max_version >= (1, 0)` the capsule is versioned: zero-copy and flagged
    /// `READ_ONLY`, or, with `copy=True`, a fresh writable copy flagged `IS_COPIED`. A
    /// legacy capsule (no `max_version`) cannot say read-only, so it is always a copy.
    ///
    /// Args:
    ///     stream: Must be `None` (or -1): the memory is on the CPU.
    ///     max_version: The highest DLPack version the consumer understands.
    ///     dl_device: The device the consumer wants; only `(1, 0)`, the CPU.
    ///     copy: `True` for a writable copy; `False` to forbid copying; `None` for
    ///         zero-copy where DLPack can mark it read-only, a copy otherwise.
    ///
    /// Returns:
    ///     A `dltensor_versioned` or `dltensor` PyCapsule, for exactly one consumer.
    ///
    /// Raises:
    ///     BufferError: The tensor was consumed; `copy=False` without `max_version`; a
    ///         device other than the CPU; a dtype DLPack cannot describe.
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
        self.check_dlpack(py)?;
        let bytes = self.shared()?;
        let layout = self.layout();
        match (request.abi, request.copy) {
            (Abi::Versioned, None | Some(false)) => {
                let owner = Box::new(bytes);
                let data = owner.as_ptr().cast_mut();
                // SAFETY: the capsule keeps a `Bytes` clone (so the memory lives and is seen
                // as shared) and says READ_ONLY, so nobody writes through `data`.
                unsafe { dlpack::export(py, owner, data, &layout, Abi::Versioned, DlpackFlags::READ_ONLY) }
            }
            (Abi::Legacy, Some(false)) => Err(PyBufferError::new_err(
                "a legacy DLPack capsule (no max_version) cannot mark memory read-only, so a \
                 zero-copy export needs max_version >= (1, 0); or use into_dlpack() to move the buffer out",
            )),
            (abi, _) => export_copy(py, &bytes, &layout, abi),
        }
    }

    /// The DLPack device of the memory.
    ///
    /// Returns:
    ///     Always `(1, 0)`: CPU memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        CPU
    }

    /// Moves the buffer out for a writable, zero-copy export.
    ///
    /// Use it as `np.from_dlpack(t.into_dlpack())` or `torch.from_dlpack(t.into_dlpack())`.
    /// Every fresh read's buffer is held by nobody else, so this succeeds on it.
    ///
    /// Returns:
    ///     An OwnedTensor holding the buffer; its one `__dlpack__` export is writable.
    ///     This tensor is consumed.
    ///
    /// Raises:
    ///     BufferError: Something else still shares the buffer — a view, an array from
    ///         `to_numpy()`, a chunk cache entry — (the tensor is left intact; use
    ///         `__dlpack__(copy=True)` for a writable copy), the tensor was already
    ///         consumed, or its dtype has no DLPack type code (datetimes, strings,
    ///         records: use `to_numpy()`).
    #[allow(clippy::wrong_self_convention)] // the name is the public API; Python objects are shared
    fn into_dlpack(&self, py: Python<'_>) -> PyResult<OwnedTensor> {
        self.check_dlpack(py)?;
        let mut slot = self.lock();
        let bytes = slot
            .take()
            .ok_or_else(|| PyBufferError::new_err(CONSUMED))?;
        // An empty buffer owns no memory, so nobody can observe writes to it.
        let owned = if bytes.is_empty() {
            Ok(bytes::BytesMut::new())
        } else {
            bytes.try_into_mut()
        };
        match owned {
            Ok(owned) => {
                Ok(OwnedTensor::new(owned, self.shape.clone(), self.dtype).recycled(self.recycle))
            }
            Err(bytes) => {
                *slot = Some(bytes);
                Err(PyBufferError::new_err(SHARED))
            }
        }
    }
}

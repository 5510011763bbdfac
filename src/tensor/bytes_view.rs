//! A read-only, 1-D byte exporter that holds one `Bytes` clone: the base object behind
//! `Tensor.buffer()` and `Tensor.to_numpy()`. While it lives, the tensor's buffer is shared.

use std::ffi::c_int;

use bytes::Bytes;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// Holds the bytes behind `Tensor.buffer()` and `Tensor.to_numpy()` (internal).
#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_BytesView")]
pub struct BytesView {
    bytes: Bytes,
}

impl BytesView {
    pub fn new(bytes: Bytes) -> Self {
        Self { bytes }
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
}

#[pymethods]
impl BytesView {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("zarrpipe buffers are read-only"));
        }
        let bytes = &slf.get().bytes;
        let len =
            isize::try_from(bytes.len()).map_err(|_| PyBufferError::new_err("buffer too large"))?;
        // SAFETY: `view` is a valid Py_buffer supplied by CPython. The memory it points to is
        // owned by `slf.bytes`, which lives as long as `view.obj` (a strong reference to slf).
        unsafe {
            (*view).buf = bytes.as_ptr().cast_mut().cast();
            (*view).len = len;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"B".as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                &raw mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &raw mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }
}

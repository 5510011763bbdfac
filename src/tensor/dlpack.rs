//! Builds DLPack capsules: the keyword negotiation of `__dlpack__` and the managed tensors
//! behind both doors (shared read-only, fresh copy, moved-out owned buffer).

use dlpark::ffi::{DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackFlags, ManagedTensorBase, OpaqueContext};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use zarrpipe_codecs::ElementType;

use crate::dtype::dlpack_dtype;

pub const CPU: (i32, i32) = (1, 0);

/// Which capsule the consumer can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abi {
    /// `dltensor`: no flags field, so it can never say "read-only".
    Legacy,
    /// `dltensor_versioned`: carries `READ_ONLY` / `IS_COPIED`.
    Versioned,
}

/// A validated `__dlpack__` call.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub abi: Abi,
    pub copy: Option<bool>,
}

/// Validates the `__dlpack__` keywords. Errors are `BufferError`/`ValueError`, never
/// `TypeError`: NumPy reads `TypeError` as "old producer" and retries without keywords.
pub fn parse_request(
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<&Bound<'_, PyAny>>,
) -> PyResult<Request> {
    if let Some(stream) = stream.filter(|s| !s.is_none()) {
        if stream.extract::<i64>().ok() != Some(-1) {
            return Err(PyValueError::new_err(format!(
                "stream must be None for CPU tensors, got {stream}"
            )));
        }
    }
    if let Some(device) = dl_device.filter(|d| !d.is_none()) {
        let parsed: Option<(i32, i32)> = device.extract().ok();
        if parsed != Some(CPU) {
            return Err(PyBufferError::new_err(format!(
                "zarrpipe tensors live on the CPU (device (1, 0)); cannot export to device {device}"
            )));
        }
    }
    let abi = match max_version.filter(|v| !v.is_none()) {
        None => Abi::Legacy,
        Some(v) => {
            let (major, _minor): (u32, u32) = v.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "max_version must be a (major, minor) tuple, got {v}"
                ))
            })?;
            if major >= 1 {
                Abi::Versioned
            } else {
                Abi::Legacy
            }
        }
    };
    let copy = match copy.filter(|c| !c.is_none()) {
        None => None,
        Some(c) => Some(c.extract::<bool>().map_err(|_| {
            PyValueError::new_err(format!("copy must be None, True or False, got {c}"))
        })?),
    };
    Ok(Request { abi, copy })
}

/// Everything a capsule describes besides who owns the memory.
pub struct Layout<'a> {
    pub shape: &'a [usize],
    pub dtype: ElementType,
}

/// Wraps `data` in a DLPack capsule whose manager context is `owner`.
///
/// # Safety
/// `data` must point to `shape.product() * dtype.size()` initialised bytes that stay valid
/// until `owner` is dropped, and `flags` must tell the truth: without `READ_ONLY` the
/// consumer may write through `data`, so `owner` must be the memory's only holder.
pub unsafe fn export<'py, C: OpaqueContext>(
    py: Python<'py>,
    owner: C,
    data: *mut u8,
    layout: &Layout<'_>,
    abi: Abi,
    flags: DlpackFlags,
) -> PyResult<Bound<'py, PyAny>> {
    match abi {
        // SAFETY: `build` has `export`'s contract, which the caller upholds.
        Abi::Versioned => unsafe {
            build::<DLManagedTensorVersioned, _>(owner, data, layout, Some(flags))?
                .into_bound_py_any(py)
        },
        // SAFETY: as above.
        Abi::Legacy => unsafe {
            build::<DLManagedTensor, _>(owner, data, layout, None)?.into_bound_py_any(py)
        },
    }
}

unsafe fn build<M: ManagedTensorBase, C: OpaqueContext>(
    owner: C,
    data: *mut u8,
    layout: &Layout<'_>,
    flags: Option<DlpackFlags>,
) -> PyResult<dlpark::Managed<M>> {
    let mut tensor = Dynamic::compact(layout.shape.to_vec())
        .initialize_as::<M>(owner)
        .map_err(|e| PyBufferError::new_err(format!("cannot describe tensor to DLPack: {e}")))?;
    tensor
        .set_data(data.cast())
        .set_device(DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        })
        .set_dtype(dlpack_dtype(layout.dtype))
        .set_byte_offset(0);
    if let Some(flags) = flags {
        // SAFETY: the caller of `export` vouches for the flags (see its contract).
        unsafe { tensor.set_flags_unchecked(flags) };
    }
    // SAFETY: data, shape and strides are set; the owner keeps `data` alive (caller's contract).
    Ok(unsafe { tensor.finish() })
}

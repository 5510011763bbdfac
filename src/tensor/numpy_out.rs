//! A fresh read handed to NumPy as a writable array without a copy, for indexing
//! (`arr[...]`, `oindex`, `vindex`, `blocks`): the buffer moves out of the Tensor, as
//! `into_dlpack()` moves it, into the array's base object. Unlike DLPack this works for every
//! data type NumPy has (datetimes, fixed-length strings, records, small floats).

use std::ffi::c_int;

use bytes::BytesMut;
use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{recycle_owned, Tensor};

/// Owns a buffer that a NumPy array points into; frees (or keeps for the next read of its
/// size) the buffer when the array goes.
#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_ArrayMemory")]
pub struct ArrayMemory {
    buffer: std::sync::Mutex<Option<BytesMut>>,
    recycle: bool,
}

impl Drop for ArrayMemory {
    fn drop(&mut self) {
        let buffer = self
            .buffer
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let (true, Some(buffer)) = (self.recycle, buffer) {
            recycle_owned(buffer);
        }
    }
}

impl Tensor {
    /// A NumPy array of the tensor's shape and dtype over `data`, which `owner` keeps alive
    /// (the array's base object): the one place both NumPy faces are made.
    ///
    /// # Safety
    /// `data` must point to the tensor's `nbytes` bytes and stay valid while `owner` lives;
    /// with `writable`, nobody else may see those bytes.
    pub(super) unsafe fn array_over<'py>(
        &self,
        py: Python<'py>,
        data: *mut u8,
        owner: Bound<'py, PyAny>,
        writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let descr = self.descr(py)?;
        let mut dims: Vec<npy_intp> = self
            .shape
            .iter()
            .map(|&d| npy_intp::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| PyValueError::new_err("dimension too large for NumPy"))?;
        let nd = c_int::try_from(dims.len())
            .map_err(|_| PyValueError::new_err("too many dimensions"))?;
        let mut flags = npyffi::NPY_ARRAY_C_CONTIGUOUS | npyffi::NPY_ARRAY_ALIGNED;
        if writable {
            flags |= npyffi::NPY_ARRAY_WRITEABLE;
        }
        // SAFETY: NewFromDescr steals the descr reference we pass; `data` is valid while
        // `owner` lives (the caller's contract), and SetBaseObject makes the array own
        // `owner` (stealing the reference we pass).
        unsafe {
            let array = PY_ARRAY_API.PyArray_NewFromDescr(
                py,
                npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
                descr.into_ptr().cast(),
                nd,
                dims.as_mut_ptr(),
                std::ptr::null_mut(),
                data.cast(),
                flags,
                std::ptr::null_mut(),
            );
            let array = Bound::from_owned_ptr_or_err(py, array)?;
            if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), owner.into_ptr()) != 0
            {
                return Err(PyErr::fetch(py));
            }
            Ok(array)
        }
    }

    /// The buffer, moved out of the slot when nobody else holds it (else left in place).
    fn take_unique(&self) -> Option<BytesMut> {
        let mut slot = self.lock();
        let bytes = slot.take()?;
        if bytes.is_empty() {
            return Some(BytesMut::new());
        }
        match bytes.try_into_mut() {
            Ok(owned) => Some(owned),
            Err(bytes) => {
                *slot = Some(bytes);
                None
            }
        }
    }

    /// The tensor's values as a writable NumPy array that owns its memory: the buffer moves
    /// out (the tensor becomes a tombstone) when nobody else holds it, else a copy.
    #[allow(clippy::wrong_self_convention)] // moves the buffer out, as `into_dlpack` does
    pub fn into_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(mut owned) = self.take_unique() else {
            // Shared (a cache entry): a writable copy, as `np.array(t)` makes.
            return py
                .import("numpy")?
                .call_method1("array", (self.to_numpy(py)?,));
        };
        let recycle = self.recycle;
        // Taken before the buffer moves into its owner: moving a BytesMut keeps its memory.
        let data = owned.as_mut_ptr();
        let memory = Bound::new(
            py,
            ArrayMemory {
                buffer: std::sync::Mutex::new(Some(owned)),
                recycle,
            },
        )?;
        // SAFETY: `data` points to the tensor's bytes, which `memory` owns and nobody else
        // sees (the buffer was uniquely held and moved out of the tensor), so the array may
        // write them.
        unsafe { self.array_over(py, data, memory.into_any(), true) }
    }
}

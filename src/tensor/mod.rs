//! `Tensor`: decoded data with shared read-only faces and one explicit door (`into_dlpack`)
//! that moves a uniquely held buffer out for a writable zero-copy export.
//!
//! The contract is docs/architecture.md's "The Tensor ownership contract". Every read-only face
//! keeps a `Bytes` clone alive while it lives, so `Bytes::is_unique()` honestly answers "does
//! anyone else see this memory?" when `into_dlpack()` asks.

pub mod bytes_view;
pub mod dlpack;
mod doors;
pub mod numpy_out;
pub mod owned;

use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use dlpark::DlpackFlags;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyTuple};
use zarrpipe_codecs::memory::{buffer, recycle};
use zarrpipe_codecs::ElementType;

use crate::dtype::{from_numpy_dtype, numpy_dtype};
use crate::errors::BindResult;
use bytes_view::BytesView;
use dlpack::{Abi, Layout};

pub const CONSUMED: &str = "Tensor already consumed";
const SHARED: &str = "Tensor buffer is shared; cannot move out for a writable export. \
                      Use __dlpack__(copy=True) for a writable copy.";

/// Copies above this size run with the GIL released.
const DETACH_COPY_BYTES: usize = 1 << 20;

/// Decoded data: a shape, a dtype and one buffer.
///
/// Reads return Tensors. The read-only faces — `buffer()`, `to_numpy()`, `__array__`
/// (`np.asarray(t)`), the buffer protocol (`memoryview(t)`: typed, N-d, read-only) and
/// `__dlpack__` — share the buffer without copying, as often as asked; each view keeps the
/// memory alive. `into_dlpack()` moves a buffer that nobody else holds out for a writable,
/// zero-copy export; the tensor is then consumed (a tombstone: `shape`, `dtype`, `nbytes`
/// and `repr` still work, the data faces raise `BufferError`).
///
/// Fixed-size types DLPack has no type code for — `datetime64`, `timedelta64`, fixed-length
/// strings (`<U7`) and bytes (`|S7`, `|V8`), structured records, ml_dtypes' small floats —
/// refuse `__dlpack__`, `into_dlpack()` and the buffer protocol with `BufferError`;
/// `to_numpy()`, `np.asarray(t)` (through `__array__`) and `buffer()` give their data with
/// the right dtype.
#[pyclass(frozen, module = "zarrpipe", name = "Tensor")]
pub struct Tensor {
    shape: Vec<usize>,
    dtype: ElementType,
    /// The NumPy dtype of a type DLPack and the buffer protocol cannot describe (datetimes,
    /// fixed-length strings and bytes, records, small floats), whose elements `dtype`
    /// carries opaquely (or as int64). Such a tensor refuses both and offers `to_numpy()`,
    /// `__array__` (so `np.asarray`) and `buffer()`.
    descr: Option<Py<PyArrayDescr>>,
    /// `None` once `into_dlpack()` has moved the buffer out (a tombstone).
    slot: Mutex<Option<Bytes>>,
    /// A read's fresh output: when its last holder lets go, the buffer is kept for the next
    /// read of its size (`zarrpipe_codecs::memory::recycle`).
    recycle: bool,
}

impl Tensor {
    /// Wraps decoded bytes. `bytes.len()` must equal `shape.product() * dtype.size()`.
    pub fn new(bytes: Bytes, shape: Vec<usize>, dtype: ElementType) -> Self {
        Self::with_descr(bytes, shape, dtype, None)
    }

    /// [`Tensor::new`] for elements whose NumPy dtype is `descr` (see the field).
    pub fn with_descr(
        bytes: Bytes,
        shape: Vec<usize>,
        dtype: ElementType,
        descr: Option<Py<PyArrayDescr>>,
    ) -> Self {
        debug_assert_eq!(
            bytes.len(),
            shape.iter().product::<usize>() * dtype.size(),
            "tensor bytes do not match shape {shape:?} and dtype {dtype}"
        );
        Self {
            shape,
            dtype,
            descr,
            slot: Mutex::new(Some(bytes)),
            recycle: false,
        }
    }

    /// Marks a read's fresh output, whose buffer is kept for the next read of its size once
    /// nobody holds it (never a buffer anyone else made: only those are known to be sized
    /// exactly and filled by every read).
    #[must_use]
    pub fn recycled(mut self) -> Self {
        self.recycle = true;
        self
    }

    /// `BufferError` for a tensor DLPack cannot describe.
    fn check_dlpack(&self, py: Python<'_>) -> PyResult<()> {
        match &self.descr {
            Some(d) => Err(PyBufferError::new_err(format!(
                "DLPack has no type code for dtype {}; use to_numpy() or numpy.asarray(tensor)",
                d.bind(py)
            ))),
            None => Ok(()),
        }
    }

    fn descr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        match &self.descr {
            Some(d) => Ok(d.bind(py).clone()),
            None => numpy_dtype(py, self.dtype),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Bytes>> {
        // The slot is only ever swapped whole, so a poisoned lock still holds a valid value.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A shared handle on the buffer, or `BufferError` if it was moved out.
    fn shared(&self) -> PyResult<Bytes> {
        self.lock()
            .as_ref()
            .cloned()
            .ok_or_else(|| PyBufferError::new_err(CONSUMED))
    }

    fn layout(&self) -> Layout<'_> {
        Layout {
            shape: &self.shape,
            dtype: self.dtype,
        }
    }

    /// The values as NumPy prints them, continuation lines aligned under `Tensor(`.
    fn values_text(&self, py: Python<'_>) -> PyResult<String> {
        let kwargs = [("separator", ", "), ("prefix", "Tensor(")].into_py_dict(py)?;
        py.import("numpy")?
            .call_method("array2string", (self.to_numpy(py)?,), Some(&kwargs))?
            .extract()
    }

    fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// A fresh, uniquely owned copy of `bytes`, made without the GIL when it is large.
pub fn fresh_copy(py: Python<'_>, bytes: &Bytes) -> BindResult<Vec<u8>> {
    let copy = || buffer::try_copy(bytes, "a DLPack copy");
    let result = if bytes.len() >= DETACH_COPY_BYTES {
        py.detach(copy)
    } else {
        copy()
    };
    Ok(result?)
}

/// Exports a fresh copy of `bytes`: writable, and flagged `IS_COPIED` when versioned.
pub fn export_copy<'py>(
    py: Python<'py>,
    bytes: &Bytes,
    layout: &Layout<'_>,
    abi: Abi,
) -> PyResult<Bound<'py, PyAny>> {
    let mut copy = Box::new(fresh_copy(py, bytes)?);
    let data = copy.as_mut_ptr();
    // SAFETY: `copy` is a new allocation of exactly the tensor's bytes, owned only by the
    // capsule from here on, so the consumer may write to it and IS_COPIED is true.
    unsafe { dlpack::export(py, copy, data, layout, abi, DlpackFlags::IS_COPIED) }
}

#[pymethods]
impl Tensor {
    /// Copies an array into a fresh Tensor.
    ///
    /// Args:
    ///     array: Anything `numpy.asarray` accepts, of a fixed-size dtype (numbers, bool,
    ///         bfloat16, datetime64/timedelta64, fixed-length strings and bytes, records).
    ///         It is made C-contiguous and native-endian.
    ///
    /// Returns:
    ///     A Tensor that owns its copy (so `into_dlpack()` succeeds on it).
    ///
    /// Raises:
    ///     TypeError: The dtype is not one zarrpipe holds (object arrays).
    #[staticmethod]
    fn from_numpy(py: Python<'_>, array: &Bound<'_, PyAny>) -> BindResult<Self> {
        let np = py.import("numpy")?;
        // `asarray(order="C")`, not `ascontiguousarray`, which turns 0-d arrays into 1-d.
        let kwargs = [("order", "C")].into_py_dict(py)?;
        let mut arr = np.call_method("asarray", (array,), Some(&kwargs))?;
        let descr = arr.getattr("dtype")?.cast_into::<PyArrayDescr>()?;
        let (dtype, keep) = match from_numpy_dtype(&descr) {
            Ok(dtype) => {
                let native = numpy_dtype(py, dtype)?;
                if !descr.is(&native) && descr.getattr("byteorder")?.extract::<String>()? == ">" {
                    arr = arr.call_method1("astype", (native,))?;
                }
                (dtype, None)
            }
            Err(e) => {
                // Datetimes, fixed-length strings and bytes, records: opaque elements that
                // keep their dtype (in native byte order).
                let kind = descr.kind();
                if !matches!(kind, b'M' | b'm' | b'U' | b'S' | b'V') || descr.has_object() {
                    return Err(e.into());
                }
                let native = descr.call_method1("newbyteorder", ("=",))?;
                if !native.eq(&descr)? {
                    arr = crate::dtype::as_dtype(&arr, &native)?;
                }
                let native = native.cast_into::<PyArrayDescr>()?;
                let elem = if matches!(kind, b'M' | b'm') {
                    ElementType::Int64
                } else {
                    ElementType::raw(native.itemsize(), 1)?
                };
                (elem, Some(native.unbind()))
            }
        };
        let arr = arr.cast_into::<PyUntypedArray>()?;
        let shape = arr.shape().to_vec();
        let nbytes = arr.len() * dtype.size();
        // SAFETY: `arr` is a C-contiguous, native-order array of `nbytes` bytes that stays
        // alive (and, holding the GIL, unchanged by Python code) while we copy it.
        let data = unsafe {
            let raw = (*arr.as_array_ptr()).fields.data.cast::<u8>();
            if nbytes == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(raw, nbytes)
            }
        };
        let bytes = buffer::try_copy(data, "Tensor.from_numpy")?;
        Ok(Self::with_descr(Bytes::from(bytes), shape, dtype, keep))
    }

    /// The shape, one length per axis (still available after `into_dlpack()`).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type, in native byte order (a record keeps its fields' orders).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        self.descr(py)
    }

    /// The number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The size of the buffer in bytes.
    #[getter(nbytes)]
    fn py_nbytes(&self) -> usize {
        self.nbytes()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let dtype = match &self.descr {
            Some(d) => d.bind(py).to_string(),
            None => self.dtype.to_string(),
        };
        let consumed = if self.lock().is_none() {
            ", consumed"
        } else {
            ""
        };
        let dims: Vec<String> = self.shape.iter().map(ToString::to_string).collect();
        let trailing = if self.shape.len() == 1 { "," } else { "" };
        let shape = format!("shape=({}{trailing})", dims.join(", "));
        // A few values, as NumPy shows them (large tensors summarised by NumPy's print
        // options), read through a zero-copy view.
        let values = (consumed.is_empty())
            .then(|| self.values_text(py).ok())
            .flatten();
        match values {
            Some(v) => format!("Tensor({v}, {shape}, dtype={dtype})"),
            None => format!("Tensor({shape}, dtype={dtype}{consumed})"),
        }
    }

    /// `len(t)`: the length of the first axis, as NumPy's.
    fn __len__(&self) -> PyResult<usize> {
        self.shape
            .first()
            .copied()
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of unsized object"))
    }

    /// The raw bytes, zero-copy.
    ///
    /// Returns:
    ///     A read-only, 1-D memoryview of format `'B'` over the tensor's memory; it keeps
    ///     the memory alive.
    ///
    /// Raises:
    ///     BufferError: The tensor was consumed by `into_dlpack()`.
    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let view = Bound::new(py, BytesView::new(self.shared()?))?;
        // SAFETY: `view` is a live object that implements the buffer protocol.
        unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMemoryView_FromObject(view.as_ptr())) }
    }

    /// A NumPy array over the tensor's memory, zero-copy.
    ///
    /// Returns:
    ///     A read-only array of the tensor's shape and dtype; it keeps the memory alive
    ///     (and so makes `into_dlpack()` refuse while it lives).
    ///
    /// Raises:
    ///     BufferError: The tensor was consumed by `into_dlpack()`.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let owner = Bound::new(py, BytesView::new(self.shared()?))?;
        let data = owner.get().as_ptr().cast_mut();
        // SAFETY: `owner` holds a clone of the tensor's bytes, so `data` stays valid while it
        // lives; the array is read-only.
        unsafe { self.array_over(py, data, owner.into_any(), false) }
    }

    /// NumPy's `__array__` protocol (`np.asarray(t)`, `np.array(t)`).
    ///
    /// Args:
    ///     dtype: A dtype to convert to; a different one from the tensor's makes a copy.
    ///     copy: `True` for a writable copy; `None` or `False` for the read-only zero-copy
    ///         view (`False` with a different `dtype` is an error, as in NumPy).
    ///
    /// Returns:
    ///     A read-only view of the tensor's memory, or a writable copy.
    ///
    /// Raises:
    ///     BufferError: The tensor was consumed by `into_dlpack()`.
    ///     ValueError: `copy=False` with a `dtype` that needs a conversion.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let view = self.to_numpy(py)?;
        let target = match dtype.filter(|d| !d.is_none()) {
            Some(d) => Some(PyArrayDescr::new(py, d)?),
            None => None,
        };
        let converts = match &target {
            Some(t) => !t.is(&view.getattr("dtype")?) && !t.eq(view.getattr("dtype")?)?,
            None => false,
        };
        match (copy, target) {
            (Some(false), Some(_)) if converts => Err(PyValueError::new_err(
                "Unable to avoid copy while creating an array as requested: the dtype differs",
            )),
            (Some(true), Some(t)) => view.call_method1("astype", (t,)),
            (Some(true), None) => view.call_method0("copy"),
            (_, Some(t)) if converts => view.call_method1("astype", (t,)),
            _ => Ok(view),
        }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        if !self.recycle {
            return;
        }
        let bytes = self
            .slot
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // Only when nobody else holds it (no view, no shared export still alive).
        if let Some(Ok(owned)) = bytes
            .filter(|b| b.len() >= recycle::MIN_BYTES)
            .map(Bytes::try_into_mut)
        {
            recycle_owned(owned);
        }
    }
}

/// Keeps a uniquely held read output for the next read of its size (see `recycle`).
pub fn recycle_owned(owned: bytes::BytesMut) {
    if owned.len() >= recycle::MIN_BYTES {
        // The whole allocation, as the read made it (anything else is not a read's output).
        if let Some(whole) = buffer::allocation_of(owned) {
            recycle::give(whole);
        }
    }
}

/// What a buffer-protocol view points into; freed by `__releasebuffer__`.
struct HeldBuffer {
    bytes: Bytes,
    shape: Vec<isize>,
    strides: Vec<isize>,
    len: isize,
    itemsize: isize,
    ndim: c_int,
}

impl HeldBuffer {
    fn new(bytes: Bytes, shape: &[usize], dtype: ElementType) -> PyResult<Self> {
        let too_big = |_| PyBufferError::new_err("tensor too large for the buffer protocol");
        let shape: Vec<isize> = shape
            .iter()
            .map(|&d| isize::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(too_big)?;
        let itemsize = isize::try_from(dtype.size()).map_err(too_big)?;
        let mut strides = vec![itemsize; shape.len()];
        for axis in (0..shape.len().saturating_sub(1)).rev() {
            strides[axis] = strides[axis + 1] * shape[axis + 1];
        }
        Ok(Self {
            len: isize::try_from(bytes.len()).map_err(too_big)?,
            ndim: c_int::try_from(shape.len())
                .map_err(|_| PyBufferError::new_err("too many dimensions"))?,
            bytes,
            shape,
            strides,
            itemsize,
        })
    }

    fn is_f_contiguous(&self) -> bool {
        self.len == 0 || self.shape.iter().filter(|&&d| d > 1).count() <= 1
    }
}

//! Where a NumPy array's elements are: its data pointer and the engine's layout of it,
//! checked (a write target must be writable and its strides must not overlap).

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use zarrpipe_codecs::layout::plan::OutLayout;

use crate::errors::BindResult;

/// The data pointer (of the lowest byte the array spans) and layout of `array`; `writable`
/// refuses a read-only array and strides that make two elements share bytes.
pub(crate) fn numpy_layout(
    array: &Bound<'_, PyUntypedArray>,
    writable: bool,
) -> BindResult<(*mut u8, OutLayout)> {
    if writable
        && !array
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?
    {
        return Err(PyValueError::new_err("output array is read-only").into());
    }
    let elem = array.dtype().itemsize();
    let shape: Vec<u64> = array.shape().iter().map(|&n| n as u64).collect();
    let strides: Vec<isize> = array.strides().to_vec();
    // SAFETY: reading the data pointer of a live NumPy array.
    let data = unsafe { (*array.as_array_ptr()).fields.data.cast::<u8>() };
    if shape.contains(&0) {
        return Ok((data, OutLayout::c_order(&shape, elem)));
    }
    let mut below = 0usize;
    let mut above = elem;
    for (&n, &s) in shape.iter().zip(&strides) {
        let reach = (n as usize - 1) * s.unsigned_abs();
        if s < 0 {
            below += reach;
        } else {
            above += reach;
        }
    }
    let layout = if writable {
        OutLayout::strided(&shape, &strides, below, below + above, elem)?
    } else {
        // A write's source may repeat elements (broadcasting): only its extent matters.
        OutLayout {
            shape,
            strides,
            base: below,
            len: below + above,
            elem,
        }
    };
    // SAFETY: `below` bytes before element 0 belong to the array (NumPy's layout).
    Ok((unsafe { data.sub(below) }, layout))
}

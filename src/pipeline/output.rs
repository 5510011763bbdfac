//! Output arrays for zarr-python's reads (`zarrpipe.NDBuffer.empty`) in memory zarrpipe
//! keeps between reads, as a native read's own output is: a large read's pages are then
//! faulted in once per process, not once per read.

use pyo3::prelude::*;
use zarrpipe_codecs::memory::buffer::zeroed_output;
use zarrpipe_codecs::ElementType;

use crate::errors::BindResult;
use crate::runtime::run;
use crate::tensor::Tensor;

/// A writable, zeroed 1-d uint8 NumPy array of `nbytes` in memory zarrpipe keeps for the
/// next read of its size once NumPy frees it (the pages of an earlier read's output, else
/// fresh memory faulted in on the pool threads); None where NumPy's own allocation costs no
/// more (under 32 MiB, or with kept outputs turned off by `ZARRPIPE_RECYCLE_BYTES=0`).
#[pyfunction]
pub fn _output_array(py: Python<'_>, nbytes: usize) -> BindResult<Option<Bound<'_, PyAny>>> {
    let Some(bytes) = run(py, move || zeroed_output(nbytes, "an output array"))? else {
        return Ok(None);
    };
    let tensor = Tensor::new(bytes, vec![nbytes], ElementType::UInt8).recycled();
    Ok(Some(tensor.into_numpy(py)?))
}

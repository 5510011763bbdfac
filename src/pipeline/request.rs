//! zarr-python's batch of chunk selections, parsed once, in Rust, into the engine's box
//! requests: the chunk's key, its stored shape, the part of it (per chunk axis an index or a
//! range) and where that part lands (per output axis a range). The pipeline passes the
//! batch as zarr-python gives it; nothing of it is taken apart in Python.

use std::ops::Range;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PySlice, PyTuple};
use zarrpipe_codecs::layout::plan::ChunkAxis;

/// One chunk of a box read or write.
#[derive(Clone, Debug)]
pub(super) struct BoxRequest {
    pub key: String,
    pub chunk_sel: Vec<ChunkAxis>,
    pub out_sel: Vec<Range<u64>>,
    /// The stored chunk's shape (chunks of a rectilinear grid differ).
    pub shape: Vec<u64>,
}

impl BoxRequest {
    /// Whether the request's part is the whole chunk.
    fn covers_chunk(&self) -> bool {
        (self.chunk_sel.iter().zip(&self.shape))
            .all(|(s, &n)| matches!(*s, ChunkAxis::Range(0, stop) if stop == n))
    }
}

/// The box requests of one zarr-python batch (`_ChunkRequests.from_batch`).
#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_ChunkRequests")]
pub struct ChunkRequests {
    pub(super) items: Vec<BoxRequest>,
}

/// A selection as zarr-python passes it: a tuple of per-axis selectors, or one selector.
fn per_axis<'py>(sel: &Bound<'py, PyAny>) -> Vec<Bound<'py, PyAny>> {
    match sel.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![sel.clone()],
    }
}

/// A step-1 slice over an axis of `n` as `start..stop`; None for any other selector.
fn step_one(s: &Bound<'_, PyAny>, n: u64) -> PyResult<Option<Range<u64>>> {
    let Ok(slice) = s.cast::<PySlice>() else {
        return Ok(None);
    };
    let n = isize::try_from(n)
        .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("chunk axis longer than isize"))?;
    let i = slice.indices(n)?;
    if i.step != 1 {
        return Ok(None);
    }
    // `indices` clamps into 0..=n, so both ends are non-negative.
    let (start, stop) = (i.start as u64, i.stop.max(i.start) as u64);
    Ok(Some(start..stop))
}

/// A chunk axis' selector as the engine takes it: a step-1 slice or a non-negative integer
/// (not a bool); None for anything else (index arrays, masks, steps).
fn chunk_axis(s: &Bound<'_, PyAny>, n: u64) -> PyResult<Option<ChunkAxis>> {
    if let Some(r) = step_one(s, n)? {
        return Ok(Some(ChunkAxis::Range(r.start, r.end)));
    }
    if s.is_instance_of::<PyBool>() || s.cast::<PySlice>().is_ok() {
        return Ok(None);
    }
    // Python and NumPy integers (`__index__`, as `operator.index` takes them); an index
    // array is none.
    Ok(s.extract::<u64>().ok().map(ChunkAxis::Index))
}

/// One `(getter, spec, chunk_selection, out_selection, is_complete)` of a batch; None when
/// its selections are not boxes.
fn box_request(item: &Bound<'_, PyAny>, out_shape: &[u64]) -> PyResult<Option<BoxRequest>> {
    let py = item.py();
    let item = item.cast::<PyTuple>()?;
    let (getter, spec) = (item.get_item(0)?, item.get_item(1)?);
    let shape: Vec<u64> = spec.getattr(intern!(py, "shape"))?.extract()?;
    let chunk = per_axis(&item.get_item(2)?);
    let out = per_axis(&item.get_item(3)?);
    if chunk.len() != shape.len() || out.len() != out_shape.len() {
        return Ok(None);
    }
    let mut chunk_sel = Vec::with_capacity(chunk.len());
    for (s, &n) in chunk.iter().zip(&shape) {
        match chunk_axis(s, n)? {
            Some(axis) => chunk_sel.push(axis),
            None => return Ok(None),
        }
    }
    let mut out_sel = Vec::with_capacity(out.len());
    for (s, &n) in out.iter().zip(out_shape) {
        match step_one(s, n)? {
            Some(r) => out_sel.push(r),
            None => return Ok(None),
        }
    }
    let key = match getter.getattr(intern!(py, "path")) {
        Ok(path) => path.str()?.to_string(),
        Err(_) => String::new(),
    };
    Ok(Some(BoxRequest {
        key,
        chunk_sel,
        out_sel,
        shape,
    }))
}

#[pymethods]
impl ChunkRequests {
    /// zarr-python's batch (`(getter, spec, chunk_selection, out_selection, is_complete)`
    /// per chunk) over an output of `out_shape`, as box requests; None when some selection
    /// is not a box (index arrays, masks, steps), which the pick path then reads.
    #[staticmethod]
    fn from_batch(batch: &Bound<'_, PyAny>, out_shape: Vec<u64>) -> PyResult<Option<Self>> {
        let mut items = Vec::new();
        for item in batch.try_iter()? {
            match box_request(&item?, &out_shape)? {
                Some(r) => items.push(r),
                None => return Ok(None),
            }
        }
        Ok(Some(Self { items }))
    }

    /// The requests at `indices`, in that order.
    fn subset(&self, indices: Vec<usize>) -> PyResult<Self> {
        let items = indices
            .iter()
            .map(|&i| {
                self.items.get(i).cloned().ok_or_else(|| {
                    pyo3::exceptions::PyIndexError::new_err(format!(
                        "request {i} of {}",
                        self.items.len()
                    ))
                })
            })
            .collect::<PyResult<_>>()?;
        Ok(Self { items })
    }

    /// Per request, whether it selects its whole chunk.
    fn covers_chunk(&self) -> Vec<bool> {
        self.items.iter().map(BoxRequest::covers_chunk).collect()
    }

    fn __len__(&self) -> usize {
        self.items.len()
    }

    fn __repr__(&self) -> String {
        format!("_ChunkRequests({} chunks)", self.items.len())
    }
}

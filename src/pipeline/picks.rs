//! zarr-python's batch of chunk selections of every kind (steps, index arrays, masks,
//! coordinates, and boxes of variable-length data), parsed once, in Rust, into the engine's
//! picks: per chunk, the pick inside the stored chunk and the pick its values take in the
//! output (a read) or come from in the value (a write). NumPy's rules decide what each
//! selection means (`crate::selection::chunk_pick`); the k-th element of the chunk's pick
//! pairs with the k-th of the other side's, in C order, as NumPy's assignment pairs them.
//! Python passes the batch as zarr-python gives it and computes no position.

use pyo3::exceptions::PyIndexError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zarrpipe_codecs::layout::placement::c_strides;
use zarrpipe_codecs::select::pick::Pick;
use zarrpipe_codecs::select::positions::{
    broadcast_index, pick_offsets, same_but_ones, shape_text,
};

use crate::selection::chunk_pick;

/// One chunk of a read or write by picks.
#[derive(Clone, Debug)]
pub(super) struct PickRequest {
    pub key: String,
    /// The stored chunk's shape (chunks of a rectilinear grid differ).
    pub shape: Vec<u64>,
    /// What the request selects inside the chunk, and the shape `chunk[sel]` has.
    pub pick: Pick,
    pub dims: Vec<u64>,
    /// Where its values go (a read) or come from (a write), over the other side's shape;
    /// None for a 0-d value, which every element takes.
    pub other: Option<(Pick, Vec<u64>)>,
    /// zarr-python calls the chunk complete: every cell of it inside the array is written.
    pub complete: bool,
}

impl PickRequest {
    /// The chunk-side C-order positions (element indices in the stored chunk).
    pub fn chunk_positions(&self) -> Vec<u64> {
        let strides: Vec<i64> = c_strides(&self.shape, 1)
            .iter()
            .map(|&s| s as i64)
            .collect();
        // A checked pick inside the chunk: every offset is non-negative.
        pick_offsets(&self.pick, &strides)
            .into_iter()
            .map(|o| o as u64)
            .collect()
    }
}

/// The pick requests of one zarr-python batch (`_PickRequests.from_batch`).
#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_PickRequests")]
pub struct PickRequests {
    pub(super) items: Vec<PickRequest>,
    /// The shape of the array the other side's picks index (the output, or the value).
    pub(super) other_shape: Vec<u64>,
}

impl PickRequests {
    /// The element index in the C-contiguous other side (the value of a write) of each of
    /// request `i`'s chunk positions' values: the value's part `value[out_selection]`,
    /// given the dropped axes back as length 1, broadcast to `chunk[sel]`'s shape, as
    /// zarr-python's pipeline assigns it.
    pub(super) fn value_index(
        &self,
        i: usize,
        drop_axes: &[usize],
    ) -> zarrpipe_codecs::Result<Vec<u64>> {
        let r = &self.items[i];
        let n: u64 = r.dims.iter().product();
        let Some((pick, dims)) = &r.other else {
            return Ok(vec![0; n as usize]);
        };
        let strides: Vec<i64> = (c_strides(&self.other_shape, 1).iter())
            .map(|&s| s as i64)
            .collect();
        let offsets = pick_offsets(pick, &strides);
        let mut piece = dims.clone();
        for &a in drop_axes {
            if a > piece.len() {
                return Err(zarrpipe_codecs::Error::InvalidArgument(format!(
                    "dropped axis {a} of a {}-d value part",
                    piece.len()
                )));
            }
            piece.insert(a, 1);
        }
        let from = broadcast_index(&piece, &r.dims)?;
        Ok(from.iter().map(|&i| offsets[i as usize] as u64).collect())
    }

    /// Where request `i`'s values go in an output of byte `strides`: byte offsets from the
    /// output's element 0, in the order of the chunk pick's values.
    pub(super) fn out_offsets(&self, i: usize, strides: &[i64]) -> Vec<i64> {
        let r = &self.items[i];
        match &r.other {
            Some((pick, _)) => pick_offsets(pick, strides),
            None => vec![0; r.dims.iter().product::<u64>() as usize],
        }
    }
}

/// A selection as zarr-python passes it: a tuple of per-axis selectors, or one selector.
fn as_key<'py>(sel: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if sel.cast::<PyTuple>().is_ok() {
        return Ok(sel.clone());
    }
    Ok(PyTuple::new(sel.py(), [sel])?.into_any())
}

/// One `(getter, spec, chunk_selection, out_selection, is_complete)` of a batch.
fn pick_request(
    item: &Bound<'_, PyAny>,
    other_shape: Option<&[u64]>,
    reading: bool,
) -> PyResult<PickRequest> {
    let py = item.py();
    let item = item.cast::<PyTuple>()?;
    let (getter, spec) = (item.get_item(0)?, item.get_item(1)?);
    let shape: Vec<u64> = spec.getattr(intern!(py, "shape"))?.extract()?;
    let (pick, dims) = chunk_pick(&shape, &as_key(&item.get_item(2)?)?)?;
    let other = match other_shape {
        Some(s) => Some(chunk_pick(s, &as_key(&item.get_item(3)?)?)?),
        None => None,
    };
    if let (true, Some((_, out_dims))) = (reading, &other) {
        // A read puts `chunk[sel]` (its dropped axes squeezed) at `out[out_sel]`.
        if !same_but_ones(&dims, out_dims) {
            return Err(PyIndexError::new_err(format!(
                "a chunk selection of shape {} does not fit its output selection of shape {}",
                shape_text(&dims),
                shape_text(out_dims)
            )));
        }
    }
    let key = match getter.getattr(intern!(py, "path")) {
        Ok(path) => path.str()?.to_string(),
        Err(_) => String::new(),
    };
    Ok(PickRequest {
        key,
        shape,
        pick,
        dims,
        other,
        complete: item.get_item(4)?.is_truthy()?,
    })
}

#[pymethods]
impl PickRequests {
    /// zarr-python's batch, each selection read as NumPy reads it: the chunk side over
    /// the stored chunk, the other over `other_shape` (a read's output, a write's value;
    /// None for a 0-d value). Raises IndexError or TypeError for what NumPy refuses.
    #[staticmethod]
    #[pyo3(signature = (batch, other_shape, reading))]
    fn from_batch(
        batch: &Bound<'_, PyAny>,
        other_shape: Option<Vec<u64>>,
        reading: bool,
    ) -> PyResult<Self> {
        let mut items = Vec::new();
        for item in batch.try_iter()? {
            items.push(pick_request(&item?, other_shape.as_deref(), reading)?);
        }
        Ok(Self {
            items,
            other_shape: other_shape.unwrap_or_default(),
        })
    }

    /// The requests at `indices`, in that order.
    fn subset(&self, indices: Vec<usize>) -> PyResult<Self> {
        let items = indices
            .iter()
            .map(|&i| {
                self.items.get(i).cloned().ok_or_else(|| {
                    PyIndexError::new_err(format!("request {i} of {}", self.items.len()))
                })
            })
            .collect::<PyResult<_>>()?;
        Ok(Self {
            items,
            other_shape: self.other_shape.clone(),
        })
    }

    /// Per request, whether zarr-python calls its chunk complete.
    fn complete(&self) -> Vec<bool> {
        self.items.iter().map(|r| r.complete).collect()
    }

    fn __len__(&self) -> usize {
        self.items.len()
    }

    fn __repr__(&self) -> String {
        format!("_PickRequests({} chunks)", self.items.len())
    }
}

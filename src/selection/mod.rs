//! Python selections into engine requests, with NumPy's semantics and exceptions: integers,
//! slices and `...` parse straight into a region (`basic`); anything else is classified item
//! by item (`items`) and becomes a pick by the engine's geometry
//! (`zarrpipe_codecs::select::numpy` for `arr[...]` and `vindex`, `select::orthogonal` for
//! `oindex` and `blocks`).

mod basic;
mod items;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use zarrpipe_codecs::layout::grid::ChunkGrid;
use zarrpipe_codecs::select::numpy::numpy_pick;
use zarrpipe_codecs::select::orthogonal::{block_ranges, orthogonal_pick};
use zarrpipe_codecs::select::pick::{Factor, Pick};
use zarrpipe_codecs::select::selection::{AxisSelector, Region};

pub use basic::{chunk_index, parse};

use crate::errors::BindResult;

/// A read or write request: a rectangular region (the fast path of integers and step-1
/// slices), or a pick of any kind and the shape its result takes.
pub enum Request {
    Region(Region),
    Pick(Pick, Vec<u64>),
}

/// How a key selects: as NumPy indexes (`arr[key]`, `vindex`), orthogonally (`oindex`), or
/// blocks of the stored chunk grid (`blocks`, with that grid).
pub enum Kind<'a> {
    Numpy,
    Orthogonal,
    Blocks(&'a ChunkGrid),
}

impl Kind<'_> {
    /// The kind a private Python call names (`"numpy"`, `"orthogonal"`, `"block"`).
    pub fn named<'a>(name: &str, blocks: &'a ChunkGrid) -> PyResult<Kind<'a>> {
        match name {
            "numpy" => Ok(Kind::Numpy),
            "orthogonal" => Ok(Kind::Orthogonal),
            "block" => Ok(Kind::Blocks(blocks)),
            other => Err(PyValueError::new_err(format!(
                "no selection kind {other:?}"
            ))),
        }
    }
}

/// The request for `selection` with NumPy's semantics (`None`: everything).
pub fn request(shape: &[u64], selection: Option<&Bound<'_, PyAny>>) -> BindResult<Request> {
    let Some(s) = selection else {
        return Ok(Request::Region(Region::all(shape)));
    };
    if let Ok(selectors) = parse(s) {
        let step_one = selectors.iter().all(|x| match x {
            AxisSelector::Slice { step, .. } => step.unwrap_or(1) == 1,
            _ => true,
        });
        if step_one {
            return Ok(Request::Region(Region::resolve(shape, &selectors)?));
        }
    }
    kind_request(shape, &Kind::Numpy, s)
}

/// The request for `key` of the given kind.
pub fn kind_request(shape: &[u64], kind: &Kind<'_>, key: &Bound<'_, PyAny>) -> BindResult<Request> {
    let items = items::key_items(key)?;
    let (factors, dims) = match kind {
        Kind::Numpy => numpy_pick(shape, items)?,
        Kind::Orthogonal => orthogonal_pick(shape, items)?,
        Kind::Blocks(blocks) => {
            let ranges = block_ranges(shape, blocks, items)?;
            let extent: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
            return Ok(Request::Region(Region {
                dropped: vec![false; ranges.len()],
                out_shape: extent,
                ranges,
            }));
        }
    };
    pick_request(shape, factors, dims)
}

/// A pick request from its factors and the result's shape (checked to hold as many
/// elements).
fn pick_request(shape: &[u64], factors: Vec<Factor>, dims: Vec<u64>) -> BindResult<Request> {
    let pick = Pick::new(shape, factors)?;
    let want: u128 = pick.out_shape().iter().map(|&d| u128::from(d)).product();
    if dims.iter().map(|&d| u128::from(d)).product::<u128>() != want {
        return Err(PyValueError::new_err(format!(
            "result shape {dims:?} for a selection of {want} elements"
        ))
        .into());
    }
    Ok(Request::Pick(pick, dims))
}

/// The pick of `arr[key]` over a chunk of `shape` (zarr-python's chunk selections), and the
/// shape `chunk[key]` has.
pub fn chunk_pick(shape: &[u64], key: &Bound<'_, PyAny>) -> PyResult<(Pick, Vec<u64>)> {
    match kind_request(shape, &Kind::Numpy, key)? {
        Request::Pick(pick, dims) => Ok((pick, dims)),
        Request::Region(_) => unreachable!("a NumPy key is always a pick"),
    }
}

//! `Store.create_array`'s Python arguments (NumPy dtypes, codec objects, fill values, shapes)
//! as the JSON spec the engine builds array metadata from.

mod codecs;
mod dtype;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use zarrpipe_codecs::array::chunk_guess::guess_chunks;

/// `create_array`'s arguments, as Python gave them.
pub struct Args<'a, 'py> {
    pub shape: &'a Bound<'py, PyAny>,
    pub dtype: &'a Bound<'py, PyAny>,
    pub chunks: Option<&'a Bound<'py, PyAny>>,
    pub shards: Option<&'a Bound<'py, PyAny>>,
    pub compressors: &'a Bound<'py, PyAny>,
    pub filters: &'a Bound<'py, PyAny>,
    pub fill_value: Option<&'a Bound<'py, PyAny>>,
    pub attributes: Option<&'a Bound<'py, PyAny>>,
    pub dimension_names: Option<&'a Bound<'py, PyAny>>,
    pub zarr_format: u8,
}

/// A shape-like argument: an integer or a sequence of them (`operator.index` each); a
/// negative one is a ValueError.
fn shape(value: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let index = value.py().import("operator")?.getattr("index")?;
    let one = |v: Bound<'_, PyAny>| -> PyResult<u64> {
        let n: i128 = index.call1((v,))?.extract()?;
        u64::try_from(n).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "shapes, chunk and shard edges must be non-negative integers, got {n}"
            ))
        })
    };
    if value.hasattr("__iter__")? {
        value.try_iter()?.map(|v| one(v?)).collect()
    } else {
        Ok(vec![one(value.clone())?])
    }
}

/// A chunk or shard argument: a shape, or per axis an edge or a list of edges (a
/// rectilinear grid, `[[3, 3, 4], [2, 5, 6]]` or `[4, [2, 5, 6]]`). `Ok(None)` when no axis
/// lists edges (then [`shape`] reads it).
fn grid_axes<'py>(value: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyList>>> {
    if !value.hasattr("__iter__")? || value.is_instance_of::<pyo3::types::PyString>() {
        return Ok(None);
    }
    let items: Vec<Bound<'py, PyAny>> = value.try_iter()?.collect::<PyResult<_>>()?;
    let mut explicit = false;
    let axes = PyList::empty(value.py());
    for item in items {
        if item.hasattr("__iter__")? {
            explicit = true;
            axes.append(PyList::new(value.py(), shape(&item)?)?)?;
        } else {
            axes.append(shape(&item)?[0])?;
        }
    }
    Ok(explicit.then_some(axes))
}

/// The spec's JSON for `args`.
pub fn array_spec_json(args: &Args<'_, '_>) -> PyResult<String> {
    let py = args.shape.py();
    let dt = dtype::data_type(args.dtype, args.fill_value, args.zarr_format)?;
    let array_shape = shape(args.shape)?;
    let spec = PyDict::new(py);
    let shard_edges = args.shards.map(grid_axes).transpose()?.flatten();
    let shards = match (&shard_edges, args.shards) {
        (Some(edges), _) => {
            spec.set_item("shards", edges)?;
            None
        }
        (None, s) => {
            let s = s.map(shape).transpose()?;
            spec.set_item("shards", s.clone())?;
            s
        }
    };
    match args.chunks.filter(|c| !c.is_none()) {
        Some(c) => match grid_axes(c)? {
            Some(edges) => spec.set_item("chunks", edges)?,
            None => spec.set_item("chunks", shape(c)?)?,
        },
        None if shard_edges.is_some() => {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "rectilinear shards need chunks: the one inner chunk shape every shard edge is \
                 a multiple of",
            ))
        }
        None => spec.set_item(
            "chunks",
            guess_chunks(shards.as_deref().unwrap_or(&array_shape), dt.itemsize),
        )?,
    }
    spec.set_item("shape", array_shape)?;
    spec.set_item("dtype", dt.name)?;
    spec.set_item("data_type", dt.data_type)?;
    spec.set_item("big_endian", dt.big_endian)?;
    spec.set_item("compressors", codecs::codecs(args.compressors)?)?;
    let auto = args.filters.extract::<&str>().is_ok_and(|s| s == "auto");
    let filters = if auto {
        py.None().into_bound(py)
    } else {
        codecs::codecs(args.filters)?
    };
    spec.set_item("filters", filters)?;
    spec.set_item("object_codec", dt.object_codec)?;
    spec.set_item("fill_value", dt.fill)?;
    // `dict(attributes or {})`: a mapping or pairs, copied.
    let attributes = match args.attributes {
        Some(a) if a.is_truthy()? => py.import("builtins")?.getattr("dict")?.call1((a,))?,
        _ => PyDict::new(py).into_any(),
    };
    spec.set_item("attributes", attributes)?;
    let names = match args.dimension_names.filter(|d| !d.is_none()) {
        Some(d) => PyList::new(py, d.try_iter()?.collect::<PyResult<Vec<_>>>()?)?.into_any(),
        None => py.None().into_bound(py),
    };
    spec.set_item("dimension_names", names)?;
    spec.set_item("zarr_format", args.zarr_format)?;
    py.import("json")?.call_method1("dumps", (spec,))?.extract()
}

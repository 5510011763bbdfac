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

/// A shape-like argument: an integer or a sequence of them (`operator.index` each).
fn shape(value: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let index = value.py().import("operator")?.getattr("index")?;
    if value.hasattr("__iter__")? {
        value
            .try_iter()?
            .map(|v| index.call1((v?,))?.extract())
            .collect()
    } else {
        Ok(vec![index.call1((value,))?.extract()?])
    }
}

/// The spec's JSON for `args`.
pub fn array_spec_json(args: &Args<'_, '_>) -> PyResult<String> {
    let py = args.shape.py();
    let dt = dtype::data_type(args.dtype, args.fill_value, args.zarr_format)?;
    let array_shape = shape(args.shape)?;
    let shards = args.shards.map(shape).transpose()?;
    let chunks = match args.chunks {
        Some(c) if !c.is_none() => shape(c)?,
        _ => guess_chunks(shards.as_deref().unwrap_or(&array_shape), dt.itemsize),
    };
    let spec = PyDict::new(py);
    spec.set_item("shape", array_shape)?;
    spec.set_item("dtype", dt.name)?;
    spec.set_item("data_type", dt.data_type)?;
    spec.set_item("big_endian", dt.big_endian)?;
    spec.set_item("chunks", chunks)?;
    spec.set_item("shards", shards)?;
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

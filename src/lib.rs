//! The Python binding of zarrpipe: `zarrpipe._zarrpipe`. It only binds; the engine is the
//! `zarrpipe-codecs` crate in `codecs/`.

mod array;
mod async_call;
mod attributes;
mod create;
mod diagnostics;
mod dtype;
mod errors;
mod loader;
mod numpy_layout;
mod obstore;
mod pipeline;
mod runtime;
mod selection;
mod store;
mod tensor;
mod variable;

use pyo3::prelude::*;

#[pymodule]
fn _zarrpipe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<tensor::owned::OwnedTensor>()?;
    m.add_class::<tensor::bytes_view::BytesView>()?;
    m.add_class::<store::Store>()?;
    m.add_class::<array::Array>()?;
    m.add_class::<store::group::Group>()?;
    m.add_class::<attributes::Attributes>()?;
    // Attributes behave as a MutableMapping: isinstance checks and code that takes one.
    m.py()
        .import("collections.abc")?
        .getattr("MutableMapping")?
        .call_method1("register", (m.getattr("Attributes")?,))?;
    m.add_class::<loader::Rows>()?;
    m.add_class::<pipeline::PipelineArray>()?;
    m.add_class::<pipeline::request::ChunkRequests>()?;
    m.add_class::<pipeline::picks::PickRequests>()?;
    m.add_function(wrap_pyfunction!(store::open::open, m)?)?;
    m.add_function(wrap_pyfunction!(store::set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(store::get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(diagnostics::_first_touch_stats, m)?)?;
    m.add_function(wrap_pyfunction!(diagnostics::_read_path_stats, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::output::_output_array, m)?)?;
    m.add_function(wrap_pyfunction!(obstore::_obstore_location, m)?)?;
    errors::register(m)?;
    Ok(())
}

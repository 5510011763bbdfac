//! The Python binding of zarrpipe: `zarrpipe._zarrpipe`. It only binds; the engine is the
//! `zarrpipe-codecs` crate in `codecs/`.

mod bytes_view;
mod dlpack;
mod dtype;
mod errors;
mod owned_tensor;
mod tensor;

use pyo3::prelude::*;

#[pymodule]
fn _zarrpipe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<owned_tensor::OwnedTensor>()?;
    m.add_class::<bytes_view::BytesView>()?;
    errors::register(m)?;
    Ok(())
}

//! zarrpipe's read engine: open Zarr v2/v3 arrays through [`zarrs`], plan which chunks a
//! selection touches, and decode them in parallel on a rayon pool into freshly allocated
//! buffers that nobody else holds. No Python here; `src/` in the workspace root binds it.

pub mod array;
pub mod codec;
pub mod dtype;
pub mod error;
pub mod hierarchy;
pub mod layout;
pub mod memory;
pub mod process;
pub mod read;
pub mod select;
pub mod store;
pub mod write;

pub use dtype::{ElementKind, ElementType};
pub use error::{Error, Result};

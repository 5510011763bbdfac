//! zarrpipe's Zarr engine: it opens, creates, reads and writes Zarr v2/v3 arrays and groups.
//! It parses metadata through [`zarrs`], plans which chunks a selection touches, fetches them
//! from local files or object stores and decodes them in parallel on a rayon pool into freshly
//! allocated buffers that nobody else holds; writes encode chunks and shards and store each as
//! one step that concurrent writers do not interleave with. No Python here; `src/` in the
//! workspace root binds it, and docs/architecture.md gives its modules and their one-way
//! dependencies.

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

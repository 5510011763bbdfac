//! zarrpipe's read engine: open Zarr v2/v3 arrays through [`zarrs`], plan which chunks a
//! selection touches, and decode them in parallel on a rayon pool into freshly allocated
//! buffers that nobody else holds. No Python here; `src/` in the workspace root binds it.

pub mod array;
pub mod buffer;
pub mod cache;
pub mod create;
pub mod decode;
pub mod dtype;
pub mod encode;
pub mod error;
pub mod first_touch;
pub mod fork;
pub mod gather;
pub mod harden;
pub mod hierarchy;
pub mod kept_buffers;
pub mod key_turns;
pub mod local_read;
pub mod local_write;
pub mod numpy_type;
pub mod pick;
pub mod plan;
pub mod plugins;
pub mod pool;
pub mod read;
pub mod recycle;
pub mod remote;
pub mod remote_read;
pub mod remote_update;
pub mod response_body;
pub mod rows;
pub mod scatter;
pub mod selection;
pub mod store;
pub mod variable;
pub mod write;
pub mod write_points;

pub use dtype::{ElementKind, ElementType};
pub use error::{Error, Result};

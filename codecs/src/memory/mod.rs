//! Memory the engine allocates: fresh output buffers (aligned, faulted in the cheap way),
//! outputs and response bodies kept for reuse, and per-thread scratch buffers. Uses
//! `process` (fork safety) and `dtype` (a record's byte-swap table), nothing above them.

pub mod buffer;
pub mod first_touch;
pub mod kept_buffers;
pub mod out;
pub mod recycle;
pub mod scratch;
pub mod stream_store;

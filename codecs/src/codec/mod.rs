//! Codecs: the chains of a Zarr array parsed once (`chain`), zarrpipe's own streaming
//! decoders and encoders for the common chains (`decode`, `encode`), and what zarrs decodes
//! for the rest, hardened against hostile input (`harden`, `plugins`). Uses `store` only
//! to read stored values by byte range and to write encoded values into their sink.

pub mod chain;
pub mod decode;
pub mod encode;
pub mod harden;
pub mod plugins;
mod wrapper;

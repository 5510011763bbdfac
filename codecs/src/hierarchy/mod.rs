//! The hierarchy above the arrays: which nodes a store holds (`listing`), one node's stored
//! metadata (`node`), a group's direct children (`members`), consolidated metadata read and
//! written as zarr-python does (`consolidated`), and attribute changes made atomically
//! (`attributes`). Uses `store` for every read and write; nothing here decodes chunks.

pub mod attributes;
pub mod consolidated;
pub mod listing;
pub mod members;
pub mod node;

/// Stored metadata documents larger than this are refused as corrupt (consolidated
/// metadata of a very large hierarchy stays well below it).
pub const METADATA_LIMIT: u64 = 256 << 20;

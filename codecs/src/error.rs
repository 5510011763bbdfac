//! The engine's one error type. The binding maps each variant to one Python exception.

use std::io;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store, array or group that does not exist.
    #[error("{0}")]
    NotFound(String),

    /// A selection outside the array, or of the wrong dimensionality.
    #[error("{0}")]
    InvalidSelection(String),

    /// An argument that can never be valid (zero threads, a negative cache size...).
    #[error("{0}")]
    InvalidArgument(String),

    /// Valid Zarr that zarrpipe (or zarrs) cannot read: a codec or data type it lacks.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// Metadata that does not parse or breaks the spec.
    #[error("invalid metadata for {path:?}: {reason}")]
    Metadata { path: String, reason: String },

    /// Chunk bytes that do not decode to what the metadata promises.
    #[error("chunk {key:?} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },

    /// Values a codec cannot represent (out of its range, not exactly divisible...): the
    /// data handed to a write, not the store, is at fault.
    #[error("cannot encode chunk {key:?}: {reason}")]
    Encode { key: String, reason: String },

    /// A checksum (crc32c; numcodecs' adler32, fletcher32, crc32, crc32c, jenkins_lookup3) that
    /// does not match the data it guards.
    #[error("chunk {key:?} failed its checksum check{detail}")]
    Checksum { key: String, detail: String },

    /// The store could not be read (permissions, I/O, a remote failure).
    #[error("cannot read {key:?}: {source}")]
    Storage {
        key: String,
        #[source]
        source: io::Error,
    },

    /// Creating something where something already is.
    #[error("{0}")]
    Exists(String),

    /// An update that other writers kept changing under it (object stores: every
    /// conditional write failed).
    #[error("{0}")]
    Conflict(String),

    /// A write to a store opened read-only.
    #[error("{0}")]
    ReadOnly(String),

    /// A bug in zarrpipe (or a dependency) caught before it could crash the process.
    #[error("internal error: {0}")]
    Internal(String),

    /// The call was asked to stop (Ctrl-C) before it finished.
    #[error("interrupted")]
    Interrupted,

    /// The call was cancelled (an awaited call whose task was cancelled) before it finished.
    #[error("cancelled")]
    Cancelled,

    /// An output or chunk buffer larger than the machine can allocate.
    #[error("cannot allocate {bytes} bytes for {what}")]
    OutOfMemory { bytes: u128, what: String },
}

impl Error {
    pub(crate) fn corrupt(key: &str, reason: impl std::fmt::Display) -> Self {
        Self::Corrupt {
            key: key.to_owned(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn storage(key: &str, source: io::Error) -> Self {
        Self::Storage {
            key: key.to_owned(),
            source,
        }
    }

    /// The chunk (or metadata) key the error is about, where there is one.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Corrupt { key, .. }
            | Self::Encode { key, .. }
            | Self::Checksum { key, .. }
            | Self::Storage { key, .. } => Some(key),
            Self::Metadata { path, .. } => Some(path),
            _ => None,
        }
    }
}

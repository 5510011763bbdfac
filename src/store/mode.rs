//! zarr-python's access modes, for `Store(mode=...)` and `zarrpipe.open(mode=...)`.

use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// "r": read-only; the store (and the node) must exist.
    Read,
    /// "r+": read and write; the store (and the node) must exist.
    ReadWrite,
    /// "a": read and write; what is missing is created by the first write.
    Append,
    /// "w": create, deleting what is there.
    Write,
    /// "w-": create; something already there is an error.
    WriteNew,
}

impl Mode {
    pub fn parse(mode: &str) -> PyResult<Self> {
        Ok(match mode {
            "r" => Self::Read,
            "r+" => Self::ReadWrite,
            "a" => Self::Append,
            "w" => Self::Write,
            "w-" | "x" => Self::WriteNew,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode must be \"r\", \"r+\", \"a\", \"w\" or \"w-\", not {other:?}"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "r",
            Self::ReadWrite => "r+",
            Self::Append => "a",
            Self::Write => "w",
            Self::WriteNew => "w-",
        }
    }

    /// Whether what is opened must already exist.
    pub fn must_exist(self) -> bool {
        matches!(self, Self::Read | Self::ReadWrite)
    }

    /// The mode a copy (unpickled in another process) opens with: never one that deletes
    /// or refuses what the first opening made.
    pub fn reopened(self) -> Self {
        match self {
            Self::Write | Self::WriteNew => Self::Append,
            other => other,
        }
    }
}

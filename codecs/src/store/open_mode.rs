//! Opening a store: where a location is (a local directory or a URL) and zarr-python's access
//! modes ("r", "r+", "a", "w", "w-"), the rules `zarrpipe.Store(location, mode=...)` and
//! `zarrpipe.open` share.

use crate::error::{Error, Result};
use crate::store::remote::RemoteSettings;
use crate::store::Store;

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
    /// "w-" (or "x"): create; something already there is an error.
    WriteNew,
}

impl Mode {
    /// The mode a name gives.
    pub fn parse(mode: &str) -> Result<Self> {
        Ok(match mode {
            "r" => Self::Read,
            "r+" => Self::ReadWrite,
            "a" => Self::Append,
            "w" => Self::Write,
            "w-" | "x" => Self::WriteNew,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "mode must be \"r\", \"r+\", \"a\", \"w\" or \"w-\", not {other:?}"
                )))
            }
        })
    }

    /// The mode of a store opened without one: read-only over HTTP, which takes no writes;
    /// else "a".
    #[must_use]
    pub fn default_for(location: &str) -> Self {
        if location.starts_with("http://") || location.starts_with("https://") {
            Self::Read
        } else {
            Self::Append
        }
    }

    #[must_use]
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
    #[must_use]
    pub fn must_exist(self) -> bool {
        matches!(self, Self::Read | Self::ReadWrite)
    }

    /// The mode a copy (unpickled in another process) opens with: never one that deletes
    /// or refuses what the first opening made.
    #[must_use]
    pub fn reopened(self) -> Self {
        match self {
            Self::Write | Self::WriteNew => Self::Append,
            other => other,
        }
    }
}

/// Where a store is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location<'a> {
    /// A local directory: a path, or a `file://` URL's path.
    Local(&'a str),
    /// A URL of any other scheme (`s3://`, `gs://`, `az://`, `http(s)://`, ...).
    Url(&'a str),
}

impl<'a> Location<'a> {
    #[must_use]
    pub fn parse(location: &'a str) -> Self {
        match location.strip_prefix("file://") {
            Some(path) => Self::Local(path),
            None if location.contains("://") => Self::Url(location),
            None => Self::Local(location),
        }
    }
}

impl Store {
    /// Opens the store at `location` in `mode`: "r" and "r+" open what exists, the others
    /// create the store with its first write; "r" refuses writes, "w" deletes everything in
    /// the store, "w-" refuses a store that is not empty.
    pub fn open_with_mode(
        location: &str,
        mode: Mode,
        options: &[(String, String)],
        settings: RemoteSettings,
        durable: bool,
    ) -> Result<Self> {
        let store = match Location::parse(location) {
            Location::Url(url) => Self::open_url(url, options, settings)?,
            Location::Local(path) if mode.must_exist() => Self::open_local(path)?,
            Location::Local(path) => Self::open_local_lazily(path)?,
        }
        .read_only(mode == Mode::Read)
        .durable(durable);
        match mode {
            Mode::Write => store.delete_prefix("")?,
            Mode::WriteNew if !store.is_empty_under("")? => {
                return Err(Error::Exists(format!(
                    "{location} is not empty (mode=\"w-\" creates a new store only)"
                )))
            }
            _ => {}
        }
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_name_and_reopen() {
        for name in ["r", "r+", "a", "w", "w-"] {
            assert_eq!(Mode::parse(name).unwrap().name(), name);
        }
        assert_eq!(Mode::parse("x").unwrap(), Mode::WriteNew);
        let err = Mode::parse("rw").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("not \"rw\"")));
        assert!(Mode::Read.must_exist() && Mode::ReadWrite.must_exist());
        assert!(!Mode::Append.must_exist() && !Mode::Write.must_exist());
        assert_eq!(Mode::Write.reopened(), Mode::Append);
        assert_eq!(Mode::WriteNew.reopened(), Mode::Append);
        assert_eq!(Mode::Read.reopened(), Mode::Read);
        assert_eq!(Mode::default_for("https://host/a.zarr"), Mode::Read);
        assert_eq!(Mode::default_for("s3://bucket/a.zarr"), Mode::Append);
        assert_eq!(Mode::default_for("/data/a.zarr"), Mode::Append);
    }

    #[test]
    fn locations_are_local_or_urls() {
        assert_eq!(Location::parse("/d/a.zarr"), Location::Local("/d/a.zarr"));
        assert_eq!(Location::parse("rel/a.zarr"), Location::Local("rel/a.zarr"));
        assert_eq!(Location::parse("file:///d/a"), Location::Local("/d/a"));
        assert_eq!(Location::parse("s3://b/a"), Location::Url("s3://b/a"));
    }

    #[test]
    fn each_mode_opens_as_zarr_python_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s.zarr");
        let at = root.to_str().unwrap();
        let open = |mode| Store::open_with_mode(at, mode, &[], RemoteSettings::default(), false);
        // Nothing there: "r" and "r+" refuse, "a" opens without creating anything.
        assert!(matches!(open(Mode::Read), Err(Error::NotFound(_))));
        assert!(matches!(open(Mode::ReadWrite), Err(Error::NotFound(_))));
        open(Mode::Append).unwrap();
        assert!(!root.exists());
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/zarr.json"), b"{}").unwrap();
        // "r" refuses writes; "w-" refuses a store with something in it.
        assert!(open(Mode::Read).unwrap().check_writable().is_err());
        assert!(matches!(open(Mode::WriteNew), Err(Error::Exists(m)) if m.contains("w-")));
        // "w" deletes what is there.
        let store = open(Mode::Write).unwrap();
        assert!(store.is_empty_under("").unwrap());
        assert!(!root.join("a/zarr.json").exists());
        open(Mode::WriteNew).unwrap();
    }
}

//! `Store`'s hierarchy calls: opening and creating arrays and groups, consolidating
//! metadata, listing what the store holds.

use pyo3::prelude::*;
use zarrpipe_codecs::hierarchy::listing as hierarchy;

use super::group::Group;
use super::{CodecsArg, Store};
use crate::array::Array;
use crate::errors::BindResult;
use crate::runtime::run;

// The Python methods of the hierarchy.
#[pymethods]
impl Store {
    /// Opens an array.
    ///
    /// Args:
    ///     path: The array's path in the store (`""`, the default, is an array stored at
    ///         the root itself).
    ///     metadata: The array's metadata (the JSON content of `zarr.json` or `.zarray`,
    ///         as text or a dict), to use instead of reading it from the store.
    ///     write_empty_chunks: Whether writes store chunks that are all fill value (by
    ///         default they are deleted, as zarr-python does).
    ///
    /// Returns:
    ///     The array, its metadata read once.
    ///
    /// Raises:
    ///     FileNotFoundError: No array at `path`.
    ///     MetadataError: Metadata that does not parse or breaks the Zarr spec.
    ///     UnsupportedError: A data type zarrpipe cannot read.
    #[pyo3(signature = (path = "", *, metadata = None, write_empty_chunks = false))]
    pub(crate) fn open_array(
        slf: &Bound<'_, Self>,
        path: &str,
        metadata: Option<&Bound<'_, PyAny>>,
        write_empty_chunks: bool,
    ) -> PyResult<Array> {
        let py = slf.py();
        let this = slf.get();
        let json = match metadata {
            None => None,
            Some(m) if m.is_instance_of::<pyo3::types::PyString>() => Some(m.extract::<String>()?),
            Some(m) => Some(
                py.import("json")?
                    .call_method1("dumps", (m,))?
                    .extract::<String>()?,
            ),
        };
        Ok(Array::new(
            this.reader_with(py, path, true, json.clone())?,
            this.cache.clone(),
            write_empty_chunks,
            Some((slf.clone().into_any().unbind(), json)),
        ))
    }

    /// Creates an array, with the metadata zarr-python writes for the same arguments.
    ///
    /// Missing parent groups are created too.
    ///
    /// Args:
    ///     path: Where, in the store.
    ///     shape: The array's shape.
    ///     dtype: A NumPy dtype zarrpipe holds (bool, (u)int8-64, float16/32/64,
    ///         complex64/128, bfloat16, datetime64/timedelta64, `<U7`, `|S7`, `|V8`,
    ///         records, ml_dtypes' small floats); a big-endian one is stored big-endian
    ///         (v2). Variable-length strings: `str`, `"string"` or `StringDType()`;
    ///         variable-length bytes: `bytes` or `"variable_length_bytes"` (zarr-python's
    ///         `VariableLengthUTF8()` / `VariableLengthBytes()` too). `object` is refused
    ///         as ambiguous.
    ///     chunks: The chunk shape reads work in (the inner chunks when `shards` is given);
    ///         None guesses one as zarr-python's "auto" does (within the shard shape when
    ///         `shards` is given). A list of edges on some axis (`[[3, 3, 4], 5]`) makes a
    ///         rectilinear grid (Zarr v3; the edges sum to the shape).
    ///     shards: The shard shape (Zarr v3), a multiple of `chunks`; None for no sharding.
    ///         Edges per axis (`[[10, 5, 5], 10]`), each a multiple of `chunks`, make
    ///         shards of different sizes.
    ///     compressors: v3 codec dicts (`{"name": "zstd", "configuration": {"level": 3}}`),
    ///         numcodecs configs (`{"id": "zstd", "level": 3}`) or zarr-python / numcodecs
    ///         codec objects, one or a list. `"auto"` (the default) is zarr-python's
    ///         default, zstd at level 0; None or `[]` means no compressor.
    ///     filters: Array-to-array or bytes-to-bytes codecs before the compressors, in the
    ///         same forms; `"auto"` (the default) is zarr-python's default (none for
    ///         numbers); None or `[]` means none.
    ///     fill_value: What unwritten elements read as; None is the dtype's zero.
    ///     attributes: User attributes to store.
    ///     dimension_names: One name (or None) per axis (Zarr v3).
    ///     zarr_format: 3 (the default) or 2.
    ///     write_empty_chunks: Whether writes store chunks that are all fill value.
    ///     overwrite: Delete whatever is at `path` first.
    ///
    /// Returns:
    ///     The new array, open.
    ///
    /// Raises:
    ///     FileExistsError: Something is at `path` and `overwrite` is False.
    ///     PermissionError: The store is read-only.
    ///     TypeError: A dtype zarrpipe cannot create, no `chunks`, or a codec it does not
    ///         recognise.
    ///     ValueError: Shapes that do not fit together, or codec settings out of range.
    #[pyo3(signature = (path, *, shape, dtype, chunks = None, shards = None, compressors = CodecsArg::Auto, filters = CodecsArg::Auto, fill_value = None, attributes = None, dimension_names = None, zarr_format = 3, write_empty_chunks = false, overwrite = false))]
    #[pyo3(
        text_signature = "($self, path, *, shape, dtype, chunks=None, shards=None, compressors='auto', filters='auto', fill_value=None, attributes=None, dimension_names=None, zarr_format=3, write_empty_chunks=False, overwrite=False)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn create_array<'py>(
        slf: &Bound<'py, Self>,
        path: &str,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        chunks: Option<&Bound<'py, PyAny>>,
        shards: Option<&Bound<'py, PyAny>>,
        compressors: CodecsArg<'py>,
        filters: CodecsArg<'py>,
        fill_value: Option<&Bound<'_, PyAny>>,
        attributes: Option<&Bound<'_, PyAny>>,
        dimension_names: Option<&Bound<'_, PyAny>>,
        zarr_format: u8,
        write_empty_chunks: bool,
        overwrite: bool,
    ) -> BindResult<Array> {
        let py = slf.py();
        let this = slf.get();
        let compressors = compressors.or_auto(py);
        let filters = filters.or_auto(py);
        let spec_json = crate::create::array_spec_json(&crate::create::Args {
            shape,
            dtype,
            chunks,
            shards,
            compressors: &compressors,
            filters: &filters,
            fill_value,
            attributes,
            dimension_names,
            zarr_format,
        })?;
        let spec = zarrpipe_codecs::array::create::ArraySpec::from_json(&spec_json)?;
        let store = this.store.clone();
        let owned_path = path.to_owned();
        let array = run(py, move || {
            zarrpipe_codecs::array::create::create_array(&store, &owned_path, &spec, overwrite)
        })?;
        Ok(Array::new(
            this.remember(array),
            this.cache.clone(),
            write_empty_chunks,
            Some((slf.clone().into_any().unbind(), None)),
        ))
    }

    /// Creates a group, and any missing parent groups, and returns it.
    ///
    /// Args:
    ///     path: Where, in the store (`""` is the root).
    ///     attributes: Its user attributes. An existing group keeps its attributes unless
    ///         this is given.
    ///     zarr_format: 3 (the default) or 2.
    ///
    /// Returns:
    ///     The group, open.
    ///
    /// Raises:
    ///     FileExistsError: An array is at `path`.
    ///     PermissionError: The store is read-only.
    ///     TypeError: `attributes` is not a mapping of str keys to JSON values.
    ///     ValueError: An attribute that JSON cannot hold (NaN, an infinity).
    #[pyo3(signature = (path = "", attributes = None, *, zarr_format = 3))]
    pub(crate) fn create_group(
        slf: &Bound<'_, Self>,
        path: &str,
        attributes: Option<&Bound<'_, PyAny>>,
        zarr_format: u8,
    ) -> BindResult<Group> {
        super::group::create(slf, path, attributes, zarr_format)
    }

    /// Opens the group at `path`.
    ///
    /// Args:
    ///     path: The group's path in the store (`""` is the root group).
    ///     use_consolidated: None (the default) reads the group's consolidated metadata
    ///         when it has some, as zarr-python does: its members are then the ones that
    ///         metadata lists, found without listing the store. True requires it; False
    ///         ignores it and lists the store.
    ///
    /// Returns:
    ///     The group.
    ///
    /// Raises:
    ///     FileNotFoundError: No group at `path` (nothing, or an array).
    ///     ValueError: `use_consolidated=True` and the group has no consolidated metadata.
    ///     MetadataError: Metadata that does not parse.
    #[pyo3(signature = (path = "", *, use_consolidated = None))]
    pub(crate) fn open_group(
        slf: &Bound<'_, Self>,
        path: &str,
        use_consolidated: Option<bool>,
    ) -> BindResult<Group> {
        super::group::open(slf, path, use_consolidated)
    }

    /// Writes the consolidated metadata of the group at `path`, as
    /// `zarr.consolidate_metadata` does (v3: into the group's `zarr.json`; v2: a
    /// `.zmetadata` document), so that opening and walking the hierarchy reads one
    /// document and lists nothing.
    ///
    /// Args:
    ///     path: The group's path (`""` is the root group).
    ///
    /// Returns:
    ///     The group, opened with its new consolidated metadata.
    ///
    /// Raises:
    ///     FileNotFoundError: No group at `path`.
    ///     PermissionError: The store is read-only.
    #[pyo3(signature = (path = ""))]
    fn consolidate(slf: &Bound<'_, Self>, path: &str) -> BindResult<Group> {
        super::group::consolidate(slf, path)
    }

    /// Every array and group in the store: the ones the root group's consolidated
    /// metadata lists when it has some (one read, no listing, as zarr-python's
    /// `members(max_depth=None)`), else the store's, listed.
    ///
    /// Returns:
    ///     `(path, "array" | "group")` pairs sorted by path, `""` being the root.
    ///
    /// Raises:
    ///     OSError: The store cannot be listed.
    fn list(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str)>> {
        let store = self.store.clone();
        let nodes = run(py, move || hierarchy::list(&store))?;
        Ok(nodes.into_iter().map(|(p, k)| (p, k.name())).collect())
    }
}

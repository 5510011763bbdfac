//! Reads and writes of `_PickRequests`: the values of each chunk's pick placed at, or taken
//! from, the positions of zarr-python's output selection, all in Rust. Fixed-size elements
//! are bytes copied through the engine; variable-length ones (strings, bytes) are decoded
//! whole by the engine and become Python objects only for the selected elements.

use numpy::{PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use zarrpipe_codecs::array::variable::VarData;
use zarrpipe_codecs::layout::placement::c_strides;
use zarrpipe_codecs::memory::out::OutPtr;
use zarrpipe_codecs::read::variable::VariableChunkPick;
use zarrpipe_codecs::read::Source;
use zarrpipe_codecs::write::pick::{ChunkPick, PickValues, Sources};
use zarrpipe_codecs::write::{SrcPtr, Written};

use super::fetched::{fetched_list, FetchedArg};
use super::picks::{PickRequest, PickRequests};
use super::{bytes_list, PipelineArray};
use crate::errors::BindResult;
use crate::numpy_layout::numpy_layout;
use crate::runtime::run;

/// The values of a write by picks, as the engine takes them.
enum Held {
    Strings(VarData),
    Fixed(SrcPtr),
}

/// What a write returns to Python: per chunk the encoded bytes, or None (stored, deleted).
pub(super) type WrittenList<'py> = Vec<Option<Bound<'py, PyBytes>>>;

impl PipelineArray {
    /// Reads each request's pick into `out` at its output selection.
    pub(super) fn read_picks_into(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyUntypedArray>,
        requests: &PickRequests,
        encoded: Option<Vec<Option<PyBackedBytes>>>,
        fetched: Option<Vec<Option<FetchedArg>>>,
    ) -> BindResult<Vec<bool>> {
        if out.dtype().itemsize() != self.array.info.dtype.size() {
            return Err(PyValueError::new_err("output dtype does not match the array").into());
        }
        let (ptr, layout) = numpy_layout(out, true)?;
        let strides: Vec<i64> = layout.strides.iter().map(|&s| s as i64).collect();
        let base = layout.base as i64;
        // One request's offsets at a time: 8 bytes per value, so not all of them at once.
        let offsets = |i: usize| {
            (requests.out_offsets(i, &strides).into_iter())
                .map(|o| usize::try_from(base + o))
                .collect::<Result<Vec<usize>, _>>()
                .map_err(|_| {
                    zarrpipe_codecs::Error::InvalidSelection(
                        "an output position before the output".into(),
                    )
                })
        };
        let picks = self.engine_picks(requests)?;
        // SAFETY: `out` is a writable array the caller holds for the whole read, which
        // Python does not touch while the engine runs detached; every write is
        // bounds-checked against `layout.len`, and only this call writes it.
        let target = unsafe { OutPtr::new(ptr, layout.len) };
        let array = self.array.clone();
        run(py, move || {
            let enc = bytes_list(&encoded);
            let fetched = fetched.as_deref().map(fetched_list);
            let source = match (&enc, &fetched) {
                (_, Some(f)) => Source::Fetched(f),
                (Some(e), None) => Source::Supplied(e),
                (None, None) => Source::Store,
            };
            array.read_chunk_picks_into(&picks, source, &target, offsets)
        })
    }

    /// Reads each request's pick of a variable-length array from whole stored chunks
    /// (`encoded`, None: missing) into the NumPy array `out` at its output selection.
    pub(super) fn read_variable_into(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyAny>,
        requests: &PickRequests,
        encoded: Vec<Option<PyBackedBytes>>,
    ) -> BindResult<()> {
        let kind = self.array.variable()?;
        if encoded.len() != requests.items.len() {
            return Err(PyValueError::new_err("one encoded chunk per request").into());
        }
        let positions: Vec<Vec<u64>> = (requests.items.iter())
            .map(PickRequest::chunk_positions)
            .collect();
        let array = self.array.clone();
        let all = run(py, || {
            let chunks: Vec<VariableChunkPick<'_>> = (requests.items.iter().zip(&encoded))
                .zip(&positions)
                .map(|((r, e), p)| VariableChunkPick {
                    encoded: e.as_deref(),
                    key: &r.key,
                    shape: &r.shape,
                    positions: p,
                })
                .collect();
            array.read_variable_chunk_picks(&chunks)
        })?;
        let shape: Vec<u64> = out.getattr("shape")?.extract()?;
        let strides: Vec<i64> = c_strides(&shape, 1).iter().map(|&s| s as i64).collect();
        let flat: Vec<i64> = (0..requests.items.len())
            .flat_map(|i| requests.out_offsets(i, &strides))
            .collect();
        let values = crate::variable::to_numpy(py, &all, kind, &all.shape)?;
        // `out.flat[...] =`, not `numpy.put`, which (NumPy 2.4) leaves `StringDType`
        // strings stored outside the array's slots empty.
        out.getattr("flat")?
            .set_item(PyArray1::from_vec(py, flat), values)?;
        Ok(())
    }

    /// Writes `value` (C-contiguous, the array's type; any shape zarr-python passes) at
    /// each request's chunk pick: the values at its output selection of `value`, broadcast
    /// as NumPy broadcasts them. `fresh[i]`: chunk i's old value is not read. Old chunks
    /// come from `existing` or the store, as for `write`.
    #[allow(clippy::too_many_arguments)] // the arguments of `write_picks`, passed on
    pub(super) fn write_picks_from<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        requests: &PickRequests,
        drop_axes: &[usize],
        fresh: &[bool],
        write_empty: bool,
        existing: Option<Vec<Option<PyBackedBytes>>>,
    ) -> BindResult<WrittenList<'py>> {
        if existing.is_none() && !self.reads_store() {
            return Err(
                PyValueError::new_err("this array's old chunks must be passed as bytes").into(),
            );
        }
        let chunks: Vec<ChunkPick> = (requests.items.iter().enumerate())
            .map(|(i, r)| ChunkPick {
                key: r.key.clone(),
                shape: r.shape.clone(),
                pick: r.pick.clone(),
                fresh: fresh.get(i).copied().unwrap_or(false),
            })
            .collect();
        // Request i's values, one request at a time: 8 bytes per value, not all at once.
        let sources = |i: usize| -> zarrpipe_codecs::Result<Sources> {
            Ok(Sources::Listed(
                (requests.value_index(i, drop_axes)?.into_iter())
                    .map(|v| v as usize)
                    .collect(),
            ))
        };
        let array = self.array.clone();
        // The values: strings and bytes converted, fixed-size elements read where they are.
        let held = if let Some(kind) = self.array.info.variable {
            let n: u64 = value.getattr("size")?.extract()?;
            let flat = value.call_method0("ravel")?;
            Held::Strings(crate::variable::from_numpy(py, &flat, kind, &[n])?)
        } else {
            let value = value.cast::<PyUntypedArray>()?;
            if value.dtype().itemsize() != self.array.info.dtype.size() {
                return Err(
                    PyValueError::new_err("values must have the array's element size").into(),
                );
            }
            if !value.is_c_contiguous() {
                return Err(PyValueError::new_err("values must be C-contiguous").into());
            }
            let (ptr, layout) = numpy_layout(value, false)?;
            // SAFETY: `value` is a C-contiguous array zarr-python holds, unchanged, until
            // this call returns; the write only reads it.
            let src =
                unsafe { SrcPtr::new(ptr.wrapping_add(layout.base), layout.len - layout.base) };
            Held::Fixed(src)
        };
        let written = run(py, move || {
            let values = match &held {
                Held::Strings(strings) => PickValues::Variable(strings),
                Held::Fixed(src) => PickValues::Fixed(src),
            };
            let supplied = bytes_list(&existing);
            array.write_chunk_picks(
                &chunks,
                values,
                sources,
                supplied.as_deref(),
                write_empty,
                None,
            )
        })?;
        crate::errors::warn_unconditional(py, self.array.store())?;
        Ok(written
            .into_iter()
            .map(|w| match w {
                Written::Bytes(b) => Some(PyBytes::new(py, &b)),
                Written::Stored(_) | Written::Deleted => None,
            })
            .collect())
    }
}

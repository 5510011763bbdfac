//! `_ChunkCodecs`: the Rust half of `zarrpipe.CodecPipeline`. zarr-python's planner says
//! which chunks a read or write touches; this decodes or encodes them in parallel with the
//! GIL released, reading and writing zarr-python's numpy buffers in place.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use zarrpipe_codecs::decode::placement::{OutPtr, Placement};
use zarrpipe_codecs::pipeline::{ChunkCodecs, ChunkRead, ChunkWrite, SrcPtr};
use zarrpipe_codecs::store::Store;

use crate::errors::to_pyerr;
use crate::runtime::run;
use crate::store::Store as PyStore;

/// (store key, chunk shape, wanted (start, stop) per chunk axis, byte offset of the first
/// wanted element in the array, byte stride of the array per chunk axis)
type Item = (String, Vec<u64>, Vec<(u64, u64)>, usize, Vec<usize>);

#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_ChunkCodecs")]
pub struct PyChunkCodecs {
    inner: Arc<ChunkCodecs>,
    stores: Mutex<HashMap<PathBuf, Arc<Store>>>,
}

/// The memory of a numpy array: base pointer and the byte span its strides reach.
fn span(array: &Bound<'_, PyUntypedArray>, writable: bool) -> PyResult<(*mut u8, usize)> {
    if writable
        && !array
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?
    {
        return Err(PyValueError::new_err("output array is read-only"));
    }
    let elem = array.dtype().itemsize();
    let mut span = elem;
    for (&n, &s) in array.shape().iter().zip(array.strides()) {
        if n == 0 {
            return Ok((std::ptr::null_mut(), 0));
        }
        let s = usize::try_from(s)
            .map_err(|_| PyValueError::new_err("negative strides are not supported"))?;
        span += (n - 1) * s;
    }
    // SAFETY: reading the data pointer of a live numpy array.
    let ptr = unsafe { (*array.as_array_ptr()).fields.data.cast::<u8>() };
    Ok((ptr, span))
}

fn bytes_list(list: &Option<Vec<Option<PyBackedBytes>>>) -> Option<Vec<Option<&[u8]>>> {
    list.as_ref()
        .map(|l| l.iter().map(|b| b.as_deref()).collect())
}

impl PyChunkCodecs {
    fn store(&self, root: Option<PathBuf>) -> PyResult<Option<Arc<Store>>> {
        let Some(root) = root else { return Ok(None) };
        let mut stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = stores.get(&root) {
            return Ok(Some(s.clone()));
        }
        let store = Arc::new(Store::open_local(&root).map_err(to_pyerr)?);
        stores.insert(root, store.clone());
        Ok(Some(store))
    }
}

#[pymethods]
impl PyChunkCodecs {
    /// Raises UnsupportedError when zarrpipe cannot decode this array itself.
    /// `subchunk_order`: C-order indices of a shard's inner chunks, in the order writes lay
    /// them out (zarr-python's `subchunk_write_order`); None keeps C order.
    #[new]
    #[pyo3(signature = (metadata_json, subchunk_order = None))]
    fn new(metadata_json: &str, subchunk_order: Option<Vec<u64>>) -> PyResult<Self> {
        let codecs = ChunkCodecs::from_metadata_json(metadata_json).map_err(to_pyerr)?;
        Ok(Self {
            inner: Arc::new(codecs.with_subchunk_order(subchunk_order.unwrap_or_default())),
            stores: Mutex::new(HashMap::new()),
        })
    }

    /// Decodes chunks into `out`, from `encoded` (bytes or None per item) or, if that is
    /// None, from the local store at `local_root` or the zarrpipe `store` (an object store:
    /// fetched concurrently). Returns per chunk whether it was present.
    #[pyo3(signature = (out, items, fill, encoded = None, local_root = None, store = None))]
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyUntypedArray>,
        items: Vec<Item>,
        fill: Vec<u8>,
        encoded: Option<Vec<Option<PyBackedBytes>>>,
        local_root: Option<PathBuf>,
        store: Option<PyRef<'_, PyStore>>,
    ) -> PyResult<Vec<bool>> {
        if fill.len() != self.inner.dtype.size() || out.dtype().itemsize() != fill.len() {
            return Err(PyValueError::new_err(
                "fill value and output dtype do not match the array",
            ));
        }
        let (ptr, len) = span(out, true)?;
        let store = match store {
            Some(s) => Some(s.engine().clone()),
            None => self.store(local_root)?,
        };
        let reads: Vec<ChunkRead> = items
            .into_iter()
            .map(
                |(key, chunk_shape, want, out_offset, out_strides)| ChunkRead {
                    key,
                    placement: Placement {
                        chunk_shape,
                        want: want.into_iter().map(|(a, b)| a..b).collect(),
                        out_offset,
                        out_strides,
                    },
                },
            )
            .collect();
        // SAFETY: `out` stays alive (we hold it) and is not touched by Python while detached;
        // zarr-python gives each chunk a disjoint part of it; every write is bounds-checked.
        let out = unsafe { OutPtr::new(ptr, len) };
        let inner = self.inner.clone();
        run(py, move || {
            let enc = bytes_list(&encoded);
            inner.read(&reads, enc.as_deref(), store.as_deref(), &out, &fill)
        })
    }

    /// Encodes the chunks a write touches from `value`; returns per item the encoded bytes,
    /// or None where the chunk is all fill value and `write_empty` is false (delete it).
    /// With `local_root`, also writes (atomically) or deletes the chunk files there.
    /// `fresh[i]`: chunk i's old value is not read (cells not written become fill value).
    #[pyo3(signature = (value, items, fill, write_empty, existing = None, local_root = None, fresh = None))]
    #[allow(clippy::too_many_arguments)]
    fn write<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyUntypedArray>,
        items: Vec<Item>,
        fill: Vec<u8>,
        write_empty: bool,
        existing: Option<Vec<Option<PyBackedBytes>>>,
        local_root: Option<PathBuf>,
        fresh: Option<Vec<bool>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        if fill.len() != self.inner.dtype.size() || value.dtype().itemsize() != fill.len() {
            return Err(PyValueError::new_err(
                "fill value and input dtype do not match the array",
            ));
        }
        let (ptr, len) = span(value, false)?;
        let store = self.store(local_root)?;
        let local = store.is_some();
        let fresh = fresh.unwrap_or_default();
        let writes: Vec<ChunkWrite> = items
            .into_iter()
            .enumerate()
            .map(
                |(i, (key, chunk_shape, want, src_offset, src_strides))| ChunkWrite {
                    key,
                    chunk_shape,
                    want: want.into_iter().map(|(a, b)| a..b).collect(),
                    src_offset,
                    src_strides,
                    fresh: fresh.get(i).copied().unwrap_or(false),
                },
            )
            .collect();
        // SAFETY: `value` stays alive while we run and zarr-python does not modify it.
        let src = unsafe { SrcPtr::new(ptr, len) };
        let inner = self.inner.clone();
        let encoded = run(py, move || {
            let ex = bytes_list(&existing);
            inner.write(
                &writes,
                &src,
                ex.as_deref(),
                store.as_deref(),
                write_empty,
                &fill,
            )
        })?;
        Ok(encoded
            .into_iter()
            .map(|e| {
                if local {
                    None
                } else {
                    e.map(|b| PyBytes::new(py, &b))
                }
            })
            .collect())
    }
}

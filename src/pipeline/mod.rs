//! `_PipelineArray`: the Rust half of `zarrpipe.CodecPipeline`. zarr-python's planner says
//! which chunks a read or write touches and which part of each, in element terms; the
//! engine turns that into checked placements and decodes or encodes the chunks in parallel
//! with the GIL released, reading and writing zarr-python's NumPy buffers in place.

use std::sync::Arc;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use zarrpipe_codecs::array::Array as EngineArray;
use zarrpipe_codecs::layout::placement::Placement;
use zarrpipe_codecs::layout::plan::{check, ChunkPlan, OutLayout};
use zarrpipe_codecs::layout::shard_order::ShardOrder;
use zarrpipe_codecs::read::Source;
use zarrpipe_codecs::select::pick::Pick;
use zarrpipe_codecs::store::Store as EngineStore;
use zarrpipe_codecs::write::{ChunkWrite, SrcPtr, Written};

mod fetched;
pub mod output;
mod pick_io;
pub mod picks;
pub mod request;

use crate::errors::BindResult;
use crate::numpy_layout::numpy_layout;
use crate::runtime::run;
use crate::store::Store as PyStore;
use fetched::{fetched_list, FetchedArg, ReadPlans};
use pick_io::WrittenList;
use picks::PickRequests;
use request::{BoxRequest, ChunkRequests};

/// Where the chunks of this array live, as recognised once, when the pipeline is built.
enum Chunks {
    /// The engine reads and writes them itself (a local directory or an object store).
    Store,
    /// zarr-python's store API moves the bytes; the engine only decodes and encodes.
    Supplied,
}

/// The Rust half of `zarrpipe.CodecPipeline` (internal): one engine array.
#[pyclass(frozen, module = "zarrpipe._zarrpipe", name = "_PipelineArray")]
pub struct PipelineArray {
    array: Arc<EngineArray>,
    chunks: Chunks,
}

/// The bytes of the output (from the layout's pointer) that the requests write: from the
/// first element of the first box to the last of the last, when all strides are positive.
fn written_span(requests: &[BoxRequest], layout: &OutLayout) -> Option<std::ops::Range<usize>> {
    if layout.strides.iter().any(|&s| s <= 0) {
        return None;
    }
    let mut span: Option<std::ops::Range<usize>> = None;
    for r in requests {
        let out_sel = &r.out_sel;
        if out_sel.len() != layout.strides.len() || out_sel.iter().any(|r| r.start >= r.end) {
            continue;
        }
        let offset = |pick: &dyn Fn(u64, u64) -> u64| -> usize {
            out_sel
                .iter()
                .zip(&layout.strides)
                .map(|(r, &s)| pick(r.start, r.end) as usize * s as usize)
                .sum::<usize>()
                + layout.base
        };
        let lo = offset(&|a, _| a);
        let hi = offset(&|_, b| b - 1) + layout.elem;
        span = Some(match span {
            Some(r) => r.start.min(lo)..r.end.max(hi),
            None => lo..hi,
        });
    }
    span.filter(|r| r.end <= layout.len)
}

fn bytes_list(list: &Option<Vec<Option<PyBackedBytes>>>) -> Option<Vec<Option<&[u8]>>> {
    list.as_ref()
        .map(|l| l.iter().map(|b| b.as_deref()).collect())
}

impl PipelineArray {
    /// Each request's key and the part of its chunk its read decodes (None: nothing).
    fn pick_placements(
        &self,
        requests: &PickRequests,
    ) -> BindResult<Vec<(String, Option<Placement>)>> {
        let picks = self.engine_picks(requests)?;
        let placements = self.array.chunk_pick_placements(&picks)?;
        Ok(picks.into_iter().map(|p| p.0).zip(placements).collect())
    }

    /// The engine's picks of `requests`, each chunk's shape checked against the array's.
    fn engine_picks(&self, requests: &PickRequests) -> BindResult<Vec<(String, Vec<u64>, Pick)>> {
        (requests.items.iter())
            .map(|r| {
                self.array.check_chunk_shape(&r.shape, &r.key)?;
                Ok((r.key.clone(), r.shape.clone(), r.pick.clone()))
            })
            .collect()
    }

    /// `inner_ranges` of the engine, as Python takes them.
    fn ranges_of(
        &self,
        wanted: &[(&str, Option<&Placement>)],
        indexes: &[Option<PyBackedBytes>],
    ) -> BindResult<Vec<Vec<(u64, u64)>>> {
        let indexes: Vec<Option<&[u8]>> = indexes.iter().map(|b| b.as_deref()).collect();
        let ranges = self.array.inner_ranges(wanted, &indexes)?;
        Ok(ranges
            .into_iter()
            .map(|r| r.into_iter().map(|r| (r.start, r.end)).collect())
            .collect())
    }

    /// The checked plans of a read of `requests` into `out`.
    fn read_plans(
        &self,
        out: &Bound<'_, PyUntypedArray>,
        requests: &ChunkRequests,
    ) -> BindResult<ReadPlans> {
        if out.dtype().itemsize() != self.array.info.dtype.size() {
            return Err(PyValueError::new_err("output dtype does not match the array").into());
        }
        let (ptr, layout) = numpy_layout(out, true)?;
        let span = written_span(&requests.items, &layout);
        let plans = (requests.items.iter())
            .map(|r| {
                self.array.check_chunk_shape(&r.shape, &r.key)?;
                ChunkPlan::from_request(r.key.clone(), &r.shape, &r.chunk_sel, &r.out_sel, &layout)
            })
            .collect::<Result<Vec<_>, zarrpipe_codecs::Error>>()?;
        check(&plans, &layout, false)?;
        Ok(ReadPlans {
            plans,
            ptr,
            len: layout.len,
            span,
        })
    }
}

#[pymethods]
impl PipelineArray {
    /// An engine array for zarr-python's `metadata_json` (`json.dumps(metadata.to_dict())`)
    /// whose chunks live in `store` (a zarrpipe Store over the same location as
    /// zarr-python's store) or, without one, are passed in and out as bytes.
    /// `subchunk_write_order`: zarr-python's order of a written shard's inner chunks
    /// (`"morton"`, `"colexicographic"`, `"lexicographic"`, `"unordered"`; None: C order).
    /// Raises UnsupportedError when zarrpipe cannot read this array at all.
    #[new]
    #[pyo3(signature = (metadata_json, subchunk_write_order = None, store = None))]
    fn new(
        py: Python<'_>,
        metadata_json: &str,
        subchunk_write_order: Option<&str>,
        store: Option<PyRef<'_, PyStore>>,
    ) -> BindResult<Self> {
        let order = match subchunk_write_order {
            None => ShardOrder::C,
            Some(name) => ShardOrder::named(name).ok_or_else(|| {
                PyValueError::new_err(format!("no subchunk write order {name:?}"))
            })?,
        };
        let engine: Option<Arc<EngineStore>> = store.map(|s| s.engine().clone());
        let chunks = if engine.is_some() {
            Chunks::Store
        } else {
            Chunks::Supplied
        };
        let json = metadata_json.to_owned();
        let array = py.detach(|| match engine {
            Some(store) => EngineArray::with_metadata(store, "/", &json),
            None => EngineArray::detached(&json),
        })?;
        if array.info.variable.is_none() {
            array.chain()?;
        }
        Ok(Self {
            array: Arc::new(array.with_shard_order(order)),
            chunks,
        })
    }

    /// Whether the elements are variable-length strings or bytes.
    #[getter]
    fn variable(&self) -> bool {
        self.array.info.variable.is_some()
    }

    /// Reads each request's pick of a variable-length array into `out` at its output
    /// selection, from whole stored chunks (None: missing), decoded in parallel.
    fn read_variable(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyAny>,
        requests: PyRef<'_, PickRequests>,
        encoded: Vec<Option<PyBackedBytes>>,
    ) -> BindResult<()> {
        self.read_variable_into(py, out, &requests, encoded)
    }

    /// Writes `value` at each request's chunk pick, the values at its output selection
    /// broadcast as NumPy broadcasts; returns the encoded chunks when `existing` is given
    /// (None: delete), else stores them, each read, updated and stored as one step.
    #[pyo3(signature = (value, requests, drop_axes, fresh, write_empty, existing = None))]
    #[allow(clippy::too_many_arguments)]
    fn write_picks<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        requests: PyRef<'py, PickRequests>,
        drop_axes: Vec<usize>,
        fresh: Vec<bool>,
        write_empty: bool,
        existing: Option<Vec<Option<PyBackedBytes>>>,
    ) -> BindResult<WrittenList<'py>> {
        self.write_picks_from(
            py,
            value,
            &requests,
            &drop_axes,
            &fresh,
            write_empty,
            existing,
        )
    }

    /// Reads each request's pick into `out` at its output selection; per chunk whether
    /// it was present.
    #[pyo3(signature = (out, requests, encoded = None, fetched = None))]
    fn read_picks(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyUntypedArray>,
        requests: PyRef<'_, PickRequests>,
        encoded: Option<Vec<Option<PyBackedBytes>>>,
        fetched: Option<Vec<Option<FetchedArg>>>,
    ) -> BindResult<Vec<bool>> {
        if encoded.is_none() && fetched.is_none() && !self.reads_store() {
            return Err(
                PyValueError::new_err("this array's chunks must be passed as bytes").into(),
            );
        }
        self.read_picks_into(py, out, &requests, encoded, fetched)
    }

    /// Whether the engine fetches and stores chunks itself (else pass bytes).
    #[getter]
    fn reads_store(&self) -> bool {
        matches!(self.chunks, Chunks::Store)
    }

    /// Decodes the requested chunks into `out`; returns per chunk whether it was present.
    #[pyo3(signature = (out, requests, encoded = None))]
    fn read(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyUntypedArray>,
        requests: PyRef<'_, ChunkRequests>,
        encoded: Option<Vec<Option<PyBackedBytes>>>,
    ) -> BindResult<Vec<bool>> {
        if encoded.is_none() && !self.reads_store() {
            return Err(
                PyValueError::new_err("this array's chunks must be passed as bytes").into(),
            );
        }
        let planned = self.read_plans(out, &requests)?;
        let array = self.array.clone();
        run(py, move || {
            let out = planned.faulted_in();
            let enc = bytes_list(&encoded);
            let source = enc.as_deref().map_or(Source::Store, Source::Supplied);
            array.read_plan(&planned.plans, &out, source, None)
        })
    }

    /// Per request, its shard's index length when it needs only some inner chunks (None:
    /// fetch the value whole), and whether indexes sit at the end; None when shards cannot
    /// be read in part.
    fn partial_shard_indexes(
        &self,
        out: &Bound<'_, PyUntypedArray>,
        requests: PyRef<'_, ChunkRequests>,
    ) -> BindResult<Option<(Vec<Option<u64>>, bool)>> {
        let planned = self.read_plans(out, &requests)?;
        let placements: Vec<_> = planned.plans.iter().map(|p| Some(&p.placement)).collect();
        Ok(self.array.partial_shard_indexes(&placements)?)
    }

    /// Per request, the `(start, end)` byte ranges of its shard to fetch, from the index.
    fn inner_ranges(
        &self,
        out: &Bound<'_, PyUntypedArray>,
        requests: PyRef<'_, ChunkRequests>,
        indexes: Vec<Option<PyBackedBytes>>,
    ) -> BindResult<Vec<Vec<(u64, u64)>>> {
        let planned = self.read_plans(out, &requests)?;
        let wanted: Vec<_> = (planned.plans.iter())
            .map(|p| (p.key.as_str(), Some(&p.placement)))
            .collect();
        self.ranges_of(&wanted, &indexes)
    }

    /// `read` from what was fetched: None, the whole value, or a shard's (index, pieces).
    fn read_fetched(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyUntypedArray>,
        requests: PyRef<'_, ChunkRequests>,
        fetched: Vec<Option<FetchedArg>>,
    ) -> BindResult<Vec<bool>> {
        let planned = self.read_plans(out, &requests)?;
        let array = self.array.clone();
        run(py, move || {
            let out = planned.faulted_in();
            let fetched = fetched_list(&fetched);
            array.read_plan(&planned.plans, &out, Source::Fetched(&fetched), None)
        })
    }

    /// `partial_shard_indexes` for `read_picks`' requests.
    fn partial_pick_indexes(
        &self,
        requests: PyRef<'_, PickRequests>,
    ) -> BindResult<Option<(Vec<Option<u64>>, bool)>> {
        let placements = self.pick_placements(&requests)?;
        let placements: Vec<_> = placements.iter().map(|(_, p)| p.as_ref()).collect();
        Ok(self.array.partial_shard_indexes(&placements)?)
    }

    /// `inner_ranges` for `read_picks`' requests.
    fn pick_inner_ranges(
        &self,
        requests: PyRef<'_, PickRequests>,
        indexes: Vec<Option<PyBackedBytes>>,
    ) -> BindResult<Vec<Vec<(u64, u64)>>> {
        let placements = self.pick_placements(&requests)?;
        let wanted: Vec<_> = (placements.iter())
            .map(|(key, p)| (key.as_str(), p.as_ref()))
            .collect();
        self.ranges_of(&wanted, &indexes)
    }

    /// Encodes the chunks a write touches; None marks a chunk to delete (or one the
    /// engine stored itself).
    #[pyo3(signature = (value, requests, write_empty, fresh, existing = None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyUntypedArray>,
        requests: PyRef<'py, ChunkRequests>,
        write_empty: bool,
        fresh: Vec<bool>,
        existing: Option<Vec<Option<PyBackedBytes>>>,
    ) -> BindResult<Vec<Option<Bound<'py, PyBytes>>>> {
        if value.dtype().itemsize() != self.array.info.dtype.size() {
            return Err(PyValueError::new_err("value dtype does not match the array").into());
        }
        let store_them = existing.is_none() && self.reads_store();
        if existing.is_none() && !store_them {
            return Err(
                PyValueError::new_err("this array's old chunks must be passed as bytes").into(),
            );
        }
        let (ptr, layout) = numpy_layout(value, false)?;
        let writes = (requests.items.iter())
            .enumerate()
            .map(|(i, r)| {
                // A write's placement is a read's, with the value as the "output".
                let p = ChunkPlan::from_request(
                    r.key.clone(),
                    &r.shape,
                    &r.chunk_sel,
                    &r.out_sel,
                    &layout,
                )?;
                Ok(ChunkWrite {
                    key: p.key,
                    chunk_shape: r.shape.clone(),
                    want: p.placement.want,
                    src_offset: p.placement.out_offset,
                    src_strides: p.placement.out_strides,
                    fresh: fresh.get(i).copied().unwrap_or(false),
                })
            })
            .collect::<Result<Vec<_>, zarrpipe_codecs::Error>>()?;
        // SAFETY: `value` stays alive while we run and zarr-python does not modify it.
        let src = unsafe { SrcPtr::new(ptr, layout.len) };
        let array = self.array.clone();
        let written = run(py, move || {
            let supplied = bytes_list(&existing);
            array.write_chunks(&writes, &src, supplied.as_deref(), write_empty, None)
        });
        crate::errors::warn_unconditional(py, self.array.store())?;
        let written = written?;
        Ok(written
            .into_iter()
            .map(|w| match w {
                _ if store_them => None,
                Written::Bytes(b) => Some(PyBytes::new(py, &b)),
                Written::Stored(_) | Written::Deleted => None,
            })
            .collect())
    }
}

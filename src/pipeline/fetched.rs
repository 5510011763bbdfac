//! What `_PipelineArray`'s reads take besides zarr-python's requests: the checked plans of
//! a read into zarr-python's output, and what the caller fetched of each stored value
//! (whole, or a shard in part) for stores the engine does not reach.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use zarrpipe_codecs::layout::plan::ChunkPlan;
use zarrpipe_codecs::memory::first_touch;
use zarrpipe_codecs::memory::out::OutPtr;
use zarrpipe_codecs::read::fetched::Fetched;

/// What the caller fetched of one stored value for `read_fetched`.
#[derive(FromPyObject)]
pub(super) enum FetchedArg {
    /// The whole value.
    Whole(PyBackedBytes),
    /// A shard's encoded index and `(offset, bytes)` ranges of it.
    Partial(PyBackedBytes, Vec<(u64, PyBackedBytes)>),
}

/// A read's checked plans into zarr-python's output array.
pub(super) struct ReadPlans {
    pub(super) plans: Vec<ChunkPlan>,
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    /// The bytes of the output the plans write (see `written_span`).
    pub(super) span: Option<std::ops::Range<usize>>,
}

// SAFETY: `ptr` is the output array's memory, which the caller holds for the whole read
// and Python does not touch while the engine runs detached (see `read`).
unsafe impl Send for ReadPlans {}

impl ReadPlans {
    /// The output, its written span faulted in first: zarr-python's output comes from
    /// `np.empty`, and its first touch, page by page in the decoding threads, can cost
    /// seconds on a VM (see `first_touch`).
    pub(super) fn faulted_in(&self) -> OutPtr {
        if let Some(r) = &self.span {
            // SAFETY: inside the output, which the caller holds and Python does not touch
            // meanwhile.
            unsafe { first_touch::populate_keeping(self.ptr.add(r.start), r.len()) };
        }
        // SAFETY: as above; the checked plan keeps every write inside it, chunks disjoint.
        unsafe { OutPtr::new(self.ptr, self.len) }
    }
}

/// The engine's view of what the caller fetched.
pub(super) fn fetched_list(fetched: &[Option<FetchedArg>]) -> Vec<Fetched<'_>> {
    fetched
        .iter()
        .map(|f| match f {
            None => Fetched::Missing,
            Some(FetchedArg::Whole(b)) => Fetched::Whole(b),
            Some(FetchedArg::Partial(index, pieces)) => Fetched::Partial {
                index,
                pieces: pieces.iter().map(|(at, b)| (*at, &b[..])).collect(),
            },
        })
        .collect()
}

//! Output buffers as the engine writes them from many threads at once: [`OutPtr`], a
//! bounds-checked capability to write disjoint parts of one buffer (with streaming stores
//! for large outputs, see `stream_store`), and [`RawTarget`], the part of it that belongs to
//! one chunk alone. Who may write where is proved by `layout::plan::check`.

use crate::memory::stream_store;

/// An output buffer that several threads fill at disjoint places.
#[derive(Clone, Copy, Debug)]
pub struct OutPtr {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    /// Scatter rows with streaming stores (see `stream_store`): the output is too large
    /// for the cache to keep.
    pub(crate) streaming: bool,
}

/// Outputs from this size on are written around the cache when scattered. Smaller ones may
/// still be in cache when the caller reads them; larger ones would only evict it. Measured
/// (BENCHMARKS.md): a 1 GiB read-all is 3-18 % faster streamed, reading a 128 MiB slab 15 %,
/// while reading 32 MiB shards and summing each was up to 8 % slower streamed.
const STREAM_AT_LEAST: usize = 64 << 20;

// SAFETY: an `OutPtr` is only a capability to write; `OutPtr::new`'s contract makes every
// writer target disjoint bytes, so sharing it across threads creates no data race.
unsafe impl Send for OutPtr {}
// SAFETY: as for `Send`: shared use only writes disjoint bytes.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes for as long as this value (or a copy) is
    /// used, and concurrent users must write disjoint byte ranges.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        Self {
            ptr,
            len,
            streaming: false,
        }
    }

    /// This output, scattered with streaming stores if it is large (a whole read's output,
    /// not a chunk's buffer that is read again at once).
    #[must_use]
    pub fn streaming_if_large(self) -> Self {
        Self {
            streaming: self.len >= STREAM_AT_LEAST,
            ..self
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` to `offset`. Out-of-range writes are refused (a planner bug, never UB).
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> Result<(), SinkError> {
        let end = offset
            .checked_add(src.len())
            .ok_or(SinkError::OutOfBounds)?;
        if end > self.len {
            return Err(SinkError::OutOfBounds);
        }
        // SAFETY: in bounds (checked above); disjointness is `new`'s contract.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) };
        Ok(())
    }

    /// As [`Self::write`], with streaming stores: the caller must call
    /// [`stream_store::fence`] on this thread before the bytes are read.
    pub(crate) fn write_streaming(&self, offset: usize, src: &[u8]) -> Result<(), SinkError> {
        let end = offset
            .checked_add(src.len())
            .ok_or(SinkError::OutOfBounds)?;
        if end > self.len {
            return Err(SinkError::OutOfBounds);
        }
        // SAFETY: in bounds (checked above); disjointness is `new`'s contract; the fence is
        // the caller's.
        unsafe { stream_store::copy(self.ptr.add(offset), src) };
        Ok(())
    }

    /// Reads back `len` bytes at `offset`.
    ///
    /// # Safety
    /// The bytes must have been written, and no one may be writing them now.
    pub(crate) unsafe fn read(&self, offset: usize, len: usize) -> Result<&[u8], SinkError> {
        let end = offset.checked_add(len).ok_or(SinkError::OutOfBounds)?;
        if end > self.len {
            return Err(SinkError::OutOfBounds);
        }
        // SAFETY: in bounds; initialised and not being written (caller's contract).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) })
    }

    /// Copies `src` to `offset`, then reverses every `width` bytes of it in place.
    pub(crate) fn write_swapped(
        &self,
        offset: usize,
        src: &[u8],
        width: usize,
    ) -> Result<(), SinkError> {
        self.write(offset, src)?;
        // SAFETY: in bounds (checked by `write`), just written by this writer, and no one
        // else touches this range (`new`'s contract).
        let written = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), src.len()) };
        written.chunks_exact_mut(width).for_each(<[u8]>::reverse);
        Ok(())
    }

    /// Like [`Self::write_swapped`], reversing each `(offset, width)` span of `table` in
    /// every `elem`-byte element of `src` (whole elements).
    pub(crate) fn write_fields(
        &self,
        offset: usize,
        src: &[u8],
        elem: usize,
        table: &[(usize, usize)],
    ) -> Result<(), SinkError> {
        self.write(offset, src)?;
        // SAFETY: as in `write_swapped`.
        let written = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), src.len()) };
        crate::dtype::swap_fields(written, elem, table);
        Ok(())
    }
}

/// Where a decoder may write a whole chunk directly: `len` possibly uninitialised bytes that
/// belong to this chunk alone (the planner gives each chunk a disjoint output range).
#[derive(Debug)]
pub struct RawTarget {
    pub ptr: *mut u8,
    pub len: usize,
}

/// Why a decoded stream did not fit its chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkError {
    /// The stream is longer than the chunk.
    TooLong { expected: usize },
    /// The stream ended early.
    TooShort { expected: usize, got: usize },
    /// A piece that is not a whole number of elements.
    Misaligned { elem: usize },
    /// A write outside the output buffer: a bug in zarrpipe's planning, reported, not done.
    OutOfBounds,
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { expected } => {
                write!(f, "decodes to more than the expected {expected} bytes")
            }
            Self::TooShort { expected, got } => {
                write!(f, "decodes to {got} bytes, expected {expected}")
            }
            Self::Misaligned { elem } => {
                write!(
                    f,
                    "decodes to a size that is not a multiple of the {elem}-byte element"
                )
            }
            Self::OutOfBounds => f.write_str("internal error: write outside the output buffer"),
        }
    }
}

//! zstd compression with one compression context per thread, kept from chunk to chunk.
//!
//! A chunk is compressed from one contiguous buffer that zstd uses as its window in place
//! (`ZSTD_c_stableInBuffer`: no copy into a window buffer of its own), and its output goes
//! to the value's sink as it comes, through one small buffer, so no chunk-sized output
//! buffer is made. (Feeding zstd the elements piece by piece instead made it copy them into
//! a circular window and search matches across its wrap, `doubleFast_extDict`: 1.4x the
//! time of the whole benchmark write.)
//!
//! Why: zarrs makes a context for every chunk (its workspace, a few MiB for large chunks,
//! allocated and faulted in again each time), and zstd 1.5.7's block pre-splitter costs 6 %
//! more instructions at level 3 on the benchmark's chunks (callgrind: 536 M instead of 505 M
//! for 8 MiB) for chunks 1.6 % smaller. zarrpipe turns the pre-splitter off, which makes
//! the frames zstd 1.5.6 makes (numcodecs', so zarr-python's, at the same level) but where
//! 1.5.7's reworked double-fast search picks another match: identical for the benchmark's
//! 512 KiB and 4 MiB chunks, 2 bytes shorter for a 32 MiB one. That search, branch-free in
//! 1.5.7, is also why 1.5.7 compresses about 5 % slower than 1.5.6 on this data (runs log
//! `benches/results/2026-12-06-writes.md`).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/zstd/>.

use std::cell::RefCell;
use std::ptr::NonNull;

use zstd::zstd_safe::zstd_sys as sys;

use crate::store::sink::Sink;

/// A zstd codec's settings, as the metadata gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZstdParams {
    /// zstd's level; 0 is zstd's default (3).
    pub level: i32,
    /// Whether frames end with a checksum of their content.
    pub checksum: bool,
}

/// `ZSTD_c_blockSplitterLevel`: 1 is "no splitting" (`zstd.h`, experimental parameters).
const NO_BLOCK_SPLITTING: i32 = 1;

struct Context {
    cctx: NonNull<sys::ZSTD_CCtx>,
    /// Compressed bytes on their way to the sink.
    out: Vec<u8>,
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `cctx` came from ZSTD_createCCtx and is freed once, here.
        unsafe { sys::ZSTD_freeCCtx(self.cctx.as_ptr()) };
    }
}

thread_local! {
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

fn check(code: usize) -> Result<usize, String> {
    // SAFETY: ZSTD_isError and ZSTD_getErrorName take any value and return a static string.
    if unsafe { sys::ZSTD_isError(code) } != 0 {
        // SAFETY: as above: a static, nul-terminated string for any code.
        let name = unsafe { std::ffi::CStr::from_ptr(sys::ZSTD_getErrorName(code)) };
        return Err(format!("zstd: {}", name.to_string_lossy()));
    }
    Ok(code)
}

fn set(
    cctx: NonNull<sys::ZSTD_CCtx>,
    param: sys::ZSTD_cParameter,
    value: i32,
) -> Result<(), String> {
    // SAFETY: a live context and a parameter zstd.h defines.
    check(unsafe { sys::ZSTD_CCtx_setParameter(cctx.as_ptr(), param, value) }).map(|_| ())
}

impl Context {
    fn new() -> Result<Self, String> {
        // SAFETY: creating a context has no preconditions; a null one is an allocation
        // failure.
        let cctx = NonNull::new(unsafe { sys::ZSTD_createCCtx() })
            .ok_or_else(|| "zstd: cannot allocate a compression context".to_owned())?;
        // SAFETY: ZSTD_CStreamOutSize has no preconditions.
        let out_len = unsafe { sys::ZSTD_CStreamOutSize() };
        Ok(Self {
            cctx,
            out: vec![0; out_len],
        })
    }

    /// Starts a frame of `len` bytes with `params`. Parameters are set afresh for every
    /// frame: a context that only had its session reset searched the next frame's matches
    /// with its slower external-dictionary loop (`doubleFast_extDict`: callgrind, 443 M
    /// instructions for a 4 MiB chunk instead of 363 M).
    fn start(&mut self, params: ZstdParams, len: u64) -> Result<(), String> {
        let cctx = self.cctx;
        // SAFETY: a live context.
        check(unsafe {
            sys::ZSTD_CCtx_reset(
                cctx.as_ptr(),
                sys::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters,
            )
        })?;
        set(
            cctx,
            sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
            params.level,
        )?;
        set(
            cctx,
            sys::ZSTD_cParameter::ZSTD_c_checksumFlag,
            i32::from(params.checksum),
        )?;
        set(
            cctx,
            sys::ZSTD_cParameter::ZSTD_c_experimentalParam20,
            NO_BLOCK_SPLITTING,
        )?;
        // ZSTD_c_stableInBuffer: the whole input is one buffer that stays put.
        set(cctx, sys::ZSTD_cParameter::ZSTD_c_experimentalParam9, 1)?;
        // The frame then says its content size, and zstd sizes its window for it, as a
        // one-shot compression does.
        // SAFETY: a live context, reset above.
        check(unsafe { sys::ZSTD_CCtx_setPledgedSrcSize(cctx.as_ptr(), len as _) }).map(|_| ())
    }

    /// Compresses all of `input` into the frame and ends it, putting what comes out into
    /// `sink`.
    fn compress_all(&mut self, input: &[u8], sink: &mut dyn Sink) -> Result<(), String> {
        let mut inb = sys::ZSTD_inBuffer {
            src: input.as_ptr().cast(),
            size: input.len(),
            pos: 0,
        };
        let directive = sys::ZSTD_EndDirective::ZSTD_e_end;
        loop {
            let mut outb = sys::ZSTD_outBuffer {
                dst: self.out.as_mut_ptr().cast(),
                size: self.out.len(),
                pos: 0,
            };
            // SAFETY: a live context mid-frame; `inb` points at `input`, readable for its
            // length and unchanged until the frame ends (the stable-input promise), and
            // `outb` at `out`, writable for its length; zstd moves both `pos`.
            let left = check(unsafe {
                sys::ZSTD_compressStream2(self.cctx.as_ptr(), &mut outb, &mut inb, directive)
            })?;
            sink.put(&self.out[..outb.pos]).map_err(|e| e.to_string())?;
            if left == 0 {
                return Ok(());
            }
        }
    }
}

/// Compresses `input` into one zstd frame, put into `sink` as it comes out.
pub fn compress(params: ZstdParams, input: &[u8], sink: &mut dyn Sink) -> Result<(), String> {
    CONTEXT.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(Context::new()?);
        }
        let ctx = slot.as_mut().expect("just made");
        ctx.start(params, input.len() as u64)
            .and_then(|()| ctx.compress_all(input, sink))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Vec<u8> {
        (0u32..200_000)
            .flat_map(|i| ((i * 7919) % 1013).to_le_bytes())
            .collect()
    }

    #[test]
    fn frames_decode_to_the_input_with_each_setting() {
        let src = data();
        for params in [
            ZstdParams {
                level: 0,
                checksum: false,
            },
            ZstdParams {
                level: 5,
                checksum: true,
            },
            ZstdParams {
                level: -3,
                checksum: false,
            },
            ZstdParams {
                level: 0,
                checksum: false,
            },
        ] {
            let mut out = b"head".to_vec();
            compress(params, &src, &mut out).unwrap();
            assert_eq!(&out[..4], b"head");
            let frame = &out[4..];
            assert_eq!(zstd::bulk::decompress(frame, src.len()).unwrap(), src);
            // The checksum flag is bit 2 of the frame header descriptor; the content size
            // is in the header, as one-shot compressors write it.
            assert_eq!(frame[4] & 0b100 != 0, params.checksum, "{params:?}");
            assert_eq!(
                zstd::zstd_safe::get_frame_content_size(frame).ok(),
                Some(Some(src.len() as u64))
            );
        }
    }
}

//! Process-wide counters for benchmarks and diagnosis (private API: `zarrpipe._zarrpipe`).

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What faulting in fresh output buffers has cost this process, per page size ("base",
/// "huge": dicts of 2 MiB steps, slow steps (memory the host had to fault in) and seconds),
/// and "switches", how often the page size changed.
#[pyfunction]
pub fn _first_touch_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = zarrpipe_codecs::memory::first_touch::stats();
    let out = PyDict::new(py);
    for (i, name) in ["base", "huge"].into_iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("steps", s.steps[i])?;
        d.set_item("slow_steps", s.slow_steps[i])?;
        d.set_item("seconds", s.nanos[i] as f64 / 1e9)?;
        out.set_item(name, d)?;
    }
    out.set_item("switches", s.switches)?;
    Ok(out)
}

/// Which read paths this process has taken, as `{"direct_pick_boxes": n, "overlapped_reads":
/// n}`: chunk boxes of picks decoded and gathered straight into place, and large zstd chunks
/// whose file read overlapped their decoding.
#[pyfunction]
pub fn _read_path_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item(
        "direct_pick_boxes",
        zarrpipe_codecs::read::direct_pick_boxes(),
    )?;
    out.set_item(
        "overlapped_reads",
        zarrpipe_codecs::read::overlapped_reads(),
    )?;
    Ok(out)
}

//! Process-wide counters for benchmarks and diagnosis (private API: `zarrpipe._zarrpipe`).

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What faulting in fresh output buffers has cost this process, per page size: 2 MiB steps,
/// slow steps (memory the host had to fault in) and seconds, as
/// `{"base": {...}, "huge": {...}, "switches": n}` (changes from one page size to the other).
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

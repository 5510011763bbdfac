//! The chunk grid: where each stored chunk (shard) starts and how long it is along each
//! axis. Regular grids have one edge length per axis (the last chunk padded past the
//! array's end); rectilinear grids (zarr-extensions' `rectilinear`, which zarr-python
//! writes) list the edges. Plans, placements, writes and key loops ask this type, never a
//! chunk shape times an index, so that no code assumes equal chunks.

use std::ops::Range;

use serde_json::{json, Value};

/// At most this many explicit edges in one array's grid (8 bytes each): an edge list that
/// expands past it is refused as metadata before anything (zarrs included) expands it.
pub const MAX_EDGES: u64 = 1 << 24;

/// One axis of the grid.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Axis {
    /// Every chunk has this edge.
    Regular(u64),
    /// Chunk `i` spans `starts[i]..starts[i + 1]` (`starts[0] == 0`; the last end may lie
    /// past the array's end, as after zarr-python shrinks an array).
    Edges(Vec<u64>),
}

/// The chunk grid of an array of shape `extent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkGrid {
    extent: Vec<u64>,
    axes: Vec<Axis>,
}

impl ChunkGrid {
    /// A regular grid of `chunk` chunks (each edge positive).
    #[must_use]
    pub fn regular(extent: &[u64], chunk: &[u64]) -> Self {
        Self {
            extent: extent.to_vec(),
            axes: chunk.iter().map(|&c| Axis::Regular(c.max(1))).collect(),
        }
    }

    /// The grid a v3 `chunk_grid` document describes for an array of shape `extent`:
    /// `Ok(None)` for a grid kind zarrpipe does not know, `Err` for a grid that breaks its
    /// spec (edges that do not cover the array, a zero edge, more edges than [`MAX_EDGES`]).
    pub fn from_metadata(grid: &Value, extent: &[u64]) -> Result<Option<Self>, String> {
        let config = grid.get("configuration").unwrap_or(&Value::Null);
        let axes = match grid.get("name").and_then(Value::as_str) {
            Some("regular") => {
                let shape = config
                    .get("chunk_shape")
                    .and_then(Value::as_array)
                    .ok_or("a regular chunk grid without a chunk_shape list")?;
                shape
                    .iter()
                    .map(|v| positive(v, "chunk edge").map(Axis::Regular))
                    .collect::<Result<Vec<_>, _>>()?
            }
            Some("rectilinear") => rectilinear_axes(config, extent)?,
            _ => return Ok(None),
        };
        if axes.len() != extent.len() {
            return Err(format!(
                "the chunk grid has {} axes, the array {}",
                axes.len(),
                extent.len()
            ));
        }
        Ok(Some(Self {
            extent: extent.to_vec(),
            axes,
        }))
    }

    /// The one chunk shape of a regular grid; `None` for a rectilinear one.
    #[must_use]
    pub fn regular_shape(&self) -> Option<Vec<u64>> {
        self.axes
            .iter()
            .map(|a| match a {
                Axis::Regular(c) => Some(*c),
                Axis::Edges(_) => None,
            })
            .collect()
    }

    /// Chunks along each axis: those that start before the array's end (as zarr-python
    /// counts them).
    #[must_use]
    pub fn shape(&self) -> Vec<u64> {
        (0..self.axes.len()).map(|a| self.count(a)).collect()
    }

    fn count(&self, axis: usize) -> u64 {
        let n = self.extent[axis];
        match &self.axes[axis] {
            Axis::Regular(c) => n.div_ceil(*c),
            Axis::Edges(starts) => starts[..starts.len() - 1].partition_point(|&s| s < n) as u64,
        }
    }

    /// Where chunk `i` starts along `axis`.
    #[must_use]
    pub fn start(&self, axis: usize, i: u64) -> u64 {
        match &self.axes[axis] {
            Axis::Regular(c) => i * c,
            Axis::Edges(starts) => starts[i as usize],
        }
    }

    /// The stored length of chunk `i` along `axis` (a regular grid's last chunk padded).
    #[must_use]
    pub fn edge(&self, axis: usize, i: u64) -> u64 {
        match &self.axes[axis] {
            Axis::Regular(c) => *c,
            Axis::Edges(starts) => starts[i as usize + 1] - starts[i as usize],
        }
    }

    /// The first element of the chunk at grid `index`.
    #[must_use]
    pub fn origin(&self, index: &[u64]) -> Vec<u64> {
        index
            .iter()
            .enumerate()
            .map(|(a, &i)| self.start(a, i))
            .collect()
    }

    /// The stored (decoded) shape of the chunk at grid `index`.
    #[must_use]
    pub fn chunk_shape(&self, index: &[u64]) -> Vec<u64> {
        index
            .iter()
            .enumerate()
            .map(|(a, &i)| self.edge(a, i))
            .collect()
    }

    /// The chunk holding element `coord` along `axis`.
    #[must_use]
    pub fn chunk_at(&self, axis: usize, coord: u64) -> u64 {
        match &self.axes[axis] {
            Axis::Regular(c) => coord / c,
            Axis::Edges(starts) => (starts.partition_point(|&s| s <= coord) - 1) as u64,
        }
    }

    /// The chunks along `axis` that hold elements of `range` (empty for an empty range).
    #[must_use]
    pub fn covering(&self, axis: usize, range: &Range<u64>) -> Range<u64> {
        if range.start >= range.end {
            return 0..0;
        }
        self.chunk_at(axis, range.start)..self.chunk_at(axis, range.end - 1) + 1
    }

    /// The largest stored chunk shape (a bound for buffers and limits).
    #[must_use]
    pub fn max_chunk_shape(&self) -> Vec<u64> {
        (0..self.axes.len())
            .map(|a| match &self.axes[a] {
                Axis::Regular(c) => *c,
                Axis::Edges(starts) => starts.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(1),
            })
            .collect()
    }

    /// Every distinct stored edge along `axis` (a rectilinear axis' edges past the array's
    /// end included).
    #[must_use]
    pub fn distinct_edges(&self, axis: usize) -> Vec<u64> {
        let mut edges: Vec<u64> = match &self.axes[axis] {
            Axis::Regular(c) => vec![*c],
            Axis::Edges(starts) => starts.windows(2).map(|w| w[1] - w[0]).collect(),
        };
        edges.sort_unstable();
        edges.dedup();
        edges
    }

    /// The data sizes of the chunks along each axis, clipped to the array's end
    /// (zarr-python's `read_chunk_sizes` / `write_chunk_sizes`; dask's `chunks`).
    #[must_use]
    pub fn clipped_sizes(&self) -> Vec<Vec<u64>> {
        (0..self.axes.len())
            .map(|a| {
                let n = self.extent[a];
                (0..self.count(a))
                    .map(|i| {
                        let s = self.start(a, i);
                        (s + self.edge(a, i)).min(n) - s
                    })
                    .collect()
            })
            .collect()
    }

    /// The `chunk_grid` metadata of this grid, as zarr-python writes it (explicit edges
    /// run-length encoded where that is shorter, a regular axis of a rectilinear grid a
    /// bare edge).
    #[must_use]
    pub fn to_metadata(&self) -> Value {
        if let Some(shape) = self.regular_shape() {
            return json!({"name": "regular", "configuration": {"chunk_shape": shape}});
        }
        let axes: Vec<Value> = self
            .axes
            .iter()
            .map(|a| match a {
                Axis::Regular(c) => json!(c),
                Axis::Edges(starts) => {
                    let edges: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
                    // Run-length pairs only where they shorten the list (zarr-python's rule).
                    let runs = run_lengths(&edges);
                    if runs.len() < edges.len() {
                        Value::Array(runs)
                    } else {
                        json!(edges)
                    }
                }
            })
            .collect();
        json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": axes}})
    }

    /// A rectilinear grid over `extent` from explicit edges per axis (`None`: regular,
    /// `Some(edge)` for that axis' one length given as `Regular`). Edges must be positive
    /// and sum to the extent.
    pub fn from_edges(extent: &[u64], axes: &[AxisSpec]) -> Result<Self, String> {
        if axes.len() != extent.len() {
            return Err(format!(
                "{} chunk axes for an array of {} dimensions",
                axes.len(),
                extent.len()
            ));
        }
        let mut built = Vec::with_capacity(axes.len());
        for (a, (spec, &n)) in axes.iter().zip(extent).enumerate() {
            built.push(match spec {
                AxisSpec::Regular(c) if *c > 0 => Axis::Regular(*c),
                AxisSpec::Regular(_) => return Err(format!("axis {a}: chunk edge 0")),
                AxisSpec::Edges(edges) => {
                    if edges.contains(&0) {
                        return Err(format!("axis {a}: chunk edges must be positive"));
                    }
                    let sum = edges.iter().try_fold(0u64, |s, &e| s.checked_add(e));
                    if sum != Some(n) {
                        return Err(format!(
                            "axis {a}: chunk edges {edges:?} sum to {}, not the array's {n}",
                            sum.map_or("more than 2^64".to_owned(), |s| s.to_string())
                        ));
                    }
                    Axis::Edges(cumulative(edges))
                }
            });
        }
        Ok(Self {
            extent: extent.to_vec(),
            axes: built,
        })
    }
}

/// One axis as a caller gives it: one edge for every chunk, or every edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AxisSpec {
    Regular(u64),
    Edges(Vec<u64>),
}

fn cumulative(edges: &[u64]) -> Vec<u64> {
    let mut starts = Vec::with_capacity(edges.len() + 1);
    starts.push(0);
    let mut at = 0;
    for &e in edges {
        at += e;
        starts.push(at);
    }
    starts
}

fn run_lengths(edges: &[u64]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < edges.len() {
        let run = edges[i..].iter().take_while(|&&e| e == edges[i]).count();
        out.push(if run > 1 {
            json!([edges[i], run])
        } else {
            json!(edges[i])
        });
        i += run;
    }
    out
}

fn positive(v: &Value, what: &str) -> Result<u64, String> {
    v.as_u64()
        .filter(|&x| x > 0)
        .ok_or_else(|| format!("{what} {v} is not a positive integer"))
}

/// The axes of a rectilinear `configuration`, every edge list counted before it is
/// expanded (a run-length pair can stand for more edges than memory holds).
fn rectilinear_axes(config: &Value, extent: &[u64]) -> Result<Vec<Axis>, String> {
    match config.get("kind").and_then(Value::as_str) {
        Some("inline") => {}
        other => {
            return Err(format!(
                "rectilinear chunk grid kind {other:?}: only \"inline\" is defined"
            ))
        }
    }
    let specs = config
        .get("chunk_shapes")
        .and_then(Value::as_array)
        .ok_or("a rectilinear chunk grid without a chunk_shapes list")?;
    if specs.len() != extent.len() {
        return Err(format!(
            "the rectilinear chunk grid has {} axes, the array {}",
            specs.len(),
            extent.len()
        ));
    }
    // Count every axis' edges first: nothing is expanded unless all of them fit.
    let mut total: u64 = 0;
    for (a, spec) in specs.iter().enumerate() {
        if let Some(items) = spec.as_array() {
            for item in items {
                let count = match item.as_array() {
                    Some(pair) if pair.len() == 2 => {
                        positive(&pair[0], &format!("axis {a}: chunk edge"))?;
                        positive(&pair[1], &format!("axis {a}: run-length count"))?
                    }
                    Some(_) => {
                        return Err(format!(
                            "axis {a}: {item} is neither an edge nor an [edge, count] pair"
                        ))
                    }
                    None => {
                        positive(item, &format!("axis {a}: chunk edge"))?;
                        1
                    }
                };
                total = total.saturating_add(count);
            }
        } else {
            positive(spec, &format!("axis {a}: chunk edge"))?;
        }
    }
    if total > MAX_EDGES {
        return Err(format!(
            "the rectilinear chunk grid lists {total} chunk edges, more than the {MAX_EDGES} \
             zarrpipe indexes"
        ));
    }
    specs
        .iter()
        .zip(extent)
        .enumerate()
        .map(|(a, (spec, &n))| {
            let Some(items) = spec.as_array() else {
                return Ok(Axis::Regular(spec.as_u64().unwrap_or(1)));
            };
            let mut edges = Vec::new();
            for item in items {
                match item.as_array() {
                    Some(pair) => {
                        let (e, k) = (pair[0].as_u64().unwrap_or(1), pair[1].as_u64().unwrap_or(0));
                        edges.extend(std::iter::repeat_n(e, k as usize));
                    }
                    None => edges.push(item.as_u64().unwrap_or(1)),
                }
            }
            let sum = edges.iter().try_fold(0u64, |s, &e| s.checked_add(e));
            match sum {
                Some(s) if s >= n => Ok(Axis::Edges(cumulative(&edges))),
                Some(s) => Err(format!(
                    "axis {a}: the chunk edges sum to {s}, short of the array's {n}"
                )),
                None => Err(format!("axis {a}: the chunk edges sum past 2^64")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(shapes: Value, extent: &[u64]) -> Result<Option<ChunkGrid>, String> {
        ChunkGrid::from_metadata(
            &json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}),
            extent,
        )
    }

    #[test]
    fn rectilinear_edges_place_every_chunk() {
        let g = rect(json!([[[3, 2], 4], 5]), &[10, 12]).unwrap().unwrap();
        assert_eq!(g.shape(), [3, 3]);
        assert_eq!(g.origin(&[2, 1]), [6, 5]);
        assert_eq!(g.chunk_shape(&[2, 2]), [4, 5]);
        assert_eq!(g.covering(0, &(2..7)), 0..3);
        assert_eq!(g.covering(0, &(3..6)), 1..2);
        assert_eq!(g.clipped_sizes(), [vec![3, 3, 4], vec![5, 5, 2]]);
        assert_eq!(g.max_chunk_shape(), [4, 5]);
        assert_eq!(g.regular_shape(), None);
        assert_eq!(
            g.to_metadata()["configuration"]["chunk_shapes"],
            json!([[[3, 2], 4], 5])
        );
    }

    #[test]
    fn edges_past_the_end_count_only_chunks_that_start_before_it() {
        let g = rect(json!([[[5, 3]]]), &[7]).unwrap().unwrap();
        assert_eq!(g.shape(), [2]);
        assert_eq!(g.clipped_sizes(), [vec![5, 2]]);
        assert_eq!(g.chunk_shape(&[1]), [5]);
    }

    #[test]
    fn broken_grids_are_refused_without_expanding_them() {
        for (shapes, extent) in [
            (json!([[3, 3]]), 7u64),
            (json!([[3, 0]]), 3),
            (json!([[[3, 0]]]), 3),
            (json!([[-1]]), 3),
            (json!([0]), 3),
            (
                json!([[[1, 1_000_000_000_000_000u64]]]),
                1_000_000_000_000_000,
            ),
            (json!([[[1, 4_611_686_018_427_387_904u64]]]), 1),
            (json!([[[1, 2, 3]]]), 3),
        ] {
            assert!(rect(shapes.clone(), &[extent]).is_err(), "{shapes}");
        }
        let other =
            json!({"name": "rectilinear", "configuration": {"kind": "x", "chunk_shapes": [[1]]}});
        assert!(ChunkGrid::from_metadata(&other, &[1]).is_err());
        assert_eq!(
            ChunkGrid::from_metadata(&json!({"name": "odd"}), &[1]),
            Ok(None)
        );
    }

    #[test]
    fn regular_grids_pad_their_last_chunk() {
        let g = ChunkGrid::regular(&[10], &[4]);
        assert_eq!(g.shape(), [3]);
        assert_eq!(g.chunk_shape(&[2]), [4]);
        assert_eq!(g.clipped_sizes(), [vec![4, 4, 2]]);
        assert_eq!(g.chunk_at(0, 9), 2);
        assert_eq!(g.to_metadata()["name"], "regular");
    }

    #[test]
    fn created_edges_must_sum_to_the_shape() {
        let g = ChunkGrid::from_edges(
            &[10, 4],
            &[AxisSpec::Edges(vec![5, 5]), AxisSpec::Regular(2)],
        )
        .unwrap();
        assert_eq!(
            g.to_metadata()["configuration"]["chunk_shapes"],
            json!([[[5, 2]], 2])
        );
        let g = ChunkGrid::from_edges(&[13], &[AxisSpec::Edges(vec![2, 5, 6])]).unwrap();
        assert_eq!(
            g.to_metadata()["configuration"]["chunk_shapes"],
            json!([[2, 5, 6]])
        );
        assert!(ChunkGrid::from_edges(&[10], &[AxisSpec::Edges(vec![5, 4])]).is_err());
        assert!(ChunkGrid::from_edges(&[10], &[AxisSpec::Edges(vec![10, 0])]).is_err());
    }
}

//! zarrpipe's own encoder for the codec chains most arrays are written with: elements stored
//! as they are in memory (`bytes`, native byte order), then `zstd` or nothing, then
//! `crc32c` or nothing; and the same as the inner chain of a `sharding_indexed` shard whose
//! index is `bytes` (+ `crc32c`). Every other chain is encoded by zarrs' codec chain.
//!
//! Why: writes are compression-bound, and zarrs' encoder pays, on every chunk, for a fresh
//! zstd context and zstd 1.5.7's block pre-splitter (see [`zstd`]), for a chunk-sized copy
//! of the values and a chunk-sized output buffer, both faulted in afresh; shards also copy
//! each inner chunk out twice. This encoder reads the values where they are
//! ([`view::ChunkView`]: the caller's array for a write that covers the chunk) and writes
//! the encoded bytes where they go ([`sink::Sink`]: the file that becomes the value).
//!
//! A shard is laid out as zarrs lays it out: inner chunks that are all fill value (bit for
//! bit) are left out (index entry `u64::MAX`, `u64::MAX`); the others follow each other in
//! the write order (C order, or zarr-python's `subchunk_write_order`), with the index first
//! or last as the metadata says.

pub mod view;
pub mod zstd;

use serde_json::Value;
use zarrs::metadata::v3::MetadataV3;

use crate::codec::chain::{config, parse_codecs, ArrayToBytes, ChunkChain};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::store::sink::Sink;
use view::ChunkView;
use zstd::ZstdParams;

/// Index entry of an inner chunk that is not stored.
const EMPTY: u64 = u64::MAX;

/// The bytes codecs after `bytes`, as this encoder runs them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Flat {
    zstd: Option<ZstdParams>,
    crc32c: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ShardLayout {
    inner_shape: Vec<u64>,
    inner: Flat,
    index_crc32c: bool,
    index_at_end: bool,
}

/// How this array's chunks (shards) are encoded when zarrpipe encodes them itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoder {
    flat: Flat,
    shard: Option<ShardLayout>,
}

/// `bytes` (native order, no transpose) followed by `[zstd] [crc32c]`, or None.
fn flat(codecs: &[MetadataV3], chain: &ChunkChain) -> Option<Flat> {
    if chain.transpose.is_some() || chain.array_to_bytes != ArrayToBytes::Bytes(ByteOrder::Native) {
        return None;
    }
    let mut out = Flat {
        zstd: None,
        crc32c: false,
    };
    let (first, rest) = codecs.split_first()?;
    if !matches!(first.name(), "bytes" | "endian") {
        return None;
    }
    for meta in rest {
        match meta.name() {
            "zstd" | "numcodecs.zstd" if out.zstd.is_none() && !out.crc32c => {
                let cfg = config(meta);
                let level = cfg.get("level").map_or(Some(0), Value::as_i64)?;
                let checksum = cfg.get("checksum").map_or(Some(false), Value::as_bool)?;
                out.zstd = Some(ZstdParams {
                    level: i32::try_from(level).ok()?,
                    checksum,
                });
            }
            "crc32c" if !out.crc32c => out.crc32c = true,
            _ => return None,
        }
    }
    Some(out)
}

impl Encoder {
    /// The encoder for an array whose codecs are `codecs` (parsed by zarrpipe's decoder as
    /// `chain`), or None when zarrs must encode it.
    #[must_use]
    pub fn parse(codecs: &[MetadataV3], chain: &ChunkChain) -> Option<Self> {
        if cfg!(target_endian = "big") {
            return None; // index words and `bytes` little endian are not native here
        }
        if let Some(spec) = chain.plain_sharding() {
            let [sharding] = codecs else { return None };
            let cfg = config(sharding);
            let inner = flat(&parse_codecs(&cfg, "codecs").ok()?, &spec.inner)?;
            if spec.index_order != ByteOrder::Native {
                return None;
            }
            return Some(Self {
                flat: Flat {
                    zstd: None,
                    crc32c: false,
                },
                shard: Some(ShardLayout {
                    inner_shape: spec.inner_shape.clone(),
                    inner,
                    index_crc32c: spec.index_crc32c,
                    index_at_end: spec.index_at_end,
                }),
            });
        }
        Some(Self {
            flat: flat(codecs, chain)?,
            shard: None,
        })
    }

    /// Encodes one whole chunk (shard), `view`, into `sink`; `fill` is one element of the
    /// fill value, `order` the write order of a shard's inner chunks (C-order indices;
    /// empty: C order).
    pub fn encode(
        &self,
        view: &ChunkView<'_>,
        fill: &[u8],
        order: &[u64],
        sink: &mut dyn Sink,
        key: &str,
    ) -> Result<()> {
        match &self.shard {
            None => self.flat.encode(view, sink),
            Some(layout) => layout.encode(view, fill, order, sink),
        }
        .map_err(|reason| Error::Encode {
            key: key.to_owned(),
            reason,
        })
    }
}

/// A sink that keeps the crc32c of what passes through it.
struct Crc32cSink<'a> {
    inner: &'a mut dyn Sink,
    crc: u32,
}

impl Sink for Crc32cSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.inner.put(bytes)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn patch(&mut self, _at: u64, _bytes: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other(
            "a checksummed value cannot be patched",
        ))
    }
}

/// Unencoded elements go to the sink in pieces of this size (a strided view's rows can be a
/// few hundred bytes: a write each would cost more than the copy).
const RAW_PIECE: usize = 1 << 20;

impl Flat {
    fn encode(&self, view: &ChunkView<'_>, sink: &mut dyn Sink) -> Result<(), String> {
        if !self.crc32c {
            return self.encode_unchecked(view, sink);
        }
        let mut with_crc = Crc32cSink {
            inner: sink,
            crc: 0,
        };
        self.encode_unchecked(view, &mut with_crc)?;
        let crc = with_crc.crc;
        sink.put(&crc.to_le_bytes()).map_err(|e| e.to_string())
    }

    fn encode_unchecked(&self, view: &ChunkView<'_>, sink: &mut dyn Sink) -> Result<(), String> {
        if let Some(params) = self.zstd {
            // zstd reads one contiguous buffer: the view itself when it is one, else its
            // elements gathered into this thread's pooled buffer.
            if let Some(input) = view.as_contiguous() {
                return zstd::compress(params, input, sink);
            }
            let mut gathered = crate::memory::scratch::Scratch::fitting(view.nbytes() as usize);
            gathered.clear();
            gathered
                .try_reserve_exact(view.nbytes() as usize)
                .map_err(|_| format!("cannot allocate {} bytes", view.nbytes()))?;
            view.for_each_run(|run| {
                gathered.extend_from_slice(run);
                Ok(())
            })?;
            return zstd::compress(params, &gathered, sink);
        }
        let mut piece = crate::memory::scratch::Scratch::fitting(RAW_PIECE);
        piece.clear();
        view.for_each_run(|run| {
            if piece.len() + run.len() > RAW_PIECE && !piece.is_empty() {
                sink.put(&piece).map_err(|e| e.to_string())?;
                piece.clear();
            }
            if run.len() >= RAW_PIECE {
                return sink.put(run).map_err(|e| e.to_string());
            }
            piece.extend_from_slice(run);
            Ok(())
        })?;
        sink.put(&piece).map_err(|e| e.to_string())
    }
}

impl ShardLayout {
    fn encode(
        &self,
        view: &ChunkView<'_>,
        fill: &[u8],
        order: &[u64],
        sink: &mut dyn Sink,
    ) -> Result<(), String> {
        let grid: Vec<u64> = view
            .shape()
            .iter()
            .zip(&self.inner_shape)
            .map(|(s, i)| s / i)
            .collect();
        let n: u64 = grid.iter().product();
        let index_len = usize::try_from(16 * n + if self.index_crc32c { 4 } else { 0 })
            .map_err(|_| "shard index too large".to_owned())?;
        let io = |e: std::io::Error| e.to_string();
        let start = sink.len();
        if !self.index_at_end {
            sink.put(&vec![0; index_len]).map_err(io)?;
        }
        let mut entries = vec![(EMPTY, EMPTY); n as usize];
        let mut seen = vec![false; n as usize];
        let sequence = order
            .iter()
            .map(|&i| i as usize)
            .chain(0..n as usize)
            .filter(|&i| i < seen.len() && !std::mem::replace(&mut seen[i], true));
        for i in sequence {
            let inner = view.sub(&self.inner_box(&grid, i as u64));
            if inner.all_equal(fill) {
                continue;
            }
            let at = sink.len();
            self.inner.encode(&inner, sink)?;
            entries[i] = (at - start, sink.len() - at);
        }
        let mut index: Vec<u8> = entries
            .iter()
            .flat_map(|&(o, l)| [o.to_le_bytes(), l.to_le_bytes()])
            .flatten()
            .collect();
        if self.index_crc32c {
            let crc = crc32c::crc32c(&index);
            index.extend_from_slice(&crc.to_le_bytes());
        }
        if self.index_at_end {
            sink.put(&index).map_err(io)
        } else {
            sink.patch(start, &index).map_err(io)
        }
    }

    /// The box of inner chunk `i` (C-order index in `grid`), in shard coordinates.
    fn inner_box(&self, grid: &[u64], i: u64) -> Vec<std::ops::Range<u64>> {
        let mut rest = i;
        let mut out = vec![0..0; grid.len()];
        for a in (0..grid.len()).rev() {
            let start = (rest % grid[a]) * self.inner_shape[a];
            out[a] = start..start + self.inner_shape[a];
            rest /= grid[a];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ElementType;

    fn codecs(json: &str) -> Vec<MetadataV3> {
        serde_json::from_str(json).unwrap()
    }

    fn encoder(json: &str, shape: &[u64]) -> Option<Encoder> {
        let codecs = codecs(json);
        let chain = ChunkChain::parse(&codecs, shape, ElementType::UInt16).ok()?;
        Encoder::parse(&codecs, &chain)
    }

    const BYTES: &str = r#"{"name":"bytes","configuration":{"endian":"little"}}"#;

    #[test]
    fn chains_it_encodes_and_chains_it_leaves_to_zarrs() {
        let zstd =
            format!(r#"[{BYTES},{{"name":"zstd","configuration":{{"level":5,"checksum":true}}}}]"#);
        let e = encoder(&zstd, &[4, 4]).unwrap();
        assert_eq!(
            e.flat.zstd,
            Some(ZstdParams {
                level: 5,
                checksum: true
            })
        );
        assert!(encoder(&format!("[{BYTES}]"), &[4]).is_some());
        assert!(encoder(&format!(r#"[{BYTES},{{"name":"crc32c"}}]"#), &[4]).is_some());
        // Big endian, gzip, a transpose: zarrs encodes them.
        assert!(encoder(
            r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#,
            &[4]
        )
        .is_none());
        assert!(encoder(
            &format!(r#"[{BYTES},{{"name":"gzip","configuration":{{"level":1}}}}]"#),
            &[4]
        )
        .is_none());
        let t = format!(r#"[{{"name":"transpose","configuration":{{"order":[1,0]}}}},{BYTES}]"#);
        assert!(encoder(&t, &[4, 4]).is_none());
    }

    #[test]
    fn inner_boxes_follow_c_order() {
        let layout = ShardLayout {
            inner_shape: vec![2, 3],
            inner: Flat {
                zstd: None,
                crc32c: false,
            },
            index_crc32c: false,
            index_at_end: true,
        };
        // A 4x6 shard in 2x3 inner chunks: inner chunk 3 is rows 2-3, columns 3-5.
        assert_eq!(layout.inner_box(&[2, 2], 3), vec![2..4, 3..6]);
        assert_eq!(layout.inner_box(&[2, 2], 1), vec![0..2, 3..6]);
    }

    #[test]
    fn shards_leave_out_fill_inner_chunks_and_index_them() {
        let layout = ShardLayout {
            inner_shape: vec![2],
            inner: Flat {
                zstd: None,
                crc32c: true,
            },
            index_crc32c: true,
            index_at_end: false,
        };
        // Inner chunks [1, 2], [0, 0] (fill), [3, 4].
        let shard = [1u8, 2, 0, 0, 3, 4];
        let mut out = Vec::new();
        let view = ChunkView::contiguous(&shard, &[6], 1);
        layout.encode(&view, &[0], &[2, 0], &mut out).unwrap();
        let index_len = 3 * 16 + 4;
        let word = |k: usize| u64::from_le_bytes(out[k * 8..k * 8 + 8].try_into().unwrap());
        // Written in the order asked for: inner chunk 2 first, then 0; 1 is left out.
        assert_eq!((word(4), word(5)), (index_len as u64, 6));
        assert_eq!((word(0), word(1)), (index_len as u64 + 6, 6));
        assert_eq!((word(2), word(3)), (EMPTY, EMPTY));
        assert_eq!(&out[index_len..index_len + 2], [3, 4]);
        let crc = u32::from_le_bytes(out[48..52].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&out[..48]));
        let inner_crc = u32::from_le_bytes(out[index_len + 2..index_len + 6].try_into().unwrap());
        assert_eq!(inner_crc, crc32c::crc32c(&[3, 4]));
    }
}

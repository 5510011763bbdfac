//! numcodecs' `lzma` with a custom filter chain: the `filters` of its configuration are
//! Python `lzma` filter specs (`{"id": lzma.FILTER_LZMA2, "preset": 1, "dict_size": ...}`,
//! `{"id": lzma.FILTER_DELTA, "dist": 4}`, the branch converters with `start_offset`), built
//! into the liblzma filter chain Python's `lzma` builds from them, so chunks encode to the
//! same bytes.
//!
//! Spec: <https://docs.python.org/3/library/lzma.html#filter-chain-specs>. A raw stream
//! (`format` 3) has no header: its decoder allocates the dictionary the configuration
//! names, so dictionaries above [`super::lzma::MEMLIMIT`] are refused when the
//! configuration is read, not when a chunk is decoded.

use liblzma::stream::{Filters, LzmaOptions, MatchFinder, Mode};
use serde_json::{Map, Value};

use super::lzma::MEMLIMIT;

/// liblzma's filter ids, as Python's `lzma.FILTER_*`.
pub const LZMA1: u64 = 0x4000_0000_0000_0001;
const LZMA2: u64 = 0x21;
const DELTA: u64 = 0x03;
const BRANCH: [(u64, &str); 6] = [
    (0x04, "x86"),
    (0x05, "powerpc"),
    (0x06, "ia64"),
    (0x07, "arm"),
    (0x08, "armthumb"),
    (0x09, "sparc"),
];

/// LZMA1/LZMA2 options beyond the preset they start from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct LzmaFields {
    preset: u32,
    dict_size: Option<u32>,
    lc: Option<u32>,
    lp: Option<u32>,
    pb: Option<u32>,
    mode: Option<u32>,
    nice_len: Option<u32>,
    mf: Option<u32>,
    depth: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Filter {
    Lzma {
        id: u64,
        fields: LzmaFields,
    },
    /// Distance in bytes, 1 to 256.
    Delta(u32),
    Branch {
        id: u64,
        start_offset: u32,
    },
}

/// A parsed filter chain, built into liblzma's form for each stream (liblzma's `Filters`
/// holds raw pointers and is neither `Send` nor `Clone`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterChain(Vec<Filter>);

fn field(spec: &Map<String, Value>, name: &str) -> Result<Option<u32>, String> {
    match spec.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Some)
            .ok_or_else(|| format!("filter option {name} {v} is not a 32-bit unsigned integer")),
    }
}

fn only(spec: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match spec
        .keys()
        .find(|k| *k != "id" && !allowed.contains(&k.as_str()))
    {
        Some(k) => Err(format!("unknown filter option {k:?}")),
        None => Ok(()),
    }
}

impl FilterChain {
    /// The chain of numcodecs' `filters` list (1 to 4 filters, the last LZMA1 or LZMA2).
    pub fn parse(value: &Value) -> Result<Self, String> {
        let specs = value
            .as_array()
            .ok_or_else(|| format!("filters {value} is not a list"))?;
        if specs.is_empty() || specs.len() > 4 {
            return Err(format!(
                "{} filters: liblzma chains hold 1 to 4",
                specs.len()
            ));
        }
        let filters = specs
            .iter()
            .map(|s| {
                let spec = s
                    .as_object()
                    .ok_or_else(|| format!("filter {s} is not a dict"))?;
                let id = spec
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("filter {s} has no integer id"))?;
                Self::filter(id, spec)
            })
            .collect::<Result<Vec<_>, String>>()?;
        if !matches!(filters.last(), Some(Filter::Lzma { .. })) {
            return Err("the last filter must be LZMA1 or LZMA2".into());
        }
        if filters[..filters.len() - 1]
            .iter()
            .any(|f| matches!(f, Filter::Lzma { .. }))
        {
            return Err("only the last filter may be LZMA1 or LZMA2".into());
        }
        Ok(Self(filters))
    }

    fn filter(id: u64, spec: &Map<String, Value>) -> Result<Filter, String> {
        match id {
            LZMA1 | LZMA2 => {
                only(
                    spec,
                    &[
                        "preset",
                        "dict_size",
                        "lc",
                        "lp",
                        "pb",
                        "mode",
                        "nice_len",
                        "mf",
                        "depth",
                    ],
                )?;
                let fields = LzmaFields {
                    preset: field(spec, "preset")?.unwrap_or(6),
                    dict_size: field(spec, "dict_size")?,
                    lc: field(spec, "lc")?,
                    lp: field(spec, "lp")?,
                    pb: field(spec, "pb")?,
                    mode: field(spec, "mode")?,
                    nice_len: field(spec, "nice_len")?,
                    mf: field(spec, "mf")?,
                    depth: field(spec, "depth")?,
                };
                if fields.mode.is_some_and(|m| m != 1 && m != 2) {
                    return Err(format!(
                        "lzma mode {:?} is not MODE_FAST or MODE_NORMAL",
                        fields.mode
                    ));
                }
                if fields
                    .mf
                    .is_some_and(|m| ![0x03, 0x04, 0x12, 0x13, 0x14].contains(&m))
                {
                    return Err(format!(
                        "lzma match finder {:?} is not one of MF_*",
                        fields.mf
                    ));
                }
                let dict = fields
                    .dict_size
                    .map_or_else(|| preset_dict(fields.preset), u64::from);
                if dict > MEMLIMIT {
                    return Err(format!(
                        "a dictionary of {dict} bytes is above zarrpipe's lzma memory limit of \
                         {MEMLIMIT}"
                    ));
                }
                Ok(Filter::Lzma { id, fields })
            }
            DELTA => {
                only(spec, &["dist"])?;
                match field(spec, "dist")?.unwrap_or(1) {
                    d @ 1..=256 => Ok(Filter::Delta(d)),
                    d => Err(format!("delta distance {d} is not 1-256")),
                }
            }
            _ if BRANCH.iter().any(|(b, _)| *b == id) => {
                only(spec, &["start_offset"])?;
                Ok(Filter::Branch {
                    id,
                    start_offset: field(spec, "start_offset")?.unwrap_or(0),
                })
            }
            other => Err(format!("filter id {other} is not one Python's lzma knows")),
        }
    }

    /// The one LZMA1 filter's options, for a `.lzma` stream (whose chain is just that).
    pub fn alone_options(&self) -> Result<LzmaOptions, String> {
        match self.0.as_slice() {
            [Filter::Lzma { id: LZMA1, fields }] => {
                lzma_options(fields).map_err(|e| format!("lzma options: {e}"))
            }
            _ => Err("a .lzma stream (format 2) takes exactly one LZMA1 filter".into()),
        }
    }

    /// The chain in liblzma's form.
    pub fn build(&self) -> Result<Filters, String> {
        let mut filters = Filters::new();
        for f in &self.0 {
            match f {
                Filter::Lzma { id, fields } => {
                    let opts = lzma_options(fields).map_err(|e| format!("lzma options: {e}"))?;
                    if *id == LZMA1 {
                        filters.lzma1(&opts);
                    } else {
                        filters.lzma2(&opts);
                    }
                }
                Filter::Delta(dist) => {
                    // The delta filter's one property byte is the distance minus one.
                    filters
                        .delta_properties(&[(dist - 1) as u8])
                        .map_err(|e| format!("delta filter: {e}"))?;
                }
                Filter::Branch { id, start_offset } => {
                    let props = if *start_offset == 0 {
                        Vec::new()
                    } else {
                        start_offset.to_le_bytes().to_vec()
                    };
                    let added = match id {
                        0x04 => filters.x86_properties(&props),
                        0x05 => filters.powerpc_properties(&props),
                        0x06 => filters.ia64_properties(&props),
                        0x07 => filters.arm_properties(&props),
                        0x08 => filters.arm_thumb_properties(&props),
                        _ => filters.sparc_properties(&props),
                    };
                    added.map_err(|e| format!("branch filter {id}: {e}"))?;
                }
            }
        }
        Ok(filters)
    }
}

/// The dictionary size of an LZMA preset (liblzma's table; `PRESET_EXTREME` keeps it).
fn preset_dict(preset: u32) -> u64 {
    const DICT: [u64; 10] = [
        256 << 10,
        1 << 20,
        2 << 20,
        4 << 20,
        4 << 20,
        8 << 20,
        8 << 20,
        16 << 20,
        32 << 20,
        64 << 20,
    ];
    DICT.get((preset & 0x1f) as usize)
        .copied()
        .unwrap_or(u64::MAX)
}

/// Python's LZMA filter options: the preset's, then each given field over it.
fn lzma_options(f: &LzmaFields) -> Result<LzmaOptions, liblzma::stream::Error> {
    let mut opts = LzmaOptions::new_preset(f.preset)?;
    if let Some(v) = f.dict_size {
        opts.dict_size(v);
    }
    if let Some(v) = f.lc {
        opts.literal_context_bits(v);
    }
    if let Some(v) = f.lp {
        opts.literal_position_bits(v);
    }
    if let Some(v) = f.pb {
        opts.position_bits(v);
    }
    if let Some(v) = f.mode {
        opts.mode(if v == 1 { Mode::Fast } else { Mode::Normal });
    }
    if let Some(v) = f.nice_len {
        opts.nice_len(v);
    }
    if let Some(v) = f.mf {
        opts.match_finder(match v {
            0x03 => MatchFinder::HashChain3,
            0x04 => MatchFinder::HashChain4,
            0x12 => MatchFinder::BinaryTree2,
            0x13 => MatchFinder::BinaryTree3,
            _ => MatchFinder::BinaryTree4,
        });
    }
    if let Some(v) = f.depth {
        opts.depth(v);
    }
    Ok(opts)
}

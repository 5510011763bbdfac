//! The fixed-size data types that are not numbers or bool — `datetime64`/`timedelta64` in
//! any unit and scale, fixed-length UTF-32 (`<U7`), null-terminated bytes (`|S7`), raw bytes
//! (`|V8`), structured records, and ml_dtypes' small floats — in their v2 and v3 spellings.
//!
//! zarrs lacks most of them (or some of their spellings, or zarr-python's fill values), so
//! the engine carries them as opaque elements of N bytes: before zarrs sees the metadata,
//! [`stand_in`] replaces the data type by a same-size one zarrs reads and writes with the
//! same bytes (`int64` for times, raw bits `r{8N}` / `|V{N}` for bytes and records, `uint8`
//! for 8-bit floats; fixed-length UTF-32, 4- and 6-bit floats and zarr-extensions' sub-byte
//! integers stay zarrs' own, which swaps code points and packs narrow types with
//! `packbits`) and the fill value by its bytes. The type itself survives as the NumPy dtype the binding gives
//! results: the one zarr-python returns, in native byte order where the engine swapped.
//!
//! Specs: <https://github.com/zarr-developers/zarr-extensions/tree/main/data-types>, the v2
//! dtype encoding <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#data-type-encoding>.

mod parse;

use base64::Engine;
use serde_json::{json, Value};

use crate::dtype::{ElementType, FieldSwaps};

use parse::{parse_v2, parse_v3};

/// What a stand-in replaced: the real type, for the binding and for writes.
#[derive(Clone, Debug, PartialEq)]
pub struct NumpyType {
    /// The NumPy dtype as JSON `numpy.dtype` accepts once field lists become tuples: a type
    /// string (`"=M8[10s]"`, `"|S7"`), `"ml_dtypes.<name>"` for a small float, or a list of
    /// `[name, type]` / `[name, type, shape]` fields.
    pub numpy: Value,
    /// How the engine carries the elements.
    pub elem: ElementType,
    /// For a v3 record stored in the other byte order: the byte spans of each element that
    /// the `bytes` codec reverses (decoding and encoding), one per multi-byte scalar.
    pub field_swaps: Option<FieldSwaps>,
    /// For a sub-byte integer: how its bytes are spelled when stored and when read.
    pub sub_byte: Option<SubByte>,
}

const NATIVE_BIG: bool = cfg!(target_endian = "big");

/// ml_dtypes' one-byte floats, by their Zarr v3 (and ml_dtypes) names.
pub const SMALL_FLOATS: [&str; 11] = [
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
];

/// zarr-extensions' sub-byte integers (ml_dtypes has them): name, bits, signed. One byte
/// per element in memory and in the `bytes` codec (the value in the low bits), `bits` bits
/// each in `packbits`.
pub const SUB_BYTE_INTS: [(&str, u8, bool); 4] = [
    ("int2", 2, true),
    ("int4", 4, true),
    ("uint2", 2, false),
    ("uint4", 4, false),
];

/// How a sub-byte integer's byte is spelled: ml_dtypes keeps the value in the low `bits`
/// bits and zeros above; zarrs (and its `packbits`) sign-extends a signed one. Readers
/// ignore the upper bits (the spec), so writes store zarrs' form, reads give either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubByte {
    pub bits: u8,
    pub signed: bool,
}

impl SubByte {
    /// Each byte as stored: the low `bits` bits, sign-extended when signed.
    pub fn to_stored(self, bytes: &mut [u8]) {
        let shift = 8 - u32::from(self.bits);
        for b in bytes {
            *b = if self.signed {
                (((*b << shift) as i8) >> shift) as u8
            } else {
                *b & (0xFF >> shift)
            };
        }
    }

    /// Each byte as ml_dtypes spells it: the low `bits` bits alone.
    pub fn to_numpy(self, bytes: &mut [u8]) {
        let shift = 8 - u32::from(self.bits);
        bytes.iter_mut().for_each(|b| *b &= 0xFF >> shift);
    }
}

/// A scalar or record type, with the byte order its bytes have in memory.
#[derive(Clone, Debug, PartialEq)]
enum Ty {
    Bool,
    Int(usize, bool),
    UInt(usize, bool),
    Float(usize, bool),
    Complex(usize, bool),
    Time {
        delta: bool,
        unit: String,
        scale: u64,
        big: bool,
    },
    Utf32(usize, bool),
    Bytes(usize),
    Void(usize),
    Small(&'static str),
    /// A sub-byte integer: its name in [`SUB_BYTE_INTS`].
    SubByte(&'static str, SubByte),
    Struct(Vec<Field>),
}

#[derive(Clone, Debug, PartialEq)]
struct Field {
    name: String,
    ty: Ty,
    shape: Vec<u64>,
}

const UNITS: [&str; 14] = [
    "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "generic",
];

fn bad(why: impl Into<String>) -> String {
    why.into()
}

impl Ty {
    fn size(&self) -> Result<usize, String> {
        Ok(match self {
            Self::Bool | Self::Small(_) | Self::SubByte(..) => 1,
            Self::Int(n, _) | Self::UInt(n, _) | Self::Float(n, _) | Self::Complex(n, _) => *n,
            Self::Time { .. } => 8,
            Self::Utf32(n, _) => n
                .checked_mul(4)
                .ok_or_else(|| bad("UTF-32 length overflows"))?,
            Self::Bytes(n) | Self::Void(n) => *n,
            Self::Struct(fields) => {
                let mut total = 0usize;
                for f in fields {
                    let count = f
                        .shape
                        .iter()
                        .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?));
                    let part = count
                        .and_then(|c| c.checked_mul(f.ty.size().ok()?))
                        .ok_or_else(|| bad("structured type too large"))?;
                    total = total
                        .checked_add(part)
                        .ok_or_else(|| bad("structured type too large"))?;
                }
                total
            }
        })
    }

    /// The NumPy spelling, byte order as the bytes have it.
    fn numpy(&self) -> Value {
        let order = |n: usize, big: bool| match (n, big) {
            (1, _) => '|',
            (_, true) => '>',
            (_, false) => '<',
        };
        match self {
            Self::Bool => json!("|b1"),
            Self::Int(n, b) => json!(format!("{}i{n}", order(*n, *b))),
            Self::UInt(n, b) => json!(format!("{}u{n}", order(*n, *b))),
            Self::Float(n, b) => json!(format!("{}f{n}", order(*n, *b))),
            Self::Complex(n, b) => json!(format!("{}c{n}", order(*n, *b))),
            Self::Time {
                delta,
                unit,
                scale,
                big,
            } => {
                let scale = if *scale == 1 {
                    String::new()
                } else {
                    scale.to_string()
                };
                let kind = if *delta { 'm' } else { 'M' };
                if unit == "generic" && scale.is_empty() {
                    // NumPy's own spelling: `<M8[generic]` is not one it parses.
                    return json!(format!("{}{kind}8", order(8, *big)));
                }
                json!(format!("{}{kind}8[{scale}{unit}]", order(8, *big)))
            }
            Self::Utf32(n, b) => json!(format!("{}U{n}", order(4, *b))),
            Self::Bytes(n) => json!(format!("|S{n}")),
            Self::Void(n) => json!(format!("|V{n}")),
            Self::Small(name) | Self::SubByte(name, _) => json!(format!("ml_dtypes.{name}")),
            Self::Struct(fields) => Value::Array(
                fields
                    .iter()
                    .map(|f| {
                        let mut v = vec![json!(f.name), f.ty.numpy()];
                        if !f.shape.is_empty() {
                            v.push(json!(f.shape));
                        }
                        Value::Array(v)
                    })
                    .collect(),
            ),
        }
    }

    /// Whether a record has a field of more than one byte per scalar (one a byte order
    /// changes).
    fn has_multibyte_scalar(&self) -> bool {
        match self {
            Self::Struct(fields) => fields.iter().any(|f| f.ty.has_multibyte_scalar()),
            Self::Bool | Self::Bytes(_) | Self::Void(_) | Self::Small(_) | Self::SubByte(..) => {
                false
            }
            Self::Int(n, _) | Self::UInt(n, _) | Self::Float(n, _) | Self::Complex(n, _) => *n > 1,
            Self::Time { .. } | Self::Utf32(..) => true,
        }
    }

    /// Appends the `(offset, width)` spans of every multi-byte scalar of this type, laid
    /// out from byte `at`: what a byte-order change reverses.
    fn swap_spans(&self, at: usize, out: &mut Vec<(usize, usize)>) -> Result<(), String> {
        match self {
            Self::Bool | Self::Bytes(_) | Self::Void(_) | Self::Small(_) | Self::SubByte(..) => {}
            Self::Int(n, _) | Self::UInt(n, _) | Self::Float(n, _) if *n > 1 => {
                out.push((at, *n));
            }
            Self::Int(..) | Self::UInt(..) | Self::Float(..) => {}
            Self::Complex(n, _) => out.extend([(at, n / 2), (at + n / 2, n / 2)]),
            Self::Time { .. } => out.push((at, 8)),
            Self::Utf32(n, _) => out.extend((0..*n).map(|i| (at + 4 * i, 4))),
            Self::Struct(fields) => {
                let mut at = at;
                for f in fields {
                    let size = f.ty.size()?;
                    let count = usize::try_from(f.shape.iter().product::<u64>())
                        .map_err(|_| bad("structured type too large"))?;
                    for _ in 0..count {
                        f.ty.swap_spans(at, out)?;
                        at += size;
                    }
                }
            }
        }
        Ok(())
    }

    /// The same type with its scalar in native byte order (what the engine's `bytes` codec
    /// produces); records keep their bytes as stored.
    fn native(self) -> Self {
        match self {
            Self::Int(n, _) => Self::Int(n, NATIVE_BIG),
            Self::UInt(n, _) => Self::UInt(n, NATIVE_BIG),
            Self::Float(n, _) => Self::Float(n, NATIVE_BIG),
            Self::Complex(n, _) => Self::Complex(n, NATIVE_BIG),
            Self::Time {
                delta, unit, scale, ..
            } => Self::Time {
                delta,
                unit,
                scale,
                big: NATIVE_BIG,
            },
            Self::Utf32(n, _) => Self::Utf32(n, NATIVE_BIG),
            other => other,
        }
    }

    /// The bytes of one element holding the fill value `v` (JSON as zarr-python writes it).
    fn fill(&self, v: &Value) -> Result<Vec<u8>, String> {
        let size = self.size()?;
        let wrong = || bad(format!("fill value {v} does not fit the data type"));
        let ordered = |mut le: Vec<u8>, big: bool| {
            if big {
                le.reverse();
            }
            le
        };
        if v.is_null() {
            return Ok(match self {
                Self::Time { big, .. } => ordered(i64::MIN.to_le_bytes().to_vec(), *big),
                _ => vec![0; size],
            });
        }
        Ok(match self {
            Self::SubByte(_, sub) => {
                let x = v.as_i64().ok_or_else(wrong)?;
                let bits = u32::from(sub.bits);
                let (lo, hi) = if sub.signed {
                    (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                } else {
                    (0, (1i64 << bits) - 1)
                };
                if !(lo..=hi).contains(&x) {
                    return Err(wrong());
                }
                let mut byte = [x as u8];
                sub.to_numpy(&mut byte);
                byte.to_vec()
            }
            Self::Bool => vec![u8::from(
                v.as_bool()
                    .or(v.as_u64().map(|x| x != 0))
                    .ok_or_else(wrong)?,
            )],
            Self::Int(n, big) => {
                let x = v.as_i64().ok_or_else(wrong)?;
                let le = x.to_le_bytes();
                if *n < 8 && (x >> (8 * n - 1)) != 0 && (x >> (8 * n - 1)) != -1 {
                    return Err(wrong());
                }
                ordered(le[..*n].to_vec(), *big)
            }
            Self::UInt(n, big) => {
                let x = v.as_u64().ok_or_else(wrong)?;
                if *n < 8 && x >> (8 * n) != 0 {
                    return Err(wrong());
                }
                ordered(x.to_le_bytes()[..*n].to_vec(), *big)
            }
            Self::Float(n, big) => ordered(float_bytes(v, *n).ok_or_else(wrong)?, *big),
            Self::Complex(n, big) => {
                let parts = v.as_array().filter(|a| a.len() == 2).ok_or_else(wrong)?;
                let half = n / 2;
                let mut out = ordered(float_bytes(&parts[0], half).ok_or_else(wrong)?, *big);
                out.extend(ordered(
                    float_bytes(&parts[1], half).ok_or_else(wrong)?,
                    *big,
                ));
                out
            }
            Self::Time { big, .. } => {
                let x = match v.as_str() {
                    Some("NaT") => i64::MIN,
                    _ => v.as_i64().ok_or_else(wrong)?,
                };
                ordered(x.to_le_bytes().to_vec(), *big)
            }
            Self::Utf32(n, big) => {
                if v.as_u64() == Some(0) {
                    return Ok(vec![0; size]);
                }
                let s = v.as_str().ok_or_else(wrong)?;
                if s.chars().count() > *n {
                    return Err(wrong());
                }
                let mut out = Vec::with_capacity(size);
                for c in s.chars() {
                    out.extend(ordered(u32::from(c).to_le_bytes().to_vec(), *big));
                }
                out.resize(size, 0);
                out
            }
            Self::Bytes(_) | Self::Void(_) | Self::Struct(_) | Self::Small(_) => {
                if v.as_u64() == Some(0) || v.as_f64() == Some(0.0) {
                    return Ok(vec![0; size]);
                }
                if let (Self::Struct(fields), Some(map)) = (self, v.as_object()) {
                    let mut out = Vec::with_capacity(size);
                    for f in fields {
                        let one = match map.get(&f.name) {
                            Some(x) => f.ty.fill(x)?,
                            None => vec![0; f.ty.size()?],
                        };
                        let count: u64 = f.shape.iter().product();
                        for _ in 0..count {
                            out.extend_from_slice(&one);
                        }
                    }
                    return Ok(out);
                }
                if let Self::Small(_) = self {
                    // A small float's bits, spelled as hex ("0x38"); other numbers would
                    // need ml_dtypes' rounding.
                    let bits = v
                        .as_str()
                        .and_then(|s| s.strip_prefix("0x"))
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(wrong)?;
                    return Ok(vec![bits]);
                }
                let s = v.as_str().ok_or_else(wrong)?;
                let mut bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| wrong())?;
                match self {
                    // NumPy pads a shorter `bytes_` to the width (and zarr-python casts it).
                    Self::Bytes(_) if bytes.len() <= size => bytes.resize(size, 0),
                    _ if bytes.len() == size => {}
                    _ => return Err(wrong()),
                }
                bytes
            }
        })
    }
}

/// A float's bytes (little-endian) from JSON: a number, `"NaN"`, `"Infinity"`,
/// `"-Infinity"`, or the raw bits in hex (`"0x7fc00000"`).
fn float_bytes(v: &Value, n: usize) -> Option<Vec<u8>> {
    if let Some(hex) = v.as_str().and_then(|s| s.strip_prefix("0x")) {
        let bits = u64::from_str_radix(hex, 16).ok()?;
        return Some(bits.to_le_bytes()[..n].to_vec());
    }
    let x = match v.as_str() {
        Some("NaN") => f64::NAN,
        Some("Infinity") => f64::INFINITY,
        Some("-Infinity") => f64::NEG_INFINITY,
        Some(_) => return None,
        None => v.as_f64()?,
    };
    Some(match n {
        2 => half::f16::from_f64(x).to_le_bytes().to_vec(),
        4 => (x as f32).to_le_bytes().to_vec(),
        8 => x.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// Rewrites array metadata (v2 `.zarray` or v3 `zarr.json` as JSON) whose data type is one
/// of this module's to a same-size stand-in zarrs reads and writes byte for byte, with the
/// fill value spelled for the stand-in. `Ok(None)`: a type the rest of the engine handles
/// as it is (numbers, bool, variable-length types, or one this module does not know).
pub fn stand_in(meta: &mut Value) -> Result<Option<NumpyType>, String> {
    let v2 = meta.get("zarr_format").and_then(Value::as_u64) == Some(2);
    let field = if v2 { "dtype" } else { "data_type" };
    let Some(dt) = meta.get(field) else {
        return Ok(None);
    };
    if v2 && dt.as_str() == Some("|O") && has_filter(meta, "vlen-bytes") {
        // zarrs opens every v2 `|O` as text, whose fill value is the base64 spelling
        // itself; its `|VX` is variable-length bytes, with base64 fill values.
        meta[field] = json!("|VX");
        return Ok(None);
    }
    let ty = match if v2 { parse_v2(dt) } else { parse_v3(dt) } {
        Ok(ty) => ty,
        // Not one of ours (e.g. "|O", "string", "bfloat16"): zarrs decides.
        Err(_) => return Ok(None),
    };
    let size = ty.size()?;
    let fill = ty.fill(meta.get("fill_value").unwrap_or(&Value::Null))?;
    let big_prefix = |big: bool| if big { '>' } else { '<' };
    let (elem, stand_in, fill_json) = match &ty {
        Ty::Time { big, .. } => {
            let x = i64::from_le_bytes(le8(&fill, *big));
            let name = if v2 {
                json!(format!("{}i8", big_prefix(*big)))
            } else {
                json!("int64")
            };
            (ElementType::Int64, name, json!(x))
        }
        Ty::Utf32(n, big) => {
            // zarrs' own fixed_length_utf32 swaps code points; it wants the fill as a string.
            let text: String = fill
                .chunks_exact(4)
                .map(|c| {
                    let mut b = [c[0], c[1], c[2], c[3]];
                    if *big {
                        b.reverse();
                    }
                    char::from_u32(u32::from_le_bytes(b)).unwrap_or('\0')
                })
                .collect::<String>()
                .trim_end_matches('\0')
                .to_owned();
            let name = if v2 {
                json!(format!("{}U{n}", big_prefix(*big)))
            } else {
                json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": size}})
            };
            (
                ElementType::raw(size, 4).map_err(|e| e.to_string())?,
                name,
                json!(text),
            )
        }
        // A 4- or 6-bit float keeps zarrs' own type (whose width `packbits` needs), with the
        // fill value as the element's byte; the 8-bit ones are uint8 to zarrs (which lacks
        // some of them here), the width packbits gives uint8 too.
        Ty::Small(name) if !v2 => {
            let narrow = name.starts_with("float4_") || name.starts_with("float6_");
            let spelled = if narrow { json!(name) } else { json!("uint8") };
            (ElementType::UInt8, spelled, json!(fill[0]))
        }
        Ty::SubByte(..) if !v2 => {
            let fill = meta.get("fill_value").cloned().unwrap_or(json!(0));
            (ElementType::UInt8, meta[field].clone(), fill)
        }
        Ty::Bytes(_) | Ty::Void(_) | Ty::Struct(_) => {
            let name = if v2 {
                json!(format!("|V{size}"))
            } else {
                json!(format!("r{}", size * 8))
            };
            (
                ElementType::raw(size, 1).map_err(|e| e.to_string())?,
                name,
                json!(fill),
            )
        }
        // Numbers and bool: zarrs' own.
        _ => return Ok(None),
    };
    let field_swaps = if !v2 && swaps_record_fields(&ty, meta) {
        let mut spans = Vec::new();
        ty.swap_spans(0, &mut spans)?;
        Some(FieldSwaps::from(spans))
    } else {
        None
    };
    let sub_byte = match ty {
        Ty::SubByte(_, sub) => Some(sub),
        _ => None,
    };
    meta[field] = stand_in;
    meta["fill_value"] = fill_json;
    Ok(Some(NumpyType {
        numpy: ty.native().numpy(),
        elem,
        field_swaps,
        sub_byte,
    }))
}

/// Whether reading a v3 array of `ty` would need each record field swapped: its fields are
/// stored in the bytes codec's byte order (the `struct` spec), and the engine carries records
/// as opaque bytes, so in the other order it would return wrong values.
fn swaps_record_fields(ty: &Ty, meta: &Value) -> bool {
    matches!(ty, Ty::Struct(_))
        && ty.has_multibyte_scalar()
        && stored_big(meta) == Some(!NATIVE_BIG)
}

/// Whether the v3 `bytes` codec of `meta` (at the top of the chain or inside sharding) stores
/// big-endian data; `None` when no codec names an endian (one-byte data only).
fn stored_big(meta: &Value) -> Option<bool> {
    fn find(codecs: &Value) -> Option<bool> {
        for c in codecs.as_array()? {
            let config = c.get("configuration");
            match c.get("name").and_then(Value::as_str) {
                Some("bytes") => {
                    return config
                        .and_then(|k| k.get("endian"))
                        .and_then(Value::as_str)
                        .map(|e| e == "big")
                }
                Some("sharding_indexed") => {
                    if let Some(found) = config.and_then(|k| k.get("codecs")).and_then(find) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        None
    }
    find(meta.get("codecs")?)
}

/// Whether v2 metadata lists a filter of numcodecs id `id`.
fn has_filter(meta: &Value, id: &str) -> bool {
    meta.get("filters")
        .and_then(Value::as_array)
        .is_some_and(|f| {
            f.iter()
                .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
        })
}

fn le8(b: &[u8], big: bool) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    if big {
        a.reverse();
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(dtype: Value, fill: Value) -> Value {
        json!({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": dtype,
               "fill_value": fill, "order": "C", "compressor": null, "filters": null})
    }

    #[test]
    fn datetimes_become_int64_with_nat_fill() {
        let mut m = v2(json!(">M8[10s]"), json!("NaT"));
        let t = stand_in(&mut m).unwrap().unwrap();
        assert_eq!(t.elem, ElementType::Int64);
        assert_eq!(m["dtype"], json!(">i8"));
        assert_eq!(m["fill_value"], json!(i64::MIN));
        assert_eq!(
            t.numpy,
            json!(if NATIVE_BIG { ">M8[10s]" } else { "<M8[10s]" })
        );
        let mut m3 = json!({"zarr_format": 3, "data_type": {"name": "numpy.timedelta64",
            "configuration": {"unit": "ns", "scale_factor": 1}}, "fill_value": 5});
        let t3 = stand_in(&mut m3).unwrap().unwrap();
        assert_eq!(m3["data_type"], json!("int64"));
        assert_eq!(m3["fill_value"], json!(5));
        assert_eq!(
            t3.numpy,
            json!(if NATIVE_BIG { ">m8[ns]" } else { "<m8[ns]" })
        );
        // The generic unit, as NumPy spells it (`<M8`, `<M8[2generic]`) and in v3.
        let numpy = |mut m: Value| stand_in(&mut m).unwrap().unwrap().numpy;
        assert_eq!(numpy(v2(json!("<M8"), Value::Null)), json!("<M8"));
        let scaled = if NATIVE_BIG {
            ">m8[2generic]"
        } else {
            "<m8[2generic]"
        };
        assert_eq!(
            numpy(v2(json!(">m8[2generic]"), Value::Null)),
            json!(scaled)
        );
        let generic = json!({"zarr_format": 3, "data_type": {"name": "numpy.datetime64",
            "configuration": {"unit": "generic", "scale_factor": 1}}, "fill_value": "NaT"});
        let native = if NATIVE_BIG { ">M8" } else { "<M8" };
        assert_eq!(numpy(generic), json!(native));
    }

    #[test]
    fn bytes_and_records_become_raw_bits() {
        let mut m = v2(json!("|S3"), json!("YWI="));
        let t = stand_in(&mut m).unwrap().unwrap();
        assert_eq!(t.elem, ElementType::Raw { size: 3, swap: 1 });
        assert_eq!(m["dtype"], json!("|V3"));
        assert_eq!(m["fill_value"], json!([b'a', b'b', 0]));
        let mut r = v2(json!([["a", ">i4"], ["b", "|S2", [2]]]), Value::Null);
        let t = stand_in(&mut r).unwrap().unwrap();
        assert_eq!(t.elem.size(), 8);
        assert_eq!(t.numpy, json!([["a", ">i4"], ["b", "|S2", [2]]]));
        let mut s = json!({"zarr_format": 3, "data_type": {"name": "struct", "configuration":
            {"fields": [{"name": "x", "data_type": "int16"}, {"name": "y", "data_type": "bool"}]}},
            "fill_value": {"x": 258, "y": true}});
        stand_in(&mut s).unwrap().unwrap();
        assert_eq!(s["data_type"], json!("r24"));
        let x = 258i16.to_ne_bytes();
        assert_eq!(s["fill_value"], json!([x[0], x[1], 1]));
    }

    #[test]
    fn records_stored_in_the_other_byte_order_swap_each_scalar() {
        let other = if NATIVE_BIG { "little" } else { "big" };
        let native = if NATIVE_BIG { "big" } else { "little" };
        let record = |endian: &str, fields: Value| {
            json!({"zarr_format": 3, "data_type": {"name": "struct", "configuration":
                {"fields": fields}}, "fill_value": 0,
                "codecs": [{"name": "sharding_indexed", "configuration": {"codecs":
                    [{"name": "bytes", "configuration": {"endian": endian}}]}}]})
        };
        let swaps = |mut m: Value| stand_in(&mut m).unwrap().unwrap().field_swaps;
        let fields = json!([{"name": "a", "data_type": "uint8"},
            {"name": "b", "data_type": "int16"}, {"name": "c", "data_type": "complex64"},
            {"name": "d", "data_type": "float64"}]);
        assert_eq!(
            swaps(record(other, fields.clone())).as_deref(),
            Some(&[(1, 2), (3, 4), (7, 4), (11, 8)][..])
        );
        assert!(swaps(record(native, fields)).is_none());
        // One-byte fields have no byte order.
        let bytes_only = json!([{"name": "x", "data_type": "uint8"}]);
        assert!(swaps(record(other, bytes_only)).is_none());
    }

    #[test]
    fn sub_byte_integers_and_small_floats_keep_zarrs_types() {
        let v3 = |name: &str, fill: Value| {
            json!({"zarr_format": 3, "data_type": name, "fill_value": fill,
                   "codecs": [{"name": "packbits"}]})
        };
        let mut m = v3("int4", json!(-8));
        let t = stand_in(&mut m).unwrap().unwrap();
        assert_eq!(
            (m["data_type"].clone(), m["fill_value"].clone()),
            (json!("int4"), json!(-8))
        );
        assert_eq!(t.numpy, json!("ml_dtypes.int4"));
        let sub = t.sub_byte.unwrap();
        // Stored sign-extended (zarrs' form); read as ml_dtypes spells it (low bits).
        let mut bytes = [0x08u8, 0x0F, 0x07, 0xF9];
        sub.to_stored(&mut bytes);
        assert_eq!(bytes, [0xF8, 0xFF, 0x07, 0xF9]);
        sub.to_numpy(&mut bytes);
        assert_eq!(bytes, [0x08, 0x0F, 0x07, 0x09]);
        let mut u = [0xF3u8];
        SubByte {
            bits: 2,
            signed: false,
        }
        .to_stored(&mut u);
        assert_eq!(u, [0x03]);
        assert!(stand_in(&mut v3("int2", json!(2))).is_err()); // int2 holds -2..=1
        assert!(stand_in(&mut v3("uint4", json!(16))).is_err());
        let mut f = v3("float4_e2m1fn", json!("0x02"));
        stand_in(&mut f).unwrap().unwrap();
        assert_eq!(
            (f["data_type"].clone(), f["fill_value"].clone()),
            (json!("float4_e2m1fn"), json!(2))
        );
    }

    #[test]
    fn utf32_keeps_zarrs_type_and_numbers_are_left_alone() {
        let mut m = v2(json!(">U2"), Value::Null);
        let t = stand_in(&mut m).unwrap().unwrap();
        assert_eq!(t.elem, ElementType::Raw { size: 8, swap: 4 });
        assert_eq!(m["fill_value"], json!(""));
        for dt in [json!("<i4"), json!("|O")] {
            let mut n = v2(dt, json!(0));
            assert_eq!(stand_in(&mut n).unwrap(), None);
        }
    }

    #[test]
    fn bad_fill_values_are_errors() {
        assert!(stand_in(&mut v2(json!("|S2"), json!("not base64!"))).is_err());
        assert!(stand_in(&mut v2(json!("<U1"), json!("too long"))).is_err());
        assert!(stand_in(&mut v2(json!("|V2"), json!("YWJj"))).is_err());
    }
}

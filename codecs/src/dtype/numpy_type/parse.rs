//! Reading a data type's v2 spelling (a NumPy type string or a record's field list) and its
//! v3 spelling (a name, or a name with a configuration) into the type model.

use serde_json::Value;

use super::{bad, Field, SubByte, Ty, NATIVE_BIG, SMALL_FLOATS, SUB_BYTE_INTS, UNITS};

/// Parses a v2 type string (`"<M8[10s]"`, `">U13"`, `"|S7"`, `"<i4"`).
fn parse_v2_str(s: &str) -> Result<Ty, String> {
    let unknown = || bad(format!("data type {s:?}"));
    let (big, rest) = match s.chars().next() {
        Some('>') => (true, &s[1..]),
        Some('<' | '|') => (false, &s[1..]),
        Some('=') => (NATIVE_BIG, &s[1..]),
        _ => (false, s),
    };
    let mut chars = rest.chars();
    let kind = chars.next().ok_or_else(unknown)?;
    let tail = chars.as_str();
    if matches!(kind, 'M' | 'm') {
        // NumPy spells the generic unit without brackets (`<M8`), or scaled (`<M8[2generic]`).
        let inner = match tail {
            "8" => "generic",
            _ => tail
                .strip_prefix("8[")
                .and_then(|t| t.strip_suffix(']'))
                .ok_or_else(unknown)?,
        };
        return time(kind == 'm', inner, big).ok_or_else(unknown);
    }
    let n: usize = tail.parse().map_err(|_| unknown())?;
    Ok(match kind {
        'b' if n == 1 => Ty::Bool,
        'i' if matches!(n, 1 | 2 | 4 | 8) => Ty::Int(n, big),
        'u' if matches!(n, 1 | 2 | 4 | 8) => Ty::UInt(n, big),
        'f' if matches!(n, 2 | 4 | 8) => Ty::Float(n, big),
        'c' if matches!(n, 8 | 16) => Ty::Complex(n, big),
        'U' if n > 0 => Ty::Utf32(n, big),
        'S' if n > 0 => Ty::Bytes(n),
        'V' if n > 0 => Ty::Void(n),
        _ => return Err(unknown()),
    })
}

/// `"10s"` / `"ns"` → a time type.
fn time(delta: bool, spec: &str, big: bool) -> Option<Ty> {
    let digits = spec.len() - spec.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (scale, unit) = spec.split_at(digits);
    let scale = if scale.is_empty() {
        1
    } else {
        scale.parse().ok().filter(|&s| s > 0)?
    };
    UNITS.contains(&unit).then(|| Ty::Time {
        delta,
        unit: unit.to_owned(),
        scale,
        big,
    })
}

/// Parses a v2 `dtype` (a type string or a list of fields).
pub(super) fn parse_v2(v: &Value) -> Result<Ty, String> {
    match v {
        Value::String(s) => parse_v2_str(s),
        Value::Array(fields) => Ok(Ty::Struct(
            fields
                .iter()
                .map(|f| {
                    let parts = f.as_array().ok_or_else(|| bad(format!("field {f}")))?;
                    let name = parts
                        .first()
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad(format!("field {f}")))?;
                    let ty = parse_v2(parts.get(1).ok_or_else(|| bad(format!("field {f}")))?)?;
                    let shape = match parts.get(2) {
                        None => Vec::new(),
                        Some(s) => serde_json::from_value(s.clone())
                            .map_err(|_| bad(format!("field shape {s}")))?,
                    };
                    Ok(Field {
                        name: name.to_owned(),
                        ty,
                        shape,
                    })
                })
                .collect::<Result<_, String>>()?,
        )),
        other => Err(bad(format!("data type {other}"))),
    }
}

/// Parses a v3 `data_type` (native byte order in memory: v3 types have none of their own).
pub(super) fn parse_v3(v: &Value) -> Result<Ty, String> {
    let unknown = || bad(format!("data type {v}"));
    let (name, config) = match v {
        Value::String(s) => (s.as_str(), &Value::Null),
        Value::Object(o) => (
            o.get("name").and_then(Value::as_str).ok_or_else(unknown)?,
            o.get("configuration").unwrap_or(&Value::Null),
        ),
        _ => return Err(unknown()),
    };
    let length = || {
        config
            .get("length_bytes")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(unknown)
    };
    let b = NATIVE_BIG;
    Ok(match name {
        "bool" => Ty::Bool,
        "int8" => Ty::Int(1, b),
        "int16" => Ty::Int(2, b),
        "int32" => Ty::Int(4, b),
        "int64" => Ty::Int(8, b),
        "uint8" => Ty::UInt(1, b),
        "uint16" => Ty::UInt(2, b),
        "uint32" => Ty::UInt(4, b),
        "uint64" => Ty::UInt(8, b),
        "float16" => Ty::Float(2, b),
        "float32" => Ty::Float(4, b),
        "float64" => Ty::Float(8, b),
        "complex64" => Ty::Complex(8, b),
        "complex128" => Ty::Complex(16, b),
        "numpy.datetime64" | "numpy.timedelta64" => {
            let unit = config
                .get("unit")
                .and_then(Value::as_str)
                .ok_or_else(unknown)?;
            let scale = config
                .get("scale_factor")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            time(name == "numpy.timedelta64", &format!("{scale}{unit}"), b).ok_or_else(unknown)?
        }
        "fixed_length_utf32" => {
            let n = length()?;
            if n % 4 != 0 {
                return Err(unknown());
            }
            Ty::Utf32(n / 4, b)
        }
        "null_terminated_bytes" => Ty::Bytes(length()?),
        "raw_bytes" => Ty::Void(length()?),
        "structured" | "struct" => {
            let fields = config
                .get("fields")
                .and_then(Value::as_array)
                .ok_or_else(unknown)?;
            Ty::Struct(
                fields
                    .iter()
                    .map(|f| {
                        // "structured" (zarr-python 3.1): [name, type]; "struct" (3.4 and
                        // the zarr-extensions spec): {"name", "data_type"}.
                        let (fname, ty) = match f {
                            Value::Array(p) if p.len() == 2 => (p[0].as_str(), &p[1]),
                            Value::Object(o) => (
                                o.get("name").and_then(Value::as_str),
                                o.get("data_type").ok_or_else(unknown)?,
                            ),
                            _ => return Err(unknown()),
                        };
                        Ok(Field {
                            name: fname.ok_or_else(unknown)?.to_owned(),
                            ty: parse_v3(ty)?,
                            shape: Vec::new(),
                        })
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        other => match SMALL_FLOATS.iter().find(|s| **s == other) {
            Some(s) => Ty::Small(s),
            None => match SUB_BYTE_INTS.iter().find(|(n, ..)| *n == other) {
                Some(&(name, bits, signed)) => Ty::SubByte(name, SubByte { bits, signed }),
                None => return Err(unknown()),
            },
        },
    })
}

//! zarr-python's `scale_offset` codec (zarr >= 3.2): `enc = (x - offset) * scale`,
//! `dec = enc / scale + offset`, in the array's own type.
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/scale_offset>.
//! Integers: exact arithmetic, an error when a result leaves the type's range or a division
//! leaves a remainder (zarr-python's semantics); floats: IEEE arithmetic in the array's
//! precision. `offset` and `scale` are JSON scalars of the array's type (numbers, or for
//! floats "NaN", "Infinity", "-Infinity" and "0x…" bit patterns), defaulting to 0 and 1.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::bad_config;
use super::numeric::{int_range, is_float, is_int, load, round_to, store, Val};
use crate::ElementType;

#[derive(Debug)]
pub struct ScaleOffset {
    offset: Value,
    scale: Value,
    config: Map<String, Value>,
}

/// Builds the codec from its configuration (both fields optional).
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let get = |k: &str, default: i64| config.get(k).cloned().unwrap_or_else(|| default.into());
    let (offset, scale) = (get("offset", 0), get("scale", 1));
    for v in [&offset, &scale] {
        if !(v.is_number() || v.is_string()) {
            return Err(bad_config("scale_offset", format!("{v} is not a number")));
        }
    }
    if scale.as_f64() == Some(0.0) {
        return Err(bad_config("scale_offset", "scale must be non-zero"));
    }
    Ok(ArrayCodec::codec(ScaleOffset {
        offset,
        scale,
        config: config.clone(),
    }))
}

/// A JSON scalar as a value of type `t` (zarr-python's `from_json_scalar`).
pub fn json_scalar(codec: &str, v: &Value, t: ElementType) -> Result<Val, CodecError> {
    let bad = || CodecError::Other(format!("{codec}: {v} is not a value of type {t}"));
    if is_int(t) {
        let x = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i128))
            .ok_or_else(bad)?;
        let (lo, hi) = int_range(t);
        return if (lo..=hi).contains(&x) {
            Ok(Val::Int(x))
        } else {
            Err(bad())
        };
    }
    if !is_float(t) {
        return Err(CodecError::Other(format!(
            "{codec}: unsupported data type {t}"
        )));
    }
    let f = match v {
        Value::Number(n) => n.as_f64().ok_or_else(bad)?,
        Value::String(s) => match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            hex if hex.starts_with("0x") => {
                let bits = u64::from_str_radix(&hex[2..], 16).map_err(|_| bad())?;
                match t {
                    ElementType::Float16 => half::f16::from_bits(bits as u16).to_f64(),
                    ElementType::BFloat16 => half::bf16::from_bits(bits as u16).to_f64(),
                    ElementType::Float32 => f64::from(f32::from_bits(bits as u32)),
                    _ => f64::from_bits(bits),
                }
            }
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    };
    Ok(Val::Float(round_to(t, f)))
}

fn out_of_range(t: ElementType) -> CodecError {
    CodecError::Other(format!(
        "scale_offset produced a value outside the range of dtype {t}"
    ))
}

impl ScaleOffset {
    fn params(&self, t: ElementType) -> Result<(Val, Val), CodecError> {
        if !(is_int(t) && t != ElementType::Bool || is_float(t)) {
            return Err(CodecError::Other(format!(
                "scale_offset: only integer and float arrays, not {t}"
            )));
        }
        let offset = json_scalar("scale_offset", &self.offset, t)?;
        let scale = json_scalar("scale_offset", &self.scale, t)?;
        if matches!(scale, Val::Int(0)) || scale == Val::Float(0.0) {
            return Err(CodecError::Other(
                "scale_offset: scale must be non-zero".into(),
            ));
        }
        Ok((offset, scale))
    }
}

impl Transform for ScaleOffset {
    fn name_v3(&self) -> &'static str {
        "scale_offset"
    }

    fn name_v2(&self) -> Option<&'static str> {
        None
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        self.params(decoded)?;
        Ok(decoded)
    }

    fn encode(&self, bytes: &[u8], t: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        let (offset, scale) = self.params(t)?;
        let (lo, hi) = int_range(t);
        let mut out = vec![0u8; n * t.size()];
        for i in 0..n {
            let y = match (load(t, bytes, i), offset, scale) {
                (Val::Int(x), Val::Int(o), Val::Int(s)) => {
                    let y = (x - o) * s;
                    if !(lo..=hi).contains(&y) {
                        return Err(out_of_range(t));
                    }
                    Val::Int(y)
                }
                (Val::Float(x), Val::Float(o), Val::Float(s)) => {
                    Val::Float(round_to(t, round_to(t, x - o) * s))
                }
                _ => unreachable!("params are of the array's kind"),
            };
            store(t, y, &mut out, i);
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], t: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        let (offset, scale) = self.params(t)?;
        expect_len("scale_offset", bytes, t, n)?;
        let (lo, hi) = int_range(t);
        let mut out = vec![0u8; n * t.size()];
        for i in 0..n {
            let y = match (load(t, bytes, i), offset, scale) {
                (Val::Int(x), Val::Int(o), Val::Int(s)) => {
                    if x % s != 0 {
                        return Err(CodecError::Other(format!(
                            "scale_offset: {x} divided by scale {s} leaves a non-zero remainder"
                        )));
                    }
                    let y = x / s + o;
                    if !(lo..=hi).contains(&y) {
                        return Err(out_of_range(t));
                    }
                    Val::Int(y)
                }
                (Val::Float(x), Val::Float(o), Val::Float(s)) => {
                    Val::Float(round_to(t, round_to(t, x / s) + o))
                }
                _ => unreachable!("params are of the array's kind"),
            };
            store(t, y, &mut out, i);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: &str) -> ScaleOffset {
        let config: Map<String, Value> = serde_json::from_str(json).unwrap();
        ScaleOffset {
            offset: config.get("offset").cloned().unwrap_or(0.into()),
            scale: config.get("scale").cloned().unwrap_or(1.into()),
            config,
        }
    }

    #[test]
    fn integers_are_exact_or_errors() {
        let c = codec(r#"{"offset": 10, "scale": 3}"#);
        let a: Vec<u8> = [10i16, 11, -5]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let enc = c.encode(&a, ElementType::Int16, 3).unwrap();
        let want: Vec<u8> = [0i16, 3, -45]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(enc, want);
        assert_eq!(c.decode(&enc, ElementType::Int16, 3).unwrap(), a);
        // 4 is not a multiple of 3; 30000 * 3 overflows int16.
        let bad: Vec<u8> = [4i16].iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert!(c.decode(&bad, ElementType::Int16, 1).is_err());
        let big: Vec<u8> = [30000i16].iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert!(c.encode(&big, ElementType::Int16, 1).is_err());
        assert!(c.decode(&enc[..4], ElementType::Int16, 3).is_err());
    }

    #[test]
    fn floats_in_their_precision() {
        // zarr: ScaleOffset(offset=0.5, scale=4) on float32 [1.25, "NaN"] stores [3.0, NaN].
        let c = codec(r#"{"offset": 0.5, "scale": 4}"#);
        let a: Vec<u8> = [1.25f32, f32::NAN]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let enc = c.encode(&a, ElementType::Float32, 2).unwrap();
        assert_eq!(&enc[..4], &3.0f32.to_ne_bytes());
        let dec = c.decode(&enc, ElementType::Float32, 2).unwrap();
        assert_eq!(&dec[..4], &1.25f32.to_ne_bytes());
        assert!(f32::from_ne_bytes(dec[4..].try_into().unwrap()).is_nan());
        assert!(codec(r#"{"scale": "NaN"}"#)
            .params(ElementType::Int8)
            .is_err());
    }
}

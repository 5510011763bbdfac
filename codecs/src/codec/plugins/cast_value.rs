//! zarr-python's `cast_value` codec (zarr >= 3.2): stores values converted to another
//! numeric type, with a rounding mode, an out-of-range rule and explicit scalar mappings.
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/cast_value>;
//! semantics as in the `cast-value` reference implementation zarr-python uses: a scalar map
//! entry replaces matching values (NaN matches NaN); float to integer refuses NaN and
//! infinities, rounds by `rounding` and then applies `out_of_range` (error, `clamp`, or
//! `wrap` modulo the target's range); to a float type, the value rounds by `rounding` to the
//! target's precision (overflow to infinity is an error unless `clamp`). Supported types:
//! (u)int8-64, float16, bfloat16, float32, float64; the sub-byte and 8-bit float types are
//! refused at open (`UnsupportedError`), as zarrs has no layout for them here.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::bad_config;
use super::numeric::{int_range, is_float, is_int, load, round_to, store, Val};
use super::scale_offset::json_scalar;
use crate::ElementType;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    NearestEven,
    TowardsZero,
    TowardsPositive,
    TowardsNegative,
    NearestAway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutOfRange {
    Error,
    Clamp,
    Wrap,
}

#[derive(Debug)]
pub struct CastValue {
    target: ElementType,
    rounding: Rounding,
    out_of_range: OutOfRange,
    encode_map: Vec<(Value, Value)>,
    decode_map: Vec<(Value, Value)>,
    config: Map<String, Value>,
}

fn v3_type(name: &str) -> Option<ElementType> {
    use ElementType as E;
    Some(match name {
        "int8" => E::Int8,
        "int16" => E::Int16,
        "int32" => E::Int32,
        "int64" => E::Int64,
        "uint8" => E::UInt8,
        "uint16" => E::UInt16,
        "uint32" => E::UInt32,
        "uint64" => E::UInt64,
        "float16" => E::Float16,
        "bfloat16" => E::BFloat16,
        "float32" => E::Float32,
        "float64" => E::Float64,
        _ => return None,
    })
}

fn pairs(map: Option<&Value>, direction: &str) -> Result<Vec<(Value, Value)>, PluginCreateError> {
    let Some(list) = map.and_then(|m| m.get(direction)) else {
        return Ok(Vec::new());
    };
    let bad = || {
        bad_config(
            "cast_value",
            format!("scalar_map.{direction} must be [[from, to], ...]"),
        )
    };
    list.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([from, to]) => Ok((from.clone(), to.clone())),
            _ => Err(bad()),
        })
        .collect()
}

/// Builds the codec from its configuration.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let name = config
        .get("data_type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_config("cast_value", "missing data_type"))?;
    let target = v3_type(name).ok_or_else(|| {
        PluginCreateError::Other(format!(
            "codec cast_value: target data type {name} is not supported"
        ))
    })?;
    let rounding = match config.get("rounding").and_then(Value::as_str) {
        None | Some("nearest-even") => Rounding::NearestEven,
        Some("towards-zero") => Rounding::TowardsZero,
        Some("towards-positive") => Rounding::TowardsPositive,
        Some("towards-negative") => Rounding::TowardsNegative,
        Some("nearest-away") => Rounding::NearestAway,
        Some(other) => return Err(bad_config("cast_value", format!("rounding {other:?}"))),
    };
    let out_of_range = match config.get("out_of_range") {
        None | Some(Value::Null) => OutOfRange::Error,
        Some(Value::String(s)) if s == "clamp" => OutOfRange::Clamp,
        Some(Value::String(s)) if s == "wrap" && is_int(target) => OutOfRange::Wrap,
        Some(other) => return Err(bad_config("cast_value", format!("out_of_range {other}"))),
    };
    let map = config.get("scalar_map");
    Ok(ArrayCodec::codec(CastValue {
        target,
        rounding,
        out_of_range,
        encode_map: pairs(map, "encode")?,
        decode_map: pairs(map, "decode")?,
        config: config.clone(),
    }))
}

/// The neighbour of `x` (a value of float type `t`) one step up or down in `t`.
fn next(t: ElementType, x: f64, up: bool) -> f64 {
    let step16 = |bits: u16| {
        if bits & 0x7fff == 0 {
            if up {
                0x0001
            } else {
                0x8001
            }
        } else if up == (bits & 0x8000 == 0) {
            bits + 1
        } else {
            bits - 1
        }
    };
    match t {
        ElementType::Float16 => {
            half::f16::from_bits(step16(half::f16::from_f64(x).to_bits())).to_f64()
        }
        ElementType::BFloat16 => {
            half::bf16::from_bits(step16(half::bf16::from_f64(x).to_bits())).to_f64()
        }
        ElementType::Float32 => f64::from(if up {
            (x as f32).next_up()
        } else {
            (x as f32).next_down()
        }),
        _ => {
            if up {
                x.next_up()
            } else {
                x.next_down()
            }
        }
    }
}

fn max_finite(t: ElementType) -> f64 {
    match t {
        ElementType::Float16 => half::f16::MAX.to_f64(),
        ElementType::BFloat16 => half::bf16::MAX.to_f64(),
        ElementType::Float32 => f64::from(f32::MAX),
        _ => f64::MAX,
    }
}

impl CastValue {
    fn err(&self, why: impl std::fmt::Display) -> CodecError {
        CodecError::Other(format!("cast_value: {why}"))
    }

    fn check_types(&self, decoded: ElementType) -> Result<(), CodecError> {
        if (is_int(decoded) && decoded != ElementType::Bool) || is_float(decoded) {
            Ok(())
        } else {
            Err(self.err(format!("only integer and float arrays, not {decoded}")))
        }
    }

    /// Converts `v` of type `from` to type `to`, following the map of this direction.
    fn convert(
        &self,
        v: Val,
        from: ElementType,
        to: ElementType,
        map: &[(Val, Val)],
    ) -> Result<Val, CodecError> {
        for (k, out) in map {
            let hit = match (v, k) {
                (Val::Float(a), Val::Float(b)) => a == *b || (a.is_nan() && b.is_nan()),
                (a, b) => a == *b,
            };
            if hit {
                return Ok(*out);
            }
        }
        if is_int(to) {
            let w = match v {
                Val::Int(x) => x,
                Val::Float(x) if !x.is_finite() => {
                    return Err(self.err(format!(
                        "cannot cast {x} to {to} without a scalar_map entry"
                    )))
                }
                Val::Float(x) => {
                    (match self.rounding {
                        Rounding::NearestEven => x.round_ties_even(),
                        Rounding::TowardsZero => x.trunc(),
                        Rounding::TowardsPositive => x.ceil(),
                        Rounding::TowardsNegative => x.floor(),
                        Rounding::NearestAway => x.round(),
                    }) as i128
                }
                Val::Complex(..) => return Err(self.err("complex values")),
            };
            let (lo, hi) = int_range(to);
            if (lo..=hi).contains(&w) {
                return Ok(Val::Int(w));
            }
            return match self.out_of_range {
                OutOfRange::Clamp => Ok(Val::Int(w.clamp(lo, hi))),
                OutOfRange::Wrap => Ok(Val::Int((w - lo).rem_euclid(hi - lo + 1) + lo)),
                OutOfRange::Error => Err(self.err(format!("{w} is out of range for {to}"))),
            };
        }
        let x = match v {
            Val::Int(x) => x as f64,
            Val::Float(x) => x,
            Val::Complex(..) => return Err(self.err("complex values")),
        };
        let ne = round_to(to, x);
        let mut y = ne;
        if ne != x && x.is_finite() && self.rounding != Rounding::NearestEven {
            let other = next(to, ne, ne < x);
            let use_other = match self.rounding {
                Rounding::TowardsZero => other.abs() < ne.abs(),
                Rounding::TowardsPositive => other > ne,
                Rounding::TowardsNegative => other < ne,
                _ => {
                    let (d_ne, d_other) = ((ne - x).abs(), (other - x).abs());
                    d_other < d_ne || (d_other == d_ne && other.abs() > ne.abs())
                }
            };
            if use_other {
                y = other;
            }
        }
        if y.is_infinite() && x.is_finite() {
            return match self.out_of_range {
                OutOfRange::Clamp => Ok(Val::Float(max_finite(to).copysign(x))),
                _ => Err(self.err(format!("{x} overflows {to} (from {from})"))),
            };
        }
        Ok(Val::Float(y))
    }

    fn run(
        &self,
        bytes: &[u8],
        from: ElementType,
        to: ElementType,
        n: usize,
        map: &[(Value, Value)],
    ) -> Result<Vec<u8>, CodecError> {
        expect_len("cast_value", bytes, from, n)?;
        let map: Vec<(Val, Val)> = map
            .iter()
            .map(|(k, v)| {
                Ok((
                    json_scalar("cast_value", k, from)?,
                    json_scalar("cast_value", v, to)?,
                ))
            })
            .collect::<Result<_, CodecError>>()?;
        let mut out = vec![0u8; n * to.size()];
        for i in 0..n {
            store(
                to,
                self.convert(load(from, bytes, i), from, to, &map)?,
                &mut out,
                i,
            );
        }
        Ok(out)
    }
}

impl Transform for CastValue {
    fn name_v3(&self) -> &'static str {
        "cast_value"
    }

    fn name_v2(&self) -> Option<&'static str> {
        None
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        self.check_types(decoded)?;
        Ok(self.target)
    }

    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check_types(decoded)?;
        self.run(bytes, decoded, self.target, n, &self.encode_map)
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check_types(decoded)?;
        self.run(bytes, self.target, decoded, n, &self.decode_map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: &str) -> CastValue {
        let config: Map<String, Value> = serde_json::from_str(json).unwrap();
        let map = config.get("scalar_map").cloned();
        CastValue {
            target: v3_type(config["data_type"].as_str().unwrap()).unwrap(),
            rounding: Rounding::NearestEven,
            out_of_range: match config.get("out_of_range").and_then(Value::as_str) {
                Some("clamp") => OutOfRange::Clamp,
                Some("wrap") => OutOfRange::Wrap,
                _ => OutOfRange::Error,
            },
            encode_map: pairs(map.as_ref(), "encode").unwrap(),
            decode_map: pairs(map.as_ref(), "decode").unwrap(),
            config,
        }
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn float_to_uint8_with_nan_map() {
        let c = codec(
            r#"{"data_type": "uint8", "out_of_range": "clamp",
                "scalar_map": {"encode": [["NaN", 255]], "decode": [[255, "NaN"]]}}"#,
        );
        let enc = c
            .encode(
                &f32s(&[1.5, 2.5, -3.0, 300.0, f32::NAN]),
                ElementType::Float32,
                5,
            )
            .unwrap();
        assert_eq!(enc, [2, 2, 0, 255, 255]);
        let dec = c.decode(&enc, ElementType::Float32, 5).unwrap();
        assert_eq!(&dec[..12], &f32s(&[2.0, 2.0, 0.0])[..]);
        // 300 was clamped to 255, which decodes through the map to NaN like the NaN itself.
        for v in dec[12..].chunks_exact(4) {
            assert!(f32::from_ne_bytes(v.try_into().unwrap()).is_nan());
        }
    }

    #[test]
    fn errors_and_wrapping() {
        let strict = codec(r#"{"data_type": "int8"}"#);
        assert!(strict
            .encode(&f32s(&[200.0]), ElementType::Float32, 1)
            .is_err());
        assert!(strict
            .encode(&f32s(&[f32::NAN]), ElementType::Float32, 1)
            .is_err());
        let wrap = codec(r#"{"data_type": "int8", "out_of_range": "wrap"}"#);
        let a: Vec<u8> = [200i32, -129]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(
            wrap.encode(&a, ElementType::Int32, 2).unwrap(),
            [200u8, 127]
        );
        assert!(strict.decode(&[1, 2], ElementType::Int32, 3).is_err());
    }
}

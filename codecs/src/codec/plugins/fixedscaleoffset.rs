//! numcodecs' `fixedscaleoffset` filter, with numcodecs' exact arithmetic.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/filter/fixedscaleoffset.html> (v3 name
//! `numcodecs.fixedscaleoffset`). Encoding is `np.around((a - offset) * scale).astype(astype)`,
//! decoding `(enc / scale + offset).astype(dtype)`, both in NumPy 2's type rules: an integer
//! `enc` divides in float64, a float one in its own precision (the Python scalars `scale` and
//! `offset` are cast to it first). zarrs has this codec too, but computes in f32 with f32
//! parameters and cannot read zarr-python's `"astype": "|u1"`; this one replaces it.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::numeric::{cast, is_float, is_int, load, round_to, store, wrap, Val};
use super::{bad_config, numpy_dtype};
use crate::ElementType;

/// A Python number from the configuration: integers stay exact.
#[derive(Clone, Copy, Debug)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn parse(v: Option<&Value>, field: &str) -> Result<Self, PluginCreateError> {
        match v {
            Some(Value::Number(n)) => Ok(match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Self::Int(i.into()),
                (_, Some(u), _) => Self::Int(u.into()),
                (_, _, Some(f)) => Self::Float(f),
                _ => return Err(bad_config("fixedscaleoffset", format!("bad {field}"))),
            }),
            _ => Err(bad_config(
                "fixedscaleoffset",
                format!("{field} must be a number"),
            )),
        }
    }

    fn f64(self) -> f64 {
        match self {
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
        }
    }
}

#[derive(Debug)]
pub struct FixedScaleOffset {
    offset: Number,
    scale: Number,
    dtype: ElementType,
    astype: ElementType,
    config: Map<String, Value>,
}

/// Builds the codec from numcodecs' configuration.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let real = |field: &str| -> Result<Option<ElementType>, PluginCreateError> {
        match config.get(field).and_then(Value::as_str) {
            None => Ok(None),
            Some(s) => numpy_dtype(s)
                .filter(|t| is_int(*t) && *t != ElementType::Bool || is_float(*t))
                .map(Some)
                .ok_or_else(|| {
                    bad_config("fixedscaleoffset", format!("unsupported {field} {s:?}"))
                }),
        }
    };
    let dtype = real("dtype")?.ok_or_else(|| bad_config("fixedscaleoffset", "missing dtype"))?;
    Ok(ArrayCodec::codec(FixedScaleOffset {
        offset: Number::parse(config.get("offset"), "offset")?,
        scale: Number::parse(config.get("scale"), "scale")?,
        dtype,
        astype: real("astype")?.unwrap_or(dtype),
        config: config.clone(),
    }))
}

impl FixedScaleOffset {
    fn check(&self, decoded: ElementType) -> Result<(), CodecError> {
        if decoded == self.dtype {
            Ok(())
        } else {
            Err(CodecError::Other(format!(
                "fixedscaleoffset: configured for {} but the array holds {decoded}",
                self.dtype
            )))
        }
    }

    /// `x op p` where `x` is of type `t` (or float64 once promoted), NumPy 2 style.
    fn step(
        t: ElementType,
        x: Val,
        p: Number,
        op: fn(f64, f64) -> f64,
        iop: fn(i128, i128) -> i128,
    ) -> Val {
        match (x, p) {
            (Val::Int(a), Number::Int(b)) if is_int(t) => Val::Int(wrap(t, iop(a, b))),
            (Val::Int(a), p) => Val::Float(op(a as f64, p.f64())),
            (Val::Float(a), p) => {
                // A float array keeps its precision; the Python scalar is cast to it first.
                let ft = if is_float(t) { t } else { ElementType::Float64 };
                Val::Float(round_to(ft, op(a, round_to(ft, p.f64()))))
            }
            (v, _) => v,
        }
    }
}

impl Transform for FixedScaleOffset {
    fn name_v3(&self) -> &'static str {
        "numcodecs.fixedscaleoffset"
    }

    fn name_v2(&self) -> Option<&'static str> {
        Some("fixedscaleoffset")
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        self.check(decoded)?;
        Ok(self.astype)
    }

    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check(decoded)?;
        let t = self.dtype;
        let mut out = vec![0u8; n * self.astype.size()];
        for i in 0..n {
            let x = load(t, bytes, i);
            // After a float offset an integer array is float64: later steps see that type.
            let x = Self::step(t, x, self.offset, |a, b| a - b, i128::wrapping_sub);
            let t2 = if matches!(x, Val::Float(_)) && is_int(t) {
                ElementType::Float64
            } else {
                t
            };
            let x = Self::step(t2, x, self.scale, |a, b| a * b, i128::wrapping_mul);
            let x = match x {
                Val::Float(f) => Val::Float(f.round_ties_even()),
                v => v,
            };
            store(self.astype, cast(x, self.astype), &mut out, i);
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check(decoded)?;
        expect_len("numcodecs.fixedscaleoffset", bytes, self.astype, n)?;
        // True division: integers divide in float64, floats in their own precision.
        let ct = if is_int(self.astype) {
            ElementType::Float64
        } else {
            self.astype
        };
        let (scale, offset) = (
            round_to(ct, self.scale.f64()),
            round_to(ct, self.offset.f64()),
        );
        let mut out = vec![0u8; n * self.dtype.size()];
        for i in 0..n {
            let Val::Float(x) = cast(load(self.astype, bytes, i), ct) else {
                unreachable!("ct is a float type")
            };
            let x = round_to(ct, round_to(ct, x / scale) + offset);
            store(self.dtype, cast(Val::Float(x), self.dtype), &mut out, i);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(json: &str) -> FixedScaleOffset {
        let config: Map<String, Value> = serde_json::from_str(json).unwrap();
        let dtype = numpy_dtype(config["dtype"].as_str().unwrap()).unwrap();
        FixedScaleOffset {
            offset: Number::parse(config.get("offset"), "offset").unwrap(),
            scale: Number::parse(config.get("scale"), "scale").unwrap(),
            dtype,
            astype: config
                .get("astype")
                .and_then(Value::as_str)
                .and_then(numpy_dtype)
                .unwrap_or(dtype),
            config,
        }
    }

    #[test]
    fn matches_numcodecs() {
        // c = numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="|u1")
        // c.encode(np.array([1000, 1000.11, 1000.25, 1025.5], "<f8")).tobytes() == b"\x00\x01\x02\xff"
        let c = codec(r#"{"offset":1000,"scale":10,"dtype":"<f8","astype":"|u1"}"#);
        let a: Vec<u8> = [1000.0f64, 1000.11, 1000.25, 1025.5]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let enc = c.encode(&a, ElementType::Float64, 4).unwrap();
        assert_eq!(enc, b"\x00\x01\x02\xff");
        // c.decode(b"\x00\x01\x02\xff") -> [1000.0, 1000.1, 1000.2, 1025.5]
        let dec = c.decode(&enc, ElementType::Float64, 4).unwrap();
        let want: Vec<u8> = [1000.0f64, 1000.1, 1000.2, 1025.5]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(dec, want);
        assert!(c.decode(&enc[..3], ElementType::Float64, 4).is_err());
    }
}

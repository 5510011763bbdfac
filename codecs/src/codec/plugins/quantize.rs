//! numcodecs' `quantize` filter: floats rounded to a number of decimal digits (lossy).
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/filter/quantize.html> (v3 name
//! `numcodecs.quantize`). With `bits = ceil(log2(10^-e))`, `e` the decimal exponent of
//! `10^-digits`, and `scale = 2^bits`, encoding is `np.around(scale * a) / scale` in the
//! array's float type (NumPy 2: the Python scalar `scale` is cast to that type first), then
//! `.astype(astype)`; decoding is `enc.astype(dtype)`. Powers of two make the product and
//! quotient exact, so computing in f64 and rounding to the type gives NumPy's bits.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::numeric::{cast, convert, is_float, load, round_to, store, Val};
use super::{bad_config, little_endian_dtype};
use crate::ElementType;

const NAME: &str = "numcodecs.quantize";

#[derive(Debug)]
pub struct Quantize {
    scale: f64,
    /// The array's type; `None` (zarr-python's v3 codec may leave it out): the array's.
    dtype: Option<ElementType>,
    /// The stored type; `None`: `dtype`.
    astype: Option<ElementType>,
    config: Map<String, Value>,
}

fn float_field(
    config: &Map<String, Value>,
    field: &str,
) -> Result<Option<ElementType>, PluginCreateError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => little_endian_dtype(s)
            .filter(|t| is_float(*t))
            .map(Some)
            .ok_or_else(|| bad_config(NAME, format!("unsupported {field} {s:?} (a float type)"))),
        Some(v) => Err(bad_config(
            NAME,
            format!("{field} {v} is not a dtype string"),
        )),
    }
}

/// numcodecs' scale for `digits`, with the same floating-point steps.
fn scale(digits: i64) -> f64 {
    let precision = 10f64.powf(-(digits as f64));
    let exp = precision.log10();
    let exp = if exp < 0.0 { exp.floor() } else { exp.ceil() };
    let bits = 10f64.powf(-exp).log2().ceil();
    2f64.powf(bits)
}

/// Builds the codec from numcodecs' configuration (`digits` required).
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let digits = config
        .get("digits")
        .and_then(Value::as_i64)
        .filter(|d| (-300..=300).contains(d))
        .ok_or_else(|| bad_config(NAME, "digits must be an integer in -300..=300"))?;
    Ok(ArrayCodec::codec(Quantize {
        scale: scale(digits),
        dtype: float_field(config, "dtype")?,
        astype: float_field(config, "astype")?,
        config: config.clone(),
    }))
}

impl Quantize {
    /// The stored type for an array of `decoded`.
    fn stored(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        match self.dtype {
            Some(t) if t != decoded => Err(CodecError::Other(format!(
                "{NAME}: dtype is {t} but the array holds {decoded}"
            ))),
            _ if !is_float(decoded) => Err(CodecError::Other(format!(
                "{NAME}: only float arrays, not {decoded}"
            ))),
            _ => Ok(self.astype.unwrap_or(decoded)),
        }
    }
}

impl Transform for Quantize {
    fn name_v3(&self) -> &'static str {
        NAME
    }

    fn name_v2(&self) -> Option<&'static str> {
        Some("quantize")
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        self.stored(decoded)
    }

    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        let astype = self.stored(decoded)?;
        expect_len(NAME, bytes, decoded, n)?;
        let t = decoded;
        let scale = round_to(t, self.scale);
        let mut out = vec![0u8; n * astype.size()];
        for i in 0..n {
            let Val::Float(x) = load(t, bytes, i) else {
                unreachable!("t is a float type")
            };
            let scaled = round_to(t, scale * x).round_ties_even();
            let q = round_to(t, scaled / scale);
            store(astype, cast(Val::Float(q), astype), &mut out, i);
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        let astype = self.stored(decoded)?;
        expect_len(NAME, bytes, astype, n)?;
        Ok(convert(bytes, astype, decoded, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn matches_numcodecs() {
        // numcodecs.Quantize(digits=1, dtype="f8").encode(np.linspace(0, 1, 10)), from
        // numcodecs' docstring
        let c = Quantize {
            scale: scale(1),
            dtype: Some(ElementType::Float64),
            astype: None,
            config: Map::new(),
        };
        let x: Vec<f64> = (0..10).map(|i| f64::from(i) / 9.0).collect();
        let enc = c.encode(&f64s(&x), ElementType::Float64, 10).unwrap();
        let want = [
            0.0, 0.125, 0.25, 0.3125, 0.4375, 0.5625, 0.6875, 0.75, 0.875, 1.0,
        ];
        assert_eq!(enc, f64s(&want));
        assert_eq!(c.decode(&enc, ElementType::Float64, 10).unwrap(), enc);
        assert!(c.decode(&enc[..8], ElementType::Float64, 10).is_err());
        assert!(c.encode(&enc, ElementType::Float32, 20).is_err());
        assert_eq!(scale(2), 128.0);
        assert_eq!(scale(3), 1024.0);
    }

    #[test]
    fn stores_astype() {
        let c = Quantize {
            scale: scale(2),
            dtype: Some(ElementType::Float64),
            astype: Some(ElementType::Float32),
            config: Map::new(),
        };
        let enc = c
            .encode(&f64s(&[1.0 / 3.0]), ElementType::Float64, 1)
            .unwrap();
        // round(128 / 3) / 128 = 43 / 128, exact in f32
        assert_eq!(enc, (43.0f32 / 128.0).to_ne_bytes());
        let dec = c.decode(&enc, ElementType::Float64, 1).unwrap();
        assert_eq!(dec, f64s(&[43.0 / 128.0]));
    }
}

//! numcodecs' `delta` filter: stores the first element and then successive differences.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/filter/delta.html> (v3 name
//! `numcodecs.delta`, <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/numcodecs.delta>).
//! Configuration: `dtype` (the array's type) and optional `astype` (the stored type).
//! Encoding is `enc[0] = a[0]; enc[i] = a[i] - a[i-1]` computed in `dtype` and cast to
//! `astype`; decoding is `np.cumsum(enc, out=dec)`, a running sum in `dtype` (integers
//! wrap, floats round at every step), exactly as numcodecs does.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::numeric::{add, cast, load, store, sub, Val};
use super::{bad_config, numpy_dtype};
use crate::ElementType;

#[derive(Debug)]
pub struct Delta {
    dtype: ElementType,
    astype: ElementType,
    config: Map<String, Value>,
}

/// Builds the codec from numcodecs' configuration.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let parse = |field: &str| -> Result<Option<ElementType>, PluginCreateError> {
        match config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => numpy_dtype(s)
                .filter(|t| *t != ElementType::Bool)
                .map(Some)
                .ok_or_else(|| bad_config("delta", format!("unsupported {field} {s:?}"))),
            Some(other) => Err(bad_config(
                "delta",
                format!("{field} {other} is not a dtype"),
            )),
        }
    };
    let dtype = parse("dtype")?.ok_or_else(|| bad_config("delta", "missing dtype"))?;
    let astype = parse("astype")?.unwrap_or(dtype);
    Ok(ArrayCodec::codec(Delta {
        dtype,
        astype,
        config: config.clone(),
    }))
}

impl Delta {
    fn check(&self, decoded: ElementType) -> Result<(), CodecError> {
        if decoded == self.dtype {
            Ok(())
        } else {
            Err(CodecError::Other(format!(
                "delta: configured for {} but the array holds {decoded}",
                self.dtype
            )))
        }
    }
}

impl Transform for Delta {
    fn name_v3(&self) -> &'static str {
        "numcodecs.delta"
    }

    fn name_v2(&self) -> Option<&'static str> {
        Some("delta")
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
        let mut out = vec![0u8; n * self.astype.size()];
        let mut prev: Option<Val> = None;
        for i in 0..n {
            let x = load(self.dtype, bytes, i);
            let d = prev.map_or(x, |p| sub(self.dtype, x, p));
            store(self.astype, d, &mut out, i);
            prev = Some(x);
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check(decoded)?;
        expect_len("numcodecs.delta", bytes, self.astype, n)?;
        let mut out = vec![0u8; n * self.dtype.size()];
        let mut acc: Option<Val> = None;
        for i in 0..n {
            let d = cast(load(self.astype, bytes, i), self.dtype);
            let x = acc.map_or(d, |a| add(self.dtype, a, d));
            store(self.dtype, x, &mut out, i);
            acc = Some(x);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(dtype: &str, astype: &str) -> Delta {
        Delta {
            dtype: numpy_dtype(dtype).unwrap(),
            astype: numpy_dtype(astype).unwrap(),
            config: Map::new(),
        }
    }

    #[test]
    fn matches_numcodecs() {
        // numcodecs.Delta(dtype="<i2", astype="<i1").encode(np.array([1, 3, 2, 300, -5], "<i2")).tobytes()
        let d = delta("<i2", "<i1");
        let a: Vec<u8> = [1i16, 3, 2, 300, -5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let enc = d.encode(&a, ElementType::Int16, 5).unwrap();
        assert_eq!(enc, b"\x01\x02\xff\x2a\xcf");
        // Narrowing lost 298 - 42: numcodecs' decode gives [1, 3, 2, 44, -5], and so do we.
        let want: Vec<u8> = [1i16, 3, 2, 44, -5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(d.decode(&enc, ElementType::Int16, 5).unwrap(), want);
    }

    #[test]
    fn float_round_trip_and_bad_sizes() {
        let d = delta("<f4", "<f8");
        let a: Vec<u8> = [0.5f32, 0.75, -3.25, 1024.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let enc = d.encode(&a, ElementType::Float32, 4).unwrap();
        assert_eq!(enc.len(), 32);
        assert_eq!(d.decode(&enc, ElementType::Float32, 4).unwrap(), a);
        assert!(d.decode(&enc[..31], ElementType::Float32, 4).is_err());
        assert!(d.decode(&enc, ElementType::Float64, 4).is_err());
    }
}

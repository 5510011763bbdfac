//! numcodecs' `astype` filter: chunks stored as another numeric type.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/filter/astype.html> (v3 name
//! `numcodecs.astype`). Encoding is `a.astype(encode_dtype)`, decoding
//! `enc.astype(decode_dtype)`, with NumPy's unsafe casts (`numeric::cast`: integers wrap, float
//! to integer truncates; NaN and out-of-range floats, undefined in NumPy, saturate here).
//! `decode_dtype` is the array's type (zarr-python's v3 codec fills it in when it is left
//! out). A big-endian multi-byte `encode_dtype` is refused (zarr-python then reads it).

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::array_codec::{expect_len, ArrayCodec, Transform};
use super::numeric::convert;
use super::{bad_config, little_endian_dtype};
use crate::ElementType;

const NAME: &str = "numcodecs.astype";

#[derive(Debug)]
pub struct AsType {
    encode: ElementType,
    /// The array's type; `None`: whatever the array holds.
    decode: Option<ElementType>,
    config: Map<String, Value>,
}

fn dtype_field(
    config: &Map<String, Value>,
    field: &str,
) -> Result<Option<ElementType>, PluginCreateError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => little_endian_dtype(s)
            .filter(|t| !matches!(t, ElementType::Raw { .. }))
            .map(Some)
            .ok_or_else(|| bad_config(NAME, format!("unsupported {field} {s:?}"))),
        Some(v) => Err(bad_config(
            NAME,
            format!("{field} {v} is not a dtype string"),
        )),
    }
}

/// Builds the codec from numcodecs' configuration (`encode_dtype` required).
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    Ok(ArrayCodec::codec(AsType {
        encode: dtype_field(config, "encode_dtype")?
            .ok_or_else(|| bad_config(NAME, "missing encode_dtype"))?,
        decode: dtype_field(config, "decode_dtype")?,
        config: config.clone(),
    }))
}

impl AsType {
    fn check(&self, decoded: ElementType) -> Result<(), CodecError> {
        match self.decode {
            Some(t) if t != decoded => Err(CodecError::Other(format!(
                "{NAME}: decode_dtype is {t} but the array holds {decoded}"
            ))),
            _ => Ok(()),
        }
    }
}

impl Transform for AsType {
    fn name_v3(&self) -> &'static str {
        NAME
    }

    fn name_v2(&self) -> Option<&'static str> {
        Some("astype")
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn encoded_type(&self, decoded: ElementType) -> Result<ElementType, CodecError> {
        self.check(decoded)?;
        Ok(self.encode)
    }

    fn encode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check(decoded)?;
        expect_len(NAME, bytes, decoded, n)?;
        Ok(convert(bytes, decoded, self.encode, n))
    }

    fn decode(&self, bytes: &[u8], decoded: ElementType, n: usize) -> Result<Vec<u8>, CodecError> {
        self.check(decoded)?;
        expect_len(NAME, bytes, self.encode, n)?;
        Ok(convert(bytes, self.encode, decoded, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_as_numpy() {
        let c = AsType {
            encode: ElementType::Int8,
            decode: Some(ElementType::Float64),
            config: Map::new(),
        };
        // np.array([1.9, -2.7, 300.0]).astype("i1") == [1, -2, 44]
        let a: Vec<u8> = [1.9f64, -2.7, 300.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let enc = c.encode(&a, ElementType::Float64, 3).unwrap();
        assert_eq!(enc, [1u8, (-2i8) as u8, 44]);
        let dec = c.decode(&enc, ElementType::Float64, 3).unwrap();
        let want: Vec<u8> = [1.0f64, -2.0, 44.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(dec, want);
        assert!(c.decode(&enc[..2], ElementType::Float64, 3).is_err());
        assert!(c.decode(&enc, ElementType::Int32, 3).is_err());
    }

    #[test]
    fn refuses_big_endian_storage() {
        let config: Map<String, Value> =
            serde_json::from_str(r#"{"encode_dtype": ">i2", "decode_dtype": "<f8"}"#).unwrap();
        assert!(create(&config).is_err());
    }
}

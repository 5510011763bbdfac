//! zfp's parameters as the two codecs spell them, parsed into one [`Mode`]: numcodecs' `zfpy`
//! (`{"mode": 2, "rate": 12, …}`: zfp's mode number and numcodecs' three fields, `-1` where
//! unused) and zarrs' `zfp` (`{"mode": "fixed_rate", "rate": 12}`, or `"expert"` with its four
//! parameters); and the zfp-rs configuration a mode gives for a chunk's scalar type.
//!
//! Specs: <https://numcodecs.readthedocs.io/en/stable/compression/zfpy.html>,
//! <https://codec.zarrs.dev/array_to_bytes/zfp>. zarr-python writes zfpy's v3 configuration
//! without numcodecs' defaults (`{"mode": 4}`, tolerance `-1` left out): they are filled in
//! here, and the fields then must match the mode as zarrs requires (zarrs wrote these arrays).

use serde_json::{json, Map, Value};
use zfp_rs::{ZfpConfig, ZfpConfigError, ZfpDimensionality, ZfpScalarType, ZfpStreamAlignment};

/// A zfp compression mode, as the codec metadata gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Compressed bits per value.
    FixedRate(f64),
    /// Uncompressed bit planes kept per block (0: all).
    FixedPrecision(u32),
    /// Absolute error tolerance (zero or less: the smallest exponent zfp knows).
    FixedAccuracy(f64),
    /// Lossless.
    Reversible,
    /// zfp's four parameters (zarrs' `zfp` only).
    Expert {
        minbits: u32,
        maxbits: u32,
        maxprec: u32,
        minexp: i32,
    },
}

/// Parses numcodecs' zfpy configuration (`mode` 2, 3, 4 or 5; 4 when absent).
pub fn parse_zfpy(config: &Map<String, Value>) -> Result<Mode, String> {
    let number = |field: &str| match config.get(field) {
        None | Some(Value::Null) => Ok(-1.0),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("`{field}` must be a number, not {v}")),
    };
    let mode = match config.get("mode") {
        None | Some(Value::Null) => 4,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("`mode` must be 2, 3, 4 or 5, not {v}"))?,
    };
    let (rate, precision, tolerance) =
        (number("rate")?, number("precision")?, number("tolerance")?);
    // The fields a mode does not use must be numcodecs' -1, as zarrs requires.
    let unused = |fields: &[(&str, f64)]| match fields.iter().find(|(_, v)| *v != -1.0) {
        Some((name, v)) => Err(format!("mode {mode} takes no `{name}` (got {v})")),
        None => Ok(()),
    };
    match mode {
        2 => {
            unused(&[("precision", precision), ("tolerance", tolerance)])?;
            if !(rate >= 0.0 && rate.is_finite()) {
                return Err(format!("mode 2 needs a `rate` of 0 or more, not {rate}"));
            }
            Ok(Mode::FixedRate(rate))
        }
        3 => {
            unused(&[("rate", rate), ("tolerance", tolerance)])?;
            let p = config.get("precision").and_then(Value::as_u64);
            let p = p.and_then(|p| u32::try_from(p).ok()).ok_or_else(|| {
                format!("mode 3 needs a `precision` of 0 or more, not {precision}")
            })?;
            Ok(Mode::FixedPrecision(p))
        }
        4 => {
            unused(&[("rate", rate), ("precision", precision)])?;
            Ok(Mode::FixedAccuracy(tolerance))
        }
        5 => {
            unused(&[
                ("rate", rate),
                ("precision", precision),
                ("tolerance", tolerance),
            ])?;
            Ok(Mode::Reversible)
        }
        other => Err(format!(
            "`mode` {other} is not one zfpy writes (2: fixed rate, 3: fixed precision, 4: fixed \
             accuracy, 5: reversible)"
        )),
    }
}

/// Parses zarrs' zfp configuration (`mode` by name).
pub fn parse_zfp(config: &Map<String, Value>) -> Result<Mode, String> {
    let float = |field: &str| {
        config
            .get(field)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("needs a number `{field}`"))
    };
    let uint = |field: &str| {
        let v = config.get(field).and_then(Value::as_u64);
        v.and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("needs an integer `{field}` of 0 or more"))
    };
    let mode = config.get("mode").and_then(Value::as_str).unwrap_or("");
    match mode {
        "fixed_rate" => Ok(Mode::FixedRate(float("rate")?)),
        "fixed_precision" => Ok(Mode::FixedPrecision(uint("precision")?)),
        "fixed_accuracy" => Ok(Mode::FixedAccuracy(float("tolerance")?)),
        "reversible" => Ok(Mode::Reversible),
        "expert" => {
            let minexp = config.get("minexp").and_then(Value::as_i64);
            let minexp = minexp
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| "needs an integer `minexp`".to_owned())?;
            Ok(Mode::Expert {
                minbits: uint("minbits")?,
                maxbits: uint("maxbits")?,
                maxprec: uint("maxprec")?,
                minexp,
            })
        }
        _ => Err(format!(
            "`mode` must be fixed_rate, fixed_precision, fixed_accuracy, reversible or expert, \
             not {}",
            config.get("mode").unwrap_or(&Value::Null)
        )),
    }
}

impl Mode {
    /// The configuration zfpy's metadata gives for this mode (numcodecs' spelling; `None`
    /// for expert mode, which zfpy cannot write).
    pub fn zfpy_json(self) -> Option<Map<String, Value>> {
        let value = match self {
            Mode::FixedRate(rate) => json!({"mode": 2, "rate": rate}),
            Mode::FixedPrecision(precision) => json!({"mode": 3, "precision": precision}),
            Mode::FixedAccuracy(tolerance) => json!({"mode": 4, "tolerance": tolerance}),
            Mode::Reversible => json!({"mode": 5}),
            Mode::Expert { .. } => return None,
        };
        value.as_object().cloned()
    }

    /// The configuration zarrs' zfp metadata gives for this mode.
    pub fn zfp_json(self) -> Map<String, Value> {
        let value = match self {
            Mode::FixedRate(rate) => json!({"mode": "fixed_rate", "rate": rate}),
            Mode::FixedPrecision(precision) => {
                json!({"mode": "fixed_precision", "precision": precision})
            }
            Mode::FixedAccuracy(tolerance) => {
                json!({"mode": "fixed_accuracy", "tolerance": tolerance})
            }
            Mode::Reversible => json!({"mode": "reversible"}),
            Mode::Expert {
                minbits,
                maxbits,
                maxprec,
                minexp,
            } => json!({"mode": "expert", "minbits": minbits, "maxbits": maxbits,
                         "maxprec": maxprec, "minexp": minexp}),
        };
        value.as_object().cloned().unwrap_or_default()
    }

    /// zfp's parameters for blocks of `ty`, as zarrs sets them for both codecs: a fixed rate
    /// is turned into bits per block as for 3-D blocks (64 values) whatever the chunk's
    /// dimensionality (zarrs' `zfp_stream_set_rate(…, 3, 0)`), so that is what its streams
    /// hold.
    pub fn zfp_config(self, ty: ZfpScalarType) -> Result<ZfpConfig, ZfpConfigError> {
        match self {
            Mode::FixedRate(rate) => ZfpConfig::fixed_rate(
                rate,
                ty,
                ZfpDimensionality::D3,
                ZfpStreamAlignment::Unaligned,
            ),
            Mode::FixedPrecision(precision) => Ok(ZfpConfig::fixed_precision(precision)),
            Mode::FixedAccuracy(tolerance) => Ok(ZfpConfig::fixed_accuracy(tolerance)),
            Mode::Reversible => Ok(ZfpConfig::reversible()),
            Mode::Expert {
                minbits,
                maxbits,
                maxprec,
                minexp,
            } => ZfpConfig::expert(minbits, maxbits, maxprec, minexp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(s: &str) -> Map<String, Value> {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn zfpy_forms() {
        let zfpy = |s: &str| parse_zfpy(&obj(s));
        // zarr-python's v3 metadata leaves numcodecs' defaults out; numcodecs' v2 has them all.
        assert_eq!(zfpy(r#"{"mode": 4}"#), Ok(Mode::FixedAccuracy(-1.0)));
        assert_eq!(zfpy("{}"), Ok(Mode::FixedAccuracy(-1.0)));
        let v2 = r#"{"mode": 2, "rate": 12, "precision": -1, "tolerance": -1}"#;
        assert_eq!(zfpy(v2), Ok(Mode::FixedRate(12.0)));
        assert_eq!(
            zfpy(r#"{"mode": 3, "precision": 10}"#),
            Ok(Mode::FixedPrecision(10))
        );
        let lossy = r#"{"mode": 4, "tolerance": 0.01, "compression_kwargs": {}}"#;
        assert_eq!(zfpy(lossy), Ok(Mode::FixedAccuracy(0.01)));
        assert_eq!(
            zfpy(r#"{"mode": 5, "tolerance": null}"#),
            Ok(Mode::Reversible)
        );
        for bad in [
            r#"{"mode": 1}"#,
            r#"{"mode": "4"}"#,
            r#"{"mode": 2}"#,
            r#"{"mode": 2, "rate": -3}"#,
            r#"{"mode": 2, "rate": 8, "tolerance": 0.1}"#,
            r#"{"mode": 3}"#,
            r#"{"mode": 3, "precision": 2.5}"#,
            r#"{"mode": 5, "precision": 3}"#,
            r#"{"mode": 4, "tolerance": "small"}"#,
        ] {
            assert!(zfpy(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn zfp_forms() {
        let zfp = |s: &str| parse_zfp(&obj(s));
        assert_eq!(zfp(r#"{"mode": "reversible"}"#), Ok(Mode::Reversible));
        assert_eq!(
            zfp(r#"{"mode": "fixed_rate", "rate": 2.5}"#),
            Ok(Mode::FixedRate(2.5))
        );
        let expert =
            r#"{"mode": "expert", "minbits": 1, "maxbits": 12, "maxprec": 10, "minexp": -2}"#;
        let parsed = zfp(expert).unwrap();
        assert_eq!(
            parsed,
            Mode::Expert {
                minbits: 1,
                maxbits: 12,
                maxprec: 10,
                minexp: -2
            }
        );
        assert_eq!(parse_zfp(&parsed.zfp_json()), Ok(parsed));
        assert_eq!(parsed.zfpy_json(), None);
        for bad in [
            r#"{"mode": "unknown"}"#,
            r#"{"mode": "fixed_rate"}"#,
            r#"{"mode": "fixed_precision", "precision": -1}"#,
            r#"{"mode": "expert", "minbits": 1, "maxbits": 12, "maxprec": 10}"#,
            "{}",
        ] {
            assert!(zfp(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn metadata_round_trips() {
        for mode in [
            Mode::FixedRate(12.0),
            Mode::FixedPrecision(10),
            Mode::FixedAccuracy(-1.0),
            Mode::Reversible,
        ] {
            assert_eq!(parse_zfpy(&mode.zfpy_json().unwrap()), Ok(mode));
            assert_eq!(parse_zfp(&mode.zfp_json()), Ok(mode));
        }
    }

    #[test]
    fn fixed_rate_counts_3d_blocks() {
        // 12 bits per value of a 64-value block, whatever the chunk's dimensionality.
        let c = Mode::FixedRate(12.0)
            .zfp_config(ZfpScalarType::F64)
            .unwrap();
        assert_eq!((c.min_bits(), c.max_bits()), (768, 768));
        assert!(Mode::FixedRate(1e9).zfp_config(ZfpScalarType::F64).is_err());
        let expert = Mode::Expert {
            minbits: 20,
            maxbits: 10,
            maxprec: 64,
            minexp: 0,
        };
        assert!(expert.zfp_config(ZfpScalarType::F32).is_err());
    }
}

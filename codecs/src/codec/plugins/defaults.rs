//! numcodecs' defaults for the configurations zarr-python writes without them.
//!
//! zarr-python's v3 `numcodecs.*` codecs store only the fields a user set (`{"name":
//! "numcodecs.zlib", "configuration": {}}`), while zarrs requires every field (`level`,
//! `checksum`, `clevel`...), knows `numcodecs.zstd`, `numcodecs.gzip` and
//! `numcodecs.blosc` under their core names only, and has no v2 `bitround`. The configs here
//! are completed with numcodecs' defaults (`numcodecs.<Codec>().get_config()`, numcodecs 0.16)
//! and renamed to what zarrs understands; the codecs themselves stay zarrs' (through
//! `harden.rs` for the compressors it bounds).
//!
//! numcodecs' blosc inside zarr-python v3 sees a flat byte buffer, so its typesize is 1 and
//! its automatic shuffle (-1) is bit-shuffle; decoding reads the frame header either way.

use std::borrow::Cow;

use serde_json::{json, Map, Value};
use zarrs::array::codec::api::CodecTraitsV3;
use zarrs::array::codec::BitroundCodec;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;

use super::config_v3;

/// Other v3 names zarrs should accept for the codec whose core name is `core`.
#[must_use]
pub fn aliases(core: &str) -> &'static [&'static str] {
    match core {
        "zstd" => &["numcodecs.zstd"],
        "gzip" => &["numcodecs.gzip"],
        "blosc" => &["numcodecs.blosc"],
        _ => &[],
    }
}

fn with_defaults(config: &Map<String, Value>, defaults: &Value) -> Map<String, Value> {
    let mut out = config.clone();
    if let Value::Object(d) = defaults {
        for (k, v) in d {
            if out.get(k).is_none_or(Value::is_null) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn metadata(name: &str, config: Map<String, Value>) -> MetadataV3 {
    MetadataV3::new_with_configuration(name, Configuration::from(config))
}

/// `metadata` completed with numcodecs' defaults and named as zarrs expects.
#[must_use]
pub fn normalise_v3(m: &MetadataV3) -> Cow<'_, MetadataV3> {
    let config = config_v3(m);
    Cow::Owned(match m.name() {
        "numcodecs.zstd" => metadata(
            "zstd",
            with_defaults(&config, &json!({"level": 0, "checksum": false})),
        ),
        "numcodecs.gzip" => metadata("gzip", with_defaults(&config, &json!({"level": 1}))),
        "numcodecs.zlib" => metadata(
            "numcodecs.zlib",
            with_defaults(&config, &json!({"level": 1})),
        ),
        "numcodecs.blosc" => {
            let c = with_defaults(
                &config,
                &json!({"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}),
            );
            let shuffle = match c.get("shuffle").and_then(Value::as_i64) {
                Some(0) => "noshuffle",
                Some(1) => "shuffle",
                _ => "bitshuffle",
            };
            let mut v3 = c.clone();
            v3.insert("shuffle".into(), shuffle.into());
            v3.insert("typesize".into(), 1.into());
            metadata("blosc", v3)
        }
        _ => return Cow::Borrowed(m),
    })
}

/// Registers the configurations zarrs' own plugins would refuse. (`numcodecs.shuffle`
/// without `elementsize` is left refused: zarr-python always writes it, and reads its absence
/// as the array's item size, which a bytes codec here cannot know.)
pub(crate) fn install() {
    use zarrs::array::codec::api::{register_codec_v2, CodecRuntimePluginV2};
    // zarrs reads numcodecs.bitround in v3 only; a v2 filter has the same configuration.
    let _handle = register_codec_v2(CodecRuntimePluginV2::new(
        |id| id == "bitround",
        |m| BitroundCodec::create(&metadata("numcodecs.bitround", super::config_v2(m))),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_numcodecs_defaults() {
        let m: MetadataV3 =
            serde_json::from_str(r#"{"name":"numcodecs.blosc","configuration":{"cname":"zstd"}}"#)
                .unwrap();
        let n = normalise_v3(&m);
        assert_eq!(n.name(), "blosc");
        let c = config_v3(&n);
        assert_eq!(c["cname"], "zstd");
        assert_eq!(c["clevel"], 5);
        assert_eq!(c["shuffle"], "shuffle");
        assert_eq!(c["typesize"], 1);
        let z: MetadataV3 = serde_json::from_str(r#"{"name":"numcodecs.zlib"}"#).unwrap();
        assert_eq!(config_v3(&normalise_v3(&z))["level"], 1);
        let core: MetadataV3 =
            serde_json::from_str(r#"{"name":"zstd","configuration":{"level":3,"checksum":true}}"#)
                .unwrap();
        assert!(matches!(normalise_v3(&core), Cow::Borrowed(_)));
    }
}

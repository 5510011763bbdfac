//! numcodecs' `lzma` compressor (`.xz` or legacy `.lzma` streams), decoded within the size
//! zarrs expects.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/compression/lzma.html> (v3 name
//! `numcodecs.lzma`). numcodecs calls Python's `lzma.compress(buf, format, check, preset,
//! filters)`; this codec calls the same C liblzma (the `liblzma` crate, built from its bundled
//! source), so a chunk encodes to the same bytes. Supported: `format` 1 (`FORMAT_XZ`, the
//! default) and 2 (`FORMAT_ALONE`), `check` -1 (the format's default), 0, 1, 4 or 10, `preset`
//! null (6) or 0-9, optionally with `lzma.PRESET_EXTREME`; or a custom `filters` chain
//! (`lzma_filters`), also for raw streams (`format` 3). Decoding streams into a buffer that
//! stops one byte past the expected size, and the decoder's memory (its dictionary, which the
//! stream header or, for a raw stream, the configuration sets) is capped at [`MEMLIMIT`],
//! twice what preset 9 needs.

use std::io::Read;

use liblzma::stream::{Check, LzmaOptions, Stream, CONCATENATED, PRESET_EXTREME};
use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::bad_config;
use super::bytes_codec::{BytesCodec, Compressor};
use super::lzma_filters::FilterChain;

const NAME: &str = "numcodecs.lzma";

/// The most memory a decoder may use (preset 9 needs 65 MiB).
pub const MEMLIMIT: u64 = 128 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Xz,
    Alone,
    Raw,
}

#[derive(Debug)]
pub struct Lzma {
    format: Format,
    check: Check,
    preset: u32,
    filters: Option<FilterChain>,
    config: Map<String, Value>,
}

fn int_field(config: &Map<String, Value>, field: &str) -> Result<Option<i64>, PluginCreateError> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_config(NAME, format!("{field} {v} is not an integer"))),
    }
}

/// Builds the codec from numcodecs' configuration.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let filters = match config.get("filters") {
        None | Some(Value::Null) => None,
        Some(f) => Some(FilterChain::parse(f).map_err(|why| bad_config(NAME, why))?),
    };
    let format = match int_field(config, "format")?.unwrap_or(1) {
        1 => Format::Xz,
        2 => Format::Alone,
        3 if filters.is_some() => Format::Raw,
        3 => return Err(bad_config(NAME, "a raw stream (format 3) needs filters")),
        f => {
            return Err(bad_config(
                NAME,
                format!("format {f} is not 1 (xz), 2 (alone) or 3 (raw)"),
            ))
        }
    };
    if let (Format::Alone, Some(chain)) = (format, &filters) {
        chain.alone_options().map_err(|why| bad_config(NAME, why))?;
    }
    let check = match (format, int_field(config, "check")?.unwrap_or(-1)) {
        (Format::Xz, -1 | 4) => Check::Crc64,
        (_, -1 | 0) => Check::None,
        (Format::Xz, 1) => Check::Crc32,
        (Format::Xz, 10) => Check::Sha256,
        (_, c) => return Err(bad_config(NAME, format!("unsupported check {c}"))),
    };
    let preset = match int_field(config, "preset")? {
        Some(_) if filters.is_some() => {
            return Err(bad_config(NAME, "preset and filters exclude each other"))
        }
        None => 6,
        Some(p) => u32::try_from(p)
            .ok()
            .filter(|p| p & !PRESET_EXTREME <= 9)
            .ok_or_else(|| bad_config(NAME, format!("preset {p} is not 0-9")))?,
    };
    Ok(BytesCodec::codec(Lzma {
        format,
        check,
        preset,
        filters,
        config: config.clone(),
    }))
}

fn lzma_error(what: &str, e: impl std::fmt::Display) -> CodecError {
    CodecError::Other(format!("lzma {what}: {e}"))
}

impl Compressor for Lzma {
    fn name_v3(&self) -> &'static str {
        NAME
    }

    fn name_v2(&self) -> &'static str {
        "lzma"
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn max_encoded(&self, n: u64) -> u64 {
        // liblzma's lzma_stream_buffer_bound is about n + n/1000 + 100; .lzma streams of
        // incompressible data grow a little more.
        n + n / 64 + 4096
    }

    fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>, CodecError> {
        let stream = match (&self.filters, self.format) {
            (None, Format::Xz) => Stream::new_easy_encoder(self.preset, self.check),
            (None, _) => LzmaOptions::new_preset(self.preset)
                .and_then(|options| Stream::new_lzma_encoder(&options)),
            (Some(chain), Format::Xz) => {
                let filters = chain.build().map_err(|e| lzma_error("filters", e))?;
                Stream::new_stream_encoder(&filters, self.check)
            }
            (Some(chain), Format::Alone) => {
                let options = chain
                    .alone_options()
                    .map_err(|e| lzma_error("filters", e))?;
                Stream::new_lzma_encoder(&options)
            }
            (Some(chain), Format::Raw) => {
                let filters = chain.build().map_err(|e| lzma_error("filters", e))?;
                Stream::new_raw_encoder(&filters)
            }
        }
        .map_err(|e| lzma_error("encoder", e))?;
        let mut out = Vec::new();
        liblzma::read::XzEncoder::new_stream(decoded, stream).read_to_end(&mut out)?;
        Ok(out)
    }

    fn decode(&self, encoded: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
        let stream = match (&self.filters, self.format) {
            // Python's lzma.decompress reads concatenated .xz streams too.
            (_, Format::Xz) => Stream::new_stream_decoder(MEMLIMIT, CONCATENATED),
            (_, Format::Alone) => Stream::new_lzma_decoder(MEMLIMIT),
            // No header: the configuration's chain (its dictionary checked when parsed).
            (Some(chain), Format::Raw) => {
                let filters = chain.build().map_err(|e| lzma_error("filters", e))?;
                Stream::new_raw_decoder(&filters)
            }
            (None, Format::Raw) => return Err(lzma_error("decoder", "raw stream without filters")),
        }
        .map_err(|e| lzma_error("decoder", e))?;
        let mut out = Vec::new();
        liblzma::read::XzDecoder::new_stream(encoded, stream)
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| lzma_error("stream", e))?;
        if out.len() > limit {
            return Err(CodecError::Other(format!(
                "lzma stream decodes to more than the {limit} bytes this chunk holds"
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The codec numcodecs' configuration `json` builds, through the plugin's own parser.
    fn built(json: &str) -> Lzma {
        let config: Map<String, Value> = serde_json::from_str(json).unwrap();
        let filters = config
            .get("filters")
            .map(|f| FilterChain::parse(f).unwrap());
        let format = match config.get("format").and_then(Value::as_i64) {
            Some(2) => Format::Alone,
            Some(3) => Format::Raw,
            _ => Format::Xz,
        };
        assert!(create(&config).is_ok(), "{json}");
        Lzma {
            format,
            check: if format == Format::Xz {
                Check::Crc64
            } else {
                Check::None
            },
            preset: 6,
            filters,
            config,
        }
    }

    #[test]
    fn custom_filter_chains_encode_as_numcodecs_does() {
        // numcodecs.LZMA(format=..., filters=[...]).encode(b"zarrpipe" * 4).hex()
        for (json, fixture) in [
            (
                r#"{"format": 3, "filters": [{"id": 3, "dist": 4}, {"id": 33, "preset": 1}]}"#,
                "e0001f00135d003d184aabfb76c5613f41b8759c2fe1af60e00000",
            ),
            (
                r#"{"format": 1, "filters": [{"id": 4, "start_offset": 16}, {"id": 33,
                    "preset": 2, "dict_size": 65536, "lc": 2, "mf": 4, "mode": 1}]}"#,
                "fd377a585a000004e6d6b4460301040410000000210108006623ec34e0001f000f5c003d184a\
                 abf582e131b23a45628c000000001dc2616d38df03f100012f208eadf4091fb6f37d01000000\
                 0004595a",
            ),
            (
                r#"{"format": 2, "filters": [{"id": 4611686018427387905, "preset": 3, "pb": 1}]}"#,
                "3000004000ffffffffffffffff003d184b2196c1f2392ee25be66c7fffffbb780000",
            ),
        ] {
            let codec = built(json);
            let enc = hex(fixture);
            assert_eq!(codec.encode(&b"zarrpipe".repeat(4)).unwrap(), enc, "{json}");
            assert_eq!(
                codec.decode(&enc, 32).unwrap(),
                b"zarrpipe".repeat(4),
                "{json}"
            );
            assert!(
                codec.decode(&enc, 31).is_err(),
                "{json}: past the chunk's size"
            );
        }
    }

    #[test]
    fn reads_numcodecs_and_stops_bombs() {
        // numcodecs.LZMA().encode(b"zarrpipe" * 4).hex()
        let fixture = "fd377a585a000004e6d6b4460200210116000000742fe5a3e0001f000e5d003d184abdfc\
                       9656a3e9d0af6640000000001dc2616d38df03f100012a20cb5983741fb6f37d0100\
                       00000004595a";
        let enc = hex(fixture);
        let xz = built("{}");
        assert_eq!(xz.encode(&b"zarrpipe".repeat(4)).unwrap(), enc);
        assert_eq!(xz.decode(&enc, 32).unwrap(), b"zarrpipe".repeat(4));
        assert!(xz.decode(&enc, 31).is_err());
        assert!(xz.decode(&enc[..enc.len() - 3], 32).is_err());
        assert!(xz.decode(b"not lzma at all", 32).is_err());
        // A 16 MiB bomb read for a 1 KiB chunk stops at 1 KiB + 1.
        let bomb = xz.encode(&vec![0u8; 16 << 20]).unwrap();
        assert!(bomb.len() < 8 << 10);
        assert!(xz.decode(&bomb, 1 << 10).is_err());
        let alone = built(r#"{"format": 2}"#);
        let enc = alone.encode(b"zarrpipe").unwrap();
        assert_eq!(alone.decode(&enc, 8).unwrap(), b"zarrpipe");
        assert!(xz.decode(&enc, 8).is_err());
        // A .lzma header asking for a 4 GiB dictionary is refused (MEMLIMIT), not allocated.
        let mut hostile = vec![0x5d, 0xff, 0xff, 0xff, 0xff];
        hostile.extend_from_slice(&[0xff; 8]);
        hostile.extend_from_slice(&[0; 16]);
        assert!(alone.decode(&hostile, 8).is_err());
    }

    #[test]
    fn refuses_what_it_cannot_write() {
        for json in [
            r#"{"filters": [{"id": 3}]}"#,
            r#"{"filters": [{"id": 33}, {"id": 33}]}"#,
            r#"{"filters": [{"id": 33, "dict_size": 2147483648}]}"#,
            r#"{"filters": [{"id": 33, "preset": 9, "bogus": 1}]}"#,
            r#"{"filters": [{"id": 33, "mode": 7}]}"#,
            r#"{"filters": [{"id": 3, "dist": 300}, {"id": 33}]}"#,
            r#"{"filters": [{"id": 99}, {"id": 33}]}"#,
            r#"{"preset": 1, "filters": [{"id": 33}]}"#,
            r#"{"format": 2, "filters": [{"id": 33}]}"#,
            r#"{"format": 3, "check": 4, "filters": [{"id": 33}]}"#,
            r#"{"format": 3}"#,
            r#"{"preset": 10}"#,
            r#"{"format": 2, "check": 4}"#,
        ] {
            let config: Map<String, Value> = serde_json::from_str(json).unwrap();
            assert!(create(&config).is_err(), "{json}");
        }
    }
}

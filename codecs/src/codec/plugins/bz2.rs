//! numcodecs' `bz2` compressor, decoded within the size zarrs expects.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/compression/bz2.html> (v3 name
//! `numcodecs.bz2`, <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/numcodecs.bz2>).
//! zarrs' bz2 decoder inflates with an unbounded `read_to_end` (a bomb of a few KiB grows
//! to GiB) and its configuration requires `level`, which zarr-python leaves out when it is
//! numcodecs' default (1). This codec uses the same `bzip2` crate (pure Rust backend) and
//! stops one byte past the expected size.

use std::io::Read;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::bad_config;
use super::bytes_codec::{BytesCodec, Compressor};

#[derive(Debug)]
pub struct Bz2 {
    level: u32,
}

/// Builds the codec; `level` (1-9) defaults to 1, as in numcodecs.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let level = match config.get("level") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .filter(|l| (1..=9).contains(l))
            .ok_or_else(|| bad_config("numcodecs.bz2", format!("level {v} is not 1-9")))?
            as u32,
    };
    Ok(BytesCodec::codec(Bz2 { level }))
}

impl Compressor for Bz2 {
    fn name_v3(&self) -> &'static str {
        "numcodecs.bz2"
    }

    fn name_v2(&self) -> &'static str {
        "bz2"
    }

    fn configuration(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("level".into(), self.level.into());
        m
    }

    fn max_encoded(&self, n: u64) -> u64 {
        n + n / 100 + 600
    }

    fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        bzip2::read::BzEncoder::new(decoded, bzip2::Compression::new(self.level))
            .read_to_end(&mut out)?;
        Ok(out)
    }

    fn decode(&self, encoded: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        bzip2::read::MultiBzDecoder::new(encoded)
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| CodecError::Other(format!("bz2 stream: {e}")))?;
        if out.len() > limit {
            return Err(CodecError::Other(format!(
                "bz2 stream decodes to more than the {limit} bytes this chunk holds"
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numcodecs_and_stops_bombs() {
        // numcodecs.BZ2(level=1).encode(b"zarrpipe" * 4).hex()
        let fixture = "425a6831314159265359dcb7987600000f818022205010200030c002aa69b25208510a70bb9229c28486e5bcc3b0";
        let enc: Vec<u8> = (0..fixture.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&fixture[i..i + 2], 16).unwrap())
            .collect();
        let bz2 = Bz2 { level: 1 };
        assert_eq!(bz2.decode(&enc, 32).unwrap(), b"zarrpipe".repeat(4));
        assert!(bz2.decode(&enc, 31).is_err());
        assert!(bz2.decode(&enc[..enc.len() - 3], 32).is_err());
        assert!(bz2.decode(b"not bz2 at all", 32).is_err());
        // A 16 MiB bomb read for a 1 KiB chunk stops at 1 KiB + 1.
        let bomb = bz2.encode(&vec![0u8; 16 << 20]).unwrap();
        assert!(bomb.len() < 1 << 10);
        assert!(bz2.decode(&bomb, 1 << 10).is_err());
    }
}

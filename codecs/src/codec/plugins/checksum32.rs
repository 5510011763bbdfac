//! numcodecs' 32-bit checksums that zarrs lacks (`crc32`, `crc32c` as a numcodecs codec, and
//! `jenkins_lookup3`), written and verified on every read.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/checksum32.html> (v3 names
//! `numcodecs.crc32`, `numcodecs.crc32c`, `numcodecs.jenkins_lookup3`). A chunk is its bytes
//! with 4 more: the checksum of those bytes, little-endian, before them (`location: "start"`,
//! numcodecs' default for crc32) or after them (`"end"`, the default for crc32c, and always
//! for jenkins_lookup3). numcodecs' `crc32c` is the Castagnoli CRC of zarr's core `crc32c`
//! codec, but a distinct codec in the metadata; jenkins_lookup3 hashes an optional `prefix`
//! before the bytes, from seed `initval`. No partial decoding is declared (see
//! `bytes_codec.rs`), so every read decodes, and checks, the whole chunk, and its size.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::bad_config;
use super::bytes_codec::{BytesCodec, Compressor};
use super::jenkins_lookup3::lookup3;

/// Where the checksum sits in a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Location {
    Start,
    End,
}

/// The checksum function.
#[derive(Debug)]
enum Sum {
    Crc32,
    Crc32c,
    Lookup3 { initval: u32, prefix: Vec<u8> },
}

#[derive(Debug)]
pub struct Checksum32 {
    sum: Sum,
    location: Location,
    config: Map<String, Value>,
}

fn location(
    name: &str,
    config: &Map<String, Value>,
    default: Location,
) -> Result<Location, PluginCreateError> {
    match config.get("location") {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) if s == "start" => Ok(Location::Start),
        Some(Value::String(s)) if s == "end" => Ok(Location::End),
        Some(v) => Err(bad_config(
            name,
            format!("location {v} is not \"start\" or \"end\""),
        )),
    }
}

/// numcodecs' `CRC32` (zlib's CRC-32), checksum at the start by default.
pub fn create_crc32(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let location = location("numcodecs.crc32", config, Location::Start)?;
    Ok(BytesCodec::codec(Checksum32 {
        sum: Sum::Crc32,
        location,
        config: config.clone(),
    }))
}

/// numcodecs' `CRC32C` (Castagnoli), checksum at the end by default.
pub fn create_crc32c(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let location = location("numcodecs.crc32c", config, Location::End)?;
    Ok(BytesCodec::codec(Checksum32 {
        sum: Sum::Crc32c,
        location,
        config: config.clone(),
    }))
}

/// numcodecs' `JenkinsLookup3`: `initval` (a u32, default 0) and `prefix` (null, or a list of
/// byte values: numcodecs keeps it as a NumPy array, which its JSON cannot hold otherwise).
pub fn create_jenkins_lookup3(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    const NAME: &str = "numcodecs.jenkins_lookup3";
    let initval = match config.get("initval") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| bad_config(NAME, format!("initval {v} is not a 32-bit unsigned")))?,
    };
    let prefix = match config.get("prefix") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| bad_config(NAME, "prefix must be a list of byte values"))?,
        Some(v) => return Err(bad_config(NAME, format!("unsupported prefix {v}"))),
    };
    Ok(BytesCodec::codec(Checksum32 {
        sum: Sum::Lookup3 { initval, prefix },
        location: Location::End,
        config: config.clone(),
    }))
}

impl Checksum32 {
    fn checksum(&self, data: &[u8]) -> u32 {
        match &self.sum {
            Sum::Crc32 => crc32fast::hash(data),
            Sum::Crc32c => crc32c::crc32c(data),
            Sum::Lookup3 { initval, prefix } if prefix.is_empty() => lookup3(data, *initval),
            Sum::Lookup3 { initval, prefix } => {
                lookup3(&[prefix.as_slice(), data].concat(), *initval)
            }
        }
    }
}

impl Compressor for Checksum32 {
    fn name_v3(&self) -> &'static str {
        match self.sum {
            Sum::Crc32 => "numcodecs.crc32",
            Sum::Crc32c => "numcodecs.crc32c",
            Sum::Lookup3 { .. } => "numcodecs.jenkins_lookup3",
        }
    }

    fn name_v2(&self) -> &'static str {
        match self.sum {
            Sum::Crc32 => "crc32",
            Sum::Crc32c => "crc32c",
            Sum::Lookup3 { .. } => "jenkins_lookup3",
        }
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn max_encoded(&self, n: u64) -> u64 {
        n + 4
    }

    fn fixed_size(&self) -> bool {
        true
    }

    fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>, CodecError> {
        let sum = self.checksum(decoded).to_le_bytes();
        let mut out = Vec::with_capacity(decoded.len() + 4);
        if self.location == Location::Start {
            out.extend_from_slice(&sum);
        }
        out.extend_from_slice(decoded);
        if self.location == Location::End {
            out.extend_from_slice(&sum);
        }
        Ok(out)
    }

    fn decode(&self, encoded: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
        if encoded.len() < 4 {
            return Err(CodecError::Other(format!(
                "{}: {} bytes is shorter than a 4-byte checksum",
                self.name_v3(),
                encoded.len()
            )));
        }
        let (stored, payload) = match self.location {
            Location::Start => (&encoded[..4], &encoded[4..]),
            Location::End => (&encoded[encoded.len() - 4..], &encoded[..encoded.len() - 4]),
        };
        if payload.len() > limit {
            return Err(CodecError::Other(format!(
                "{}: chunk holds {} bytes, more than the {limit} expected",
                self.name_v3(),
                payload.len()
            )));
        }
        if stored != self.checksum(payload).to_le_bytes() {
            return Err(CodecError::InvalidChecksum);
        }
        Ok(payload.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(sum: Sum, location: Location) -> Checksum32 {
        Checksum32 {
            sum,
            location,
            config: Map::new(),
        }
    }

    #[test]
    fn matches_numcodecs() {
        // numcodecs.CRC32().encode(b"abc").tobytes().hex() == "c2412435616263"
        let crc32 = codec(Sum::Crc32, Location::Start);
        let enc = crc32.encode(b"abc").unwrap();
        assert_eq!(enc, b"\xc2\x41\x24\x35abc");
        assert_eq!(crc32.decode(&enc, 3).unwrap(), b"abc");
        // numcodecs.CRC32C().encode(b"abc").tobytes().hex() == "616263b73f4b36"
        let crc32c = codec(Sum::Crc32c, Location::End);
        let enc = crc32c.encode(b"abc").unwrap();
        assert_eq!(enc, b"abc\xb7\x3f\x4b\x36");
        assert_eq!(crc32c.decode(&enc, 3).unwrap(), b"abc");
        // jenkins_lookup3(b"abcdefghijklm", 7) == 4154586032
        let j = codec(
            Sum::Lookup3 {
                initval: 7,
                prefix: Vec::new(),
            },
            Location::End,
        );
        let enc = j.encode(b"abcdefghijklm").unwrap();
        assert_eq!(enc[13..], 4_154_586_032u32.to_le_bytes());
    }

    #[test]
    fn refuses_bad_chunks() {
        let c = codec(Sum::Crc32, Location::End);
        let enc = c.encode(b"zarrpipe").unwrap();
        let mut flipped = enc.clone();
        flipped[2] ^= 0x10;
        assert!(matches!(
            c.decode(&flipped, 8),
            Err(CodecError::InvalidChecksum)
        ));
        assert!(c.decode(&enc, 7).is_err());
        assert!(c.decode(&enc[..3], 8).is_err());
        assert!(c.decode(b"", 8).is_err());
    }

    #[test]
    fn prefix_is_hashed_first() {
        let with = codec(
            Sum::Lookup3 {
                initval: 0,
                prefix: b"abc".to_vec(),
            },
            Location::End,
        );
        let enc = with.encode(b"defghijklm").unwrap();
        assert_eq!(enc[10..], 2_457_938_169u32.to_le_bytes());
        assert_eq!(with.decode(&enc, 10).unwrap(), b"defghijklm");
    }
}

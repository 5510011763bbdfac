//! numcodecs' `lz4` compressor: a 4-byte little-endian uncompressed size, then one LZ4 block.
//!
//! Spec: <https://numcodecs.readthedocs.io/en/stable/compression/lz4.html> (v3 name
//! `numcodecs.lz4`, <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/numcodecs.lz4>).
//! Blocks are (de)compressed with `lz4_flex` (pure Rust, bounds-checked decoding into a slice
//! we size, already in our dependency tree through zarrs' blosc). `acceleration` is kept in
//! the metadata but lz4_flex has one speed: any valid LZ4 block is a valid numcodecs block.
//! The size prefix is checked against the size zarrs expects before anything is allocated.

use serde_json::{Map, Value};
use zarrs::array::codec::api::{Codec, CodecError};
use zarrs::plugin::PluginCreateError;

use super::bad_config;
use super::bytes_codec::{BytesCodec, Compressor};

#[derive(Debug)]
pub struct Lz4 {
    config: Map<String, Value>,
}

/// Builds the codec; `acceleration` defaults to 1, as in numcodecs.
pub fn create(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    if let Some(a) = config.get("acceleration") {
        if !a.is_i64() {
            return Err(bad_config(
                "numcodecs.lz4",
                "acceleration must be an integer",
            ));
        }
    }
    Ok(BytesCodec::codec(Lz4 {
        config: config.clone(),
    }))
}

fn corrupt(why: impl std::fmt::Display) -> CodecError {
    CodecError::Other(format!("lz4: {why}"))
}

impl Compressor for Lz4 {
    fn name_v3(&self) -> &'static str {
        "numcodecs.lz4"
    }

    fn name_v2(&self) -> &'static str {
        "lz4"
    }

    fn configuration(&self) -> Map<String, Value> {
        self.config.clone()
    }

    fn max_encoded(&self, n: u64) -> u64 {
        4 + n + n / 255 + 16
    }

    fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>, CodecError> {
        let n = u32::try_from(decoded.len())
            .map_err(|_| corrupt("numcodecs' lz4 holds at most 4 GiB per chunk"))?;
        let mut out =
            Vec::with_capacity(4 + lz4_flex::block::get_maximum_output_size(decoded.len()));
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&lz4_flex::block::compress(decoded));
        Ok(out)
    }

    fn decode(&self, encoded: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
        let Some((prefix, block)) = encoded.split_first_chunk::<4>() else {
            return Err(corrupt(format!(
                "{} bytes is shorter than the 4-byte size prefix",
                encoded.len()
            )));
        };
        let n = u32::from_le_bytes(*prefix) as usize;
        // An LZ4 block expands at most ~255 times: a larger claim is a lie, whatever the limit.
        if n > limit || n > block.len().saturating_mul(255).saturating_add(16) {
            return Err(corrupt(format!(
                "header claims {n} bytes, more than this chunk can hold ({limit}) or this block \
                 can produce"
            )));
        }
        let mut out = vec![0u8; n];
        let written = lz4_flex::block::decompress_into(block, &mut out).map_err(corrupt)?;
        if written != n {
            return Err(corrupt(format!(
                "block decodes to {written} bytes, header says {n}"
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numcodecs_and_round_trips() {
        // numcodecs.LZ4().encode(np.arange(8, dtype="<u2")).hex()
        let fixture = "10000000f00100000100020003000400050006000700";
        let enc: Vec<u8> = (0..fixture.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&fixture[i..i + 2], 16).unwrap())
            .collect();
        let want: Vec<u8> = (0u16..8).flat_map(u16::to_le_bytes).collect();
        let lz4 = Lz4 { config: Map::new() };
        assert_eq!(lz4.decode(&enc, 16).unwrap(), want);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let round = lz4.decode(&lz4.encode(&data).unwrap(), data.len()).unwrap();
        assert_eq!(round, data);
    }

    #[test]
    fn hostile_inputs_are_errors() {
        let lz4 = Lz4 { config: Map::new() };
        // A 1 TiB claim is refused without allocating it; so is a short or corrupt block.
        assert!(lz4
            .decode(&[0xff, 0xff, 0xff, 0xff, 0x00], 1 << 20)
            .is_err());
        assert!(lz4.decode(&[1, 0], 16).is_err());
        assert!(lz4.decode(&[16, 0, 0, 0, 0xf0, 0x01], 16).is_err());
        assert!(lz4.decode(&[16, 0, 0, 0, 0xff, 0xff, 0xff], 16).is_err());
        // More than the chunk holds.
        let enc = lz4.encode(&[7u8; 64]).unwrap();
        assert!(lz4.decode(&enc, 63).is_err());
    }
}

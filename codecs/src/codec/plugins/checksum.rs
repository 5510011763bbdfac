//! numcodecs' `adler32` and `fletcher32` checksums, verified on every read.
//!
//! Specs: <https://numcodecs.readthedocs.io/en/stable/checksum32.html> (v3 names
//! `numcodecs.adler32`, `numcodecs.fletcher32`). zarrs checks them when it decodes a whole
//! chunk, but its partial decoders (used for any read of part of a chunk) strip the checksum
//! unchecked, with an unchecked length subtraction (docs/architecture.md, "Hostile input"; as for
//! crc32c). These wrappers keep zarrs' codecs and declare no partial decoding, so every read
//! decodes, and checks, the whole chunk, and its size.

use std::sync::Arc;

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    ArrayBytesRaw, BytesRepresentation, BytesToBytesCodecTraits, Codec, CodecError, CodecOptions,
    CodecTraitsV3, RecommendedConcurrency,
};
use zarrs::array::codec::{Adler32Codec, Fletcher32Codec};
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, PluginCreateError, ZarrVersion};

use crate::codec::wrapper::whole_input_wrapper;

/// zarrs' codec, decoded whole.
#[derive(Debug)]
struct Whole(Arc<dyn BytesToBytesCodecTraits>);

fn wrap(codec: Codec) -> Codec {
    match codec {
        Codec::BytesToBytes(inner) => Codec::BytesToBytes(Arc::new(Whole(inner))),
        other => other,
    }
}

pub fn create_adler32(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let m = MetadataV3::new_with_configuration(
        "numcodecs.adler32",
        Configuration::from(config.clone()),
    );
    Adler32Codec::create(&m).map(wrap)
}

pub fn create_fletcher32(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let m = MetadataV3::new_with_configuration(
        "numcodecs.fletcher32",
        Configuration::from(config.clone()),
    );
    Fletcher32Codec::create(&m).map(wrap)
}

whole_input_wrapper!(Whole, 0);

impl BytesToBytesCodecTraits for Whole {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        decoded: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.0.recommended_concurrency(decoded)
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        self.0.encoded_representation(decoded)
    }

    fn encode<'a>(
        &self,
        decoded: ArrayBytesRaw<'a>,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.0.encode(decoded, options)
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        if encoded.len() < 4 {
            return Err(CodecError::Other(format!(
                "{} bytes is shorter than a 4-byte checksum",
                encoded.len()
            )));
        }
        let out = self.0.decode(encoded, decoded, options)?;
        // A valid frame of the wrong size would otherwise pass a read of part of the chunk.
        super::check_decoded_size(
            &self.name(ZarrVersion::V3).unwrap_or_default(),
            out.len(),
            decoded,
        )?;
        Ok(out)
    }
}

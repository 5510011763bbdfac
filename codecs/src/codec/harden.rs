//! Bounded replacements for zarrs' zstd, gzip, zlib, blosc and crc32c decoders, registered
//! in zarrs' codec registry so that the arrays zarrs decodes for us (codec chains zarrpipe
//! does not decode itself, see `array::Decoder::Zarrs`) get the same guarantees as ours.
//!
//! zarrs trusts hostile input there (docs/architecture.md, "Hostile input"): zstd allocates what
//! the frame header claims (a 1 TiB claim aborts the process), gzip inflates without bound, blosc
//! trusts its header, and crc32c is not checked on partial reads. Each wrapper keeps zarrs' codec
//! for encoding and metadata and swaps in zarrpipe's decoder, bounded by the size zarrs expects.

use std::borrow::Cow;
use std::sync::{Arc, Once};

use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytesRaw, BytesRepresentation,
    BytesToBytesCodecTraits, Codec, CodecError, CodecOptions, CodecRuntimePluginV2,
    CodecRuntimePluginV3, CodecTraitsV2, CodecTraitsV3, RecommendedConcurrency,
};
use zarrs::array::codec::{BloscCodec, Crc32cCodec, GzipCodec, ZlibCodec, ZstdCodec};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::plugin::{ExtensionAliasesV2, ExtensionAliasesV3};

use crate::codec::chain::BytesCodec;
use crate::codec::decode::bytes_codecs::{decode_full_stages, DecodeError};
use crate::codec::wrapper::whole_input_wrapper;

/// Decoded sizes zarrs cannot state (a compressor after another compressor) are capped here.
const UNBOUNDED_CAP: u64 = 4 << 30;

/// Registers the wrappers, once per process, before any array is opened.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Codecs zarrs lacks or does not bound, and numcodecs' defaults (see plugins/).
        crate::codec::plugins::install();
        register::<ZstdCodec>(BytesCodec::Zstd);
        register::<GzipCodec>(BytesCodec::Gzip);
        register::<ZlibCodec>(BytesCodec::Zlib);
        register::<BloscCodec>(BytesCodec::Blosc);
        register::<Crc32cCodec>(BytesCodec::Crc32c);
        // v2 arrays build their codecs from the v2 registry (a v2 blosc compressor is
        // hard-wired in zarrs and cannot be replaced; zarrpipe decodes those itself).
        register_v2::<ZstdCodec>(BytesCodec::Zstd);
        register_v2::<GzipCodec>(BytesCodec::Gzip);
        register_v2::<ZlibCodec>(BytesCodec::Zlib);
    });
}

fn register<C: CodecTraitsV3 + ExtensionAliasesV3 + 'static>(kind: BytesCodec) {
    // Runtime plugins are consulted before compile-time ones (zarrs_codec registers them so), so
    // this wins, also inside sharding codecs. It builds zarrs' own codec directly, not via the
    // registry. zarr-python's `numcodecs.*` spellings of these codecs, completed with numcodecs'
    // defaults (plugins/defaults.rs), are built by the same wrapper.
    let _handle = register_codec_v3(CodecRuntimePluginV3::new(
        |name| {
            C::matches_name_v3(name)
                || crate::codec::plugins::defaults::aliases(C::aliases_v3().default_name.as_ref())
                    .contains(&name)
        },
        move |metadata: &MetadataV3| match C::create(
            &crate::codec::plugins::defaults::normalise_v3(metadata),
        )? {
            Codec::BytesToBytes(inner) => {
                Ok(Codec::BytesToBytes(Arc::new(Bounded { inner, kind })))
            }
            other => Ok(other),
        },
    ));
}

fn register_v2<C: CodecTraitsV2 + ExtensionAliasesV2 + 'static>(kind: BytesCodec) {
    let _handle = register_codec_v2(CodecRuntimePluginV2::new(
        |name| C::matches_name_v2(name),
        move |metadata: &MetadataV2| match C::create(metadata)? {
            Codec::BytesToBytes(inner) => {
                Ok(Codec::BytesToBytes(Arc::new(Bounded { inner, kind })))
            }
            other => Ok(other),
        },
    ));
}

/// zarrs' codec for everything but decoding, which zarrpipe's bounded decoders do.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn BytesToBytesCodecTraits>,
    kind: BytesCodec,
}

whole_input_wrapper!(Bounded, inner);

impl BytesToBytesCodecTraits for Bounded {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        decoded: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded)
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        self.inner.encoded_representation(decoded)
    }

    fn encode<'a>(
        &self,
        decoded: ArrayBytesRaw<'a>,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded, options)
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let limit = match decoded {
            BytesRepresentation::FixedSize(n) | BytesRepresentation::BoundedSize(n) => *n,
            BytesRepresentation::UnboundedSize => UNBOUNDED_CAP,
        };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let out = decode_full_stages(&[self.kind], &encoded, limit).map_err(codec_error)?;
        if let BytesRepresentation::FixedSize(n) = decoded {
            if out.len() as u64 != *n {
                return Err(CodecError::Other(format!(
                    "{:?} stream decodes to {} bytes, expected {n}",
                    self.kind,
                    out.len()
                )));
            }
        }
        Ok(Cow::Owned(out.into_owned()))
    }
}

fn codec_error(e: DecodeError) -> CodecError {
    match e {
        DecodeError::Checksum { .. } | DecodeError::ChecksumFailed(_) => {
            CodecError::InvalidChecksum
        }
        DecodeError::Corrupt(why) => CodecError::Other(why),
        DecodeError::OutOfMemory(n) => CodecError::Other(format!("cannot allocate {n} bytes")),
    }
}

//! Compile-time v2 registrations of the numcodecs ids that zarrs' v2-to-v3 metadata
//! conversion must know.
//!
//! zarrs converts a v2 array's metadata to v3 (`Array::metadata_opt` with
//! `MetadataConvertVersion::V3`, which zarrpipe uses to plan its decoder) through the codec
//! plugins linked in at compile time only, and panics ("conversion succeeded on array
//! creation") when one of the array's filters or compressors is not among them, although the
//! runtime plugins built the array. These entries let the conversion find `delta`, `lz4`,
//! `packbits`, `bitround`, `crc32`, `crc32c`, `jenkins_lookup3`, `astype`, `quantize`,
//! `lzma`, `zfpy` (zarrs' own is behind its zfp feature, which zarrpipe leaves off: zfp-rs
//! codes it) and numcodecs' spelling of `fixedscaleoffset` (`"astype": "|u1"`, which zarrs'
//! own plugin refuses). Codecs are still created by the runtime plugins of this module, which
//! zarrs consults first; these only name them.

use zarrs::array::codec::api::{Codec, CodecPluginV2, CodecTraitsV2};
use zarrs::metadata::v2::MetadataV2;
use zarrs::plugin::PluginCreateError;

use super::config_v2;

macro_rules! v2_plugin {
    ($type:ident, $id:literal, $create:path) => {
        /// Names a numcodecs id for zarrs' v2-to-v3 conversion.
        pub struct $type;
        zarrs::plugin::impl_extension_aliases!($type, v2: $id);
        impl CodecTraitsV2 for $type {
            fn create(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
                $create(&config_v2(metadata))
            }
        }
        inventory::submit! { CodecPluginV2::new::<$type>() }
    };
}

v2_plugin!(DeltaV2, "delta", super::delta::create);
v2_plugin!(Lz4V2, "lz4", super::lz4::create);
v2_plugin!(PackBitsV2, "packbits", super::packbits::create);
v2_plugin!(
    FixedScaleOffsetV2,
    "fixedscaleoffset",
    super::fixedscaleoffset::create
);
v2_plugin!(BitRoundV2, "bitround", bitround);
v2_plugin!(Crc32V2, "crc32", super::checksum32::create_crc32);
// zarrs registers its crc32c for v3 only.
v2_plugin!(Crc32cV2, "crc32c", super::checksum32::create_crc32c);
v2_plugin!(
    JenkinsLookup3V2,
    "jenkins_lookup3",
    super::checksum32::create_jenkins_lookup3
);
v2_plugin!(AsTypeV2, "astype", super::astype::create);
v2_plugin!(QuantizeV2, "quantize", super::quantize::create);
v2_plugin!(LzmaV2, "lzma", super::lzma::create);
v2_plugin!(ZfpyV2, "zfpy", super::zfp::create_zfpy);

fn bitround(
    config: &serde_json::Map<String, serde_json::Value>,
) -> Result<Codec, PluginCreateError> {
    use zarrs::array::codec::api::CodecTraitsV3;
    let metadata = zarrs::metadata::v3::MetadataV3::new_with_configuration(
        "numcodecs.bitround",
        zarrs::metadata::Configuration::from(config.clone()),
    );
    zarrs::array::codec::BitroundCodec::create(&metadata)
}

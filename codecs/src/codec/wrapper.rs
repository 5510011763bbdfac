//! The zarrs traits every wrapping codec implements alike: a codec that keeps zarrs' own codec
//! (`$inner`, for its name, configuration and encoding) and decodes whole inputs only, so its
//! checks run on every read (zarrs' partial decoders skip checksums and bounds).

/// Implements `ExtensionName` and `CodecTraits` for `$t`, delegating to the field `$inner`.
macro_rules! whole_input_wrapper {
    ($t:ty, $inner:tt) => {
        impl zarrs::plugin::ExtensionName for $t {
            fn name(
                &self,
                version: zarrs::plugin::ZarrVersion,
            ) -> Option<std::borrow::Cow<'static, str>> {
                self.$inner.name(version)
            }
        }

        impl zarrs::array::codec::api::CodecTraits for $t {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }

            fn configuration(
                &self,
                version: zarrs::plugin::ZarrVersion,
                options: &zarrs::array::codec::api::CodecMetadataOptions,
            ) -> Option<zarrs::metadata::Configuration> {
                self.$inner.configuration(version, options)
            }

            fn partial_decoder_capability(
                &self,
            ) -> zarrs::array::codec::api::PartialDecoderCapability {
                zarrs::array::codec::api::PartialDecoderCapability {
                    partial_read: false,
                    partial_decode: false,
                }
            }

            fn partial_encoder_capability(
                &self,
            ) -> zarrs::array::codec::api::PartialEncoderCapability {
                self.$inner.partial_encoder_capability()
            }
        }
    };
}

pub(crate) use whole_input_wrapper;

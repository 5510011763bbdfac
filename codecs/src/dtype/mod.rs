//! The element types zarrpipe hands out: fixed-size, native-endian numbers and bool, and
//! opaque fixed-size elements (`Raw`) for every other fixed-size type (fixed-length strings
//! and bytes, structured records), whose NumPy meaning the array's [`crate::dtype::numpy_type`]
//! carries.
//!
//! Decoded data is always native-endian (zarrs' `bytes` codec swaps), so an element type
//! here is only a kind and a width; byte order is not part of it. A `Raw` element says
//! which unit the `bytes` codec reverses (4 for UTF-32 code points, 1 for bytes and records).
//!
//! Uses only the engine's errors.

pub mod numpy_type;

use zarrs::array::data_type::{
    BFloat16DataType, BoolDataType, Complex128DataType, Complex64DataType,
    FixedLengthUTF32DataType, Float16DataType, Float32DataType, Float64DataType, Int16DataType,
    Int32DataType, Int64DataType, Int8DataType, RawBitsDataType, UInt16DataType, UInt32DataType,
    UInt64DataType, UInt8DataType,
};
use zarrs::array::DataType;

use crate::error::{Error, Result};

/// A fixed-size element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    /// `size` opaque bytes, byte-swapped in units of `swap` bytes (1: never).
    Raw {
        size: u32,
        swap: u8,
    },
}

/// How DLPack and NumPy classify an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementKind {
    Bool,
    Int,
    UInt,
    Float,
    BFloat,
    Complex,
    /// Opaque bytes: no DLPack code, no arithmetic.
    Raw,
}

impl ElementType {
    pub const ALL: [ElementType; 15] = [
        Self::Bool,
        Self::Int8,
        Self::Int16,
        Self::Int32,
        Self::Int64,
        Self::UInt8,
        Self::UInt16,
        Self::UInt32,
        Self::UInt64,
        Self::Float16,
        Self::BFloat16,
        Self::Float32,
        Self::Float64,
        Self::Complex64,
        Self::Complex128,
    ];

    /// Bytes per element.
    #[must_use]
    pub const fn size(self) -> usize {
        match self {
            Self::Bool | Self::Int8 | Self::UInt8 => 1,
            Self::Int16 | Self::UInt16 | Self::Float16 | Self::BFloat16 => 2,
            Self::Int32 | Self::UInt32 | Self::Float32 => 4,
            Self::Int64 | Self::UInt64 | Self::Float64 | Self::Complex64 => 8,
            Self::Complex128 => 16,
            Self::Raw { size, .. } => size as usize,
        }
    }

    #[must_use]
    pub const fn kind(self) -> ElementKind {
        match self {
            Self::Bool => ElementKind::Bool,
            Self::Int8 | Self::Int16 | Self::Int32 | Self::Int64 => ElementKind::Int,
            Self::UInt8 | Self::UInt16 | Self::UInt32 | Self::UInt64 => ElementKind::UInt,
            Self::Float16 | Self::Float32 | Self::Float64 => ElementKind::Float,
            Self::BFloat16 => ElementKind::BFloat,
            Self::Complex64 | Self::Complex128 => ElementKind::Complex,
            Self::Raw { .. } => ElementKind::Raw,
        }
    }

    /// The unit the `bytes` codec reverses to change byte order (1: nothing to reverse).
    #[must_use]
    pub const fn swap_unit(self) -> usize {
        match self {
            Self::Complex64 | Self::Complex128 => self.size() / 2,
            Self::Raw { swap, .. } => swap as usize,
            _ => self.size(),
        }
    }

    /// The Zarr v3 / NumPy name (`"uint16"`, `"complex64"`, `"bfloat16"`; `"raw"` for every
    /// opaque element, whose width [`std::fmt::Display`] shows).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::UInt8 => "uint8",
            Self::UInt16 => "uint16",
            Self::UInt32 => "uint32",
            Self::UInt64 => "uint64",
            Self::Float16 => "float16",
            Self::BFloat16 => "bfloat16",
            Self::Float32 => "float32",
            Self::Float64 => "float64",
            Self::Complex64 => "complex64",
            Self::Complex128 => "complex128",
            Self::Raw { .. } => "raw",
        }
    }

    /// Parses a name as written by [`ElementType::name`].
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Maps a zarrs data type: a fixed-size number or bool, or the opaque stand-ins
    /// [`crate::dtype::numpy_type`] hands zarrs (raw bits, fixed-length UTF-32); anything else
    /// is unsupported.
    pub fn from_zarrs(data_type: &DataType) -> Result<Self> {
        if let Some(raw) = data_type.downcast_ref::<RawBitsDataType>() {
            return Self::raw(raw.size_bytes(), 1);
        }
        if data_type.is::<FixedLengthUTF32DataType>() {
            if let zarrs::array::DataTypeSize::Fixed(n) = data_type.size() {
                return Self::raw(n, 4);
            }
        }
        let pairs: [(bool, Self); 15] = [
            (data_type.is::<BoolDataType>(), Self::Bool),
            (data_type.is::<Int8DataType>(), Self::Int8),
            (data_type.is::<Int16DataType>(), Self::Int16),
            (data_type.is::<Int32DataType>(), Self::Int32),
            (data_type.is::<Int64DataType>(), Self::Int64),
            (data_type.is::<UInt8DataType>(), Self::UInt8),
            (data_type.is::<UInt16DataType>(), Self::UInt16),
            (data_type.is::<UInt32DataType>(), Self::UInt32),
            (data_type.is::<UInt64DataType>(), Self::UInt64),
            (data_type.is::<Float16DataType>(), Self::Float16),
            (data_type.is::<BFloat16DataType>(), Self::BFloat16),
            (data_type.is::<Float32DataType>(), Self::Float32),
            (data_type.is::<Float64DataType>(), Self::Float64),
            (data_type.is::<Complex64DataType>(), Self::Complex64),
            (data_type.is::<Complex128DataType>(), Self::Complex128),
        ];
        pairs
            .into_iter()
            .find_map(|(matches, t)| matches.then_some(t))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "data type {data_type:?} is not a fixed-size number or bool"
                ))
            })
    }
}

impl ElementType {
    /// An opaque element of `size` bytes (at least one), swapped in units of `swap`.
    pub fn raw(size: usize, swap: u8) -> Result<Self> {
        match u32::try_from(size) {
            Ok(size) if size > 0 && swap > 0 && size % u32::from(swap) == 0 => {
                Ok(Self::Raw { size, swap })
            }
            _ => Err(Error::Unsupported(format!(
                "an element of {size} bytes (in units of {swap})"
            ))),
        }
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Raw { size, .. } => write!(f, "raw{size}"),
            _ => f.write_str(self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in ElementType::ALL {
            assert_eq!(ElementType::from_name(t.name()), Some(t));
        }
        assert_eq!(ElementType::from_name("string"), None);
    }

    #[test]
    fn sizes_match_names() {
        assert_eq!(ElementType::Complex128.size(), 16);
        assert_eq!(ElementType::BFloat16.size(), 2);
        assert_eq!(ElementType::Bool.size(), 1);
    }
}

/// How to turn stored bytes into native ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Native,
    /// Reverse every `n` bytes (the element, or each half of a complex number).
    Swap(usize),
    /// Reverse, in every element, each `(offset, width)` span of the table: the multi-byte
    /// scalars of a record stored in the other byte order (the `struct` spec stores every
    /// field in the `bytes` codec's order).
    Fields(FieldSwaps),
}

/// The `(offset, width)` byte spans of one record element to reverse, in offset order.
pub type FieldSwaps = std::sync::Arc<[(usize, usize)]>;

/// Reverses each span of `table` in every `elem`-byte element of `bytes` (whole elements).
pub fn swap_fields(bytes: &mut [u8], elem: usize, table: &[(usize, usize)]) {
    for e in bytes.chunks_exact_mut(elem) {
        for &(at, width) in table {
            e[at..at + width].reverse();
        }
    }
}

//! The v2 documents `create_array` writes for `zarr_format=2`: `.zarray` (numcodecs
//! configs, the NumPy dtype string, zarr-python's default compressor) and `.zattrs`, as
//! zarr-python writes them for the same arguments.

use serde_json::{json, Value};

use crate::array::create::{check_shapes, fill_or_zero, ArraySpec};
use crate::dtype::ElementKind;
use crate::error::{Error, Result};
use crate::hierarchy::node::pretty;

pub(super) fn v2_codec(c: &Value) -> Result<Value> {
    match c.as_object() {
        Some(obj) if obj.get("id").and_then(Value::as_str).is_some() => Ok(c.clone()),
        _ => Err(Error::InvalidArgument(format!(
            "zarr_format 2 arrays take numcodecs configs such as {{\"id\": \"zstd\", \"level\": 3}}, not {c}"
        ))),
    }
}

pub(super) fn v2_documents(spec: &ArraySpec) -> Result<Vec<(&'static str, String)>> {
    check_shapes(spec)?;
    let compressor = match spec.compressors.as_deref() {
        None => json!({"id": "zstd", "level": 0}),
        Some([]) => Value::Null,
        Some([one]) => {
            let mut c = v2_codec(one)?;
            // zarr-python drops a false zstd `checksum` from a v2 compressor (its fix for
            // zarr-python#2647); write what it writes.
            if let Some(obj) = c.as_object_mut() {
                let off = obj.get("checksum").is_none_or(|v| v == &json!(false));
                if obj.get("id") == Some(&json!("zstd")) && off {
                    obj.remove("checksum");
                }
            }
            c
        }
        Some(_) => {
            return Err(Error::InvalidArgument(
                "zarr_format 2 arrays take at most one compressor".into(),
            ))
        }
    };
    let mut filters: Vec<Value> = match spec.filters.as_deref() {
        None => Vec::new(),
        Some(list) => list.iter().map(v2_codec).collect::<Result<_>>()?,
    };
    if let Some(codec) = &spec.object_codec {
        // v2 keeps variable-length elements as `|O`, encoded by the object-codec filter.
        filters.insert(0, json!({"id": codec}));
    }
    let filters = if filters.is_empty() {
        Value::Null
    } else {
        Value::Array(filters)
    };
    let doc = json!({
        "shape": spec.shape,
        "chunks": spec.chunks,
        "dtype": match &spec.object_codec {
            Some(_) => json!("|O"),
            None => spec.data_type.clone().unwrap_or_else(|| json!(v2_dtype(spec))),
        },
        "fill_value": fill_or_zero(spec),
        "order": "C",
        "filters": filters,
        "dimension_separator": ".",
        "compressor": compressor,
        "zarr_format": 2,
    });
    Ok(vec![
        (".zarray", pretty(&doc)),
        (".zattrs", pretty(&Value::Object(spec.attributes.clone()))),
    ])
}

/// NumPy's type string (`"<i2"`, `"|b1"`): v2's `dtype`.
pub(super) fn v2_dtype(spec: &ArraySpec) -> String {
    let size = spec.dtype.size();
    let order = if size == 1 {
        '|'
    } else if spec.big_endian {
        '>'
    } else {
        '<'
    };
    let kind = match spec.dtype.kind() {
        ElementKind::Bool => 'b',
        ElementKind::Int => 'i',
        ElementKind::UInt => 'u',
        ElementKind::Float => 'f',
        ElementKind::BFloat => 'V',
        ElementKind::Complex => 'c',
        ElementKind::Raw => 'V',
    };
    format!("{order}{kind}{size}")
}

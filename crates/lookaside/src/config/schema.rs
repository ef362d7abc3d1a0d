//! The machine description's JSON Schema, and the schemas of the values written more than
//! one way (sizes as `32k` or 32768, addresses as `"0x…"` or integers, switches as
//! `yes`/`true`).

use super::*;
use schemars::{json_schema, Schema, SchemaGenerator};

/// The machine description's JSON Schema (draft 2020-12): every section, key, default and
/// closed choice, generated from the types that read it, so that editors, the Python layer
/// and the docs check a machine against what the engine accepts, not against a copy.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(MachineConfig)).expect("a schema is JSON")
}

/// A byte count: an integer, or digits with `k`, `M`, `G` (binary; `KiB`, `KB` too).
pub(super) fn size() -> Schema {
    json_schema!({
        "description": "bytes: an integer or a string such as \"32k\", \"64KiB\", \"2M\"",
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": "^\\s*[0-9]+\\s*([kKmMgG]([iI]?[bB])?|[bB])?\\s*$" }
        ]
    })
}

/// A page size: a power of two of bytes (as [`size`]), or `unmapped`.
pub(super) fn page_size() -> Schema {
    json_schema!({
        "description": "a page size: a power of two of bytes (4096, \"4k\", \"2M\", \"1G\"), or \"unmapped\"",
        "anyOf": [
            { "type": "integer", "minimum": 2 },
            { "type": "string" }
        ]
    })
}

/// An address: an integer or a decimal or `0x…` string (`_` allowed).
pub(super) fn address(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "an address: an integer or a \"0x…\" string",
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": "^\\s*(0[xX][0-9a-fA-F_]+|[0-9_]+)\\s*$" }
        ]
    })
}

/// A switch: `true`/`false` or, as in a flag, `yes`/`no`.
pub(super) fn switch(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [
            { "type": "boolean" },
            { "type": "string", "enum": ["yes", "no", "true", "false"] }
        ]
    })
}

/// One page size or a list of them.
pub(super) fn page_sizes(_: &mut SchemaGenerator) -> Schema {
    let one = page_size();
    json_schema!({ "anyOf": [one.clone(), { "type": "array", "items": one }] })
}

/// One name or a list of them.
pub(super) fn names(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [
            { "type": "string" },
            { "type": "array", "items": { "type": "string" } }
        ]
    })
}

/// Implements [`schemars::JsonSchema`] for a type read by hand, from a function of this
/// module.
macro_rules! schema_from {
    ($t:ty, $f:expr) => {
        impl JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $f
            }
        }
    };
}

schema_from!(Bytes, size());
schema_from!(PageSize, page_size());
schema_from!(
    Ways,
    schemars::json_schema!({
        "description": "a number of ways, or \"full\" (ways = entries)",
        "anyOf": [
            { "type": "integer", "minimum": 1 },
            { "type": "string", "enum": ["full", "fa"] }
        ]
    })
);
schema_from!(
    Allocate,
    schemars::json_schema!({
        "anyOf": [
            { "type": "boolean" },
            { "type": "string", "enum": ["yes", "no", "no-fetch", "true", "false", "always", "never", "nofetch"] }
        ]
    })
);

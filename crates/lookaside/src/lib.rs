//! Lookaside: a fast, trace-driven simulator of address translation and memory hierarchies.
//!
//! Data flows one way: a [`trace`] reader or a [`workload`] model produces
//! [`event::Event`] batches, a [`machine::Machine`] built from a [`config`] consumes them
//! (its structures live in [`tlb`]), its [`ledger`] counts what happened (with [`threec`], why it missed), and [`report`]
//! turns the counts into JSON and tables. [`run`] drives the loop. The [`onepass`] engines
//! consume the same batches and answer a whole sweep of LRU structures in one pass.

/// A closed choice that a configuration names by a string (`"lru"`, `"bin-hopping"` …):
/// serialised as its [`Display`](std::fmt::Display) name and read through its
/// [`FromStr`](std::str::FromStr), whose message says what the choices are; in the JSON
/// Schema, a string of the `names` given (an iterator of `&str`). One place for the
/// pattern, so that every such field of the schema reads, errors and documents alike.
macro_rules! serde_by_name {
    ($t:ty, $names:expr) => {
        impl schemars::JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let names: Vec<&str> = $names.collect();
                schemars::json_schema!({ "type": "string", "enum": names })
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod bench;
pub mod cache;
pub mod config;
pub mod error;
pub mod event;
pub mod ledger;
pub mod machine;
pub mod mmu;
pub mod onepass;
pub mod pagetable;
pub mod report;
pub mod run;
pub mod threec;
pub mod tlb;
pub mod trace;
pub mod vm;
pub mod workload;

pub use error::{Error, Result};
pub use event::{Event, Kind, Mode};

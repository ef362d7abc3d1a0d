//! Synthetic sources: event streams made by a model instead of read from a file. They
//! implement the same [`TraceSource`](crate::trace::TraceSource) as the readers, so everything downstream is shared.
//! The software-managed-TLB study's OS-structure models: [`OsWorkload`] (one application
//! under a monolithic, mapped, microkernel or decomposed OS) and [`Multiserver`] (the
//! token-passing ring). Huck & Hays' multi-user model: [`Multiuser`] (time-sliced users
//! sharing text and a buffer pool, in global addresses or rewritten into per-process
//! aliases; [`Rewrite`] rewrites any stream). Inouye et al.'s VM-primitive workloads for a
//! virtually addressed cache: [`Ipc`] (Chorus IPC by copy, move and pure copy) and [`Cow`]
//! (Mach's copy-on-write page initialisation).

mod multiserver;
mod multiuser;
mod osstructure;
mod segments;
mod synthetic;
pub mod vmops;

pub use multiserver::{Multiserver, MultiserverParams};
pub use multiuser::{AddressModel, Multiuser, MultiuserParams, Rewrite, Uniform};
pub use osstructure::{OsStructure, OsWorkload, OsWorkloadParams};
pub use segments::{Segments, SegmentsParams};
pub use synthetic::Synthetic;
pub use vmops::{Cow, CowCase, CowParams, Ipc, IpcDesign, IpcParams};

use crate::error::{Error, Result};
use crate::trace::TraceSource;

/// The prefix that names a workload where a trace path is expected.
pub const PREFIX: &str = "workload:";

/// The source a workload spec names, DineroIV-style like `--tlb`:
/// `workload:multiserver,servers=3,pages_per_hop=24,hops=2000,seed=0`,
/// `workload:os,structure=microkernel,syscalls=5000`,
/// `workload:os,structure=monolithic-mapped,trace=prog.lks` (a real program; see
/// [`OsWorkload::over_trace`]; the path cannot hold a comma),
/// `workload:multiuser,users=8,shared=50,addresses=per-process`,
/// `workload:rewrite,trace=hpux.din,to=per-process` (any trace, see [`Rewrite`]),
/// `workload:uniform,pages=8192`,
/// `workload:ipc,design=move,size=8k,messages=10` (see [`Ipc`]),
/// `workload:cow,case=3,pages=1` (see [`Cow`]),
/// `workload:synthetic,refs=1e7,seed=1` (program-like: almost every reference hits) or
/// `workload:segments,refs=2e7,region=64M,segment=64,random=50,stores=30,seed=1`
/// (TLB-hostile: about half miss a 64-entry TLB; see [`Segments`]).
/// `Ok(None)` when `spec` is not a workload spec (it does not start with [`PREFIX`]); an
/// error naming the bad key otherwise.
pub fn from_spec(spec: &str) -> Result<Option<Box<dyn TraceSource + Send>>> {
    let Some(rest) = spec.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let (name, keys) = rest.split_once(',').unwrap_or((rest, ""));
    let err = |key: &str, msg: String| Error::config(spec, key, msg);
    let table = crate::config::key_values(keys).map_err(|m| err(keys, m))?;
    // The keys as a `T`, by the same reading (and messages) as a machine's sections.
    fn read<T: serde::de::DeserializeOwned>(spec: &str, table: &toml::Table) -> Result<T> {
        T::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
            let (key, message) = crate::config::key_and_message(&e);
            Error::config(spec, key, message)
        })
    }
    let percent = |key: &str, v: u64| match v {
        0..=100 => Ok(()),
        _ => Err(err(key, format!("{v} is not a percentage (0 to 100)"))),
    };
    Ok(Some(match name {
        "multiserver" => Box::new(Multiserver::new(read(spec, &table)?)),
        "os" => {
            // The model's parameters, and the keys that give it a program's trace instead.
            let (mut model, mut program) = (table.clone(), toml::Table::new());
            for k in ["trace", "every"] {
                if let Some(v) = model.remove(k) {
                    program.insert(k.into(), v);
                }
            }
            let params: OsWorkloadParams = read(spec, &model).map_err(|e| match e {
                Error::Config { key, message, .. } if message.starts_with("unknown key (") => {
                    err(&key, message.replacen(")", ", trace, every)", 1))
                }
                e => e,
            })?;
            let s: spec::OsTrace = read(spec, &program)?;
            let Some(path) = s.trace else {
                if s.every.is_some() {
                    return Err(err(
                        "every",
                        "injects calls into a program's trace: give trace=FILE too".into(),
                    ));
                }
                return Ok(Some(Box::new(OsWorkload::new(params))));
            };
            // The program's own references and calls replace the model's application.
            if let Some(k) = ["syscalls", "app_pages", "burst_pages"]
                .into_iter()
                .find(|k| table.contains_key(*k))
            {
                return Err(err(k, "with trace=, the program's own references and calls replace the model's application (remove this key)".into()));
            }
            let source = crate::trace::open(std::path::Path::new(&path), None)?;
            Box::new(OsWorkload::over_trace(params, source, &path, s.every))
        }
        "multiuser" => {
            let p: MultiuserParams = read(spec, &table)?;
            percent("shared", p.shared.into())?;
            Box::new(Multiuser::new(p))
        }
        "rewrite" => {
            let s: spec::Rewrite = read(spec, &table)?;
            let source = crate::trace::open(std::path::Path::new(&s.trace), None)?;
            Box::new(Rewrite::named(source, s.to, &s.trace))
        }
        "uniform" => {
            let s: spec::Uniform = read(spec, &table)?;
            Box::new(Uniform::new(s.pages, s.rounds, s.seed))
        }
        "ipc" => Box::new(Ipc::new(read(spec, &table)?).map_err(|(k, m)| err(k, m))?),
        "cow" => Box::new(Cow::new(read(spec, &table)?).map_err(|(k, m)| err(k, m))?),
        "synthetic" => {
            let s: spec::Synthetic = read(spec, &table)?;
            Box::new(Synthetic::new(s.refs, s.seed, 256, 64 << 10))
        }
        "segments" => {
            let p: SegmentsParams = read(spec, &table)?;
            percent("random", p.random)?;
            percent("stores", p.stores)?;
            Box::new(Segments::new(p))
        }
        _ => {
            return Err(err(
                "workload",
                format!("'{name}' is not a workload (cow, ipc, multiserver, multiuser, os, rewrite, segments, synthetic, uniform)"),
            ))
        }
    }))
}

/// The keys of the workloads whose parameters are not one type of their own, read as the
/// rest are: serde types, unknown keys refused.
mod spec {
    use super::*;
    use serde::Deserialize;

    /// `workload:os` over a program's trace (`trace`), with calls injected `every`
    /// references where it has no markers (the model's parameters are the other keys).
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct OsTrace {
        pub trace: Option<String>,
        #[serde(default, deserialize_with = "at_least_one")]
        pub every: Option<u64>,
    }

    fn at_least_one<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Option<u64>, D::Error> {
        match u64::deserialize(d)? {
            0 => Err(serde::de::Error::custom("must be at least 1")),
            n => Ok(Some(n)),
        }
    }

    /// `workload:rewrite`: any trace, its shared pages rewritten `to` a sharing model.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Rewrite {
        pub trace: String,
        pub to: AddressModel,
    }

    /// `workload:uniform`: `rounds` passes over `pages` pages in random order.
    #[derive(Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub(super) struct Uniform {
        pub pages: u32,
        pub rounds: u64,
        pub seed: u64,
    }

    impl Default for Uniform {
        fn default() -> Self {
            Uniform {
                pages: 8192,
                rounds: 4,
                seed: 1,
            }
        }
    }

    /// `workload:synthetic`: a program-like stream of `refs` references.
    #[derive(Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub(super) struct Synthetic {
        pub refs: u64,
        pub seed: u64,
    }

    impl Default for Synthetic {
        fn default() -> Self {
            Synthetic {
                refs: 10_000_000,
                seed: 1,
            }
        }
    }
}

/// Every event of `source`, for the workloads' tests.
#[cfg(test)]
pub(crate) fn drain(source: &mut dyn crate::trace::TraceSource) -> Vec<crate::event::Event> {
    let (mut batch, mut all) = (Vec::new(), Vec::new());
    while source.next_batch(&mut batch).unwrap() {
        all.extend_from_slice(&batch);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_build_sources_and_errors_name_the_key() {
        assert!(from_spec("trace.lks").unwrap().is_none());
        let mut s = from_spec("workload:multiserver,servers=1,hops=10")
            .unwrap()
            .unwrap();
        let mut v = Vec::new();
        assert!(s.next_batch(&mut v).unwrap());
        assert!(from_spec("workload:os,structure=decomposed,syscalls=10")
            .unwrap()
            .is_some());
        assert!(from_spec("workload:synthetic,refs=1e3").unwrap().is_some());
        for (spec, key) in [
            ("workload:ring", "workload"),
            ("workload:multiserver,servers=x", "servers"),
            ("workload:multiserver,speed=1", "speed"),
            ("workload:os,structure=exo", "structure"),
            ("workload:os,noequals", "noequals"),
            ("workload:ipc,design=teleport", "design"),
            ("workload:ipc,design=move,size=3k", "size"),
            ("workload:ipc,size=lots", "size"),
            ("workload:ipc,page=3000", "page"),
            ("workload:ipc,buffer_colour=9000", "buffer_colour"),
            ("workload:cow,case=4", "case"),
            ("workload:cow,pages=0", "pages"),
            ("workload:multiuser,shared=101", "shared"),
            ("workload:segments,random=150", "random"),
            ("workload:synthetic,refs=2.5", "refs"),
            ("workload:os,every=0,trace=t.lks", "every"),
            ("workload:rewrite,trace=t.lks", "to"),
            ("workload:uniform,pages=-1", "pages"),
        ] {
            let e = from_spec(spec).err().unwrap().to_string();
            assert!(e.contains(key) && e.starts_with(spec), "{e}");
        }
    }

    /// A spec's keys are read as a machine's are: their messages say what is expected, an
    /// unknown key lists the keys there are, a whole float is a count.
    #[test]
    fn specs_read_as_machines_do() {
        let e = |spec: &str| from_spec(spec).err().unwrap().to_string();
        assert!(
            e("workload:os,speed=1").contains("trace, every"),
            "{}",
            e("workload:os,speed=1")
        );
        assert!(e("workload:os,structure=exo").contains("microkernel"));
        assert!(e("workload:multiuser,addresses=local").contains("per-process"));
        assert!(e("workload:rewrite,trace=t.lks").contains("missing"));
        assert!(from_spec("workload:segments,refs=2e3,region=1M")
            .unwrap()
            .is_some());
        assert!(from_spec("workload:ipc,design=move-eager,size=4k,page=4k")
            .unwrap()
            .is_some());
        assert!(from_spec("workload:cow,case=1").unwrap().is_some());
    }
}

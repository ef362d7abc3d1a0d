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
    let mut parts = rest.split(',');
    let name = parts.next().unwrap_or("");
    let err = |key: &str, msg: String| Error::config(spec, key, msg);
    let mut kv = Vec::new();
    for p in parts.filter(|p| !p.is_empty()) {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| err(p, "expected key=value".into()))?;
        kv.push((k.trim(), v.trim()));
    }
    let num = |k: &str, v: &str| -> Result<u64> {
        v.parse::<u64>()
            .ok()
            .or_else(|| {
                v.parse::<f64>()
                    .ok()
                    .filter(|f| *f >= 0.0)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| err(k, format!("'{v}' is not a non-negative number")))
    };
    let small = |k: &str, v: &str| -> Result<u32> {
        u32::try_from(num(k, v)?).map_err(|_| err(k, format!("{v} is too large")))
    };
    let bytes = |k: &str, v: &str| -> Result<u64> {
        crate::config::parse_bytes(v)
            .ok_or_else(|| err(k, format!("'{v}' is not a byte count (2k, 4096, …)")))
    };
    match name {
        "multiserver" => {
            let mut p = MultiserverParams::default();
            for (k, v) in kv {
                match k {
                    "servers" => p.servers = small(k, v)?,
                    "pages_per_hop" => p.pages_per_hop = small(k, v)?,
                    "kernel_pages" => p.kernel_pages = small(k, v)?,
                    "kernel_regions" => p.kernel_regions = small(k, v)?,
                    "refs_per_page" => p.refs_per_page = small(k, v)?,
                    "data_pages" => p.data_pages = small(k, v)?,
                    "hops" => p.hops = num(k, v)?,
                    "seed" => p.seed = num(k, v)?,
                    _ => return Err(err(k, "unknown key (servers, pages_per_hop, kernel_pages, kernel_regions, refs_per_page, data_pages, hops, seed)".into())),
                }
            }
            Ok(Some(Box::new(Multiserver::new(p))))
        }
        "os" => {
            let mut p = OsWorkloadParams::default();
            let (mut trace, mut every) = (None, None);
            let mut model_keys = Vec::new();
            for (k, v) in kv {
                if matches!(k, "syscalls" | "app_pages" | "burst_pages") {
                    model_keys.push(k);
                }
                match k {
                    "structure" => {
                        p.structure = match v {
                            "monolithic" | "monolithic-unmapped" => OsStructure::MonolithicUnmapped,
                            "monolithic-mapped" => OsStructure::MonolithicMapped,
                            "microkernel" => OsStructure::Microkernel,
                            "decomposed" => OsStructure::Decomposed,
                            _ => return Err(err(k, format!("'{v}' is not monolithic, monolithic-mapped, microkernel or decomposed"))),
                        }
                    }
                    "syscalls" => p.syscalls = num(k, v)?,
                    "app_pages" => p.app_pages = small(k, v)?,
                    "burst_pages" => p.burst_pages = small(k, v)?,
                    "kernel_pages" => p.kernel_pages = small(k, v)?,
                    "ipc_pages" => p.ipc_pages = small(k, v)?,
                    "server_pages" => p.server_pages = small(k, v)?,
                    "forward_every" => p.forward_every = small(k, v)?,
                    "refs_per_page" => p.refs_per_page = small(k, v)?,
                    "seed" => p.seed = num(k, v)?,
                    "trace" => trace = Some(v),
                    "every" => match num(k, v)? {
                        0 => return Err(err(k, "must be at least 1".into())),
                        n => every = Some(n),
                    },
                    _ => return Err(err(k, "unknown key (structure, syscalls, app_pages, burst_pages, kernel_pages, ipc_pages, server_pages, forward_every, refs_per_page, seed, trace, every)".into())),
                }
            }
            let Some(path) = trace else {
                if every.is_some() {
                    return Err(err(
                        "every",
                        "injects calls into a program's trace: give trace=FILE too".into(),
                    ));
                }
                return Ok(Some(Box::new(OsWorkload::new(p))));
            };
            if let Some(k) = model_keys.first() {
                return Err(err(k, "with trace=, the program's own references and calls replace the model's application (remove this key)".into()));
            }
            let source = crate::trace::open(std::path::Path::new(path), None)?;
            Ok(Some(Box::new(OsWorkload::over_trace(
                p, source, path, every,
            ))))
        }
        "multiuser" => {
            let mut p = MultiuserParams::default();
            for (k, v) in kv {
                match k {
                    "users" => p.users = small(k, v)?,
                    "quantum" => p.quantum = num(k, v)?,
                    "slices" => p.slices = num(k, v)?,
                    "text_pages" => p.text_pages = small(k, v)?,
                    "shm_pages" => p.shm_pages = small(k, v)?,
                    "data_pages" => p.data_pages = small(k, v)?,
                    "stack_pages" => p.stack_pages = small(k, v)?,
                    "shared" => p.shared = small(k, v)?.min(100),
                    "run" => p.run = small(k, v)?,
                    "span" => p.span = small(k, v)?,
                    "seed" => p.seed = num(k, v)?,
                    "addresses" => {
                        p.addresses = match v {
                            "global" => AddressModel::Global,
                            "per-process" => AddressModel::PerProcess,
                            _ => return Err(err(k, format!("'{v}' is not global or per-process"))),
                        }
                    }
                    _ => return Err(err(k, "unknown key (users, quantum, slices, text_pages, shm_pages, data_pages, stack_pages, shared, run, span, seed, addresses)".into())),
                }
            }
            Ok(Some(Box::new(Multiuser::new(p))))
        }
        "rewrite" => {
            let (mut trace, mut to) = (None, None);
            for (k, v) in kv {
                match k {
                    "trace" => trace = Some(v),
                    "to" => {
                        to = Some(match v {
                            "global" => AddressModel::Global,
                            "per-process" => AddressModel::PerProcess,
                            _ => return Err(err(k, format!("'{v}' is not global or per-process"))),
                        })
                    }
                    _ => return Err(err(k, "unknown key (trace, to)".into())),
                }
            }
            let trace = trace.ok_or_else(|| err("trace", "the trace to rewrite is missing (trace=FILE)".into()))?;
            let to = to.ok_or_else(|| err("to", "missing: to=per-process or to=global".into()))?;
            let source = crate::trace::open(std::path::Path::new(trace), None)?;
            Ok(Some(Box::new(Rewrite::named(source, to, trace))))
        }
        "uniform" => {
            let (mut pages, mut rounds, mut seed) = (8192u32, 4u64, 1u64);
            for (k, v) in kv {
                match k {
                    "pages" => pages = small(k, v)?,
                    "rounds" => rounds = num(k, v)?,
                    "seed" => seed = num(k, v)?,
                    _ => return Err(err(k, "unknown key (pages, rounds, seed)".into())),
                }
            }
            Ok(Some(Box::new(Uniform::new(pages, rounds, seed))))
        }
        "ipc" => {
            let mut p = IpcParams::default();
            for (k, v) in kv {
                match k {
                    "design" => p.design = IpcDesign::parse(v).map_err(|m| err(k, m))?,
                    "size" => p.bytes = bytes(k, v)?,
                    "messages" => p.messages = num(k, v)?,
                    "warm" => p.warm = num(k, v)?,
                    "page" => p.page = bytes(k, v)?,
                    "sender_colour" => p.sender_colour = small(k, v)?.into(),
                    "receiver_colour" => p.receiver_colour = small(k, v)?.into(),
                    "buffer_colour" => p.buffer_colour = small(k, v)?.into(),
                    _ => return Err(err(k, "unknown key (design, size, messages, warm, page, sender_colour, receiver_colour, buffer_colour)".into())),
                }
            }
            let w = Ipc::new(p).map_err(|(k, m)| err(k, m))?;
            Ok(Some(Box::new(w)))
        }
        "cow" => {
            let mut p = CowParams::default();
            for (k, v) in kv {
                match k {
                    "case" => p.case = CowCase::parse(v).map_err(|m| err(k, m))?,
                    "pages" => p.pages = num(k, v)?,
                    "page" => p.page = bytes(k, v)?,
                    _ => return Err(err(k, "unknown key (case, pages, page)".into())),
                }
            }
            let w = Cow::new(p).map_err(|(k, m)| err(k, m))?;
            Ok(Some(Box::new(w)))
        }
        "synthetic" => {
            let (mut refs, mut seed) = (10_000_000u64, 1u64);
            for (k, v) in kv {
                match k {
                    "refs" => refs = num(k, v)?,
                    "seed" => seed = num(k, v)?,
                    _ => return Err(err(k, "unknown key (refs, seed)".into())),
                }
            }
            Ok(Some(Box::new(Synthetic::new(refs, seed, 256, 64 << 10))))
        }
        "segments" => {
            let mut p = SegmentsParams::default();
            for (k, v) in kv {
                match k {
                    "refs" => p.refs = num(k, v)?,
                    "region" => p.region = bytes(k, v)?,
                    "segment" => p.segment = num(k, v)?.max(1),
                    "random" => p.random = num(k, v)?.min(100),
                    "stores" => p.stores = num(k, v)?.min(100),
                    "seed" => p.seed = num(k, v)?,
                    _ => return Err(err(k, "unknown key (refs, region, segment, random, stores, seed)".into())),
                }
            }
            Ok(Some(Box::new(Segments::new(p))))
        }
        _ => Err(err(
            "workload",
            format!("'{name}' is not a workload (cow, ipc, multiserver, multiuser, os, rewrite, segments, synthetic, uniform)"),
        )),
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
        ] {
            let e = from_spec(spec).err().unwrap().to_string();
            assert!(e.contains(key) && e.starts_with(spec), "{e}");
        }
    }
}

//! The driver: pull batches from a source and push them through a machine, reporting
//! progress now and then. Reading and simulating are separate calls so that each can be
//! timed on its own (`lookaside bench`).

use std::path::Path;

use crate::error::Result;
use crate::event::{Event, BATCH};
use crate::machine::Machine;
use crate::report::TraceInfo;
use crate::trace::compress::Input;
use crate::trace::cut::{Cut, CutSource};
use crate::trace::native::NativeReader;
pub use crate::trace::stream::{drain, read_ahead, Progress, Watched};
use crate::trace::{Format, TraceSource, WriteOptions};

/// How often (in batches) the progress callback is called.
const PROGRESS_EVERY: u64 = 256;

/// Simulate every event of `source` on `machine`, reading and simulating on this thread.
/// `progress` is called every few hundred batches; returning `false` from it stops the run
/// early with an error.
pub fn run(
    source: &mut dyn TraceSource,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut p = Progress::default();
    while source.next_batch(&mut batch)? {
        machine.run_batch(&batch);
        p.events += batch.len() as u64;
        p.bytes = source.bytes_read();
        tick(&mut p, batch.len(), progress)?;
    }
    p.bytes = source.bytes_read();
    progress(p);
    Ok(p)
}

/// [`run`] for a native trace: each event goes from the decoder straight into the machine,
/// with no batch in between (the fastest way through on one core).
pub fn run_native(
    source: &mut NativeReader,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    let mut p = Progress::default();
    loop {
        let n = machine.decode_native(source, BATCH)?;
        if n == 0 {
            break;
        }
        p.events += n as u64;
        p.bytes = source.bytes_read();
        tick(&mut p, n, progress)?;
    }
    p.bytes = source.bytes_read();
    progress(p);
    Ok(p)
}

/// [`run`] with the reading (decompression, parsing) on a second thread, overlapped with the
/// simulation. Batches keep their order, so results are identical to [`run`]'s.
pub fn run_pipelined(
    mut source: Box<dyn TraceSource + Send>,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    let mut p = Progress::default();
    read_ahead(source.as_mut(), |batch, bytes| {
        machine.run_batch(batch);
        p.events += batch.len() as u64;
        p.bytes = bytes;
        tick(&mut p, batch.len(), progress)
    })?;
    progress(p);
    Ok(p)
}

/// Call `progress` about every [`PROGRESS_EVERY`] batches' worth of events.
#[inline]
fn tick(p: &mut Progress, len: usize, progress: &mut dyn FnMut(Progress) -> bool) -> Result<()> {
    let every = PROGRESS_EVERY * BATCH as u64;
    if (p.events - len as u64) / every != p.events / every && !progress(*p) {
        return Err(crate::Error::Usage("interrupted".into()));
    }
    Ok(())
}

/// Converts the trace file at `src` — or the stream a `workload:` spec makes — to `dst`
/// (see [`crate::trace::convert_source`]), calling `progress` now and then (see
/// [`Watched`]); returning `false` from it stops the conversion, and the output is then not
/// written.
pub fn convert_watched(
    src: &Path,
    src_format: Option<Format>,
    dst: &Path,
    dst_format: Option<Format>,
    conversion: &Conversion,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<crate::trace::Converted> {
    let Conversion { meta, cut, options } = conversion;
    let (mut source, src_format) = open_source(src, src_format)?;
    // The caller's fields first, then the source's provenance.
    let mut meta = meta.clone();
    if src_format == "workload" {
        meta.extra
            .entry("workload".into())
            .or_insert(src.display().to_string());
    }
    let mut watched = Watched::new(source.as_mut(), progress);
    if cut.is_whole() {
        return crate::trace::convert_source(
            &mut watched,
            src_format,
            dst,
            dst_format,
            &meta,
            options,
        );
    }
    // A cut of a cut says both.
    let before = watched.metadata().and_then(|m| m.extra.get("cut").cloned());
    let kept = match before {
        Some(b) => format!("{b}; then {}", cut.describe()),
        None => cut.describe(),
    };
    meta.extra.insert("cut".into(), kept);
    let mut window = CutSource::new(&mut watched, cut);
    crate::trace::convert_source(&mut window, src_format, dst, dst_format, &meta, options)
}

/// What a conversion writes besides the events: metadata (the caller's fields, completed
/// from the source's), the part of the trace kept, and how the output is written.
#[derive(Clone, Debug, Default)]
pub struct Conversion {
    pub meta: crate::trace::Metadata,
    pub cut: Cut,
    pub options: WriteOptions,
}

/// The events of a trace file (format detected unless given) or of the workload a
/// `workload:…` spec names, with the name of their format ("workload" for a spec). The file
/// is opened once (see [`crate::trace::open_input`]), so a pipe works as a file does.
pub(crate) fn open_source(
    path: &Path,
    format: Option<Format>,
) -> Result<(Box<dyn TraceSource + Send>, &'static str)> {
    if let Some(source) = crate::workload::from_spec(&path.display().to_string())? {
        return Ok((source, "workload"));
    }
    let (input, format) = crate::trace::open_input(path, format)?;
    Ok((crate::trace::reader(input, format)?, format.name()))
}

/// Where a trace file is read while it is simulated. Results never depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// On the simulating thread; a native trace is decoded straight into the machine.
    OneThread,
    /// On a second thread, overlapped with the simulation.
    Pipelined,
}

impl std::str::FromStr for Reading {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Reading, String> {
        match s {
            "one-thread" => Ok(Reading::OneThread),
            "pipelined" => Ok(Reading::Pipelined),
            "auto" => Ok(Reading::best()),
            _ => Err(format!(
                "unknown reading '{s}' (expected one-thread, pipelined or auto)"
            )),
        }
    }
}

impl Reading {
    /// The faster choice on this machine: a second thread when there is a second core.
    pub fn best() -> Reading {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            Reading::Pipelined
        } else {
            Reading::OneThread
        }
    }
}

/// Simulate the trace `name` read from `input` in `format` on `machine` (bound to the
/// trace's metadata first: see [`Machine::bind_trace`]), reading as `reading` says.
pub fn run_input(
    input: Input,
    format: Format,
    name: &str,
    machine: &mut Machine,
    reading: Reading,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    match (reading, format) {
        (Reading::OneThread, Format::Native) if !machine.fed_in_batches() => {
            let mut source = NativeReader::new(input)?;
            machine.bind_trace(Some(source.metadata()), name)?;
            run_native(&mut source, machine, progress)
        }
        (Reading::Pipelined, _) => {
            let source = crate::trace::reader(input, format)?;
            machine.bind_trace(source.metadata(), name)?;
            run_pipelined(source, machine, progress)
        }
        (Reading::OneThread, _) => {
            let mut source = crate::trace::reader(input, format)?;
            machine.bind_trace(source.metadata(), name)?;
            run(source.as_mut(), machine, progress)
        }
    }
}

/// Simulate the trace file at `path` (format detected unless given; `-` is standard input)
/// on `machine`, reading as `reading` says; returns the progress and the format read.
pub fn run_path(
    path: &Path,
    format: Option<Format>,
    machine: &mut Machine,
    reading: Reading,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<(Progress, Format)> {
    let (input, format) = crate::trace::open_input(path, format)?;
    let name = crate::trace::compress::display(path);
    Ok((
        run_input(input, format, &name, machine, reading, progress)?,
        format,
    ))
}

/// Simulate the trace file at `path` (format detected unless given) — or the workload a
/// `workload:…` spec names (see [`crate::workload::from_spec`]) — on `machine`, reading as
/// `reading` says, and return the result as JSON (schema in [`crate::report`]).
pub fn simulate_path(
    path: &Path,
    format: Option<Format>,
    machine: &mut Machine,
    reading: Reading,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let name = path.display().to_string();
    // A workload spec (`workload:multiserver,servers=3`) stands wherever a trace path does.
    if let Some(mut source) = crate::workload::from_spec(&name)? {
        match reading {
            Reading::OneThread => run(source.as_mut(), machine, progress)?,
            Reading::Pipelined => run_pipelined(source, machine, progress)?,
        };
        refused(machine, &name)?;
        let info = TraceInfo {
            path: name,
            format: "workload".into(),
        };
        return Ok(crate::report::result_json(machine, &info));
    }
    let name = crate::trace::compress::display(path);
    let (done, format) = run_path(path, format, machine, reading, progress)?;
    refused(machine, &name)?;
    not_empty(done.events, &name)?;
    let info = TraceInfo {
        path: name,
        format: format.name().into(),
    };
    Ok(crate::report::result_json(machine, &info))
}

/// [`simulate_path`] for several machines at once: the trace (or workload) is read once,
/// each batch going through every machine in turn, so reading and decoding are paid once
/// for all of them. Each result is exactly what [`simulate_path`] gives for that machine
/// alone (machines share nothing but the events).
pub fn simulate_many(
    path: &Path,
    format: Option<Format>,
    machines: &mut [Machine],
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Vec<serde_json::Value>> {
    let (mut opened, format) = open_source(path, format)?;
    if format != "workload" {
        let name = crate::trace::compress::display(path);
        for m in machines.iter_mut() {
            m.bind_trace(opened.metadata(), &name)?;
        }
    }
    // Watched by time, not by events: a batch costs as many simulations as there are
    // machines, and a stop must be prompt however many there are.
    let mut source = Watched::new(opened.as_mut(), progress);
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut events = 0u64;
    while source.next_batch(&mut batch)? {
        for m in machines.iter_mut() {
            m.run_batch(&batch);
        }
        events += batch.len() as u64;
    }
    let name = crate::trace::compress::display(path);
    for m in machines.iter() {
        refused(m, &name)?;
    }
    if format != "workload" {
        not_empty(events, &name)?;
    }
    let info = TraceInfo {
        path: name,
        format: format.into(),
    };
    Ok(machines
        .iter()
        .map(|m| crate::report::result_json(m, &info))
        .collect())
}

/// The error of the first event `machine` refused (see [`Machine::refused`]), naming the
/// trace `name` and the event, or of a trace it could not follow at all (see
/// [`Machine::cannot_follow`]): a result over a stream the machine could not follow would be
/// wrong.
fn refused(machine: &Machine, name: &str) -> Result<()> {
    if let Some(e) = machine.cannot_follow(name) {
        return Err(e);
    }
    match machine.refused() {
        Some((at, message)) => Err(crate::error::Error::trace(
            name,
            crate::error::Location::Event(*at),
            "vac",
            message.clone(),
        )),
        None => Ok(()),
    }
}

/// The error of a trace file that held no event: its result, all zeros, would answer
/// nothing (an empty file, or a pipe that delivered nothing). `info` and `convert` accept
/// such a file; only simulating it is refused.
fn not_empty(events: u64, name: &str) -> Result<()> {
    if events > 0 {
        return Ok(());
    }
    Err(crate::error::Error::trace(
        name,
        crate::error::Location::Whole,
        "events",
        "the trace holds no event: nothing to simulate",
    ))
}

/// What `lookaside info` shows: the trace's summary, format and metadata, as JSON.
/// `progress` is called now and then; returning `false` from it stops the reading.
pub fn info_json(
    path: &Path,
    format: Option<Format>,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let (mut source, format) = open_source(path, format)?;
    let summary = crate::trace::summarize(&mut Watched::new(source.as_mut(), progress))?;
    let path = crate::trace::compress::display(path);
    let mut v = serde_json::json!({ "path": path, "format": format });
    if let (Some(o), Ok(serde_json::Value::Object(s))) =
        (v.as_object_mut(), serde_json::to_value(&summary))
    {
        o.extend(s);
        if let Some(m) = source.metadata() {
            o.insert(
                "metadata".into(),
                serde_json::to_value(m).unwrap_or_default(),
            );
        }
    }
    Ok(v)
}

/// What the trace at `path` says about itself (its metadata, `null` for a format without
/// any), read from its header alone: no event is decoded, whatever the trace's length.
pub fn metadata_json(path: &Path, format: Option<Format>) -> Result<serde_json::Value> {
    let (source, _) = open_source(path, format)?;
    Ok(source
        .metadata()
        .map(|m| serde_json::to_value(m).unwrap_or_default())
        .unwrap_or_default())
}

/// The memory access map of the trace at `path` (or a `workload:…` spec), as JSON: pages of
/// `1 << page_shift` bytes touched per interval of `interval` instructions (see
/// [`crate::trace::accessmap`]).
pub fn access_map_json(
    path: &Path,
    format: Option<Format>,
    page_shift: u32,
    interval: u64,
    select: crate::trace::accessmap::Select,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let mut source = open_source(path, format)?.0;
    let mut watched = Watched::new(source.as_mut(), progress);
    let map = crate::trace::accessmap::access_map(&mut watched, page_shift, interval, select)?;
    Ok(serde_json::to_value(map).unwrap_or_default())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::Error;
    use crate::event::Kind;
    use crate::workload::Synthetic;
    use std::path::PathBuf;

    fn machine() -> Machine {
        let flags = [
            "i:entries=16,ways=4,next=l2".to_string(),
            "d:entries=8,ways=full,next=l2".into(),
            "l2:entries=64,ways=8,policy=random".into(),
        ];
        Machine::assemble(None, "t", &flags, &[]).unwrap()
    }

    #[test]
    fn pipelined_run_gives_the_same_result() {
        let mut a = machine();
        let pa = run(
            &mut Synthetic::new(300_000, 7, 64, 4096),
            &mut a,
            &mut |_| true,
        )
        .unwrap();
        let mut b = machine();
        let mut calls = 0;
        let pb = run_pipelined(
            Box::new(Synthetic::new(300_000, 7, 64, 4096)),
            &mut b,
            &mut |_| {
                calls += 1;
                true
            },
        )
        .unwrap();
        assert_eq!(pa.events, pb.events);
        assert!(calls >= 1);
        let info = TraceInfo::default();
        assert_eq!(
            crate::report::result_json(&a, &info),
            crate::report::result_json(&b, &info)
        );
    }

    /// A stream with every event kind, several address spaces, both modes, global pages and
    /// accesses that straddle pages.
    pub(crate) fn mixed_events(n: usize, seed: u64) -> Vec<Event> {
        let mut rng = crate::tlb::SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let r = rng.next_u64();
                let page = [(r >> 8) % 40, 0x200 + (r >> 8) % 8, 0x7ff][((r >> 50) % 3) as usize];
                let addr = if r & 0x10 != 0 {
                    0xffff_8000_0000_0000
                } else {
                    0
                } + (page << 12)
                    + (r >> 40) % 4096;
                let asid = ((r >> 20) % 3) as u32;
                let mut e = match r % 64 {
                    0 => Event::control(Kind::ContextSwitch, 0, asid),
                    1 => Event::control(Kind::TlbFlush, crate::event::FLUSH_ALL, asid),
                    2 => Event::control(Kind::TlbFlush, addr, asid),
                    3 => Event::control(Kind::Unmap, addr, asid),
                    4 => Event::control(Kind::Marker, 7, asid),
                    k => Event::reference(
                        [Kind::Fetch, Kind::Load, Kind::Store][(k % 3) as usize],
                        addr,
                        [1, 4, 8, 16][((r >> 30) % 4) as usize],
                    ),
                };
                e.asid = asid;
                if r & 0x20 != 0 {
                    e.mode = crate::event::Mode::Kernel;
                }
                e
            })
            .collect()
    }

    #[test]
    fn every_reading_of_a_native_file_gives_the_same_result() {
        let events = mixed_events(50_000, 3);
        let dir = std::env::temp_dir().join(format!("lookaside-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mixed.lks");
        let mut sink =
            crate::trace::create(&path, Some(Format::Native), &Default::default()).unwrap();
        for chunk in events.chunks(1000) {
            sink.write_batch(chunk).unwrap();
        }
        sink.finish().unwrap();
        let regions = "[pages]\nsize = \"4k\"\n[[pages.regions]]\nstart = 0x200000\nend = 0x600000\nsize = \"2M\"\n";
        // A software-refilled machine (its own model of every event) reads the same way too.
        let mach3 = include_str!("../../../python/lookaside/presets/decstation3100-mach3.toml");
        // A machine with a memory system: batches and a native trace take its own loops.
        let memory = include_str!("../../../python/lookaside/presets/decstation5000-200.toml");
        // A machine of one TLB alone: its own loop, batched or decoded straight into it.
        let alone = "alone";
        for text in [None, Some(regions), Some(mach3), Some(memory), Some(alone)] {
            let build = || {
                if text == Some(mach3) || text == Some(memory) {
                    return Machine::assemble(text, "t", &[], &[]).unwrap();
                }
                let sets = ["machine.global_above=0xffff800000000000".to_string()];
                if text == Some(alone) {
                    let flags = ["d:entries=64,ways=full,page=4k,serves=unified".to_string()];
                    return Machine::assemble(None, "t", &flags, &sets).unwrap();
                }
                let mut flags = vec!["dtlb:entries=8,ways=2,next=l2,page=4k+2M".to_string()];
                flags.push("itlb:entries=4,ways=full,next=l2,asid=false,page=4k+2M".into());
                flags.push("l2:entries=32,ways=4,policy=fifo,page=4k+2M".into());
                Machine::assemble(text, "t", &flags, &sets).unwrap()
            };
            let mut expect = build();
            // A trace file binds the machine to its metadata (here: no kernel layout).
            expect.bind_trace(None, "mixed.lks").unwrap();
            expect.run_batch(&events);
            let info = TraceInfo::default();
            let want = crate::report::result_json(&expect, &info);
            for reading in [Reading::OneThread, Reading::Pipelined] {
                let mut m = build();
                let (p, _) =
                    run_path(&path, Some(Format::Native), &mut m, reading, &mut |_| true).unwrap();
                assert_eq!(p.events, events.len() as u64);
                assert_eq!(crate::report::result_json(&m, &info), want, "{reading:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn many_machines_on_one_reading_give_each_its_own_result() {
        let trace =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sortprog.lackey.zst");
        let mach3 = include_str!("../../../python/lookaside/presets/decstation3100-mach3.toml");
        let builds: Vec<(Option<&str>, Vec<String>, Vec<String>)> = vec![
            (None, vec!["d:entries=16,ways=4,policy=fifo".into()], vec![]),
            (
                None,
                vec!["d:entries=64,ways=full,policy=random,page=4k+2M".into()],
                vec![],
            ),
            (
                None,
                vec![
                    "i:entries=8,ways=full,next=l2".into(),
                    "l2:entries=128,ways=8".into(),
                ],
                vec!["pages.size=\"16k\"".into()],
            ),
            // A 64-bit trace: its user addresses folded into kuseg.
            (
                Some(mach3),
                vec![],
                vec!["refill.fold_user_addresses=true".into()],
            ),
        ];
        let build = |(text, tlb, set): &(Option<&str>, Vec<String>, Vec<String>)| {
            Machine::assemble(*text, "t", tlb, set).unwrap()
        };
        for path in [
            trace.clone(),
            PathBuf::from("workload:multiserver,servers=2,hops=300"),
        ] {
            let mut many: Vec<Machine> = builds.iter().map(build).collect();
            let got = simulate_many(&path, None, &mut many, &mut |_| true).unwrap();
            assert_eq!(got.len(), builds.len());
            for (b, g) in builds.iter().zip(&got) {
                let mut one = build(b);
                let want = simulate_path(&path, None, &mut one, Reading::OneThread, &mut |_| true)
                    .unwrap();
                assert_eq!(*g, want, "{b:?} on {}", path.display());
            }
        }
        let mut none: Vec<Machine> = vec![];
        assert!(simulate_many(&trace, None, &mut none, &mut |_| true)
            .unwrap()
            .is_empty());
        let e = simulate_many(
            Path::new("no-such.lks"),
            None,
            &mut [machine()],
            &mut |_| true,
        );
        assert!(e.unwrap_err().to_string().contains("no-such.lks"));
    }

    /// A source that fails after some batches, as a corrupt file does.
    struct FailsAfter(Synthetic, usize);

    impl TraceSource for FailsAfter {
        fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
            if self.1 == 0 {
                return Err(Error::trace(
                    "t.lks",
                    crate::error::Location::Byte(99),
                    "stream",
                    "corrupt",
                ));
            }
            self.1 -= 1;
            self.0.next_batch(out)
        }
    }

    #[test]
    fn a_watched_source_reports_its_end_and_stops_when_told() {
        let mut calls = Vec::new();
        let mut source = Synthetic::new(100_000, 1, 64, 64);
        let n = drain(&mut Watched::new(&mut source, &mut |p| {
            calls.push(p.events);
            true
        }))
        .unwrap();
        assert_eq!(n, 100_000);
        assert_eq!(calls.last(), Some(&100_000), "the end is always reported");
        // Told to stop, a pass over an endless stream ends at the next report.
        let mut endless = Synthetic::new(u64::MAX, 1, 64, 64);
        let t0 = std::time::Instant::now();
        let e = crate::trace::summarize(&mut Watched::new(&mut endless, &mut |_| false));
        assert_eq!(e.unwrap_err().to_string(), "interrupted");
        assert!(t0.elapsed() < crate::trace::stream::WATCH_EVERY * 20);
    }

    #[test]
    fn errors_and_interrupts_stop_both_drivers() {
        let e = run_pipelined(
            Box::new(FailsAfter(Synthetic::new(1 << 30, 1, 64, 64), 700)),
            &mut machine(),
            &mut |_| true,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "t.lks: byte offset 99: stream: corrupt");
        let e = run(
            &mut FailsAfter(Synthetic::new(1 << 30, 1, 64, 64), 3),
            &mut machine(),
            &mut |_| true,
        )
        .unwrap_err();
        assert!(e.to_string().contains("corrupt"));
        let e = run_pipelined(
            Box::new(Synthetic::new(1 << 30, 1, 64, 64)),
            &mut machine(),
            &mut |_| false,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "interrupted");
    }
}

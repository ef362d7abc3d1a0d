//! What every fuzz target does with its input, in one place: read it as a trace (any
//! compression) and simulate what was read on a small machine, or build a machine from it.
//! Errors are the expected outcome for most inputs; a panic, a hang or unbounded memory is
//! a bug.

use std::path::Path;

use lookaside::machine::Machine;
use lookaside::trace::{self, compress::Input, Format};
use lookaside::Event;

/// Events read from one input at most: a tiny compressed input can inflate to a huge stream,
/// and the readers are streaming, so a bounded prefix exercises everything.
const MAX_EVENTS: usize = 1 << 20;

fn small_machine() -> Machine {
    let flags = [
        "itlb:entries=8,ways=2,next=l2,page=4k+2M".to_string(),
        "dtlb:entries=4,ways=full,next=l2,asid=false,page=4k+2M".into(),
        "l2:entries=32,ways=4,policy=plru,partition=1/fifo/random,placement=kernel-lower".into(),
    ];
    Machine::assemble(None, "fuzz", &flags, &[]).expect("the fuzz machine is valid")
}

/// Read `data` as a trace of `format` (detected when `None`) and simulate it.
pub fn read_and_simulate(data: &[u8], format: Option<Format>) {
    let Ok(mut input) = Input::from_bytes("fuzz-input", data.to_vec()) else {
        return;
    };
    let format = match format {
        Some(f) => f,
        None => match input
            .peek(trace::format::SNIFF_BYTES)
            .and_then(|head| trace::detect(Path::new("fuzz-input"), head))
        {
            Ok(f) => f,
            Err(_) => return,
        },
    };
    let Ok(mut source) = trace::reader(input, format) else {
        return;
    };
    simulate(source.as_mut());
}

/// Read `data` as the raw stream of the capture plugin (`lookaside trace`) and simulate it.
pub fn read_capture(data: &[u8]) {
    let Ok(mut source) =
        trace::capture::CaptureReader::new(std::io::Cursor::new(data.to_vec()), "fuzz-input")
    else {
        return;
    };
    simulate(&mut source);
}

/// Simulate a bounded prefix of `source` on the small machine.
fn simulate(source: &mut dyn trace::TraceSource) {
    let mut machine = small_machine();
    let mut batch: Vec<Event> = Vec::new();
    let mut seen = 0;
    while let Ok(true) = source.next_batch(&mut batch) {
        machine.run_batch(&batch);
        seen += batch.len();
        if seen >= MAX_EVENTS {
            break;
        }
    }
    let _ = lookaside::report::result_json(&machine, &Default::default());
}

/// Build a machine from `data` as TOML text (its first line also as a `--tlb` flag and as a
/// `--set` override) and, if it builds, simulate a short fixed stream on it.
pub fn configure(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = text.lines().next().unwrap_or("").to_string();
    let attempts: [(Option<&str>, Vec<String>, Vec<String>); 3] = [
        (Some(text), vec![], vec![]),
        (None, vec![first.clone()], vec![]),
        (None, vec!["d:entries=8,ways=2".into()], vec![first]),
    ];
    for (toml, flags, sets) in attempts {
        if let Ok(mut m) = Machine::assemble(toml, "fuzz", &flags, &sets) {
            let events: Vec<Event> = (0..2000u64)
                .map(|i| {
                    let kind = [
                        lookaside::Kind::Fetch,
                        lookaside::Kind::Load,
                        lookaside::Kind::Store,
                    ][(i % 3) as usize];
                    let mut e = Event::reference(kind, (i * 0x1357) << 6, 8);
                    e.asid = (i % 5) as u32;
                    e
                })
                .collect();
            m.run_batch(&events);
            let _ = lookaside::report::result_json(&m, &Default::default());
        }
    }
}

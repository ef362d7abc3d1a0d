//! A window of a trace: from the start of a phase (or of the trace), skip some references
//! and keep some, so that a long capture can be stored, shared or tested in part.
//!
//! A window must mean what the whole trace meant at that point, so the state the events
//! before it set up comes first, as control events: the CPU running (the last CPU marker),
//! the address space running (the last context switch), the phase (the last phase marker)
//! and the idle loop, if it is open.
//! VM events (map, unmap, protect, copy and zero page) build state a cut cannot carry
//! cheaply (every mapping made before the window), so a trace with any before its window is
//! refused rather than silently changed.

use crate::error::{Error, Result};
use crate::event::{Event, Kind, IDLE_MARKERS};

use super::{Metadata, TraceSource};

/// Which part of a trace to keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    /// Start at the first marker of this phase (see [`crate::event::PHASE_MARK`]); `None`:
    /// at the start of the trace.
    pub phase: Option<String>,
    /// References left out from there.
    pub skip: u64,
    /// References kept after them (`None`: all the rest).
    pub take: Option<u64>,
}

impl Cut {
    /// What the cut keeps, in words, for the output's metadata. (The words stay those the
    /// stored corpus was cut with, so that a recapture gives its metadata byte for byte: the
    /// CPU running, which a cut carries too, is not named.)
    pub fn describe(&self) -> String {
        let from = match &self.phase {
            Some(p) => format!("the start of phase '{p}'"),
            None => "the start of the trace".into(),
        };
        let keep = match self.take {
            Some(n) => format!("the next {n} references"),
            None => "every reference after them".into(),
        };
        format!(
            "{keep} after skipping {} references from {from}, after the address space, phase \
             and idle state the events before set up",
            self.skip
        )
    }

    /// True when the cut keeps the whole trace.
    pub fn is_whole(&self) -> bool {
        self.phase.is_none() && self.skip == 0 && self.take.is_none()
    }
}

/// Where the window is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Looking for the phase marker.
    Phase,
    /// Skipping references.
    Skip,
    /// Keeping references.
    Keep,
    /// Past the window.
    Done,
}

/// `inner`, cut to the window `cut` describes.
pub struct CutSource<'a> {
    inner: &'a mut dyn TraceSource,
    phase: Option<String>,
    skip: u64,
    take: Option<u64>,
    at: At,
    /// The state the events before the window set up.
    cpu: Option<Event>,
    switch: Option<Event>,
    phase_mark: Option<Event>,
    idle: Option<Event>,
    batch: Vec<Event>,
    references: u64,
}

impl<'a> CutSource<'a> {
    pub fn new(inner: &'a mut dyn TraceSource, cut: &Cut) -> CutSource<'a> {
        CutSource {
            inner,
            phase: cut.phase.clone(),
            skip: cut.skip,
            take: cut.take,
            at: if cut.phase.is_some() {
                At::Phase
            } else {
                At::Skip
            },
            cpu: None,
            switch: None,
            phase_mark: None,
            idle: None,
            batch: Vec::new(),
            references: 0,
        }
    }

    /// Notes what an event before the window sets up; an error for a VM event.
    fn before(&mut self, e: &Event) -> Result<()> {
        match e.kind {
            Kind::ContextSwitch => self.switch = Some(*e),
            Kind::Marker if e.phase_label().is_some() => self.phase_mark = Some(*e),
            Kind::Marker if e.cpu_marked().is_some() => self.cpu = Some(*e),
            Kind::Marker if e.addr == IDLE_MARKERS[0] => self.idle = Some(*e),
            Kind::Marker if e.addr == IDLE_MARKERS[1] => self.idle = None,
            Kind::Map | Kind::Unmap | Kind::Protect | Kind::CopyPage | Kind::ZeroPage => {
                return Err(Error::Usage(format!(
                    "cannot cut this trace: it has a {} event before the window (at reference \
                     {}), and a cut cannot carry the mappings made before it",
                    e.kind.name(),
                    self.references
                )))
            }
            _ => {}
        }
        Ok(())
    }

    /// The window opens: the state set up before it goes out first.
    fn open(&mut self, out: &mut Vec<Event>) {
        self.at = if self.take == Some(0) {
            At::Done
        } else {
            At::Keep
        };
        out.extend(self.cpu.take());
        out.extend(self.switch.take());
        out.extend(self.phase_mark.take());
        out.extend(self.idle.take());
    }

    /// An event of the window; the window closes after its last reference.
    fn keep(&mut self, e: &Event, out: &mut Vec<Event>) {
        if self.at != At::Keep {
            return;
        }
        out.push(*e);
        if e.kind.is_ref() {
            self.references += 1;
            if Some(self.references) == self.take {
                self.at = At::Done;
            }
        }
    }
}

impl TraceSource for CutSource<'_> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        while out.is_empty() {
            if self.at == At::Skip && self.skip == 0 {
                self.open(out);
                if !out.is_empty() {
                    break;
                }
            }
            if self.at == At::Done || !self.inner.next_batch(&mut self.batch)? {
                if self.at == At::Phase {
                    let p = self.phase.as_deref().unwrap_or_default();
                    return Err(Error::Usage(format!(
                        "cannot cut this trace from phase '{p}': it marks no such phase"
                    )));
                }
                return Ok(!out.is_empty());
            }
            let batch = std::mem::take(&mut self.batch);
            for e in &batch {
                match self.at {
                    At::Phase => {
                        self.before(e)?;
                        if e.phase_label().as_deref() == self.phase.as_deref() {
                            self.at = At::Skip;
                        }
                    }
                    At::Skip if self.skip == 0 => {
                        self.open(out);
                        self.keep(e, out);
                    }
                    At::Skip => {
                        self.before(e)?;
                        if e.kind.is_ref() {
                            self.skip -= 1;
                        }
                    }
                    At::Keep => self.keep(e, out),
                    At::Done => break,
                }
            }
            self.batch = batch;
        }
        Ok(true)
    }

    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }

    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }

    fn metadata(&self) -> Option<&Metadata> {
        self.inner.metadata()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::VecSource;
    use proptest::prelude::*;

    fn r(addr: u64) -> Event {
        Event::reference(Kind::Load, addr, 8)
    }

    fn all(events: &[Event], cut: &Cut) -> Result<Vec<Event>> {
        batched(events, cut, 4)
    }

    fn batched(events: &[Event], cut: &Cut, batch: usize) -> Result<Vec<Event>> {
        let mut src = VecSource::new(events.to_vec(), batch);
        let mut c = CutSource::new(&mut src, cut);
        let (mut out, mut batch) = (Vec::new(), Vec::new());
        while c.next_batch(&mut batch)? {
            out.extend_from_slice(&batch);
        }
        Ok(out)
    }

    /// The obvious model: the window opens after the first `skip` references from the
    /// phase's marker (or the start); the state the events before it set up comes first.
    /// `None`: the phase is not in the trace.
    fn model(events: &[Event], cut: &Cut) -> Option<Vec<Event>> {
        let start = match &cut.phase {
            Some(p) => {
                events
                    .iter()
                    .position(|e| e.phase_label().as_deref() == Some(p))?
                    + 1
            }
            None => 0,
        };
        let mut open = start;
        let mut refs = 0;
        while refs < cut.skip {
            if open == events.len() {
                return Some(Vec::new()); // the window never opens
            }
            refs += events[open].kind.is_ref() as u64;
            open += 1;
        }
        let before = &events[..open];
        let mut out = Vec::new();
        out.extend(before.iter().rev().find(|e| e.cpu_marked().is_some()));
        out.extend(before.iter().rev().find(|e| e.kind == Kind::ContextSwitch));
        out.extend(before.iter().rev().find(|e| e.phase_label().is_some()));
        let idle = before
            .iter()
            .rev()
            .find(|e| e.kind == Kind::Marker && IDLE_MARKERS.contains(&e.addr));
        out.extend(idle.filter(|e| e.addr == IDLE_MARKERS[0]));
        let mut kept = 0;
        for e in &events[open..] {
            if cut.take == Some(kept) {
                break;
            }
            out.push(*e);
            kept += e.kind.is_ref() as u64;
        }
        Some(out)
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            6 => (0u64..64).prop_map(|a| r(a << 12)),
            1 => (1u32..4).prop_map(|a| Event::control(Kind::ContextSwitch, 0, a)),
            1 => (0u32..3).prop_map(Event::on_cpu),
            1 => prop::sample::select(vec!["load", "run", "chk"]).prop_map(Event::phase),
            1 => prop::sample::select(IDLE_MARKERS.to_vec())
                .prop_map(|p| Event::control(Kind::Marker, p, 0)),
        ]
    }

    proptest! {
        #[test]
        fn a_cut_is_the_window_after_the_state_before_it(
            events in prop::collection::vec(event(), 0..300),
            phase in prop::option::of(prop::sample::select(vec!["run", "chk", "none"])),
            skip in 0u64..60,
            take in prop::option::of(0u64..80),
            batch in 1usize..40,
        ) {
            let cut = Cut { phase: phase.map(String::from), skip, take };
            match model(&events, &cut) {
                Some(want) => prop_assert_eq!(batched(&events, &cut, batch).unwrap(), want),
                None => prop_assert!(batched(&events, &cut, batch).is_err()),
            }
        }
    }

    #[test]
    fn the_state_before_the_window_comes_first() {
        let events = vec![
            Event::control(Kind::ContextSwitch, 0, 1),
            r(0x1000),
            Event::phase("load"),
            Event::control(Kind::ContextSwitch, 0, 2),
            Event::control(Kind::Marker, IDLE_MARKERS[0], 0),
            Event::phase("run"),
            r(0x2000),
            r(0x3000),
            r(0x4000),
        ];
        let cut = Cut {
            phase: Some("run".into()),
            skip: 1,
            take: Some(1),
        };
        assert_eq!(
            all(&events, &cut).unwrap(),
            vec![
                Event::control(Kind::ContextSwitch, 0, 2),
                Event::phase("run"),
                Event::control(Kind::Marker, IDLE_MARKERS[0], 0),
                r(0x3000),
            ]
        );
    }

    #[test]
    fn a_missing_phase_and_vm_events_before_the_window_are_errors() {
        let events = vec![r(0x1000), Event::phase("load"), r(0x2000)];
        let e = all(
            &events,
            &Cut {
                phase: Some("run".into()),
                ..Cut::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("marks no such phase"), "{e}");
        let events = vec![Event::control(Kind::Map, 0x1000, 1), r(0x1000), r(0x2000)];
        let e = all(
            &events,
            &Cut {
                skip: 1,
                ..Cut::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("map event before the window"), "{e}");
    }
}

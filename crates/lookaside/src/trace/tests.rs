//! Tests across formats: round trips through files (plain and compressed), agreement between
//! formats, truncation and garbage (never a panic, never a silent short read), exact error
//! messages, and the real lackey trace in `tests/data`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::event::{Kind, Mode, ALL_KINDS, FLUSH_ALL, FLUSH_SPACE, NO_PADDR};

/// A source over events in memory, in batches of `batch`.
pub(crate) struct VecSource {
    events: Vec<Event>,
    pos: usize,
    batch: usize,
}

impl VecSource {
    pub fn new(events: Vec<Event>, batch: usize) -> VecSource {
        VecSource {
            events,
            pos: 0,
            batch: batch.max(1),
        }
    }
}

impl TraceSource for VecSource {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        let end = (self.pos + self.batch).min(self.events.len());
        out.extend_from_slice(&self.events[self.pos..end]);
        self.pos = end;
        Ok(!out.is_empty())
    }
}

/// A fresh directory for one test.
pub(crate) fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lookaside-trace-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn write(path: &Path, format: Option<Format>, events: &[Event]) -> u64 {
    let sink = create(path, format, &Metadata::default()).unwrap();
    copy(&mut VecSource::new(events.to_vec(), 1000), sink).unwrap()
}

pub(crate) fn read_all(path: &Path, format: Option<Format>) -> Result<Vec<Event>> {
    let mut src = open(path, format)?;
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while src.next_batch(&mut batch)? {
        assert!(!batch.is_empty() && batch.len() <= crate::event::BATCH + 32);
        all.extend_from_slice(&batch);
    }
    assert!(batch.is_empty());
    Ok(all)
}

pub(crate) fn any_kind() -> impl Strategy<Value = Kind> {
    (0..ALL_KINDS.len()).prop_map(|i| ALL_KINDS[i])
}

pub(crate) fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1u64 << 63),
        0x40_0000u64..0x40_1000,
        0x7fff_0000u64..0x7fff_0100,
        any::<u64>(),
    ]
}

/// Any event at all: every kind, every field value.
pub(crate) fn any_event() -> impl Strategy<Value = Event> {
    (
        any_kind(),
        any_u64(),
        prop_oneof![Just(NO_PADDR), any_u64()],
        prop_oneof![Just(0u32), Just(1u32), Just(u32::MAX), any::<u32>()],
        prop_oneof![
            Just(4u16),
            Just(8u16),
            Just(0u16),
            Just(u16::MAX),
            any::<u16>()
        ],
        any::<bool>(),
    )
        .prop_map(|(kind, addr, paddr, asid, size, kernel)| Event {
            addr,
            paddr,
            asid,
            size,
            kind,
            mode: if kernel { Mode::Kernel } else { Mode::User },
        })
}

/// A reference stream as text formats carry it: user mode, address space 0, no paddr.
fn plain_refs(size: impl Strategy<Value = u16>) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        ((0..3usize).prop_map(|k| ALL_KINDS[k]), any_u64(), size)
            .prop_map(|(k, a, s)| Event::reference(k, a, s)),
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn native_round_trips_any_events(events in prop::collection::vec(any_event(), 0..400)) {
        let dir = scratch("prop-native");
        let p = dir.join("t.lks");
        prop_assert_eq!(write(&p, None, &events), events.len() as u64);
        prop_assert_eq!(read_all(&p, None).unwrap(), events);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn text_formats_round_trip_references(events in plain_refs(1u16..=u16::MAX)) {
        let dir = scratch("prop-text");
        for name in ["t.lackey", "t.xdin"] {
            let p = dir.join(name);
            write(&p, None, &events);
            prop_assert_eq!(&read_all(&p, None).unwrap(), &events, "{}", name);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn din_round_trips_four_byte_references_and_flushes(
        mut events in plain_refs(Just(4u16)),
        flushes in prop::collection::vec((0usize..300, prop_oneof![Just(FLUSH_ALL), Just(FLUSH_SPACE), any_u64()]), 0..5),
    ) {
        for (at, addr) in flushes {
            let at = at.min(events.len());
            events.insert(at, Event::control(Kind::TlbFlush, addr, 0));
        }
        let dir = scratch("prop-din");
        let p = dir.join("t.din");
        // A flush of one address space has no label: left out, and counted as left out.
        let kept: Vec<Event> = events.iter().copied().filter(|e| e.addr != FLUSH_SPACE || e.kind.is_ref()).collect();
        prop_assert_eq!(write(&p, None, &events), kept.len() as u64);
        prop_assert_eq!(read_all(&p, None).unwrap(), kept);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lackey_din_and_native_agree(events in plain_refs(Just(4u16))) {
        let dir = scratch("prop-agree");
        let mut back = Vec::new();
        for name in ["t.lackey", "t.din", "t.lks", "t.xdin"] {
            let p = dir.join(name);
            write(&p, None, &events);
            back.push(read_all(&p, None).unwrap());
        }
        for b in &back {
            prop_assert_eq!(b, &events);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn native_cut_at_any_byte_is_an_error(
        events in prop::collection::vec(any_event(), 0..300),
        cut in 0.0f64..1.0,
    ) {
        let dir = scratch("prop-cut");
        let p = dir.join("t.lks");
        write(&p, None, &events);
        let full = std::fs::read(&p).unwrap();
        let n = ((full.len() as f64) * cut) as usize;
        std::fs::write(&p, &full[..n.min(full.len() - 1)]).unwrap();
        prop_assert!(read_all(&p, Some(Format::Native)).is_err());
        prop_assert!(read_all(&p, None).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn near_miss_text_never_panics(tokens in prop::collection::vec(prop::sample::select(vec![
        "I", " L", " S", " M", " ", "  ", "\t", ",", "0x", "0", "1", "4", "5", "9", "f", "ffffffffffffffff",
        "10000000000000000", "65535", "65536", "r", "w", "i", "m", "c", "v", "=", "==1==", "SB", "\r",
        "\n", "\n", "\n", "-", "g",
    ]), 0..200)) {
        let text: String = tokens.concat();
        let dir = scratch("prop-nearmiss");
        let p = dir.join("t");
        std::fs::write(&p, text.as_bytes()).unwrap();
        for f in [Format::Lackey, Format::Din, Format::XDin] {
            if let Ok(events) = read_all(&p, Some(f)) {
                // Whatever was accepted must survive a round trip through its own format.
                let q = dir.join(format!("back.{}", f.extension()));
                write(&q, Some(f), &events);
                prop_assert_eq!(read_all(&q, Some(f)).unwrap(), events);
            }
        }
        let _ = read_all(&p, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2000), text in "[ -~\n]{0,400}") {
        let dir = scratch("prop-garbage");
        let p = dir.join("g");
        for data in [&bytes[..], text.as_bytes()] {
            std::fs::write(&p, data).unwrap();
            for f in ALL_FORMATS {
                let _ = read_all(&p, Some(f));
            }
            let _ = read_all(&p, None);
            let mut with_magic = native::MAGIC.to_vec();
            with_magic.extend_from_slice(data);
            std::fs::write(&p, &with_magic).unwrap();
            let _ = read_all(&p, None);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Events exercising every kind and extreme, in a fixed order.
fn sample_events(n: usize) -> Vec<Event> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let kind = ALL_KINDS[if i % 17 == 0 {
                (x % 9) as usize
            } else {
                (x % 3) as usize
            }];
            let addr = match i % 5 {
                0 => x,
                _ => 0x40_0000 + (i as u64 * 4) % 65536,
            };
            Event {
                addr,
                paddr: if i % 3 == 0 {
                    x.rotate_left(7)
                } else {
                    NO_PADDR
                },
                asid: (i / 1000) as u32,
                size: [1, 4, 8, 16, 3, 4096][i % 6],
                kind,
                mode: if i % 7 == 0 { Mode::Kernel } else { Mode::User },
            }
        })
        .collect()
}

#[test]
fn native_spans_many_buffers_and_keeps_metadata() {
    let dir = scratch("native-big");
    let p = dir.join("big.lks");
    let events = sample_events(700_000);
    let mut meta = Metadata {
        command: Some("sortprog 1000".into()),
        ..Metadata::default()
    };
    meta.extra.insert("workload".into(), "test".into());
    let sink = create_with(&p, None, &meta, &WriteOptions { level: 1 }).unwrap();
    copy(&mut VecSource::new(events.clone(), 3000), sink).unwrap();
    assert_eq!(read_all(&p, None).unwrap(), events);
    let src = open(&p, None).unwrap();
    let m = src.metadata().unwrap();
    assert_eq!(m.command.as_deref(), Some("sortprog 1000"));
    assert_eq!(m.extra["workload"], "test");
    assert!(m.tool.as_deref().unwrap().starts_with("lookaside "));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn native_cut_anywhere_is_an_error() {
    let dir = scratch("native-cut");
    let p = dir.join("t.lks");
    let events = sample_events(20_000);
    write(&p, None, &events);
    let full = std::fs::read(&p).unwrap();
    let cut = dir.join("cut.lks");
    let step = (full.len() / 400).max(1);
    let mut cuts: Vec<usize> = (0..full.len()).step_by(step).collect();
    cuts.extend((full.len().saturating_sub(64))..full.len());
    cuts.extend(0..40);
    for n in cuts {
        std::fs::write(&cut, &full[..n]).unwrap();
        let r = read_all(&cut, Some(Format::Native));
        assert!(
            r.is_err(),
            "cut at {n} of {} read as {} events",
            full.len(),
            r.unwrap().len()
        );
    }
    // Appending anything is an error too.
    let mut longer = full.clone();
    longer.push(0);
    std::fs::write(&cut, &longer).unwrap();
    assert!(read_all(&cut, None).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn progress_counts_file_bytes() {
    let dir = scratch("progress");
    let events = sample_events(300_000);
    for name in ["t.lks", "t.din.gz", "t.champsimtrace.xz"] {
        let p = dir.join(name);
        write(&p, None, &events);
        let size = std::fs::metadata(&p).unwrap().len();
        let mut src = open(&p, None).unwrap();
        let mut batch = Vec::new();
        let mut last = 0;
        while src.next_batch(&mut batch).unwrap() {
            assert!(src.bytes_read() >= last && src.bytes_read() <= size);
            last = src.bytes_read();
        }
        assert_eq!(src.bytes_read(), size, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn native_inside_outer_compression_reads_and_reports_the_outer_layer() {
    let dir = scratch("native-gz");
    let p = dir.join("t.lks.gz");
    let events = sample_events(50_000);
    write(&p, None, &events);
    assert_eq!(read_all(&p, None).unwrap(), events);
    let full = std::fs::read(&p).unwrap();
    std::fs::write(&p, &full[..full.len() / 2]).unwrap();
    let msg = read_all(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains(": compression: corrupt or truncated gzip stream"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn native_corruption_is_detected() {
    let dir = scratch("native-flip");
    let p = dir.join("t.lks");
    let events = sample_events(5_000);
    write(&p, None, &events);
    let full = std::fs::read(&p).unwrap();
    let bad = dir.join("bad.lks");
    let start = 18 + u32::from_le_bytes([full[10], full[11], full[12], full[13]]) as usize;
    let mut caught = 0;
    for i in (start..full.len()).step_by(7) {
        let mut b = full.clone();
        b[i] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        // A flip in a bit zstd never reads (bitstream padding) changes nothing: fine. Any
        // other flip must be an error, never different events.
        match read_all(&bad, None) {
            Err(_) => caught += 1,
            Ok(back) => assert!(
                back == events,
                "flip at {i} of {} read as other events",
                full.len()
            ),
        }
    }
    assert!(caught > (full.len() - start) / 7 * 9 / 10);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every single-bit flip of the version, the header length or the metadata is refused when
/// the file is opened, before any record is read or any metadata shown.
#[test]
fn native_header_flips_are_refused_at_open() {
    let dir = scratch("native-header-flip");
    let p = dir.join("t.lks");
    let meta = Metadata {
        command: Some("lookaside convert a b".into()),
        ..Metadata::default()
    };
    let sink = create_with(&p, None, &meta, &WriteOptions::default()).unwrap();
    copy(&mut VecSource::new(sample_events(100), 100), sink).unwrap();
    let full = std::fs::read(&p).unwrap();
    let records = 18 + u32::from_le_bytes([full[10], full[11], full[12], full[13]]) as usize;
    let bad = dir.join("bad.lks");
    for i in 8..records {
        for bit in 0..8 {
            let mut b = full.clone();
            b[i] ^= 1 << bit;
            std::fs::write(&bad, &b).unwrap();
            assert!(
                open(&bad, Some(Format::Native)).is_err(),
                "bit {bit} of byte {i} flipped was accepted"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A version-1 file (no header CRC) still reads, with the same events and metadata.
#[test]
fn native_version_1_still_reads() {
    let dir = scratch("native-v1");
    let p = dir.join("t.lks");
    let events = sample_events(3_000);
    let meta = Metadata {
        command: Some("old".into()),
        ..Metadata::default()
    };
    let sink = create_with(&p, None, &meta, &WriteOptions::default()).unwrap();
    copy(&mut VecSource::new(events.clone(), 1000), sink).unwrap();
    let mut v1 = std::fs::read(&p).unwrap();
    let hlen = 14 + u32::from_le_bytes([v1[10], v1[11], v1[12], v1[13]]) as usize;
    v1.drain(hlen..hlen + 4);
    v1[8] = 1;
    let old = dir.join("old.lks");
    std::fs::write(&old, &v1).unwrap();
    assert_eq!(read_all(&old, None).unwrap(), events);
    let src = open(&old, None).unwrap();
    assert_eq!(src.metadata().unwrap().command.as_deref(), Some("old"));
    // Rewriting its metadata makes it a checked version-2 file with the same records.
    native::set_metadata(&old, &meta).unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), std::fs::read(&p).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn native_errors_say_where_and_what() {
    let dir = scratch("native-msg");
    let p = dir.join("t.lks");
    write(&p, None, &sample_events(100));
    let full = std::fs::read(&p).unwrap();
    let err = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        let shown = p.display().to_string();
        read_all(&p, Some(Format::Native))
            .unwrap_err()
            .to_string()
            .replace(&shown, "t.lks")
    };
    let mut b = full.clone();
    b[0] = b'X';
    assert_eq!(
        err(&b),
        "t.lks: byte offset 0: magic: not a Lookaside native trace (expected \"LKSTRACE\")"
    );
    let mut b = full.clone();
    b[8] = 3;
    assert_eq!(
        err(&b),
        "t.lks: byte offset 8: version: unsupported format version 3 (this build reads \
         versions 1 and 2)"
    );
    let hlen = 14 + u32::from_le_bytes([full[10], full[11], full[12], full[13]]) as usize;
    let mut b = full.clone();
    b[hlen - 2] ^= 1;
    assert_eq!(
        err(&b),
        format!(
            "t.lks: byte offset {hlen}: header: CRC mismatch: the version, length or metadata \
             is corrupt"
        )
    );
    assert_eq!(
        err(&full[..20]),
        "t.lks: byte offset 20: header: truncated: the file ends inside the header"
    );
    assert_eq!(
        err(&full[..hlen + 2]),
        format!(
            "t.lks: byte offset {}: header: truncated: the file ends inside the header",
            hlen + 2
        )
    );
    assert_eq!(
        err(&full[..hlen + 4]),
        format!(
            "t.lks: byte offset {}: compression: truncated: incomplete frame",
            hlen + 4
        )
    );
    let msg = err(&full[..full.len() - 3]);
    assert!(
        msg.starts_with("t.lks: byte offset ") && msg.contains(": compression: "),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn text_errors_name_file_line_and_field() {
    let dir = scratch("text-msg");
    let cases: [(&str, &str, &str); 4] = [
        (
            "t.din",
            "0 10\n2 20\n9 30\n",
            "line 3: label: unknown label 9 (expected 0-5)",
        ),
        ("t.xdin", "r 10 4\nw 10\n", "line 2: size: missing size"),
        (
            "t.lackey",
            "I  0400d7d4,8\n L 04zz,8\n",
            "line 2: address: expected ',' after the address, found 'z'",
        ),
        (
            "t.lackey.gz",
            "I  0400d7d4,8\n\n\n L 10,99999\n",
            "line 4: size: size 99999 is larger than 65535",
        ),
    ];
    for (name, text, want) in cases {
        let p = dir.join(name);
        let mut out = compress::Output::create(&p).unwrap();
        std::io::Write::write_all(&mut out, text.as_bytes()).unwrap();
        out.commit().unwrap();
        let e = read_all(&p, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: {want}", p.display()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compressed_text_reads_back_identically() {
    let dir = scratch("text-compressed");
    let events: Vec<Event> = sample_events(30_000)
        .into_iter()
        .filter(|e| e.kind.is_ref())
        .map(|e| Event::reference(e.kind, e.addr, 4))
        .collect();
    for f in [Format::Lackey, Format::Din, Format::XDin] {
        for comp in ["", ".gz", ".xz", ".zst"] {
            let p = dir.join(format!("t.{}{comp}", f.extension()));
            write(&p, None, &events);
            assert_eq!(read_all(&p, None).unwrap(), events, "{}", p.display());
            // The content decides, not the name.
            let q = dir.join(format!("renamed-{}{comp}", f.name()));
            std::fs::rename(&p, &q).unwrap();
            assert_eq!(read_all(&q, None).unwrap(), events, "{}", q.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn long_text_spans_chunks() {
    // More than one 1 MiB chunk, with lines cut by every chunk boundary.
    let dir = scratch("text-long");
    let p = dir.join("t.lackey");
    let events: Vec<Event> = (0..150_000u64)
        .map(|i| {
            Event::reference(
                ALL_KINDS[(i % 3) as usize],
                i.wrapping_mul(0x9e37_79b9),
                1 + (i % 300) as u16,
            )
        })
        .collect();
    write(&p, None, &events);
    assert!(std::fs::metadata(&p).unwrap().len() > 2 * textio::CHUNK as u64);
    assert_eq!(read_all(&p, None).unwrap(), events);
    // No newline at the end is fine.
    let mut text = std::fs::read(&p).unwrap();
    text.pop();
    std::fs::write(&p, &text).unwrap();
    assert_eq!(read_all(&p, None).unwrap(), events);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writers_leave_nothing_behind_unless_finished() {
    let dir = scratch("atomic");
    for name in ["t.lks", "t.din.gz", "t.lackey"] {
        let p = dir.join(name);
        let mut sink = create(&p, None, &Metadata::default()).unwrap();
        sink.write_batch(&sample_events(1000)).unwrap();
        drop(sink);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_counts_what_it_kept_and_records_provenance() {
    let dir = scratch("convert");
    let src = dir.join("t.lks");
    let events = sample_events(10_000);
    write(&src, None, &events);
    let din = dir.join("t.din.zst");
    let kept = convert(&src, None, &din, None, &Metadata::default()).unwrap();
    let carried = events
        .iter()
        .filter(|e| e.kind.is_ref() || e.kind == Kind::TlbFlush)
        .count() as u64;
    assert_eq!(kept, carried);
    assert_eq!(read_all(&din, None).unwrap().len() as u64, carried);
    let back = dir.join("back.lks");
    let n = convert(&din, None, &back, None, &Metadata::default()).unwrap();
    assert_eq!(n, carried);
    let src = open(&back, None).unwrap();
    assert_eq!(
        src.metadata().unwrap().source_format.as_deref(),
        Some("din")
    );
    assert!(create(&dir.join("t.txt"), None, &Metadata::default()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real lackey trace committed in `tests/data` (see its README).
fn sortprog() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sortprog.lackey.zst")
}

#[test]
fn real_lackey_trace_reads_and_converts() {
    let p = sortprog();
    let events = read_all(&p, None).unwrap();
    let s = summarize(open(&p, None).unwrap().as_mut()).unwrap();
    assert_eq!(s.events, events.len() as u64);
    // Counted with grep in tests/data/README.md: 198233 I, 26412 L, 28577 S, 25 M lines.
    assert_eq!(s.instructions, 198_233);
    assert_eq!(
        (s.kinds["load"], s.kinds["store"]),
        (26_412 + 25, 28_577 + 25)
    );
    assert_eq!(s.events, 198_233 + 26_437 + 28_602);
    assert_eq!((s.asids, s.modes["kernel"]), (1, 0));
    let dir = scratch("real");
    for name in ["t.lks", "t.lackey", "t.xdin.xz"] {
        let q = dir.join(name);
        convert(&p, None, &q, None, &Metadata::default()).unwrap();
        assert_eq!(read_all(&q, None).unwrap(), events, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the ChampSim writer keeps of `events`, as the reader gives it back: per fetch, the
/// first 4 non-zero loads and the first 2 non-zero stores that follow it, loads first.
fn as_champsim(events: &[Event]) -> Vec<Event> {
    let mut out = Vec::new();
    let (mut loads, mut stores): (Vec<Event>, Vec<Event>) = (vec![], vec![]);
    let mut open = false;
    let close = |out: &mut Vec<Event>, loads: &mut Vec<Event>, stores: &mut Vec<Event>| {
        out.append(loads);
        out.append(stores);
    };
    for e in events {
        let r = Event::reference(e.kind, e.addr, 1);
        match e.kind {
            Kind::Fetch => {
                close(&mut out, &mut loads, &mut stores);
                out.push(r);
                open = true;
            }
            Kind::Load if open && e.addr != 0 && loads.len() < 4 => loads.push(r),
            Kind::Store if open && e.addr != 0 && stores.len() < 2 => stores.push(r),
            _ => {}
        }
    }
    close(&mut out, &mut loads, &mut stores);
    out
}

#[test]
fn champsim_keeps_what_its_records_hold_across_many_buffers() {
    let dir = scratch("champsim-big");
    let events = sample_events(200_000);
    let want = as_champsim(&events);
    for name in ["t.champsimtrace", "t.champsimtrace.zst"] {
        let p = dir.join(name);
        assert_eq!(write(&p, None, &events), want.len() as u64, "{name}");
        assert_eq!(read_all(&p, None).unwrap(), want, "{name}");
    }
    let src = dir.join("t.lks");
    write(&src, None, &events);
    let c = convert_counted(
        &src,
        None,
        &dir.join("c.champsim.gz"),
        None,
        &Metadata::default(),
    )
    .unwrap();
    assert_eq!(c.read, events.len() as u64);
    assert_eq!(c.written, want.len() as u64);
    assert_eq!(c.left_out(), (events.len() - want.len()) as u64);
    let err = create(&dir.join("t.cloudsuite"), None, &Metadata::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("not yet implemented: writing CloudSuite"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_lackey_trace_converts_to_champsim() {
    let p = sortprog();
    let events = read_all(&p, None).unwrap();
    let want = as_champsim(&events);
    let dir = scratch("real-champsim");
    let q = dir.join("sortprog.champsimtrace.xz");
    let c = convert_counted(&p, None, &q, None, &Metadata::default()).unwrap();
    assert_eq!(read_all(&q, None).unwrap(), want);
    assert_eq!(c.written, want.len() as u64);
    let s = summarize(open(&q, None).unwrap().as_mut()).unwrap();
    let orig = summarize(open(&p, None).unwrap().as_mut()).unwrap();
    assert_eq!(
        s.instructions, orig.instructions,
        "every instruction is kept"
    );
    assert_eq!(s.references + c.left_out(), orig.references);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU markers travel in the native format as they are, so a trace of several CPUs keeps
/// which CPU made each reference through a file; the text formats, which hold no markers,
/// read back as CPU 0's.
#[test]
fn cpu_markers_survive_the_native_format() {
    let r = |cpu: u64| Event::reference(Kind::Load, 0x1000 + cpu * 64, 8);
    let events = vec![
        r(0),
        Event::on_cpu(1),
        r(1),
        r(1),
        Event::on_cpu(3),
        r(3),
        Event::on_cpu(0),
        r(0),
    ];
    let dir = scratch("cpus");
    let native = dir.join("t.lks");
    write(&native, None, &events);
    assert_eq!(read_all(&native, None).unwrap(), events);
    let s = summarize(open(&native, None).unwrap().as_mut()).unwrap();
    let per: Vec<(u32, u64)> = s.by_cpu.iter().map(|(c, n)| (*c, n.user)).collect();
    assert_eq!(per, [(0, 2), (1, 2), (3, 1)]);
    let din = dir.join("t.din");
    write(&din, None, &events);
    let s = summarize(open(&din, None).unwrap().as_mut()).unwrap();
    assert_eq!(s.by_cpu.keys().copied().collect::<Vec<_>>(), [0]);
    let _ = std::fs::remove_dir_all(&dir);
}

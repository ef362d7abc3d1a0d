//! The guest kernel's address layout a whole-system trace records: which virtual ranges are
//! its direct map of physical memory, its text, its modules, vmalloc space, vmemmap, fixmap
//! and CPU entry area.
//!
//! A model of a machine whose kernel runs partly unmapped (MIPS kseg0 holds kernel text and
//! the memory the kernel reaches directly, outside the TLB) must know which references of
//! an x86-64 trace play those roles: x86-64 translates every kernel address, and its direct
//! map (where kmalloc'd objects, page tables and the page cache live) is nowhere near the
//! MIPS segments. Priced as mapped, the direct map makes a synthesised TLB handler run for
//! most kernel data references. The capture's tracing module reads the layout from the
//! running kernel and the trace stores it as the `kernel_layout` metadata; a machine names
//! the classes it runs unmapped (`[pages] regions = [{ kernel = "direct_map", size =
//! "unmapped" }]`) and [`KernelLayout::of_trace`] gives their ranges for a trace.
//!
//! The metadata value lists each class as `NAME START-END` (hexadecimal, end exclusive),
//! separated by `; `, in the order of [`KernelClass::ALL`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Metadata;

/// The metadata key of a trace's kernel layout.
pub const METADATA_KEY: &str = "kernel_layout";
/// The `capture` metadata of a whole-system capture (`lookaside trace --system`).
pub const SYSTEM_CAPTURE: &str = "qemu-system plugin";

/// A class of kernel virtual addresses.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    /// The direct map of all physical memory (x86-64 `page_offset_base`; MIPS kseg0).
    DirectMap,
    /// The kernel image: text, data, bss (`__START_KERNEL_map`, `KERNEL_IMAGE_SIZE`).
    Text,
    /// Loadable modules (`MODULES_VADDR`..`MODULES_END`).
    Modules,
    /// vmalloc and ioremap space, kernel stacks among them (`vmalloc_base`).
    Vmalloc,
    /// The array of `struct page` (`vmemmap_base`).
    Vmemmap,
    /// Compile-time fixed mappings, the vsyscall page among them (`FIXADDR_START`..).
    Fixmap,
    /// Per-CPU entry areas: GDT, TSS, entry stacks (`CPU_ENTRY_AREA_BASE`).
    CpuEntryArea,
}

impl KernelClass {
    /// Every class, in the order the capture stream and the metadata give them.
    pub const ALL: [KernelClass; 7] = [
        KernelClass::DirectMap,
        KernelClass::Text,
        KernelClass::Modules,
        KernelClass::Vmalloc,
        KernelClass::Vmemmap,
        KernelClass::Fixmap,
        KernelClass::CpuEntryArea,
    ];

    /// The name configs and metadata use: `direct_map`, `text`, …
    pub fn name(self) -> &'static str {
        match self {
            KernelClass::DirectMap => "direct_map",
            KernelClass::Text => "text",
            KernelClass::Modules => "modules",
            KernelClass::Vmalloc => "vmalloc",
            KernelClass::Vmemmap => "vmemmap",
            KernelClass::Fixmap => "fixmap",
            KernelClass::CpuEntryArea => "cpu_entry_area",
        }
    }

    fn from_name(s: &str) -> Option<KernelClass> {
        KernelClass::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// The ranges `[start, end)` of the kernel's address classes (a class may be absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelLayout(pub BTreeMap<KernelClass, (u64, u64)>);

/// Linux x86-64 with 4-level paging and no KASLR (`nokaslr`), as Debian 12's cloud kernel
/// (6.1) lays it out and its capture module reports it (the windows of
/// `Documentation/arch/x86/x86_64/mm.rst`, with a 1 GiB kernel image since Debian builds
/// with `CONFIG_RANDOMIZE_BASE`; fixmap and CPU entry area as that build sizes them): what
/// is assumed for a whole-system capture made before traces carried their layout.
pub const X86_64_NOKASLR: [(KernelClass, u64, u64); 7] = [
    (
        KernelClass::DirectMap,
        0xffff_8880_0000_0000,
        0xffff_c880_0000_0000,
    ),
    (
        KernelClass::Text,
        0xffff_ffff_8000_0000,
        0xffff_ffff_c000_0000,
    ),
    (
        KernelClass::Modules,
        0xffff_ffff_c000_0000,
        0xffff_ffff_ff00_0000,
    ),
    (
        KernelClass::Vmalloc,
        0xffff_c900_0000_0000,
        0xffff_e900_0000_0000,
    ),
    (
        KernelClass::Vmemmap,
        0xffff_ea00_0000_0000,
        0xffff_eb00_0000_0000,
    ),
    (
        KernelClass::Fixmap,
        0xffff_ffff_ff57_9000,
        0xffff_ffff_ff80_0000,
    ),
    (
        KernelClass::CpuEntryArea,
        0xffff_fe00_0000_0000,
        0xffff_fe00_7600_1000,
    ),
];

/// Where a trace's kernel layout came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutSource {
    /// The trace's `kernel_layout` metadata, read from the running kernel by the capture.
    Trace,
    /// The trace has none, but its metadata says it is a capture of Linux on x86-64 booted
    /// with `nokaslr`: [`X86_64_NOKASLR`].
    X86_64Nokaslr,
    /// Neither: no kernel layout is known.
    Unknown,
}

impl KernelLayout {
    /// The layout of `classes`.
    pub fn of(classes: &[(KernelClass, u64, u64)]) -> KernelLayout {
        KernelLayout(classes.iter().map(|&(c, s, e)| (c, (s, e))).collect())
    }

    /// The range of `class`, if the layout has it.
    pub fn range(&self, class: KernelClass) -> Option<(u64, u64)> {
        self.0.get(&class).copied()
    }

    /// The metadata value: `direct_map 0x…-0x…; text 0x…-0x…; …`.
    pub fn describe(&self) -> String {
        self.0
            .iter()
            .map(|(c, (s, e))| format!("{} {s:#x}-{e:#x}", c.name()))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Parses a metadata value written by [`KernelLayout::describe`].
    pub fn parse(text: &str) -> std::result::Result<KernelLayout, String> {
        let mut out = BTreeMap::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || {
                format!("'{item}': expected NAME START-END (e.g. text 0xffffffff80000000-0xffffffffc0000000)")
            };
            let (name, range) = item.split_once(char::is_whitespace).ok_or_else(bad)?;
            let class = KernelClass::from_name(name).ok_or_else(|| {
                format!(
                    "'{name}' is not a kernel address class (one of {})",
                    class_names()
                )
            })?;
            let (s, e) = range.trim().split_once('-').ok_or_else(bad)?;
            let hex = |v: &str| {
                u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).map_err(|_| bad())
            };
            let (s, e) = (hex(s)?, hex(e)?);
            if e <= s {
                return Err(format!("'{item}': the end must be above the start"));
            }
            if out.insert(class, (s, e)).is_some() {
                return Err(format!("'{name}' is given twice"));
            }
        }
        Ok(KernelLayout(out))
    }

    /// The kernel layout of a trace with `meta`: its `kernel_layout`, else, for a capture of
    /// x86-64 Linux made before traces recorded it (`capture` "qemu-system plugin" on a
    /// `qemu-system-x86_64` machine, with `nokaslr` on the kernel command line if it is
    /// recorded), [`X86_64_NOKASLR`]; else none. A `kernel_layout` that does not parse is an error.
    pub fn of_trace(
        meta: Option<&Metadata>,
    ) -> std::result::Result<(Option<KernelLayout>, LayoutSource), String> {
        let Some(m) = meta else {
            return Ok((None, LayoutSource::Unknown));
        };
        if let Some(v) = m.extra.get(METADATA_KEY) {
            return KernelLayout::parse(v)
                .map(|l| (Some(l), LayoutSource::Trace))
                .map_err(|e| format!("metadata {METADATA_KEY}: {e}"));
        }
        let get = |k: &str| m.extra.get(k).map(String::as_str).unwrap_or("");
        // `lookaside trace --system` has booted with nokaslr from the start; a command line
        // recorded without it (a capture made otherwise) leaves the layout unknown.
        let x86_64_linux = get("capture") == SYSTEM_CAPTURE
            && get("machine").starts_with("qemu-system-x86_64")
            && m.extra
                .get("kernel_command_line")
                .is_none_or(|c| c.split_whitespace().any(|w| w == "nokaslr"));
        Ok(if x86_64_linux {
            (
                Some(KernelLayout::of(&X86_64_NOKASLR)),
                LayoutSource::X86_64Nokaslr,
            )
        } else {
            (None, LayoutSource::Unknown)
        })
    }
}

/// The class names, for messages: `direct_map, text, …`.
pub fn class_names() -> String {
    KernelClass::ALL
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> Metadata {
        Metadata {
            extra: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Metadata::default()
        }
    }

    #[test]
    fn layout_round_trips_through_its_metadata_value() {
        let l = KernelLayout::of(&X86_64_NOKASLR);
        let text = l.describe();
        assert!(text.starts_with("direct_map 0xffff888000000000-0xffffc88000000000; text "));
        assert_eq!(KernelLayout::parse(&text), Ok(l));
    }

    #[test]
    fn bad_layouts_say_what_is_wrong() {
        let e = |s: &str| KernelLayout::parse(s).unwrap_err();
        assert!(e("heap 0x1-0x2")
            .contains("'heap' is not a kernel address class (one of direct_map, text"));
        assert!(e("text 0x2-0x1").contains("the end must be above the start"));
        assert!(e("text 0x1").contains("expected NAME START-END"));
        assert!(e("text 0x1-0x2; text 0x3-0x4").contains("'text' is given twice"));
    }

    #[test]
    fn trace_layout_comes_from_metadata_or_the_documented_fallback() {
        let own = meta(&[("kernel_layout", "direct_map 0x1000-0x2000")]);
        let (l, src) = KernelLayout::of_trace(Some(&own)).unwrap();
        assert_eq!(src, LayoutSource::Trace);
        assert_eq!(
            l.unwrap().range(KernelClass::DirectMap),
            Some((0x1000, 0x2000))
        );
        let old = meta(&[
            ("capture", "qemu-system plugin"),
            (
                "machine",
                "qemu-system-x86_64 -cpu qemu64 -smp 1 -m 512M (TCG)",
            ),
            ("kernel_command_line", "console=ttyS0 nokaslr pti=off"),
        ]);
        let (l, src) = KernelLayout::of_trace(Some(&old)).unwrap();
        assert_eq!(src, LayoutSource::X86_64Nokaslr);
        assert_eq!(
            l.unwrap().range(KernelClass::Text),
            Some((0xffff_ffff_8000_0000, 0xffff_ffff_c000_0000))
        );
        // Captured before the command line was recorded: always with nokaslr.
        let older = meta(&[
            ("capture", "qemu-system plugin"),
            ("machine", "qemu-system-x86_64"),
        ]);
        assert_eq!(
            KernelLayout::of_trace(Some(&older)).unwrap().1,
            LayoutSource::X86_64Nokaslr
        );
        // KASLR on, a user-level capture, no metadata: nothing is guessed.
        for m in [
            meta(&[
                ("capture", "qemu-system plugin"),
                ("machine", "qemu-system-x86_64"),
                ("kernel_command_line", "console=ttyS0"),
            ]),
            meta(&[("capture", "qemu-user plugin")]),
        ] {
            assert_eq!(
                KernelLayout::of_trace(Some(&m)).unwrap(),
                (None, LayoutSource::Unknown)
            );
        }
        assert_eq!(
            KernelLayout::of_trace(None).unwrap(),
            (None, LayoutSource::Unknown)
        );
        let bad = meta(&[("kernel_layout", "nonsense")]);
        assert!(KernelLayout::of_trace(Some(&bad))
            .unwrap_err()
            .starts_with("metadata kernel_layout: 'nonsense'"));
    }
}

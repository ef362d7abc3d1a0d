#![no_main]
//! The machine configuration: TOML, `--tlb` flags and `--set` overrides.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lookaside_fuzz::configure(data));

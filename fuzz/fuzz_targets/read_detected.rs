#![no_main]
//! Format and compression detection, then whichever reader was detected.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lookaside_fuzz::read_and_simulate(data, None));

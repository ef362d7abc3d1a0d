#![no_main]
//! The raw stream of the capture plugin (`lookaside trace`), and the machine behind it.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lookaside_fuzz::read_capture(data));

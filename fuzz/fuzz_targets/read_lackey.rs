#![no_main]
//! The lackey reader (any compression) and the machine behind it.

use libfuzzer_sys::fuzz_target;
use lookaside::trace::Format;

fuzz_target!(|data: &[u8]| lookaside_fuzz::read_and_simulate(data, Some(Format::Lackey)));

#![no_main]
//! The ChampSim reader (any compression), its CloudSuite variant, and the machine behind them.

use libfuzzer_sys::fuzz_target;
use lookaside::trace::Format;

fuzz_target!(|data: &[u8]| {
    lookaside_fuzz::read_and_simulate(data, Some(Format::ChampSim));
    lookaside_fuzz::read_and_simulate(data, Some(Format::CloudSuite));
});

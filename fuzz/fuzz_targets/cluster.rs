//! Three protocol cores under a fuzzer-chosen schedule, with S1, S2 and S4 asserted.
#![no_main]

#[path = "../../tests/fuzz_harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::cluster(data);
});

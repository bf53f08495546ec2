//! The wire decoder, keyed and unkeyed: no panic, and accepted bytes are canonical.
#![no_main]

#[path = "../../tests/fuzz_harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::decode(data));

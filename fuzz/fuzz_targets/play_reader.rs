#![no_main]
//! `cargo +nightly fuzz run play_reader`: see `playdeck::fuzzing::play_reader` for what
//! it checks.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| playdeck::fuzzing::play_reader(data));

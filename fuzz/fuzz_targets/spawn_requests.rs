#![no_main]
//! `cargo +nightly fuzz run spawn_requests`: see `playdeck::fuzzing::spawn_requests` for what
//! it checks.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| playdeck::fuzzing::spawn_requests(data));

#![no_main]
//! `cargo +nightly fuzz run agent_stream`: see `playdeck::fuzzing::agent_stream` for what
//! it checks.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| playdeck::fuzzing::agent_stream(data));

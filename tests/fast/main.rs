//! The fast tier: every test here runs in this process — the kernel on
//! tokio's paused clock, plays validated, the console drawn into a test
//! backend — and none runs the playdeck binary, a terminal or a server.
//! The loop while changing code: `cargo test --lib --test fast`.

#[path = "../common/mod.rs"]
mod common;

mod agents_play;
mod budget;
mod capacity;
mod console_operator;
mod console_snapshots;
mod decisions;
mod docs_rules;
mod fuzz_corpus;
mod kernel;
mod palette;
mod play_validation;
mod projection;
mod readme_reliability;
mod replay;
mod retry;
mod web;

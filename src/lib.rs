//! playdeck: a terminal operator console for runs of AI coding agents.
//!
//! The library holds everything the binary embeds, so tests and benchmarks
//! drive the same code: `kernel` (ADR-0033), `play` (the play file),
//! `agents` (the agent registry and built-in agents), `store` (the run
//! directory) and `headless` (the NDJSON surface).

pub mod agents;
pub mod capacity;
pub mod cluster;
pub mod console;
pub mod control;
pub mod files;
pub mod fuzzing;
pub mod gitguard;
pub mod headless;
pub mod host;
pub mod inspect;
pub mod kernel;
pub mod land;
#[cfg(test)]
mod layers;
pub mod operator;
pub mod palette;
pub mod paths;
pub mod play;
pub mod printable;
pub mod projection;
pub mod session;
pub mod store;
pub mod vocab;
pub mod web;
pub mod worker;

//! The cli tier: the playdeck binary (and the example agent) run as
//! subprocesses, as a script or an operator's shell runs them — headless
//! runs, `ctl`, crashes and resumes, faults, streams, notify.

#[path = "../common/mod.rs"]
mod common;

mod adversary;
mod agents_play;
mod agents_runner;
mod budget;
mod capacity_cli;
mod cast;
mod closed_pipe;
mod conversation;
mod ctl_cli;
mod decisions;
mod durable;
mod faults;
mod headless_cli;
mod landing;
mod notify;
mod palette;
mod play_validation;
mod realcli_captures;
mod retry;
mod screenshots;
mod streams;
mod transcripts;
mod web;

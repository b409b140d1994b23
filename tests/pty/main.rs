//! The pty tier: the console run in a pseudo-terminal, read back through a
//! terminal emulator, driven by keys.

#[path = "../common/mod.rs"]
mod common;

mod console_pty;
mod decisions;

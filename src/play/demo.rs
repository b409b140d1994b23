//! The built-in demo play, embedded so `playdeck` works anywhere.

pub const DEMO_FILE: &str = "<demo>";
pub const DEMO_PLAY: &str = include_str!("../../examples/plays/demo.toml");

//! The operator console: a full-screen view of a run, folded from its
//! signals, with keyboard and mouse control.

pub mod app;
pub mod config;
pub mod keymap;
pub mod model;
pub mod replay;
pub mod run;
pub mod screenshot;
pub mod svg;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod ui;

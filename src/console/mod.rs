//! The operator console: a full-screen view of a run, folded from its
//! signals, with keyboard and mouse control.

pub mod actions;
pub mod app;
pub mod attach;
pub mod cast;
pub mod config;
pub mod diffview;
pub mod follow;
pub mod keymap;
pub mod overlay;
pub mod pager;
pub mod replay;
pub mod replay_console;
pub mod run;
pub mod screenshot;
pub mod scroll;
pub mod svg;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod ui;
pub mod warnings;

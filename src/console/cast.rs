//! `playdeck replay RUN --cast FILE`: the console over a recorded run's
//! life as an asciicast v2 recording, playable by any asciicast player
//! (`asciinema play`, the web player). The replay is played frame by
//! frame in its own time (no terminal, no waiting); each frame is drawn
//! by ratatui's crossterm backend into memory, so the recording holds what
//! a terminal would have been sent: only what changed since the frame
//! before.

use std::io;
use std::path::Path;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{TerminalOptions, Viewport};

use super::app::Hooks;
use super::config::ConsoleConfig;
use super::replay::{Player, Timeline};
use crate::kernel::Signal;
use crate::operator::model::PlayFacts;

/// Frames per second of the recording.
const FPS: f64 = 15.0;
/// Frames held after the end, so a player shows the last state.
const HOLD_AT_END: usize = 30;
/// No recording is longer than this many frames (an hour at 15 fps); a
/// longer run needs a higher --speed.
const MAX_FRAMES: usize = 54_000;

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cast {
    pub frames: usize,
    /// The replay speed used: the nearest the replay has at or above the
    /// one asked for.
    pub speed: f64,
    /// Seconds the recording plays for.
    pub seconds: f64,
}

/// Why no recording was made.
#[derive(Debug, thiserror::Error)]
pub enum CastError {
    #[error(
        "--speed {speed} would make a recording of {frames} frames ({minutes:.0} minutes); at most {MAX_FRAMES} (an hour): give a higher --speed (up to 64)"
    )]
    TooLong {
        speed: f64,
        frames: usize,
        minutes: f64,
    },
    #[error("{path}: {source}")]
    Write { path: String, source: io::Error },
}

/// Renders the console over `signals` at `speed` into `out`.
pub fn write(
    out: &Path,
    title: &str,
    signals: Vec<Signal>,
    facts: PlayFacts,
    config: ConsoleConfig,
    speed: f64,
    (width, height): (u16, u16),
) -> Result<Cast, CastError> {
    let timeline = Timeline::new(signals, facts);
    let end = timeline.end_time();
    let frames = (end / speed * FPS).ceil() as usize + 1;
    if frames > MAX_FRAMES {
        return Err(CastError::TooLong {
            speed,
            frames,
            minutes: frames as f64 / FPS / 60.0,
        });
    }
    let mut app = super::replay_console::app_for(&timeline, config, Hooks::default());
    let mut player = Player::new(timeline);
    player.set_speed(speed);
    player.playing = true;
    player.sync(&mut app);
    let area = Rect::new(0, 0, width, height);
    let sent = Sent::default();
    let backend = CrosstermBackend::new(sent.clone());
    let mut term = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Fixed(area),
        },
    )
    .map_err(|source| write_error(out, source))?;
    let mut text = String::new();
    let header = serde_json::json!({
        "version": 2,
        "width": width,
        "height": height,
        "idle_time_limit": 2.0,
        "env": {"TERM": "xterm-256color"},
        "title": title,
    });
    text.push_str(&header.to_string());
    text.push('\n');
    // Cursor hidden, screen cleared: the console's own start.
    push_event(&mut text, 0.0, "\x1b[?25l\x1b[2J\x1b[H");
    let dt = Duration::from_secs_f64(1.0 / FPS);
    let mut frame = 0usize;
    let mut after_end = 0usize;
    loop {
        let at = frame as f64 / FPS;
        super::ui::arrange(&mut app, area);
        term.draw(|f| super::ui::draw(f, &app))
            .map_err(|source| write_error(out, source))?;
        let bytes = sent.take();
        if !bytes.is_empty() {
            push_event(&mut text, at, &String::from_utf8_lossy(&bytes));
        }
        frame += 1;
        if player.pos >= player.timeline.len() {
            after_end += 1;
            if after_end > HOLD_AT_END {
                break;
            }
        }
        player.tick(&mut app, dt);
    }
    push_event(&mut text, frame as f64 / FPS, "\x1b[?25h");
    crate::files::write_atomic(out, text.as_bytes()).map_err(|source| write_error(out, source))?;
    Ok(Cast {
        speed: player.speed(),
        frames: frame,
        seconds: frame as f64 / FPS,
    })
}

/// What the backend sent, kept for the recording.
#[derive(Clone, Default)]
struct Sent(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Sent {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

impl io::Write for Sent {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn write_error(path: &Path, source: io::Error) -> CastError {
    CastError::Write {
        path: path.display().to_string(),
        source,
    }
}

/// One output event: `[time, "o", data]`.
fn push_event(text: &mut String, at: f64, data: &str) {
    let line = serde_json::json!([(at * 1000.0).round() / 1000.0, "o", data]);
    text.push_str(&line.to_string());
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_asciicast_lines() {
        let mut t = String::new();
        push_event(&mut t, 1.23456, "a\x1b[0m\"");
        assert_eq!(t, "[1.235,\"o\",\"a\\u001b[0m\\\"\"]\n");
    }
}

//! Entering and leaving the full-screen terminal. A panic hook restores the
//! terminal before the previous hook prints, so a panic never leaves the
//! operator's shell in raw mode.

use std::io::{self, Stdout, Write};
use std::sync::Once;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

pub fn init() -> io::Result<Term> {
    install_panic_hook();
    enable_raw_mode()?;
    let mut out = io::stdout();
    if let Err(e) = execute!(out, EnterAlternateScreen, EnableMouseCapture, cursor::Hide) {
        restore();
        return Err(e);
    }
    Terminal::new(CrosstermBackend::new(io::stdout()))
}

/// Leaves raw mode and the alternate screen; safe to call more than once.
pub fn restore() {
    let _ = disable_raw_mode();
    let mut out = io::stdout();
    let _ = execute!(out, DisableMouseCapture, LeaveAlternateScreen, cursor::Show);
    let _ = out.flush();
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Rings the terminal bell.
pub fn bell() {
    let mut out = io::stdout();
    let _ = out.write_all(b"\x07");
    let _ = out.flush();
}

/// The bell and a desktop notification: OSC 9 (iTerm2, kitty, WezTerm,
/// foot) and OSC 777 (rxvt, VTE terminals); a terminal that knows neither
/// ignores them. The text is made printable first: it may name agents' work.
pub fn notify(text: &str) {
    let text: String = crate::printable::printable(text)
        .chars()
        .filter(|c| *c != ';' && !c.is_control())
        .collect();
    let mut out = io::stdout();
    let _ = write!(
        out,
        "\x07\x1b]9;{text}\x07\x1b]777;notify;playdeck;{text}\x07"
    );
    let _ = out.flush();
}

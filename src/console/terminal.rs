//! Entering and leaving the full-screen terminal, and lending it to another
//! program (the pager) in between. A panic hook restores the terminal
//! before the previous hook prints, so a panic never leaves the operator's
//! shell in raw mode.

use std::io::{self, Stdout, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::terminal::{
    Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use futures_util::Stream;
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

/// Gives the terminal back to what the console was started from, for a
/// program that needs all of it: the same as leaving.
pub fn suspend() {
    restore();
}

/// Takes the terminal again after [`suspend`]: raw mode, the alternate
/// screen (cleared), the mouse; the next frame is drawn whole (what the
/// other program left is not what ratatui last drew). Not
/// `Terminal::clear`: it asks the terminal where its cursor is and waits
/// for the answer, which a terminal need not give.
pub fn resume(term: &mut Term) -> io::Result<()> {
    enable_raw_mode()?;
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        Clear(ClearType::All),
        EnableMouseCapture,
        cursor::Hide
    )?;
    // Both of ratatui's buffers blank, as the screen is now: the next
    // frame writes every cell it draws.
    term.swap_buffers();
    Ok(())
}

/// The terminal's input as the event loop reads it, which can be let go
/// while another program reads the terminal. crossterm's `EventStream`
/// reads the terminal on a thread of its own whenever a read is pending,
/// even while nobody polls it: left alone, it would take the keys typed
/// into the pager. Dropping it stops that thread (its `Drop` wakes it to
/// quit); a fresh one reads again after. Clones share the one stream.
#[derive(Clone)]
pub struct Input(Arc<Mutex<Option<EventStream>>>);

impl Input {
    pub fn new() -> Input {
        Input(Arc::new(Mutex::new(Some(EventStream::new()))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<EventStream>> {
        // Only taken inside a poll or a swap: nothing panics while held.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops reading the terminal.
    pub fn pause(&self) {
        drop(self.lock().take());
    }

    /// Reads the terminal again.
    pub fn resume(&self) {
        let mut s = self.lock();
        if s.is_none() {
            *s = Some(EventStream::new());
        }
    }
}

impl Default for Input {
    fn default() -> Self {
        Input::new()
    }
}

impl Stream for Input {
    type Item = io::Result<Event>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.lock().as_mut() {
            Some(s) => Pin::new(s).poll_next(cx),
            // Paused: the loop is waiting for the pager, not polling; it
            // polls again (a fresh poll) once input is resumed.
            None => Poll::Pending,
        }
    }
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

//! Entering and leaving the full-screen terminal, and lending it to another
//! program (the pager) in between. A panic hook restores the terminal
//! before the previous hook prints, so a panic never leaves the operator's
//! shell in raw mode.

use std::io::{self, Stdout, Write};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, Once};
use std::task::{Context, Poll};
use std::time::Duration;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event};
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
/// while another program reads the terminal.
///
/// Read on a thread of its own with crossterm's `poll` and `read`, not
/// with its `EventStream`: that stream's reader can only be stopped by
/// waking it, and when no read is pending the wake stays queued; the first
/// read after the pager then meets the wake and the terminal's readiness
/// in one batch, returns for the wake, and the readiness is gone (crossterm
/// waits edge-triggered): the key typed then sat unread until the next.
/// This thread looks at a flag between short polls instead, so pausing it
/// wakes nothing, and [`Input::pause`] returns once it is parked: nothing
/// of what is typed into the pager is read here. Clones share the one
/// reader.
#[derive(Clone)]
pub struct Input(Arc<Shared>);

struct Shared {
    events: Mutex<tokio::sync::mpsc::UnboundedReceiver<io::Result<Event>>>,
    gate: Arc<Gate>,
}

/// Between the reading thread and the console: whether it may read.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    paused: bool,
    /// The thread is waiting for `paused` to go: it reads nothing.
    parked: bool,
    /// Every [`Input`] is gone: the thread ends.
    closed: bool,
    /// The thread ended (the terminal failed, or closed).
    ended: bool,
}

/// How long one look at the terminal lasts: how soon a pause is taken up.
const LOOK: Duration = Duration::from_millis(40);

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // Nothing panics while it is held.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits while paused (saying it is parked); false once closed.
    fn open(&self) -> bool {
        let mut st = self.lock();
        loop {
            if st.closed {
                return false;
            }
            if !st.paused {
                st.parked = false;
                return true;
            }
            if !st.parked {
                st.parked = true;
                self.changed.notify_all();
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn read_terminal(gate: Arc<Gate>, tx: tokio::sync::mpsc::UnboundedSender<io::Result<Event>>) {
    while gate.open() {
        let read = match crossterm::event::poll(LOOK) {
            Ok(false) => continue,
            Ok(true) => crossterm::event::read(),
            Err(e) => Err(e),
        };
        let failed = read.is_err();
        if tx.send(read).is_err() || failed {
            break;
        }
    }
    gate.lock().ended = true;
    gate.changed.notify_all();
}

impl Input {
    /// Starts reading: fails only when no thread can be started.
    pub fn new() -> io::Result<Input> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let gate = Arc::new(Gate::default());
        let g = gate.clone();
        // Not joined: it ends within one look once every clone is gone
        // (or with the process).
        std::thread::Builder::new()
            .name("terminal input".into())
            .spawn(move || read_terminal(g, tx))?;
        Ok(Input(Arc::new(Shared {
            events: Mutex::new(rx),
            gate,
        })))
    }

    /// Stops reading the terminal: returns once nothing here reads it.
    pub fn pause(&self) {
        let gate = &self.0.gate;
        let mut st = gate.lock();
        st.paused = true;
        while !st.parked && !st.ended {
            st = gate.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Reads the terminal again.
    pub fn resume(&self) {
        self.0.gate.lock().paused = false;
        self.0.gate.changed.notify_all();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.gate.lock().closed = true;
        self.gate.changed.notify_all();
    }
}

impl Stream for Input {
    type Item = io::Result<Event>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Only taken here: nothing panics while it is held.
        let mut rx = self.0.events.lock().unwrap_or_else(|e| e.into_inner());
        rx.poll_recv(cx)
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

//! The console in a pseudo-terminal, read back through a terminal
//! emulator: shared by the pty tier and the ssh test of the external one.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

pub struct Screen {
    pub parser: Arc<Mutex<vt100::Parser>>,
}

impl Screen {
    pub fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits (60 s at most: a deadline, not a pace) until the screen's
    /// text is `pred`; the text.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(what, Duration::from_secs(60), pred)
    }

    /// [`Screen::wait_for`] with its deadline: longer where the program
    /// waits for something slow first (a real `git worktree add`).
    pub fn wait_for_within(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_screen(what, within, |s| pred(&s.contents()))
    }

    /// Waits until the terminal's state (its modes as well as its text)
    /// is `pred`; the text.
    pub fn wait_screen(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&vt100::Screen) -> bool,
    ) -> String {
        super::wait_for(what, within, || {
            let p = self.parser.lock().unwrap();
            let shown = p.screen().contents();
            match pred(p.screen()) {
                true => Ok(shown),
                false => Err(format!("screen:\n{shown}")),
            }
        })
    }

    /// Waits until the program has given the terminal back: the main
    /// screen, the cursor shown, and `line` (its exit line) on it; the text.
    pub fn wait_restored(&self, line: &str) -> String {
        self.wait_screen(
            &format!("the terminal restored, with {line:?}"),
            Duration::from_secs(60),
            |s| !s.alternate_screen() && !s.hide_cursor() && s.contents().contains(line),
        )
    }
}

/// How much of `bytes` can be shown: all of it but a synchronized update
/// (DEC 2026, which the console wraps each frame in) still being written,
/// and but a trailing piece that may begin one. A terminal shows a frame
/// whole; so does the test's screen, which otherwise catches frames half
/// drawn.
pub fn whole_updates(bytes: &[u8]) -> usize {
    const BEGIN: &[u8] = b"\x1b[?2026h";
    const END: &[u8] = b"\x1b[?2026l";
    let last = |needle: &[u8]| bytes.windows(needle.len()).rposition(|w| w == needle);
    match (last(BEGIN), last(END)) {
        (Some(b), e) if e.is_none_or(|e| e < b) => b,
        _ => {
            // A sequence cut at the end of this read stays for the next.
            let tail = bytes.len().saturating_sub(BEGIN.len() - 1);
            match bytes[tail..].iter().rposition(|&c| c == 0x1b) {
                Some(i) if BEGIN.starts_with(&bytes[tail + i..]) => tail + i,
                _ => bytes.len(),
            }
        }
    }
}

/// The binary in a 120×36 pseudo-terminal, in `dir`, with its own config
/// directory.
pub struct Console {
    pub screen: Screen,
    writer: Box<dyn Write + Send>,
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
    /// Kept for resizing the terminal.
    master: Box<dyn portable_pty::MasterPty + Send>,
    /// Every byte the program wrote, for what a screen does not keep
    /// (the bell, desktop notifications).
    pub raw: Arc<Mutex<Vec<u8>>>,
}

impl Console {
    pub fn open(dir: &std::path::Path, args: &[&str]) -> Console {
        Console::open_with(dir, args, &[])
    }

    /// [`Console::open`] with more environment variables.
    pub fn open_with(dir: &std::path::Path, args: &[&str], env: &[(String, String)]) -> Console {
        std::fs::create_dir_all(dir.join("config")).unwrap();
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 36,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(super::PLAYDECK);
        cmd.args(args);
        cmd.cwd(dir);
        cmd.env("TERM", "xterm-256color");
        cmd.env("PLAYDECK_CONFIG_DIR", dir.join("config"));
        cmd.env("XDG_STATE_HOME", dir.join("state"));
        cmd.env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = pty.master.take_writer().unwrap();
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZero::new(36).unwrap(),
            std::num::NonZero::new(120).unwrap(),
            0,
        )));
        let feed = parser.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let keep = raw.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            let mut pending = Vec::new();
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                keep.lock().unwrap().extend_from_slice(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
                let whole = whole_updates(&pending);
                feed.lock().unwrap().process(&pending[..whole]);
                pending.drain(..whole);
            }
            feed.lock().unwrap().process(&pending);
        });
        Console {
            screen: Screen { parser },
            writer,
            child,
            master: pty.master,
            raw,
        }
    }

    /// Whether the program wrote `bytes` so far.
    pub fn wrote(&self, bytes: &[u8]) -> bool {
        self.raw
            .lock()
            .unwrap()
            .windows(bytes.len())
            .any(|w| w == bytes)
    }

    /// Resizes the terminal, as a person dragging the window would.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.screen.parser.lock().unwrap().screen_mut().set_size(
            std::num::NonZero::new(rows).unwrap(),
            std::num::NonZero::new(cols).unwrap(),
        );
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
    }

    pub fn press(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types `keys` and returns once the program has handled them, where
    /// nothing on screen would say so (a terminal too small): it is
    /// stopped (SIGSTOP) while they arrive, they are seen whole in its
    /// input queue, it is let go, the queue is seen empty (read), and
    /// then ten frames drawn. Its loop takes keys before anything else and
    /// draws after each; a frame for anything else (the clock's tick,
    /// every 200 ms) comes only while no key is ready — the frames are
    /// the keys' and a few ticks'.
    pub fn press_handled(&mut self, keys: &[u8]) {
        use rustix::process::{Pid, Signal, kill_process};
        use std::os::unix::fs::OpenOptionsExt;
        const FRAMES: usize = 10;
        let name = self.master.tty_name().expect("the terminal's name");
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(&name)
            .unwrap();
        let queued = || rustix::io::ioctl_fionread(&tty).unwrap();
        let pid = self.child.process_id().expect("its pid");
        let wait = |what: &str, done: &dyn Fn() -> bool| {
            super::wait_for(what, Duration::from_secs(60), || match done() {
                true => Ok(()),
                false => Err(format!(
                    "{} bytes waiting in {}; screen:\n{}",
                    queued(),
                    name.display(),
                    self.screen.contents()
                )),
            });
        };
        let p = Pid::from_raw(pid as i32).unwrap();
        kill_process(p, Signal::STOP).unwrap();
        wait("the program stopped", &|| all_threads_stopped(pid));
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
        wait("the keys in its input queue", &|| {
            queued() == keys.len() as u64
        });
        kill_process(p, Signal::CONT).unwrap();
        wait("the keys read", &|| queued() == 0);
        let from = self.raw.lock().unwrap().len();
        wait(&format!("{FRAMES} frames after the keys"), &|| {
            let raw = self.raw.lock().unwrap();
            raw[from..]
                .windows(8)
                .filter(|w| *w == b"\x1b[?2026l")
                .count()
                >= FRAMES
        });
    }

    /// Waits for the process to end; its exit code.
    pub fn wait_exit(&mut self) -> u32 {
        super::wait_for("playdeck to exit", Duration::from_secs(60), || {
            match self.child.try_wait().unwrap() {
                Some(st) => Ok(st.exit_code()),
                None => Err(format!("screen:\n{}", self.screen.contents())),
            }
        })
    }
}

/// Whether every thread of process `pid` is stopped (by a signal).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
        })
    })
}

//! Following an agent: the output of an operation's latest attempt, read
//! from its two log files (`logs/<name>.<attempt>.stdout.log` and
//! `.stderr.log`) as they grow, for the full-screen follow view. The log
//! files are the one source every console has — the one that hosts the
//! run, one attached to it on this machine, a replay — and, unlike the
//! inspector's in-memory tail, they hold every line.
//!
//! The files do not say how stdout and stderr interleaved: what was there
//! when the view opened comes stdout first, then stderr; after that, lines
//! come in the order they are read (each read takes stdout's new lines,
//! then stderr's), a frame apart at most.
//!
//! It sticks to the newest line, like `tail -f`, until the operator scrolls
//! away from it; coming back to the end (`end`, or down to the last line)
//! sticks again.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::scroll::{Motion, ScrollList};

/// What is read of a log that was already long when the view opened: its
/// end. The pager (`O`) shows all of it.
const BACKLOG: u64 = 2 << 20;
/// Bytes read of one log per poll, so a flood of output never holds up a
/// frame for long; the rest comes at the next one.
const READ_MAX: u64 = BACKLOG;
/// Lines kept; older ones are let go (the pager shows them).
pub const KEEP: usize = 20_000;
/// Characters kept of a line: more never fits a terminal's width.
const LINE_MAX: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct OutLine {
    pub stderr: bool,
    pub text: String,
}

/// One log file, read from where the last read stopped.
#[derive(Debug)]
struct LogReader {
    path: PathBuf,
    file: Option<File>,
    offset: u64,
    /// The start of a line whose newline has not been written yet.
    partial: Vec<u8>,
}

/// What one read of a log found.
#[derive(Debug, Default)]
struct Got {
    lines: Vec<String>,
    /// The file was longer than the backlog: its start was skipped.
    skipped: bool,
    /// The file is shorter than what was read: it was written anew.
    restarted: bool,
}

impl LogReader {
    fn new(path: PathBuf) -> LogReader {
        LogReader {
            path,
            file: None,
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn exists(&self) -> bool {
        self.file.is_some()
    }

    fn read(&mut self) -> Got {
        let mut r = Got::default();
        if self.file.is_none() {
            // Not there yet (the attempt has not opened its logs), or
            // never (an agent that writes none): looked for at every poll.
            let Ok(f) = File::open(&self.path) else {
                return r;
            };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len > BACKLOG {
                self.offset = len - BACKLOG;
                r.skipped = true;
            }
            self.file = Some(f);
        }
        let Some(f) = self.file.as_mut() else {
            return r;
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return r;
        };
        if len < self.offset {
            // Truncated: the attempt's logs were opened again (a resumed
            // run runs the attempt anew).
            r.restarted = true;
            return r;
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return r;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.take(READ_MAX).read_to_end(&mut buf) else {
            return r;
        };
        let first = r.skipped;
        self.offset += n as u64;
        let mut rest = &buf[..];
        if first {
            // The backlog starts inside a line: drop its tail.
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => rest = &rest[i + 1..],
                None => rest = &[],
            }
        }
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.partial.extend_from_slice(&rest[..i]);
            r.lines.push(clean(&self.partial));
            self.partial.clear();
            rest = &rest[i + 1..];
        }
        // Held until its newline: the runner writes whole lines, so this
        // is a read that met a write halfway.
        self.partial.extend_from_slice(rest);
        r
    }
}

/// A log line as the terminal may show it: no escape sequences or control
/// characters (an agent's output must not drive the operator's terminal),
/// cut to what any screen shows.
fn clean(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches('\r');
    let p = crate::printable::printable(text);
    let mut s: String = p.chars().take(LINE_MAX).collect();
    if s.len() < p.len() {
        s.push('…');
    }
    s
}

/// The follow view's state: which operation, which attempt, the lines
/// read so far and where the window stands.
#[derive(Debug)]
pub struct FollowView {
    pub node: u32,
    /// The attempt shown; 0 before the operation started one.
    pub attempt: u32,
    pub lines: VecDeque<OutLine>,
    /// Lines of this attempt not here: skipped at open (a long log) or let
    /// go past [`KEEP`]. Counted only for lines that were read.
    pub dropped: usize,
    /// The log was longer than what is read at open: its start is not here.
    pub cut: bool,
    logs: Option<[LogReader; 2]>,
    pub scroll: ScrollList,
    /// Following the newest line.
    pub stick: bool,
}

impl FollowView {
    pub fn new(node: u32) -> FollowView {
        FollowView {
            node,
            attempt: 0,
            lines: VecDeque::new(),
            dropped: 0,
            cut: false,
            logs: None,
            scroll: ScrollList::text(),
            stick: true,
        }
    }

    /// Whether the attempt's stdout log exists (an agent CLI's attempt has
    /// one from its start; the built-in sim agent writes none).
    pub fn has_log(&self) -> bool {
        self.logs.as_ref().is_some_and(|l| l[0].exists())
    }

    /// The stdout log's path, for saying where nothing was found.
    pub fn log_path(&self) -> Option<&Path> {
        self.logs.as_ref().map(|l| l[0].path.as_path())
    }

    /// Reads what the operation's latest attempt (`attempt`, 0 for none
    /// yet) wrote since the last poll. A newer attempt starts the view
    /// over on its logs.
    pub fn poll(&mut self, logs: &Path, name: &str, attempt: u32) {
        if attempt != self.attempt || self.logs.is_none() {
            self.start(logs, name, attempt);
        }
        let Some([out, err]) = self.logs.as_mut() else {
            return;
        };
        let (o, e) = (out.read(), err.read());
        if o.restarted || e.restarted {
            self.start(logs, name, attempt);
            return;
        }
        self.cut |= o.skipped || e.skipped;
        let new = o
            .lines
            .into_iter()
            .map(|text| OutLine {
                stderr: false,
                text,
            })
            .chain(
                e.lines
                    .into_iter()
                    .map(|text| OutLine { stderr: true, text }),
            );
        self.push(new);
    }

    fn start(&mut self, logs: &Path, name: &str, attempt: u32) {
        self.attempt = attempt;
        self.lines.clear();
        self.dropped = 0;
        self.cut = false;
        self.scroll = ScrollList::text();
        self.logs = (attempt > 0).then(|| {
            [
                LogReader::new(logs.join(format!("{name}.{attempt}.stdout.log"))),
                LogReader::new(logs.join(format!("{name}.{attempt}.stderr.log"))),
            ]
        });
    }

    /// Adds lines as they arrive, letting the oldest go past [`KEEP`]; a
    /// window scrolled away from the end stays on the lines it shows.
    pub fn push(&mut self, new: impl IntoIterator<Item = OutLine>) {
        self.lines.extend(new);
        let over = self.lines.len().saturating_sub(KEEP);
        if over > 0 {
            self.lines.drain(..over);
            self.dropped += over;
            if !self.stick {
                let at = self.scroll.offset().saturating_sub(over);
                self.scroll.set_len(self.lines.len());
                self.scroll.select(at);
            }
        }
        self.scroll.set_len(self.lines.len());
        if self.stick {
            self.scroll.apply(Motion::Bottom);
        }
    }

    /// The window is `height` rows (each frame, from the layout).
    pub fn resize(&mut self, height: usize) {
        self.scroll.resize(self.lines.len(), height);
        if self.stick {
            self.scroll.apply(Motion::Bottom);
        }
    }

    /// The operator moves the window: it follows new lines again exactly
    /// when the last line is in sight after the move.
    pub fn apply(&mut self, m: Motion) {
        self.scroll.apply(m);
        self.stick = self.scroll.more_below() == 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn out(n: usize) -> Vec<OutLine> {
        (0..n)
            .map(|i| OutLine {
                stderr: false,
                text: format!("line {i}"),
            })
            .collect()
    }

    #[test]
    fn it_sticks_to_the_newest_line_until_scrolled_up() {
        let mut v = FollowView::new(0);
        v.resize(10);
        v.push(out(25));
        assert!(v.stick);
        assert_eq!(v.scroll.visible(), 15..25, "the newest lines show");
        v.push(out(5));
        assert_eq!(v.scroll.visible(), 20..30, "and new ones scroll in");
        v.apply(Motion::Up);
        assert!(!v.stick, "scrolled up: no longer following");
        v.push(out(27));
        assert_eq!(v.scroll.visible(), 19..29, "the window stays put");
        assert_eq!(v.scroll.more_below(), 28);
        v.apply(Motion::PageDown);
        assert!(!v.stick, "one page down is not the end yet");
        v.apply(Motion::Bottom);
        assert!(v.stick, "end follows again");
        v.push(out(3));
        assert_eq!(v.scroll.visible(), 50..60);
        // Down to the last line follows again too.
        v.apply(Motion::Up);
        v.push(out(1));
        assert!(!v.stick);
        v.apply(Motion::Down);
        v.apply(Motion::Down);
        assert!(v.stick);
        assert_eq!(v.scroll.visible(), 51..61);
    }

    #[test]
    fn short_output_keeps_following_whatever_is_pressed() {
        let mut v = FollowView::new(0);
        v.resize(10);
        v.push(out(3));
        v.apply(Motion::Up);
        v.apply(Motion::Top);
        assert!(v.stick, "nothing is hidden below: still at the end");
        v.push(out(20));
        assert_eq!(v.scroll.visible(), 13..23);
    }

    #[test]
    fn a_scrolled_window_keeps_its_lines_when_old_ones_go() {
        let mut v = FollowView::new(0);
        v.resize(10);
        v.push(out(KEEP));
        v.apply(Motion::PageUp);
        let first = v.lines[v.scroll.offset()].clone();
        v.push(out(100));
        assert_eq!(v.dropped, 100);
        assert_eq!(v.lines.len(), KEEP);
        assert_eq!(v.lines[v.scroll.offset()], first);
    }

    #[test]
    fn reads_both_logs_as_they_grow_and_starts_over_on_a_new_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path();
        let mut v = FollowView::new(0);
        v.poll(logs, "build", 0);
        assert!(v.lines.is_empty() && !v.has_log());
        v.poll(logs, "build", 1);
        assert!(!v.has_log(), "the attempt has no log yet");
        let mut so = File::create(logs.join("build.1.stdout.log")).unwrap();
        let mut se = File::create(logs.join("build.1.stderr.log")).unwrap();
        writeln!(so, "compiling").unwrap();
        write!(so, "linking \x1b[31mred\x1b[0m").unwrap();
        writeln!(se, "warning: unused").unwrap();
        v.poll(logs, "build", 1);
        assert!(v.has_log());
        let texts: Vec<(bool, &str)> = v
            .lines
            .iter()
            .map(|l| (l.stderr, l.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [(false, "compiling"), (true, "warning: unused")],
            "a line without its newline waits for it"
        );
        writeln!(so, " done").unwrap();
        v.poll(logs, "build", 1);
        assert_eq!(v.lines[2].text, "linking red done", "escapes are gone");
        // A retry: the view starts over on attempt 2's logs.
        std::fs::write(logs.join("build.2.stdout.log"), "second try\n").unwrap();
        v.poll(logs, "build", 2);
        assert_eq!(v.attempt, 2);
        assert_eq!(v.lines.len(), 1);
        assert_eq!(v.lines[0].text, "second try");
    }

    #[test]
    fn a_long_log_is_read_from_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let line = "x".repeat(99);
        let text: String = (0..30_000).map(|i| format!("{i} {line}\n")).collect();
        std::fs::write(dir.path().join("a.1.stdout.log"), &text).unwrap();
        let mut v = FollowView::new(0);
        v.poll(dir.path(), "a", 1);
        assert!(v.cut);
        assert!(v.lines.len() < 30_000);
        assert_eq!(v.lines.back().unwrap().text, format!("29999 {line}"));
        assert!(
            v.lines[0].text.ends_with(&line) && !v.lines[0].text.starts_with('x'),
            "the first line is whole: {}",
            v.lines[0].text
        );
    }
}

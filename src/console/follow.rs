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
//! It shows the conversation: stdout read by the attempt's format (the
//! format `command.json` names, else the one its lines' shape tells) into
//! a [`Transcript`] — what the agent wrote, its tool calls and their
//! results — wrapped to the window; `r` shows the lines as the CLI printed
//! them.
//!
//! It sticks to the newest line, like `tail -f`, until the operator scrolls
//! away from it; coming back to the end (`end`, or down to the last line)
//! sticks again.

use std::collections::VecDeque;
use std::path::Path;

use super::scroll::{Motion, ScrollList};
use crate::agents::transcript::{Kind, Transcript};
use crate::files::tail::LogTail;

/// Lines kept; older ones are let go (the pager shows them).
pub const KEEP: usize = 20_000;
/// A space wrapping does not break at.
const NBSP: &str = "\u{a0}";
/// Characters kept of a line: more never fits a terminal's width.
const LINE_MAX: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct OutLine {
    pub stderr: bool,
    pub text: String,
}

/// The last turns of an operation's latest attempt, for the node
/// inspector: read again only when that attempt's stdout log has grown.
#[derive(Debug, Default)]
pub struct LastTurns {
    /// The attempt and the log's length they were read at.
    read_at: Option<(u32, u64)>,
    pub entries: Vec<crate::agents::transcript::Entry>,
}

/// Turns the inspector shows.
pub const LAST_TURNS: usize = 6;

impl LastTurns {
    pub fn refresh(&mut self, logs: &Path, name: &str, attempt: u32) {
        let len = std::fs::metadata(logs.join(format!("{name}.{attempt}.stdout.log")))
            .map_or(0, |m| m.len());
        if self.read_at == Some((attempt, len)) {
            return;
        }
        self.read_at = Some((attempt, len));
        self.entries = crate::agents::transcript::last_turns(logs, name, attempt, LAST_TURNS)
            .map(|(e, _)| e)
            .unwrap_or_default();
    }
}

/// A log line as the terminal may show it: no escape sequences or control
/// characters (an agent's output must not drive the operator's terminal),
/// cut to what any screen shows.
fn clean(text: &str) -> String {
    let p = crate::printable::printable(text);
    let mut s: String = p.chars().take(LINE_MAX).collect();
    if s.len() < p.len() {
        s.push('…');
    }
    s
}

/// One row of the conversation as the window shows it: a line of an
/// entry, wrapped, its mark (or the indent under it) in front.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The entry it is of, counted from the attempt's first.
    entry: usize,
    pub kind: Kind,
    pub text: String,
}

/// The follow view's state: which operation, which attempt, the lines
/// read so far, the conversation they tell and where the window stands.
#[derive(Debug)]
pub struct FollowView {
    pub node: u32,
    /// The attempt shown; 0 before the operation started one.
    pub attempt: u32,
    /// The lines as printed (`r`), stderr's marked.
    pub lines: VecDeque<OutLine>,
    /// Lines of this attempt not here: skipped at open (a long log) or let
    /// go past [`KEEP`]. Counted only for lines that were read.
    pub dropped: usize,
    /// The log was longer than what is read at open: its start is not here.
    pub cut: bool,
    logs: Option<[LogTail; 2]>,
    /// The conversation the lines tell.
    pub transcript: Transcript,
    /// The conversation wrapped to `width`.
    rows: Vec<Row>,
    rows_width: usize,
    width: usize,
    /// Showing the lines as printed instead of the conversation.
    pub raw: bool,
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
            transcript: Transcript::new(None),
            rows: Vec::new(),
            rows_width: 0,
            width: 80,
            raw: false,
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
        self.logs.as_ref().map(|l| l[0].path())
    }

    /// The conversation's rows, wrapped to the window.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Rows the window scrolls over: the conversation's, or the lines'.
    fn len(&self) -> usize {
        if self.raw {
            self.lines.len()
        } else {
            self.rows.len()
        }
    }

    /// Nothing to show yet, in the mode shown.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        self.transcript = if attempt > 0 {
            Transcript::for_attempt(logs, name, attempt)
        } else {
            Transcript::new(None)
        };
        self.rows.clear();
        self.scroll = ScrollList::text();
        self.logs = (attempt > 0).then(|| {
            [
                LogTail::tail(logs.join(format!("{name}.{attempt}.stdout.log"))),
                LogTail::tail(logs.join(format!("{name}.{attempt}.stderr.log"))),
            ]
        });
    }

    /// Adds lines as they were written, to the conversation and to the
    /// lines kept as printed (the oldest let go past [`KEEP`]); a window
    /// scrolled away from the end stays on what it shows.
    pub fn push(&mut self, new: impl IntoIterator<Item = OutLine>) {
        for l in new {
            if l.stderr {
                self.transcript.feed_stderr(&l.text);
            } else {
                self.transcript.feed(&l.text);
            }
            self.lines.push_back(OutLine {
                stderr: l.stderr,
                text: clean(&l.text),
            });
        }
        let over = self.lines.len().saturating_sub(KEEP);
        if over > 0 {
            self.lines.drain(..over);
            self.dropped += over;
        }
        let gone = self.wrap();
        let gone = if self.raw { over } else { gone };
        if gone > 0 && !self.stick {
            let at = self.scroll.offset().saturating_sub(gone);
            self.scroll.set_len(self.len());
            self.scroll.select(at);
        }
        self.scroll.set_len(self.len());
        if self.stick {
            self.scroll.apply(Motion::Bottom);
        }
    }

    /// Wraps what changed in the conversation since the last call (all of
    /// it after a change of width); the rows of entries let go go too, and
    /// how many did is returned.
    fn wrap(&mut self) -> usize {
        let dropped = self.transcript.dropped();
        let changed = self.transcript.take_changed();
        let from = if self.rows_width != self.width {
            self.rows.clear();
            self.rows_width = self.width;
            Some(dropped)
        } else {
            changed
        };
        let gone = self.rows.partition_point(|r| r.entry < dropped);
        self.rows.drain(..gone);
        let Some(from) = from else {
            return gone;
        };
        let from = from.max(dropped);
        let keep = self.rows.partition_point(|r| r.entry < from);
        self.rows.truncate(keep);
        // Inside the frame's borders.
        let w = self.width.saturating_sub(2).max(10);
        for (i, e) in self
            .transcript
            .entries()
            .iter()
            .enumerate()
            .skip(from - dropped)
        {
            for l in e.lines() {
                let indent = crate::console::text::width(l.kind.mark());
                // The mark holds to the first word (no break inside it).
                let lead = l.lead().replace(' ', NBSP);
                let line = ratatui::text::Line::from(format!("{lead}{}", l.text));
                for row in crate::console::text::wrap_hanging(&line, w, indent) {
                    let text: String = row.spans.iter().map(|s| s.content.as_ref()).collect();
                    self.rows.push(Row {
                        entry: dropped + i,
                        kind: l.kind,
                        text: text.replace(NBSP, " "),
                    });
                }
            }
        }
        gone
    }

    /// The window is `width` × `height` cells with its frame (each frame,
    /// from the layout).
    pub fn resize(&mut self, width: usize, height: usize) {
        if width != self.width {
            self.width = width;
            self.wrap();
        }
        self.scroll.resize(self.len(), height);
        if self.stick {
            self.scroll.apply(Motion::Bottom);
        }
    }

    /// `r`: the lines as printed, or the conversation again; the window
    /// goes to the end of what it now shows.
    pub fn toggle_raw(&mut self) {
        self.raw = !self.raw;
        self.stick = true;
        self.scroll.set_len(self.len());
        self.scroll.apply(Motion::Bottom);
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
    use std::fs::File;
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
        v.resize(80, 10);
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
        v.resize(80, 10);
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
        v.toggle_raw();
        v.resize(80, 10);
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
    fn it_shows_the_conversation_and_r_the_lines_as_printed() {
        let dir = tempfile::tempdir().unwrap();
        let capture = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/realcli/captures/claude/2.1.332/tool-partial.jsonl"
        ))
        .unwrap();
        std::fs::write(dir.path().join("w.1.stdout.log"), &capture).unwrap();
        std::fs::write(
            dir.path().join("w.1.command.json"),
            r#"{"agent":"claude","format":"claude"}"#,
        )
        .unwrap();
        let mut v = FollowView::new(0);
        v.resize(40, 10);
        v.poll(dir.path(), "w", 1);
        let rows: Vec<&str> = v.rows().iter().map(|r| r.text.as_str()).collect();
        assert!(
            rows[0].starts_with("⚙ Write(/tmp/realcli-claude"),
            "{rows:#?}"
        );
        assert!(
            rows.iter().all(|r| crate::console::text::width(r) <= 38),
            "wrapped inside the frame: {rows:#?}"
        );
        assert_eq!(
            rows.last().copied(),
            Some("● I created hello.txt containing hi.")
        );
        let narrow = rows.len();
        v.resize(120, 10);
        assert!(v.rows().len() < narrow, "wider, fewer rows");
        assert_eq!(v.scroll.visible().end, v.rows().len(), "still at the end");
        v.toggle_raw();
        assert!(v.raw);
        assert_eq!(v.lines.len(), capture.lines().count());
        assert_eq!(v.scroll.visible().end, v.lines.len());
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

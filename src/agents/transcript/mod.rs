//! An attempt's conversation as an operator reads it: what the agent wrote
//! (streamed deltas assembled into one message), each tool call with its
//! arguments and, once it came, its result or error, what it was asked,
//! errors, and its usage as it grows — built from the same stdout lines the
//! stream parser reads, for every format playdeck drives.
//!
//! The follow view (`F`), `playdeck ctl RUN follow OP` and the report's
//! last turns all read an attempt's log through this one builder, so they
//! say the same thing.

mod formats;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::def::StreamFormat;
use super::stream::{StreamParser, Update};
use crate::kernel::Usage;

/// Entries kept; older ones go (the log has them, and `r` shows it raw).
pub const KEEP: usize = 5_000;
/// Bytes kept of one entry's text: a 50 MB answer is the attempt's result,
/// which the run's events hold whole.
const TEXT_MAX: usize = 64 << 10;
/// Lines of a tool's result shown under its call.
pub const RESULT_LINES: usize = 6;

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// What the agent wrote.
    Said(String),
    /// Its reasoning, where the CLI shows it.
    Thought(String),
    /// What it was asked: the prompt as the CLI echoes it, or an operator's
    /// message (`by` names who sent it).
    Asked {
        by: Option<String>,
        text: String,
    },
    Call(Call),
    /// An error the stream reported.
    Error(String),
    /// A stdout line that is not JSON.
    Plain(String),
    /// A stderr line.
    Stderr(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    /// The arguments, said short: `Bash(ls -la)` shows `ls -la`.
    pub args: String,
    pub outcome: Option<Outcome>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub ok: bool,
    pub text: String,
}

/// How a line of an entry reads, for whoever styles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Said,
    Thought,
    Asked,
    Call,
    Done,
    Failed,
    Error,
    Plain,
    Stderr,
}

impl Kind {
    /// The mark a line's first row starts with; the rows after it are
    /// indented by its width.
    pub fn mark(self) -> &'static str {
        match self {
            Kind::Said => "● ",
            Kind::Thought => "∴ ",
            Kind::Asked => "▶ ",
            Kind::Call => "⚙ ",
            Kind::Done => "  ✓ ",
            Kind::Failed => "  ✗ ",
            Kind::Error => "! ",
            Kind::Plain => "  ",
            Kind::Stderr => "err│ ",
        }
    }
}

/// One line of an entry, without its mark, and never with a control
/// character (an agent's words must not drive the operator's terminal).
#[derive(Debug, Clone, PartialEq)]
pub struct TextLine {
    pub kind: Kind,
    /// The entry's first line (it carries the mark).
    pub first: bool,
    pub text: String,
}

impl TextLine {
    /// What goes before the text: the mark on an entry's first line, the
    /// indent under it on the others.
    pub fn lead(&self) -> String {
        let mark = self.kind.mark();
        if self.first {
            mark.to_string()
        } else {
            " ".repeat(crate::printable::fit::width(mark))
        }
    }
}

impl Entry {
    /// The entry as lines: its text's own lines, a call's result under it
    /// (its first [`RESULT_LINES`] lines, then how many more).
    pub fn lines(&self) -> Vec<TextLine> {
        let mut out = Vec::new();
        let mut put = |kind: Kind, text: &str, max: usize| {
            let all: Vec<&str> = text.trim_end().lines().collect();
            let all = if all.is_empty() { vec![""] } else { all };
            for (i, l) in all.iter().take(max).enumerate() {
                out.push(TextLine {
                    kind,
                    first: i == 0,
                    text: crate::printable::printable(l).into_owned(),
                });
            }
            if all.len() > max {
                out.push(TextLine {
                    kind,
                    first: false,
                    text: format!("… {} more lines", all.len() - max),
                });
            }
        };
        match self {
            Entry::Said(t) => put(Kind::Said, t, usize::MAX),
            Entry::Thought(t) => put(Kind::Thought, t, usize::MAX),
            Entry::Asked { by: None, text } => put(Kind::Asked, text, usize::MAX),
            Entry::Asked { by: Some(by), text } => {
                put(Kind::Asked, &format!("{by}: {text}"), usize::MAX);
            }
            Entry::Call(c) => {
                put(Kind::Call, &c.head(), 1);
                if let Some(o) = &c.outcome {
                    let kind = if o.ok { Kind::Done } else { Kind::Failed };
                    let text = if o.text.trim().is_empty() {
                        if o.ok { "done" } else { "failed" }
                    } else {
                        o.text.as_str()
                    };
                    put(kind, text, RESULT_LINES);
                }
            }
            Entry::Error(t) => put(Kind::Error, t, usize::MAX),
            Entry::Plain(t) => put(Kind::Plain, t, 1),
            Entry::Stderr(t) => put(Kind::Stderr, t, 1),
        }
        out
    }

    /// The entry on one line, cut to `max` characters: for the report's
    /// last turns.
    pub fn one_line(&self, max: usize) -> String {
        let lines = self.lines();
        let mut s = String::new();
        for l in &lines {
            if l.first {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(l.kind.mark().trim_start());
            } else {
                s.push(' ');
            }
            s.push_str(l.text.trim());
        }
        match s.char_indices().nth(max) {
            Some((at, _)) => format!("{}…", &s[..at]),
            None => s,
        }
    }
}

impl Call {
    /// `Name(args)`, as the approval lane and the follow view say a call.
    pub fn head(&self) -> String {
        if self.args.is_empty() {
            self.name.clone()
        } else {
            format!("{}({})", self.name, self.args)
        }
    }
}

/// What a line of a format tells the transcript.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// Text the agent wrote: `delta` appends to the text of the same key
    /// being assembled; a whole text replaces the one of its key, if any.
    Text {
        key: Option<String>,
        text: String,
        delta: bool,
        thought: bool,
    },
    Asked(String),
    Call {
        id: Option<String>,
        name: String,
        args: String,
    },
    Outcome {
        id: Option<String>,
        name: Option<String>,
        ok: bool,
        text: String,
    },
    Error(String),
    /// The text being assembled is whole.
    Close,
}

/// The conversation of one attempt, fed its log's lines as they come.
pub struct Transcript {
    /// `None` until known: read from the attempt's `command.json`, else
    /// told by the first line whose shape is a format's.
    format: Option<StreamFormat>,
    state: formats::State,
    /// The stream parser's totals: the one meaning of usage.
    usage_parser: Option<StreamParser>,
    pub usage: Usage,
    entries: VecDeque<Entry>,
    /// The number of entries let go before `entries[0]`.
    base: usize,
    /// The first entry (counted from the start) changed since the last
    /// [`Transcript::take_changed`].
    changed: Option<usize>,
    /// The text being assembled: its key, its entry, whether a thought.
    open: Option<(Option<String>, usize, bool)>,
    /// Entries by the key of their text, and calls by their id.
    texts: HashMap<String, usize>,
    calls: HashMap<String, usize>,
    scratch: Vec<Update>,
}

impl Transcript {
    pub fn new(format: Option<StreamFormat>) -> Transcript {
        Transcript {
            format,
            state: formats::State::default(),
            usage_parser: format.map(StreamParser::new),
            usage: Usage::default(),
            entries: VecDeque::new(),
            base: 0,
            changed: None,
            open: None,
            texts: HashMap::new(),
            calls: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// The transcript of an attempt, as its `command.json` begins it: in
    /// the format it names (older logs are told by shape), with what the
    /// operator said to the agent first, when they did.
    pub fn for_attempt(logs: &std::path::Path, name: &str, attempt: u32) -> Transcript {
        let command: Option<Value> =
            std::fs::read(logs.join(format!("{name}.{attempt}.command.json")))
                .ok()
                .and_then(|t| serde_json::from_slice(&t).ok());
        let format = command
            .as_ref()
            .and_then(|v| v.get("format")?.as_str())
            .and_then(StreamFormat::parse);
        let mut t = Transcript::new(format);
        if let Some(asked) = command.as_ref().and_then(|v| v.get("asked"))
            && let Some(text) = asked.get("text").and_then(Value::as_str)
        {
            let by = asked
                .get("by")
                .and_then(Value::as_str)
                .unwrap_or("operator");
            t.asked_by(by, text);
        }
        t
    }

    pub fn entries(&self) -> &VecDeque<Entry> {
        &self.entries
    }

    /// Entries let go so far.
    pub fn dropped(&self) -> usize {
        self.base
    }

    /// The first entry changed (counted from the start, dropped ones
    /// included) since the last call, if any did.
    pub fn take_changed(&mut self) -> Option<usize> {
        self.changed.take()
    }

    /// Entries that will not change any more: all but a text still being
    /// assembled, or a call still waiting for its result.
    pub fn settled(&self) -> usize {
        let open_text = self.open.as_ref().map(|(_, at, _)| *at);
        let open_call = self
            .entries
            .iter()
            .enumerate()
            .rev()
            .take(8)
            .filter(|(_, e)| matches!(e, Entry::Call(c) if c.outcome.is_none()))
            .map(|(i, _)| self.base + i)
            .min();
        let end = self.base + self.entries.len();
        [open_text, open_call]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end)
            .min(end)
    }

    /// One stdout line.
    pub fn feed(&mut self, line: &str) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            return;
        }
        let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(line.trim()) else {
            self.push(Entry::Plain(line.to_string()));
            return;
        };
        if self.format.is_none() {
            self.format = formats::sniff(&v);
            self.usage_parser = self.format.map(StreamParser::new);
        }
        let Some(format) = self.format else {
            return;
        };
        let mut pieces = Vec::new();
        formats::pieces(&mut self.state, format, &v, &mut pieces);
        // The line read once: the stream parser takes the same value.
        if let Some(p) = self.usage_parser.as_mut() {
            self.scratch.clear();
            p.feed_object(v, &mut self.scratch);
            for u in &self.scratch {
                if let Update::Usage(u) = u {
                    self.usage = *u;
                }
            }
        }
        for p in pieces {
            self.apply(p);
        }
    }

    /// One stderr line.
    pub fn feed_stderr(&mut self, line: &str) {
        let line = line.trim_end();
        if !line.trim().is_empty() {
            self.push(Entry::Stderr(line.to_string()));
        }
    }

    /// A message the operator sent the agent.
    pub fn asked_by(&mut self, by: &str, text: &str) {
        self.push(Entry::Asked {
            by: Some(by.to_string()),
            text: text.to_string(),
        });
    }

    fn at(&mut self, abs: usize) -> Option<&mut Entry> {
        abs.checked_sub(self.base)
            .and_then(|i| self.entries.get_mut(i))
    }

    fn touch(&mut self, abs: usize) {
        self.changed = Some(self.changed.map_or(abs, |c| c.min(abs)));
    }

    fn push(&mut self, e: Entry) -> usize {
        self.open = None;
        let abs = self.base + self.entries.len();
        self.entries.push_back(e);
        self.touch(abs);
        if self.entries.len() > KEEP {
            self.entries.pop_front();
            self.base += 1;
            if self.texts.len() + self.calls.len() > 2 * KEEP {
                let base = self.base;
                self.texts.retain(|_, at| *at >= base);
                self.calls.retain(|_, at| *at >= base);
            }
        }
        abs
    }

    fn apply(&mut self, p: Piece) {
        match p {
            Piece::Text {
                key,
                text,
                delta,
                thought,
            } => self.text(key, text, delta, thought),
            Piece::Asked(text) => {
                self.push(Entry::Asked { by: None, text });
            }
            Piece::Call { id, name, args } => {
                if let Some(at) = id.as_ref().and_then(|id| self.calls.get(id)).copied()
                    && let Some(Entry::Call(c)) = self.at(at)
                {
                    c.name = name;
                    c.args = args;
                    self.touch(at);
                    return;
                }
                let at = self.push(Entry::Call(Call {
                    name,
                    args,
                    outcome: None,
                }));
                if let Some(id) = id {
                    self.calls.insert(id, at);
                }
            }
            Piece::Outcome { id, name, ok, text } => {
                let outcome = Outcome {
                    ok,
                    text: cut(text),
                };
                if let Some(at) = id.as_ref().and_then(|id| self.calls.get(id)).copied()
                    && let Some(Entry::Call(c)) = self.at(at)
                {
                    c.outcome = Some(outcome);
                    self.touch(at);
                    self.open = None;
                    return;
                }
                self.push(Entry::Call(Call {
                    name: name.unwrap_or_else(|| "a tool".into()),
                    args: String::new(),
                    outcome: Some(outcome),
                }));
            }
            Piece::Error(t) => {
                self.push(Entry::Error(t));
            }
            Piece::Close => self.open = None,
        }
    }

    fn text(&mut self, key: Option<String>, text: String, delta: bool, thought: bool) {
        if text.is_empty() {
            return;
        }
        let make = |t: String| {
            if thought {
                Entry::Thought(t)
            } else {
                Entry::Said(t)
            }
        };
        if delta {
            if let Some((k, at, th)) = self.open.clone()
                && k == key
                && th == thought
                && let Some(Entry::Said(t) | Entry::Thought(t)) = self.at(at)
            {
                if t.len() < TEXT_MAX {
                    t.push_str(&text);
                    if t.len() > TEXT_MAX {
                        *t = cut(std::mem::take(t));
                    }
                }
                self.touch(at);
                return;
            }
            let at = self.push(make(cut(text)));
            if let Some(k) = &key {
                self.texts.insert(k.clone(), at);
            }
            self.open = Some((key, at, thought));
            return;
        }
        // A whole text: the one its deltas assembled, said again.
        if let Some(at) = key.as_ref().and_then(|k| self.texts.get(k)).copied()
            && let Some(Entry::Said(t) | Entry::Thought(t)) = self.at(at)
        {
            *t = cut(text);
            self.touch(at);
            self.open = None;
            return;
        }
        let at = self.push(make(cut(text)));
        if let Some(k) = key {
            self.texts.insert(k, at);
        }
    }
}

/// The last `n` entries of an attempt's conversation, read from the end of
/// its stdout log (its last [`crate::files::tail::BACKLOG`] bytes), with
/// the usage that much of it told; `None` when it has no log.
pub fn last_turns(
    logs: &std::path::Path,
    name: &str,
    attempt: u32,
    n: usize,
) -> Option<(Vec<Entry>, Usage)> {
    let mut log =
        crate::files::tail::LogTail::tail(logs.join(format!("{name}.{attempt}.stdout.log")));
    let mut t = Transcript::for_attempt(logs, name, attempt);
    // A log still written to is read to where it stood.
    for _ in 0..4 {
        let got = log.read();
        if got.lines.is_empty() {
            break;
        }
        for l in &got.lines {
            t.feed(l);
        }
    }
    if !log.exists() {
        return None;
    }
    let skip = t.entries.len().saturating_sub(n);
    Some((t.entries.into_iter().skip(skip).collect(), t.usage))
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transcript({} entries)", self.entries.len())
    }
}

/// A text cut to [`TEXT_MAX`] bytes at a character boundary, said so.
fn cut(mut t: String) -> String {
    if t.len() <= TEXT_MAX {
        return t;
    }
    let mut end = TEXT_MAX;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    let more = t.len() - end;
    t.truncate(end);
    t.push_str(&format!(" … ({more} bytes more in the attempt's log)"));
    t
}

/// A tool's arguments said short: the one argument that says what the
/// call does (a command, a path, a pattern, a URL), else the JSON on one
/// line, cut.
pub fn args_of(v: Option<&Value>) -> String {
    const SAY_MAX: usize = 200;
    let said = whole_args_of(v);
    let one: String = said.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(SAY_MAX) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

/// The one argument that says what a call does, whole: what a pattern
/// that decides the call is matched on (never the cut form a view shows).
pub fn whole_args_of(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return String::new();
    };
    match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            // Some CLIs give the arguments as a JSON string.
            Ok(inner @ Value::Object(_)) => whole_args_of(Some(&inner)),
            _ => s.clone(),
        },
        Value::Object(m) if m.is_empty() => String::new(),
        Value::Object(m) => [
            "command",
            "cmd",
            "file_path",
            "filePath",
            "path",
            "pattern",
            "url",
            "query",
        ]
        .iter()
        .find_map(|k| match m.get(*k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), String::from))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
        .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

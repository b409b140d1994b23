//! Reading an agent's stdout, one line at a time. Every JSON line goes to
//! the kernel for request extraction; per format, a parser also follows
//! the agent's live state (thinking, writing, which tool), its cost and
//! tokens, its final answer, its notices and any error it reports.
//!
//! Parsers never fail on what they do not know: unknown event types and
//! fields are ignored (CLIs add both with every release), and a line that
//! is not JSON is kept as plain text.

mod claude;
mod codex;
mod copilot;
mod gemini;
mod jsonl;
mod opencode;
#[cfg(test)]
mod tests;
pub mod tools;

use std::sync::Arc;

use serde_json::{Map, Value};

use super::def::StreamFormat;
use crate::kernel::{ActivityState, Usage};

/// What one line told.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// A value to extract spawn and escalation requests from.
    Emit(Value),
    Activity(ActivityState, Option<Arc<str>>),
    /// New totals for the attempt, in the one `agent_usage` meaning.
    Usage(Usage),
    /// A notice the agent reported that does not fail it.
    Warning(String),
    /// The CLI's own id of the conversation this attempt is in (said once,
    /// when first seen), so a later attempt can name it.
    Session(Arc<str>),
    /// A turn ended (claude's `result` line): a CLI reading its input live
    /// is closed at the end of a turn once it took every message it was
    /// given.
    TurnEnd,
    /// The CLI took a message of its live input (claude echoes each one
    /// with `--replay-user-messages`, when it takes it: into the turn that
    /// runs, or as a new turn).
    Took,
}

/// What the whole stream told, at the end.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// A structured result the stream declared.
    pub result: Option<Value>,
    /// The agent's last message, when no structured result came.
    pub text: Option<String>,
    /// An error the stream reported that fails the attempt.
    pub error: Option<String>,
    /// The provider's HTTP status, where the CLI states it in a field.
    pub status: Option<u64>,
    /// A cause the CLI states outright (its own turn or spend limit).
    pub cause: Option<&'static str>,
    pub usage: Usage,
    /// Any non-blank output at all.
    pub any_output: bool,
    /// The CLI's id of the conversation (see [`session_of`]).
    pub session: Option<Arc<str>>,
}

/// State every format shares.
#[derive(Default)]
struct Core {
    activity: Option<(ActivityState, Option<Arc<str>>)>,
    parsed: Parsed,
    /// Plain (non-JSON) lines, for agents that print text: the newest,
    /// within [`PLAIN_KEEP`] lines and [`PLAIN_BYTES`] bytes.
    plain: std::collections::VecDeque<String>,
    /// The bytes `plain` holds.
    plain_bytes: usize,
    /// The last message's text, until a tool runs: CLIs repeat their
    /// final message (a part sent again when it ends, a turn's summary),
    /// and that repeat is not a new request.
    said: Option<String>,
    /// The line just read declared the attempt's result.
    is_result_line: bool,
}

/// Plain output kept for a text result; the log file has everything.
const PLAIN_KEEP: usize = 400;
/// At most this much of plain output is kept, and of one plain line
/// [`PLAIN_LINE`]: sixty lines of 16 MiB were kept whole (2 GiB of memory
/// and a 1 GB result).
const PLAIN_BYTES: usize = 1 << 20;
const PLAIN_LINE: usize = 64 << 10;

impl Core {
    /// Keeps a plain line (cut to [`PLAIN_LINE`] at a char boundary, said
    /// so), dropping the oldest past [`PLAIN_KEEP`] lines or
    /// [`PLAIN_BYTES`] bytes.
    fn keep_plain(&mut self, line: &str) {
        let kept = if line.len() > PLAIN_LINE {
            let mut end = PLAIN_LINE;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            format!(
                "{} … ({} bytes cut; the attempt's log has the whole line)",
                &line[..end],
                line.len() - end
            )
        } else {
            line.to_string()
        };
        self.plain_bytes += kept.len();
        self.plain.push_back(kept);
        while self.plain.len() > PLAIN_KEEP || self.plain_bytes > PLAIN_BYTES {
            match self.plain.pop_front() {
                Some(old) => self.plain_bytes -= old.len(),
                None => break,
            }
        }
    }

    fn activity(&mut self, state: ActivityState, tool: Option<&str>, out: &mut Vec<Update>) {
        let next = (state, tool.map(Arc::from));
        if state == ActivityState::Tool {
            // Words said again after a tool ran are a new turn's.
            self.said = None;
        }
        if self.activity.as_ref() != Some(&next) {
            self.activity = Some(next.clone());
            out.push(Update::Activity(next.0, next.1));
        }
    }

    /// The stream reports totals for the attempt so far.
    fn set_usage(&mut self, u: Usage, out: &mut Vec<Update>) {
        let t = &mut self.parsed.usage;
        t.cost_usd = u.cost_usd.or(t.cost_usd);
        t.input_tokens = u.input_tokens.or(t.input_tokens);
        t.cached_input_tokens = u.cached_input_tokens.or(t.cached_input_tokens);
        t.output_tokens = u.output_tokens.or(t.output_tokens);
        self.push_usage(out);
    }

    /// The stream reports one step (or turn) at a time: add it.
    fn add_usage(&mut self, u: Usage, out: &mut Vec<Update>) {
        let t = &mut self.parsed.usage;
        let add = |slot: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *slot = Some(slot.unwrap_or(0) + v);
            }
        };
        add(&mut t.input_tokens, u.input_tokens);
        add(&mut t.cached_input_tokens, u.cached_input_tokens);
        add(&mut t.output_tokens, u.output_tokens);
        if let Some(c) = u.cost_usd {
            t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
        }
        self.push_usage(out);
    }

    fn push_usage(&self, out: &mut Vec<Update>) {
        if !self.parsed.usage.is_empty() {
            out.push(Update::Usage(self.parsed.usage));
        }
    }

    /// The agent said something: a message whose text holds JSON carries
    /// requests too, and the last message is the answer unless a result
    /// comes.
    fn message_text(&mut self, text: &str, out: &mut Vec<Update>) {
        let echo = self.said.as_deref() == Some(text.trim());
        if !echo && let Some(Value::Object(m)) = json_in_text(text) {
            out.push(Update::Emit(Value::Object(m)));
        }
        self.said = Some(text.trim().to_string());
        self.parsed.text = Some(text.to_string());
    }

    fn warn(&mut self, message: impl Into<String>, out: &mut Vec<Update>) {
        out.push(Update::Warning(message.into()));
    }
}

/// Per-format state beyond what every format shares.
enum Format {
    Claude,
    Codex(codex::State),
    Opencode,
    /// gemini-cli's stream-json; antigravity speaks the same events.
    Gemini(gemini::State),
    Copilot(copilot::State),
    Jsonl,
}

pub struct StreamParser {
    core: Core,
    format: Format,
    /// Tool calls by id, to name one that is refused.
    tools: tools::Names,
    /// Refused or failed tool calls said so far (a long session fails many
    /// commands: each is said up to a bound, then once that more came).
    tool_refusals: usize,
}

/// Refused or failed tool calls said one by one in an attempt; the rest are
/// in its log, and one warning says so.
const TOOL_REFUSALS_SAID: usize = 20;

impl StreamParser {
    pub fn new(format: StreamFormat) -> Self {
        let format = match format {
            StreamFormat::Claude => Format::Claude,
            StreamFormat::Codex => Format::Codex(codex::State::default()),
            StreamFormat::Opencode => Format::Opencode,
            StreamFormat::Gemini | StreamFormat::Antigravity => {
                Format::Gemini(gemini::State::default())
            }
            StreamFormat::Copilot => Format::Copilot(copilot::State::default()),
            StreamFormat::Jsonl => Format::Jsonl,
        };
        StreamParser {
            core: Core::default(),
            format,
            tools: tools::Names::default(),
            tool_refusals: 0,
        }
    }

    pub fn feed(&mut self, line: &str, out: &mut Vec<Update>) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            return;
        }
        self.core.parsed.any_output = true;
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            self.core.keep_plain(line);
            return;
        };
        if !v.is_object() {
            // No format speaks in bare arrays or scalars, but requests in
            // them still count.
            out.push(Update::Emit(v));
            return;
        }
        self.feed_object(v, out);
    }

    /// A line already read as a JSON object (the transcript reads each
    /// line once, for itself and for this parser).
    pub fn feed_object(&mut self, v: Value, out: &mut Vec<Update>) {
        self.core.parsed.any_output = true;
        let core = &mut self.core;
        if core.parsed.session.is_none()
            && let Some(id) = session_of(&self.format, &v)
        {
            let id: Arc<str> = Arc::from(id);
            core.parsed.session = Some(id.clone());
            out.push(Update::Session(id));
        }
        if !matches!(self.format, Format::Jsonl) {
            self.tools.see(&v);
            for r in self.tools.name(tools::refusals(&v)) {
                self.tool_refusals += 1;
                if self.tool_refusals <= TOOL_REFUSALS_SAID {
                    core.warn(r.words(), out);
                } else if self.tool_refusals == TOOL_REFUSALS_SAID + 1 {
                    core.warn(
                        format!("more than {TOOL_REFUSALS_SAID} tool calls refused or failed: the rest are in the attempt's log"),
                        out,
                    );
                }
            }
        }
        match &mut self.format {
            Format::Claude => claude::feed(core, &v, out),
            Format::Codex(s) => codex::feed(core, s, &v, out),
            Format::Opencode => opencode::feed(core, &v, out),
            Format::Gemini(s) => gemini::feed(core, s, &v, out),
            Format::Copilot(s) => copilot::feed(core, s, &v, out),
            Format::Jsonl => jsonl::feed(core, &v, out),
        }
        if !std::mem::take(&mut core.is_result_line) {
            out.push(Update::Emit(v));
        }
    }

    pub fn finish(mut self) -> Parsed {
        match &mut self.format {
            Format::Codex(s) => codex::finish(&mut self.core, s),
            Format::Gemini(s) => gemini::finish(&mut self.core, s),
            Format::Copilot(s) => copilot::finish(&mut self.core, s),
            Format::Claude | Format::Opencode | Format::Jsonl => {}
        }
        let parsed = &mut self.core.parsed;
        if parsed.result.is_none() && parsed.text.is_none() && !self.core.plain.is_empty() {
            parsed.text = Some(Vec::from(std::mem::take(&mut self.core.plain)).join("\n"));
        }
        self.core.parsed
    }
}

/// Where each CLI names its conversation in its own stream: claude on
/// every line (`session_id`, first on `system`/`init`), codex once on
/// `thread.started` (`thread_id`), opencode on every line (`sessionID`),
/// gemini-cli once on `init` (`session_id`), copilot only on its last,
/// `result` line (`sessionId`; a killed copilot never says it), a jsonl
/// program on a `session` line (`id`). The first
/// id an attempt's stream names is the attempt's.
fn session_of<'a>(format: &Format, v: &'a Value) -> Option<&'a str> {
    let ty = str_at(v, "/type");
    let id = match format {
        Format::Claude => str_at(v, "/session_id"),
        Format::Codex(_) if ty == Some("thread.started") => str_at(v, "/thread_id"),
        Format::Opencode => str_at(v, "/sessionID"),
        Format::Gemini(_) if ty == Some("init") => str_at(v, "/session_id"),
        Format::Copilot(_) if ty == Some("result") => str_at(v, "/sessionId"),
        Format::Jsonl if ty == Some("session") => str_at(v, "/id"),
        _ => None,
    }?;
    // An id is a name, not a message: short and printable, or not an id.
    (!id.is_empty() && id.len() <= 200 && id.chars().all(|c| c.is_ascii_graphic())).then_some(id)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn u64_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

/// The sum of the counts present, `None` when none is.
fn sum(parts: &[Option<u64>]) -> Option<u64> {
    parts.iter().flatten().copied().reduce(|a, b| a + b)
}

/// An agent's text answer as a result object: the text itself when it is
/// a JSON object; the JSON object of its last ```json block, with the whole
/// text beside it as `summary` (unless the object has one); else
/// `{ "summary": text }`. The answer is never replaced silently.
pub fn result_from_text(text: &str) -> Value {
    let t = text.trim();
    if t.starts_with('{')
        && let Ok(v @ Value::Object(_)) = serde_json::from_str(t)
    {
        return v;
    }
    if let Some(Value::Object(mut m)) = fenced_json(t) {
        if !m.contains_key("summary") {
            m.insert("summary".into(), Value::String(t.to_string()));
        }
        return Value::Object(m);
    }
    let mut m = Map::new();
    m.insert("summary".into(), Value::String(t.to_string()));
    Value::Object(m)
}

/// The JSON object a text is, or ends with in a ```json block.
fn json_in_text(text: &str) -> Option<Value> {
    let t = text.trim();
    if t.starts_with('{')
        && let Ok(v @ Value::Object(_)) = serde_json::from_str(t)
    {
        return Some(v);
    }
    fenced_json(t)
}

/// The last ```json fence wins: agents tend to end with their answer.
fn fenced_json(t: &str) -> Option<Value> {
    let start = t.rfind("```json")? + "```json".len();
    let body = &t[start..];
    let end = body.find("```")?;
    match serde_json::from_str(body[..end].trim()) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

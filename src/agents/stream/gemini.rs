//! gemini-cli `--output-format stream-json` (antigravity reads the same
//! events).
//!
//! - activity: `tool_use` (`tool_name`) a tool, `tool_result` thinking
//!   again, an assistant `message` writing;
//! - answer: assistant `message` content, streamed as `delta: true` pieces
//!   that add up, or whole;
//! - usage: `result.stats`: `input_tokens` already includes `cached`
//!   (`cached` + `input` is its breakdown), `output_tokens`; no cost;
//! - notices: an `error` event of severity `warning`;
//! - failure: `result.status` other than `success` (`error.message`), or
//!   an `error` event of severity `error` that no successful result
//!   followed.

use serde_json::Value;

use super::{Core, Update, str_at, u64_at};
use crate::kernel::{ActivityState, Usage};

#[derive(Default)]
pub(super) struct State {
    /// The assistant message being streamed.
    message: String,
    unrecovered: Option<String>,
    /// gemini stopped a repeating tool loop itself ("Loop detected,
    /// stopping execution"): its own turn guard.
    loop_stopped: Option<String>,
}

pub(super) fn feed(core: &mut Core, s: &mut State, v: &Value, out: &mut Vec<Update>) {
    match str_at(v, "/type").unwrap_or("") {
        "message" if str_at(v, "/role") == Some("assistant") => {
            core.activity(ActivityState::Writing, None, out);
            let t = str_at(v, "/content").unwrap_or("");
            if v.get("delta").and_then(Value::as_bool) != Some(true) {
                s.message.clear();
            }
            s.message.push_str(t);
        }
        "thought" | "thinking" => core.activity(ActivityState::Thinking, None, out),
        "tool_use" | "tool_call" => {
            end_message(core, s, out);
            let name = str_at(v, "/tool_name").or_else(|| str_at(v, "/name"));
            core.activity(ActivityState::Tool, name, out);
        }
        "tool_result" => core.activity(ActivityState::Thinking, None, out),
        "result" => {
            end_message(core, s, out);
            if str_at(v, "/status").is_some_and(|st| st != "success") {
                let m = str_at(v, "/error/message").unwrap_or("the agent reported an error");
                core.parsed.error = Some(m.to_string());
            } else {
                s.unrecovered = None;
            }
            core.set_usage(
                Usage {
                    cost_usd: None,
                    input_tokens: u64_at(v, "/stats/input_tokens"),
                    cached_input_tokens: u64_at(v, "/stats/cached"),
                    output_tokens: u64_at(v, "/stats/output_tokens"),
                },
                out,
            );
        }
        "error" => {
            let m = str_at(v, "/message").unwrap_or("stream error").to_string();
            if str_at(v, "/severity") == Some("warning") {
                if m.to_ascii_lowercase().contains("loop detected") {
                    s.loop_stopped = Some(m.clone());
                }
                core.warn(format!("gemini: {m}"), out);
            } else {
                s.unrecovered = Some(m);
            }
        }
        _ => {}
    }
}

/// A message is whole when something else happens: read its requests and
/// keep it as the answer so far.
fn end_message(core: &mut Core, s: &mut State, out: &mut Vec<Update>) {
    if !s.message.is_empty() {
        let text = std::mem::take(&mut s.message);
        core.message_text(&text, out);
    }
}

pub(super) fn finish(core: &mut Core, s: &mut State) {
    let mut out = Vec::new();
    end_message(core, s, &mut out);
    // Requests in a message the stream never closed are still read from
    // the final answer by the kernel; nothing to report here.
    if core.parsed.error.is_none() {
        core.parsed.error = s.unrecovered.take();
    }
    // A loop it stopped without answering ended on its own turn guard,
    // not on a broken stream.
    if core.parsed.error.is_none()
        && core.parsed.text.is_none()
        && let Some(m) = s.loop_stopped.take()
    {
        core.parsed.error = Some(format!("gemini stopped a repeating tool loop: {m}"));
        core.parsed.cause = Some(crate::kernel::retry::cause::TURN_LIMIT);
    }
}

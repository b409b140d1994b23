//! GitHub Copilot CLI: `-p … --output-format json` (one event per line,
//! `{type, data}`), or plain text without it.
//!
//! - activity: `assistant.turn_start` thinking, `assistant.message_start`
//!   and `assistant.message_delta` writing, `tool.execution_start`
//!   (`data.toolName`) a tool, `tool.execution_complete` thinking again;
//! - answer: the last `assistant.message` with non-empty `data.content`
//!   (in text mode: the printed text);
//! - usage: none — the JSON stream reports premium requests, not tokens;
//! - failure: the final `result` line's `exitCode` when it is not 0 (the
//!   process itself exits 0).

use serde_json::Value;

use super::{Core, Update, str_at, u64_at};
use crate::kernel::ActivityState;

#[derive(Default)]
pub(super) struct State {
    exit_code: Option<i64>,
    /// The last `session.error`: its message and the provider's status.
    session_error: Option<(String, Option<u64>)>,
}

pub(super) fn feed(core: &mut Core, s: &mut State, v: &Value, out: &mut Vec<Update>) {
    match str_at(v, "/type").unwrap_or("") {
        "assistant.turn_start" => core.activity(ActivityState::Thinking, None, out),
        "assistant.message_start" | "assistant.message_delta" => {
            core.activity(ActivityState::Writing, None, out);
        }
        "assistant.message" => {
            if let Some(t) = str_at(v, "/data/content").filter(|t| !t.trim().is_empty()) {
                core.activity(ActivityState::Writing, None, out);
                core.message_text(t, out);
            }
        }
        "tool.execution_start" => {
            let name = str_at(v, "/data/toolName");
            core.activity(ActivityState::Tool, name.or(Some("tool")), out);
        }
        "tool.execution_complete" => core.activity(ActivityState::Thinking, None, out),
        "result" => s.exit_code = v.get("exitCode").and_then(Value::as_i64),
        // Why a failing exit code is failing: "Authentication failed with
        // provider … (HTTP 401)", "… Last error: 503 …".
        "session.error" => {
            if let Some(m) = str_at(v, "/data/message") {
                s.session_error = Some((m.to_string(), u64_at(v, "/data/statusCode")));
            }
        }
        _ => {}
    }
}

pub(super) fn finish(core: &mut Core, s: &mut State) {
    if let Some(code) = s.exit_code.filter(|c| *c != 0) {
        core.parsed.error = Some(match s.session_error.take() {
            Some((message, status)) => {
                core.parsed.status = status;
                message
            }
            None => {
                format!("copilot reported exit code {code} in its result (the process exited 0)")
            }
        });
    }
}

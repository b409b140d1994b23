//! Codex `exec --json`: thread/turn/item events (codex ≥ 0.44), and the
//! older `{ "id", "msg": { "type" } }` shape.
//!
//! - activity: `turn.started` and `reasoning` items mean thinking;
//!   `agent_message` writing; `command_execution` (shell), `file_change`
//!   (apply_patch, which may arrive only as `item.completed`),
//!   `mcp_tool_call` (server.tool), `web_search` and `collab_tool_call`
//!   are tools;
//! - answer: the last `agent_message` item's `text`;
//! - usage: `turn.completed.usage`, one turn at a time (added):
//!   `input_tokens` already includes `cached_input_tokens`;
//! - notices: an `error` item and a top-level `error` become warnings;
//! - failure: `turn.failed`, or a top-level `error` that no completed turn
//!   followed; a completed turn without an answer says so.

use std::collections::HashSet;

use serde_json::Value;

use super::{Core, Update, str_at, u64_at};
use crate::kernel::{ActivityState, Usage};

#[derive(Default)]
pub(super) struct State {
    /// Items seen starting, so one seen only completing still shows.
    started: HashSet<String>,
    turn_failed: Option<String>,
    /// A top-level error not yet followed by a completed turn.
    unrecovered: Option<String>,
    turn_completed: bool,
}

pub(super) fn feed(core: &mut Core, s: &mut State, v: &Value, out: &mut Vec<Update>) {
    if let Some(msg) = v.get("msg") {
        return legacy(core, s, msg, out);
    }
    let kind = str_at(v, "/type").unwrap_or("");
    match kind {
        "turn.started" => core.activity(ActivityState::Thinking, None, out),
        "item.started" | "item.updated" | "item.completed" => {
            item(core, s, v, kind == "item.completed", out);
        }
        "turn.completed" => {
            s.turn_completed = true;
            s.unrecovered = None;
            core.add_usage(
                Usage {
                    cost_usd: None,
                    input_tokens: u64_at(v, "/usage/input_tokens"),
                    cached_input_tokens: u64_at(v, "/usage/cached_input_tokens"),
                    output_tokens: u64_at(v, "/usage/output_tokens"),
                },
                out,
            );
        }
        "turn.failed" => {
            let m = str_at(v, "/error/message").unwrap_or("the turn failed");
            s.turn_failed = Some(m.to_string());
        }
        "error" => {
            let m = str_at(v, "/message").unwrap_or("stream error").to_string();
            core.warn(format!("codex: {m}"), out);
            s.unrecovered = Some(m);
        }
        _ => {}
    }
}

fn item(core: &mut Core, s: &mut State, v: &Value, done: bool, out: &mut Vec<Update>) {
    let item_type = str_at(v, "/item/type").unwrap_or("");
    let id = str_at(v, "/item/id").unwrap_or("").to_string();
    match item_type {
        "reasoning" => core.activity(ActivityState::Thinking, None, out),
        "agent_message" => {
            core.activity(ActivityState::Writing, None, out);
            if done && let Some(t) = str_at(v, "/item/text") {
                core.message_text(t, out);
            }
        }
        "error" => {
            if done {
                let m = str_at(v, "/item/message").unwrap_or("an error item");
                core.warn(format!("codex: {m}"), out);
            }
        }
        _ => {
            let Some(tool) = tool_name(item_type, v) else {
                return;
            };
            if !done {
                s.started.insert(id);
                core.activity(ActivityState::Tool, Some(&tool), out);
                return;
            }
            if !s.started.remove(&id) {
                // Only its completion was reported (file_change in 0.46):
                // it still ran.
                core.activity(ActivityState::Tool, Some(&tool), out);
            }
            core.activity(ActivityState::Thinking, None, out);
        }
    }
}

fn tool_name(item_type: &str, v: &Value) -> Option<String> {
    Some(match item_type {
        "command_execution" => "shell".into(),
        "file_change" => "apply_patch".into(),
        "web_search" => "web_search".into(),
        "mcp_tool_call" => match (str_at(v, "/item/server"), str_at(v, "/item/tool")) {
            (Some(s), Some(t)) => format!("{s}.{t}"),
            (_, Some(t)) => t.to_string(),
            _ => "mcp".into(),
        },
        "collab_tool_call" => str_at(v, "/item/tool").unwrap_or("collab").to_string(),
        _ => return None,
    })
}

fn legacy(core: &mut Core, s: &mut State, msg: &Value, out: &mut Vec<Update>) {
    match str_at(msg, "/type").unwrap_or("") {
        "agent_reasoning" | "agent_reasoning_delta" | "task_started" => {
            core.activity(ActivityState::Thinking, None, out);
        }
        "exec_command_begin" => core.activity(ActivityState::Tool, Some("shell"), out),
        "patch_apply_begin" => core.activity(ActivityState::Tool, Some("apply_patch"), out),
        "mcp_tool_call_begin" => {
            let tool = match (
                str_at(msg, "/invocation/server"),
                str_at(msg, "/invocation/tool"),
            ) {
                (Some(s), Some(t)) => format!("{s}.{t}"),
                (_, Some(t)) => t.to_string(),
                _ => "mcp".into(),
            };
            core.activity(ActivityState::Tool, Some(&tool), out);
        }
        "exec_command_end" | "patch_apply_end" | "mcp_tool_call_end" => {
            core.activity(ActivityState::Thinking, None, out);
        }
        "agent_message" => {
            core.activity(ActivityState::Writing, None, out);
            if let Some(t) = str_at(msg, "/message") {
                core.message_text(t, out);
            }
        }
        "task_complete" => {
            s.turn_completed = true;
            s.unrecovered = None;
            if let Some(t) = str_at(msg, "/last_agent_message")
                && core.parsed.text.as_deref() != Some(t)
            {
                core.message_text(t, out);
            }
        }
        "token_count" => {
            // Running totals, under `info.total_token_usage` (or flat in
            // the oldest releases).
            let at = |k: &str| {
                u64_at(msg, &format!("/info/total_token_usage/{k}"))
                    .or_else(|| u64_at(msg, &format!("/{k}")))
            };
            core.set_usage(
                Usage {
                    cost_usd: None,
                    input_tokens: at("input_tokens"),
                    cached_input_tokens: at("cached_input_tokens"),
                    output_tokens: at("output_tokens"),
                },
                out,
            );
        }
        "stream_error" => {
            let m = str_at(msg, "/message").unwrap_or("stream error");
            core.warn(format!("codex: {m}"), out);
        }
        "error" => {
            let m = str_at(msg, "/message")
                .unwrap_or("stream error")
                .to_string();
            s.unrecovered = Some(m);
        }
        _ => {}
    }
}

pub(super) fn finish(core: &mut Core, s: &mut State) {
    let p = &mut core.parsed;
    p.error = s.turn_failed.take().or(s.unrecovered.take());
    if p.error.is_none() && s.turn_completed && p.text.is_none() {
        p.error = Some("the codex turn completed without an answer (no agent_message)".into());
    }
}

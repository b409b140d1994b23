//! Claude Code `-p --output-format stream-json --verbose`, with or without
//! `--include-partial-messages`.
//!
//! - activity: `stream_event` `content_block_start` (thinking, text,
//!   tool_use with its name) and the same blocks in `assistant` snapshots;
//!   a `user` line (a tool result went back) means thinking again;
//! - answer: the text of `assistant` messages of the main agent (a
//!   subagent's, with `parent_tool_use_id`, is not the answer), then the
//!   `result` line's `result`;
//! - usage: the `result` line: `usage.input_tokens` excludes the cache, so
//!   input = input + cache_creation + cache_read, cached = cache_read;
//!   `total_cost_usd`;
//! - failure: `is_error: true` (even with `subtype: "success"`) or an
//!   `error_*` subtype, told by `errors`, else `result`, else
//!   `terminal_reason`.

use serde_json::Value;

use super::{Core, Update, str_at, sum, u64_at};
use crate::kernel::{ActivityState, Usage};

pub(super) fn feed(core: &mut Core, v: &Value, out: &mut Vec<Update>) {
    match str_at(v, "/type") {
        Some("stream_event") if str_at(v, "/event/type") == Some("content_block_start") => {
            match str_at(v, "/event/content_block/type") {
                Some("thinking" | "redacted_thinking") => {
                    core.activity(ActivityState::Thinking, None, out);
                }
                Some("text") => core.activity(ActivityState::Writing, None, out),
                Some("tool_use" | "server_tool_use") => {
                    let name = str_at(v, "/event/content_block/name");
                    core.activity(ActivityState::Tool, name, out);
                }
                _ => {}
            }
        }
        Some("assistant") => {
            let main_agent = v.get("parent_tool_use_id").is_none_or(Value::is_null);
            let blocks = v.pointer("/message/content").and_then(Value::as_array);
            for b in blocks.into_iter().flatten() {
                match str_at(b, "/type") {
                    Some("thinking" | "redacted_thinking") => {
                        core.activity(ActivityState::Thinking, None, out);
                    }
                    Some("text") => {
                        core.activity(ActivityState::Writing, None, out);
                        if main_agent && let Some(t) = str_at(b, "/text") {
                            core.message_text(t, out);
                        }
                    }
                    Some("tool_use" | "server_tool_use") => {
                        core.activity(ActivityState::Tool, str_at(b, "/name"), out);
                    }
                    _ => {}
                }
            }
        }
        Some("user") => {
            // The main agent's words from its input (not a tool's result,
            // not a subagent's prompt): the echo of a message it took.
            let main_agent = v.get("parent_tool_use_id").is_none_or(Value::is_null);
            let words = match v.pointer("/message/content") {
                Some(Value::String(_)) => true,
                Some(Value::Array(blocks)) => {
                    !blocks.is_empty() && blocks.iter().all(|b| str_at(b, "/type") == Some("text"))
                }
                _ => false,
            };
            if main_agent && words {
                out.push(Update::Took);
            }
            core.activity(ActivityState::Thinking, None, out);
        }
        Some("result") => result(core, v, out),
        _ => {}
    }
}

fn result(core: &mut Core, v: &Value, out: &mut Vec<Update>) {
    out.push(Update::TurnEnd);
    let cost_usd = v.get("total_cost_usd").and_then(Value::as_f64);
    let usage = match model_usage(v) {
        Some(u) => Usage { cost_usd, ..u },
        None => Usage {
            cost_usd,
            input_tokens: sum(&[
                u64_at(v, "/usage/input_tokens"),
                u64_at(v, "/usage/cache_creation_input_tokens"),
                u64_at(v, "/usage/cache_read_input_tokens"),
            ]),
            cached_input_tokens: u64_at(v, "/usage/cache_read_input_tokens"),
            output_tokens: u64_at(v, "/usage/output_tokens"),
        },
    };
    core.set_usage(usage, out);
    let subtype = str_at(v, "/subtype");
    let is_error = v.get("is_error").and_then(Value::as_bool) == Some(true)
        || subtype.is_some_and(|s| s.starts_with("error"));
    let text = str_at(v, "/result").filter(|t| !t.trim().is_empty());
    if is_error {
        core.parsed.error = Some(error_text(v, subtype, text));
        core.parsed.status = u64_at(v, "/api_error_status");
        core.parsed.cause = match (subtype, str_at(v, "/terminal_reason")) {
            (Some("error_max_turns"), _) | (_, Some("max_turns")) => {
                Some(crate::kernel::retry::cause::TURN_LIMIT)
            }
            (Some("error_max_budget_usd"), _) => Some(crate::kernel::retry::cause::BUDGET_LIMIT),
            _ => None,
        };
        return;
    }
    if let Some(t) = text {
        // The result repeats the final assistant message: the same words
        // seen twice in one attempt are one sighting, not two.
        let repeated = core.parsed.text.as_deref().map(str::trim) == Some(t.trim());
        if !repeated {
            core.message_text(t, out);
        }
        // The answer is that text (the runner makes it the result), and
        // the runner says the result restates the stream.
        core.parsed.text = Some(t.to_string());
    }
}

/// Every model the attempt used, added (`modelUsage`): what
/// `total_cost_usd` is the price of. `usage` alone can miss requests — 2.0
/// counts only the last turn's and zero after a retried request — and the
/// side calls to a small model.
fn model_usage(v: &Value) -> Option<Usage> {
    let models = v.get("modelUsage")?.as_object().filter(|m| !m.is_empty())?;
    let mut u = Usage::default();
    let add = |slot: &mut Option<u64>, n: Option<u64>| {
        if let Some(n) = n {
            *slot = Some(slot.unwrap_or(0) + n);
        }
    };
    for m in models.values() {
        let read = m.get("cacheReadInputTokens").and_then(Value::as_u64);
        let input = sum(&[
            m.get("inputTokens").and_then(Value::as_u64),
            m.get("cacheCreationInputTokens").and_then(Value::as_u64),
            read,
        ]);
        add(&mut u.input_tokens, input);
        add(&mut u.cached_input_tokens, read);
        add(
            &mut u.output_tokens,
            m.get("outputTokens").and_then(Value::as_u64),
        );
    }
    Some(u)
}

/// `error_max_turns: Reached maximum number of turns (30)`, or the text the
/// CLI put in `result` ("API Error: …", "Not logged in …").
fn error_text(v: &Value, subtype: Option<&str>, text: Option<&str>) -> String {
    let errors: Vec<&str> = v
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|e| !e.trim().is_empty())
        .collect();
    let detail = if !errors.is_empty() {
        Some(errors.join("; "))
    } else if let Some(t) = text {
        Some(t.trim().to_string())
    } else {
        str_at(v, "/terminal_reason").map(|r| format!("terminal reason {r}"))
    };
    match (subtype.filter(|s| s.starts_with("error")), detail) {
        (Some(s), Some(d)) => format!("{s}: {d}"),
        (Some(s), None) => s.to_string(),
        (None, Some(d)) => d,
        (None, None) => "the agent reported an error".into(),
    }
}

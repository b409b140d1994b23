//! opencode `run --format json`.
//!
//! - activity: `step_start` and `reasoning` mean thinking, `text` writing,
//!   `tool_use` (sent when the tool finished) a tool, `part.tool`;
//! - answer: the last `text` part;
//! - usage: `step_finish.part`, one step at a time (added): `tokens.input`
//!   excludes the cache, so input = input + cache.read + cache.write,
//!   cached = cache.read, output = output + reasoning; `cost`;
//! - failure: an `error` event (`error.data.message`).

use serde_json::Value;

use super::{Core, Update, str_at, sum, u64_at};
use crate::kernel::{ActivityState, Usage};

/// Everything sent to the model in a step. opencode 1.17 on gives `total`
/// and an `input` without the cache (total = input + output + reasoning +
/// cache); 1.0 has no `total` and passes on the provider's own count, which
/// for an OpenAI-style provider already includes the cached part — there
/// an `input` as large as the cache is taken to include it, so cached
/// tokens are counted once.
fn input_tokens(v: &Value) -> Option<u64> {
    let input = u64_at(v, "/part/tokens/input");
    let cache = sum(&[
        u64_at(v, "/part/tokens/cache/read"),
        u64_at(v, "/part/tokens/cache/write"),
    ]);
    let has_total = v.pointer("/part/tokens/total").is_some();
    match (input, cache) {
        (Some(i), Some(c)) if !has_total && i >= c && c > 0 => Some(i),
        _ => sum(&[input, cache]),
    }
}

pub(super) fn feed(core: &mut Core, v: &Value, out: &mut Vec<Update>) {
    match str_at(v, "/type").unwrap_or("") {
        "step_start" | "reasoning" => core.activity(ActivityState::Thinking, None, out),
        "text" => {
            core.activity(ActivityState::Writing, None, out);
            if let Some(t) = str_at(v, "/part/text") {
                core.message_text(t, out);
            }
        }
        "tool_use" => core.activity(ActivityState::Tool, str_at(v, "/part/tool"), out),
        "step_finish" => core.add_usage(
            Usage {
                cost_usd: v.pointer("/part/cost").and_then(Value::as_f64),
                input_tokens: input_tokens(v),
                cached_input_tokens: u64_at(v, "/part/tokens/cache/read"),
                output_tokens: sum(&[
                    u64_at(v, "/part/tokens/output"),
                    u64_at(v, "/part/tokens/reasoning"),
                ]),
            },
            out,
        ),
        "error" => {
            let m = str_at(v, "/error/data/message")
                .or_else(|| str_at(v, "/error/message"))
                .or_else(|| str_at(v, "/message"))
                .or_else(|| str_at(v, "/error/name"))
                .unwrap_or("stream error");
            core.parsed.error = Some(m.to_string());
            core.parsed.status = u64_at(v, "/error/data/statusCode");
        }
        _ => {}
    }
}

//! playdeck's own JSON-lines protocol (docs/agents.md, "Real agents"): `state`,
//! `usage` (totals so far, in the `agent_usage` meaning), `text`,
//! `result`, `error`.

use serde_json::{Map, Value};

use super::{Core, Update, result_from_text, str_at, u64_at};
use crate::kernel::{ActivityState, Usage};

pub(super) fn feed(core: &mut Core, v: &Value, out: &mut Vec<Update>) {
    match str_at(v, "/type").unwrap_or("") {
        "state" => {
            let state = match str_at(v, "/state") {
                Some("thinking") => ActivityState::Thinking,
                Some("writing") => ActivityState::Writing,
                Some("tool") => ActivityState::Tool,
                _ => ActivityState::Waiting,
            };
            core.activity(state, str_at(v, "/tool"), out);
        }
        "usage" => core.set_usage(
            Usage {
                cost_usd: v.get("cost_usd").and_then(Value::as_f64),
                input_tokens: u64_at(v, "/input_tokens"),
                cached_input_tokens: u64_at(v, "/cached_input_tokens"),
                output_tokens: u64_at(v, "/output_tokens"),
            },
            out,
        ),
        "text" => {
            if let Some(t) = str_at(v, "/text") {
                core.message_text(t, out);
            }
        }
        "result" => {
            // The declared result is sighted as the result, once; the line
            // that carries it is not a stream sighting too.
            core.is_result_line = true;
            core.parsed.result = Some(match v.get("result") {
                Some(Value::String(t)) => result_from_text(t),
                Some(Value::Object(m)) => Value::Object(m.clone()),
                Some(other) => {
                    let mut m = Map::new();
                    m.insert("value".into(), other.clone());
                    Value::Object(m)
                }
                None => Value::Object(Map::new()),
            });
        }
        "warning" => {
            let m = str_at(v, "/message").unwrap_or("a warning");
            core.warn(m, out);
        }
        "error" => {
            core.parsed.error = Some(str_at(v, "/message").unwrap_or("stream error").into());
        }
        _ => {}
    }
}

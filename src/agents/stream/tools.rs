//! Tool calls an agent's CLI refused (the role's tool permissions did not
//! allow the tool) or that failed, as its stream tells them. A refusal
//! used to leave only `agent_activity tool Write` in the log: the run now
//! records each as a warning of its operation (the console and the report
//! show it), and the follow view marks its line.
//!
//! - claude: a `user` line's `tool_result` block with `is_error: true`
//!   (`<tool_use_error>Write exists but is not enabled…`), its tool named by
//!   the `tool_use` block of the same id;
//! - gemini-cli: `tool_result` with `status: "error"`, named by the
//!   `tool_use` of the same `tool_id`;
//! - opencode: `tool_use` whose `part.state.status` is `error`;
//! - codex: an `item.completed` command execution with `status: "failed"`
//!   (the sandbox refused it, or the command failed);
//! - copilot: `tool.execution_complete` with `success: false`
//!   (`Permission to run this tool was denied…`), named by the
//!   `tool.execution_start` of the same `toolCallId`.

use std::collections::HashMap;

use serde_json::Value;

use super::str_at;

/// Most characters of what a refusal said that are kept.
const SAID_MAX: usize = 300;
/// Tool ids remembered for naming their results: a long session's oldest
/// are let go.
const IDS_KEPT: usize = 1_000;

/// A refused or failed tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The id its result names it by, where the line has one.
    id: Option<String>,
    /// The tool, where the line names it.
    pub tool: Option<String>,
    /// What the CLI said of it, on one line.
    pub said: String,
}

impl Refusal {
    /// As the run's warning and the follow view say it.
    pub fn words(&self) -> String {
        match &self.tool {
            Some(t) => format!(
                "tool {} refused or failed: {}",
                crate::printable::printable(t),
                self.said
            ),
            None => format!("a tool call was refused or failed: {}", self.said),
        }
    }
}

/// What a tool's result said, on one line, cut: a string, or the text of
/// an array of `{type: text, text}` blocks; claude's `<tool_use_error>`
/// tags dropped.
fn said_of(v: Option<&Value>) -> String {
    let text = match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| str_at(b, "/text"))
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    let text = text
        .replace("<tool_use_error>", "")
        .replace("</tool_use_error>", "");
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let one = crate::printable::printable(&one).into_owned();
    if one.is_empty() {
        return "(nothing said)".into();
    }
    match one.char_indices().nth(SAID_MAX) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

/// The refused or failed tool calls one line of any format tells of (its
/// shape says which format it is).
pub fn refusals(v: &Value) -> Vec<Refusal> {
    match str_at(v, "/type") {
        Some("user") => v
            .pointer("/message/content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| {
                str_at(b, "/type") == Some("tool_result")
                    && b.get("is_error").and_then(Value::as_bool) == Some(true)
            })
            .map(|b| Refusal {
                id: str_at(b, "/tool_use_id").map(String::from),
                tool: None,
                said: said_of(b.get("content")),
            })
            .collect(),
        Some("tool_result") if str_at(v, "/status") == Some("error") => vec![Refusal {
            id: str_at(v, "/tool_id").map(String::from),
            tool: None,
            said: said_of(v.get("error").or_else(|| v.get("output"))),
        }],
        Some("tool_use") if str_at(v, "/part/state/status") == Some("error") => vec![Refusal {
            id: None,
            tool: str_at(v, "/part/tool").map(String::from),
            said: said_of(v.pointer("/part/state/error")),
        }],
        Some("item.completed")
            if str_at(v, "/item/type") == Some("command_execution")
                && str_at(v, "/item/status") == Some("failed") =>
        {
            vec![Refusal {
                id: None,
                tool: Some("shell".into()),
                said: said_of(v.pointer("/item/aggregated_output")),
            }]
        }
        Some("tool.execution_complete")
            if v.pointer("/data/success").and_then(Value::as_bool) == Some(false) =>
        {
            vec![Refusal {
                id: str_at(v, "/data/toolCallId").map(String::from),
                tool: None,
                said: said_of(v.pointer("/data/error")),
            }]
        }
        _ => Vec::new(),
    }
}

/// What a line of output says of refused tool calls, for the follow view:
/// none for a line that tells of none (most lines are not even looked at).
pub fn refused_line(line: &str) -> Option<String> {
    // Only a line that says so is parsed: the view asks for every visible
    // line at every frame.
    const SAYS: [&str; 4] = [
        "\"is_error\":true",
        "\"status\":\"error\"",
        "\"status\":\"failed\"",
        "\"success\":false",
    ];
    if !line.starts_with('{') || !SAYS.iter().any(|s| line.contains(s)) {
        return None;
    }
    let v: Value = serde_json::from_str(line).ok()?;
    let r = refusals(&v);
    (!r.is_empty()).then(|| r.iter().map(Refusal::words).collect::<Vec<_>>().join(" · "))
}

/// Tool calls' names by id, as a stream gives them, to name a refusal.
#[derive(Default)]
pub struct Names(HashMap<String, String>);

impl Names {
    /// Remembers the tools a line calls (claude's `tool_use` blocks, in
    /// snapshots and stream events; gemini-cli's `tool_use`).
    pub fn see(&mut self, v: &Value) {
        let mut put = |id: Option<&str>, name: Option<&str>| {
            if let (Some(id), Some(name)) = (id, name) {
                if self.0.len() >= IDS_KEPT {
                    self.0.clear();
                }
                self.0.insert(id.to_string(), name.to_string());
            }
        };
        match str_at(v, "/type") {
            Some("assistant") => {
                for b in v
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if str_at(b, "/type") == Some("tool_use") {
                        put(str_at(b, "/id"), str_at(b, "/name"));
                    }
                }
            }
            Some("stream_event") => put(
                str_at(v, "/event/content_block/id"),
                str_at(v, "/event/content_block/name"),
            ),
            Some("tool_use") => put(str_at(v, "/tool_id"), str_at(v, "/tool_name")),
            Some("tool.execution_start") => {
                put(str_at(v, "/data/toolCallId"), str_at(v, "/data/toolName"));
            }
            _ => {}
        }
    }

    /// The refusals of a line, named where an earlier call said the tool.
    pub fn name(&self, mut r: Vec<Refusal>) -> Vec<Refusal> {
        for x in &mut r {
            if x.tool.is_none()
                && let Some(id) = &x.id
            {
                x.tool = self.0.get(id).cloned();
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refused_tool_is_named_and_said_in_each_format() {
        let mut names = Names::default();
        names.see(&json!({"type":"assistant","message":{"content":[
            {"type":"tool_use","id":"toolu_1","name":"Write","input":{}}]}}));
        let claude = json!({"type":"user","message":{"role":"user","content":[
            {"type":"tool_result","tool_use_id":"toolu_1","is_error":true,
             "content":"<tool_use_error>Write exists but is not enabled in this context.</tool_use_error>"},
            {"type":"tool_result","tool_use_id":"toolu_2","content":"fine"}]}});
        let r = names.name(refusals(&claude));
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            r[0].words(),
            "tool Write refused or failed: Write exists but is not enabled in this context."
        );
        names.see(&json!({"type":"tool_use","tool_name":"run_shell_command","tool_id":"7"}));
        let gemini = json!({"type":"tool_result","tool_id":"7","status":"error",
            "error":{"type":"permission","message":"Tool not allowed"}});
        assert_eq!(
            names.name(refusals(&gemini))[0].words(),
            "tool run_shell_command refused or failed: Tool not allowed"
        );
        let opencode = json!({"type":"tool_use","part":{"tool":"bash",
            "state":{"status":"error","error":"permission denied:\n rm -rf"}}});
        assert_eq!(
            refusals(&opencode)[0].words(),
            "tool bash refused or failed: permission denied: rm -rf"
        );
        // Successes and other lines tell of nothing.
        assert!(
            refusals(&json!({"type":"tool_result","tool_id":"7","status":"success"})).is_empty()
        );
        assert!(refused_line(r#"{"type":"result","is_error":false}"#).is_none());
        assert_eq!(
            refused_line(&claude.to_string()).as_deref(),
            Some(
                "a tool call was refused or failed: Write exists but is not enabled in this context."
            )
        );
        // What an agent wrote never drives the terminal, nor runs on.
        let long = json!({"type":"user","message":{"content":[{"type":"tool_result",
            "is_error":true,"content":[{"type":"text","text":format!("\u{1b}[2Jx{}", "y".repeat(400))}]}]}});
        let w = refusals(&long)[0].words();
        assert!(
            !w.contains('\u{1b}') && w.ends_with('…') && w.chars().count() < 360,
            "{w}"
        );
    }
}

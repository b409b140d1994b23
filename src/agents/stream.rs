//! Reading an agent's stdout, one line at a time. Every JSON line goes to
//! the kernel for request extraction; per format, the parser also follows
//! the agent's live state (thinking, writing, which tool), its cost and
//! tokens, its final result and any error it reports.

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
    Usage(Usage),
}

/// What the whole stream told, at the end.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// A structured result the stream declared.
    pub result: Option<Value>,
    /// The agent's last message, when no structured result came.
    pub text: Option<String>,
    /// An error the stream reported.
    pub error: Option<String>,
    pub usage: Usage,
    /// Any non-blank output at all.
    pub any_output: bool,
}

pub struct StreamParser {
    format: StreamFormat,
    activity: Option<(ActivityState, Option<Arc<str>>)>,
    parsed: Parsed,
    /// Plain (non-JSON) lines, for agents that print text.
    plain: Vec<String>,
    /// Assistant text streamed in pieces (antigravity deltas).
    partial: String,
}

/// Plain output kept for a text result; the log file has everything.
const PLAIN_KEEP: usize = 400;

impl StreamParser {
    pub fn new(format: StreamFormat) -> Self {
        StreamParser {
            format,
            activity: None,
            parsed: Parsed::default(),
            plain: Vec::new(),
            partial: String::new(),
        }
    }

    pub fn feed(&mut self, line: &str, out: &mut Vec<Update>) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            return;
        }
        self.parsed.any_output = true;
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            if self.plain.len() == PLAIN_KEEP {
                self.plain.remove(0);
            }
            self.plain.push(line.to_string());
            return;
        };
        if !v.is_object() {
            // No format speaks in bare arrays or scalars, but requests in
            // them still count.
            out.push(Update::Emit(v));
            return;
        }
        match self.format {
            StreamFormat::Claude => self.claude(&v, out),
            StreamFormat::Codex => self.codex(&v, out),
            StreamFormat::Opencode => self.opencode(&v, out),
            StreamFormat::Antigravity => self.antigravity(&v, out),
            StreamFormat::Jsonl | StreamFormat::Copilot => self.jsonl(&v, out),
        }
        out.push(Update::Emit(v));
    }

    pub fn finish(mut self) -> Parsed {
        if self.parsed.text.is_none() && !self.partial.is_empty() {
            self.parsed.text = Some(std::mem::take(&mut self.partial));
        }
        if self.parsed.result.is_none() && self.parsed.text.is_none() && !self.plain.is_empty() {
            self.parsed.text = Some(self.plain.join("\n"));
        }
        self.parsed
    }

    fn activity(&mut self, state: ActivityState, tool: Option<&str>, out: &mut Vec<Update>) {
        let next = (state, tool.map(Arc::from));
        if self.activity.as_ref() != Some(&next) {
            self.activity = Some(next.clone());
            out.push(Update::Activity(next.0, next.1));
        }
    }

    fn usage(&mut self, cost: Option<f64>, input: Option<u64>, output: Option<u64>, add: bool) {
        let u = &mut self.parsed.usage;
        let merge = |slot: &mut Option<u64>, v: Option<u64>| {
            if let Some(v) = v {
                *slot = Some(if add { slot.unwrap_or(0) + v } else { v });
            }
        };
        merge(&mut u.input_tokens, input);
        merge(&mut u.output_tokens, output);
        if let Some(c) = cost {
            u.cost_usd = Some(if add {
                u.cost_usd.unwrap_or(0.0) + c
            } else {
                c
            });
        }
    }

    fn push_usage(&self, out: &mut Vec<Update>) {
        if !self.parsed.usage.is_empty() {
            out.push(Update::Usage(self.parsed.usage));
        }
    }

    /// A message whose text is itself JSON carries requests too.
    fn message_text(&mut self, text: &str, out: &mut Vec<Update>) {
        if let Some(Value::Object(m)) = json_in_text(text) {
            out.push(Update::Emit(Value::Object(m)));
        }
        self.parsed.text = Some(text.to_string());
    }

    /// Claude Code `--output-format stream-json` (with partial messages).
    fn claude(&mut self, v: &Value, out: &mut Vec<Update>) {
        match str_at(v, "/type") {
            Some("stream_event") if str_at(v, "/event/type") == Some("content_block_start") => {
                match str_at(v, "/event/content_block/type") {
                    Some("thinking") => self.activity(ActivityState::Thinking, None, out),
                    Some("text") => self.activity(ActivityState::Writing, None, out),
                    Some("tool_use") | Some("server_tool_use") => {
                        let name = str_at(v, "/event/content_block/name");
                        self.activity(ActivityState::Tool, name, out)
                    }
                    _ => {}
                }
            }
            Some("assistant") => {
                let blocks = v.pointer("/message/content").and_then(Value::as_array);
                for b in blocks.into_iter().flatten() {
                    match str_at(b, "/type") {
                        Some("thinking") => self.activity(ActivityState::Thinking, None, out),
                        Some("text") => {
                            self.activity(ActivityState::Writing, None, out);
                            if let Some(t) = str_at(b, "/text") {
                                self.message_text(t, out);
                            }
                        }
                        Some("tool_use") => {
                            self.activity(ActivityState::Tool, str_at(b, "/name"), out)
                        }
                        _ => {}
                    }
                }
            }
            // A tool result went back to the model: it thinks again.
            Some("user") => self.activity(ActivityState::Thinking, None, out),
            Some("result") => {
                let input = [
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ]
                .iter()
                .filter_map(|k| v.pointer(&format!("/usage/{k}")).and_then(Value::as_u64))
                .reduce(|a, b| a + b);
                self.usage(
                    v.get("total_cost_usd").and_then(Value::as_f64),
                    input,
                    v.pointer("/usage/output_tokens").and_then(Value::as_u64),
                    false,
                );
                self.push_usage(out);
                let is_error = v.get("is_error").and_then(Value::as_bool) == Some(true)
                    || str_at(v, "/subtype").is_some_and(|s| s.starts_with("error"));
                let text = str_at(v, "/result").map(str::to_string);
                if is_error {
                    self.parsed.error = Some(
                        text.filter(|t| !t.is_empty())
                            .or_else(|| str_at(v, "/subtype").map(str::to_string))
                            .unwrap_or_else(|| "the agent reported an error".into()),
                    );
                } else if let Some(t) = text {
                    self.message_text(&t, out);
                    self.parsed.result = Some(result_from_text(&t));
                }
            }
            _ => {}
        }
    }

    /// Codex `exec --json` (thread/turn/item events, and the older
    /// `{ msg: { type } }` shape).
    fn codex(&mut self, v: &Value, out: &mut Vec<Update>) {
        if let Some(msg) = v.get("msg") {
            return self.codex_legacy(msg, out);
        }
        let kind = str_at(v, "/type").unwrap_or("");
        match kind {
            "turn.started" => self.activity(ActivityState::Thinking, None, out),
            "item.started" | "item.updated" | "item.completed" => {
                let item_type = str_at(v, "/item/type").unwrap_or("");
                let done = kind == "item.completed";
                match item_type {
                    "reasoning" => self.activity(ActivityState::Thinking, None, out),
                    "agent_message" => {
                        self.activity(ActivityState::Writing, None, out);
                        if done && let Some(t) = str_at(v, "/item/text") {
                            self.message_text(t, out);
                        }
                    }
                    "command_execution" | "file_change" | "mcp_tool_call" | "web_search" => {
                        if done {
                            self.activity(ActivityState::Thinking, None, out);
                        } else {
                            let tool = match item_type {
                                "command_execution" => "shell".to_string(),
                                "file_change" => "apply_patch".to_string(),
                                "web_search" => "web_search".to_string(),
                                _ => match (str_at(v, "/item/server"), str_at(v, "/item/tool")) {
                                    (Some(s), Some(t)) => format!("{s}.{t}"),
                                    (_, Some(t)) => t.to_string(),
                                    _ => "mcp".to_string(),
                                },
                            };
                            self.activity(ActivityState::Tool, Some(&tool), out);
                        }
                    }
                    "error" => {
                        if let Some(m) = str_at(v, "/item/message") {
                            self.parsed.error = Some(m.to_string());
                        }
                    }
                    _ => {}
                }
            }
            "turn.completed" => {
                let input = ["input_tokens", "cached_input_tokens"]
                    .iter()
                    .filter_map(|k| v.pointer(&format!("/usage/{k}")).and_then(Value::as_u64))
                    .reduce(|a, b| a + b);
                let output = v.pointer("/usage/output_tokens").and_then(Value::as_u64);
                self.usage(None, input, output, true);
                self.push_usage(out);
            }
            "turn.failed" => {
                self.parsed.error = Some(
                    str_at(v, "/error/message")
                        .unwrap_or("the turn failed")
                        .to_string(),
                );
            }
            "error" => {
                self.parsed.error =
                    Some(str_at(v, "/message").unwrap_or("stream error").to_string());
            }
            _ => {}
        }
    }

    fn codex_legacy(&mut self, msg: &Value, out: &mut Vec<Update>) {
        match str_at(msg, "/type").unwrap_or("") {
            "agent_reasoning" | "agent_reasoning_delta" | "task_started" => {
                self.activity(ActivityState::Thinking, None, out)
            }
            "exec_command_begin" => self.activity(ActivityState::Tool, Some("shell"), out),
            "patch_apply_begin" => self.activity(ActivityState::Tool, Some("apply_patch"), out),
            "mcp_tool_call_begin" => {
                let tool = str_at(msg, "/invocation/tool").unwrap_or("mcp").to_string();
                self.activity(ActivityState::Tool, Some(&tool), out)
            }
            "exec_command_end" | "patch_apply_end" | "mcp_tool_call_end" => {
                self.activity(ActivityState::Thinking, None, out)
            }
            "agent_message" => {
                self.activity(ActivityState::Writing, None, out);
                if let Some(t) = str_at(msg, "/message") {
                    self.message_text(t, out);
                }
            }
            "task_complete" => {
                if let Some(t) = str_at(msg, "/last_agent_message") {
                    self.message_text(t, out);
                }
            }
            "token_count" => {
                let input = msg.pointer("/info/total_token_usage/input_tokens");
                let output = msg.pointer("/info/total_token_usage/output_tokens");
                self.usage(
                    None,
                    input.and_then(Value::as_u64),
                    output.and_then(Value::as_u64),
                    false,
                );
                self.push_usage(out);
            }
            "error" | "stream_error" => {
                self.parsed.error = Some(
                    str_at(msg, "/message")
                        .unwrap_or("stream error")
                        .to_string(),
                );
            }
            _ => {}
        }
    }

    /// opencode `run --format json`.
    fn opencode(&mut self, v: &Value, out: &mut Vec<Update>) {
        match str_at(v, "/type").unwrap_or("") {
            "step_start" => self.activity(ActivityState::Thinking, None, out),
            "reasoning" => self.activity(ActivityState::Thinking, None, out),
            "text" => {
                self.activity(ActivityState::Writing, None, out);
                if let Some(t) = str_at(v, "/part/text") {
                    self.message_text(t, out);
                }
            }
            "tool_use" => {
                self.activity(ActivityState::Tool, str_at(v, "/part/tool"), out);
            }
            "step_finish" => {
                self.usage(
                    v.pointer("/part/cost").and_then(Value::as_f64),
                    v.pointer("/part/tokens/input").and_then(Value::as_u64),
                    v.pointer("/part/tokens/output").and_then(Value::as_u64),
                    true,
                );
                self.push_usage(out);
            }
            "error" => {
                let m = str_at(v, "/error/data/message")
                    .or_else(|| str_at(v, "/error/message"))
                    .or_else(|| str_at(v, "/message"))
                    .unwrap_or("stream error");
                self.parsed.error = Some(m.to_string());
            }
            _ => {}
        }
    }

    /// Antigravity's stream-json (message deltas, tool events, a result).
    fn antigravity(&mut self, v: &Value, out: &mut Vec<Update>) {
        match str_at(v, "/type").unwrap_or("") {
            "message" if str_at(v, "/role") == Some("assistant") => {
                self.activity(ActivityState::Writing, None, out);
                let t = str_at(v, "/content").unwrap_or("");
                if v.get("delta").and_then(Value::as_bool) == Some(true) {
                    self.partial.push_str(t);
                } else {
                    self.partial.clear();
                    self.message_text(t, out);
                }
            }
            "thought" | "thinking" => self.activity(ActivityState::Thinking, None, out),
            "tool_use" | "tool_call" => {
                let name = str_at(v, "/tool_name").or_else(|| str_at(v, "/name"));
                self.activity(ActivityState::Tool, name, out);
            }
            "tool_result" => self.activity(ActivityState::Thinking, None, out),
            "result" => {
                if str_at(v, "/status").is_some_and(|s| s != "success") {
                    self.parsed.error = Some(
                        str_at(v, "/error/message")
                            .unwrap_or("the agent reported an error")
                            .to_string(),
                    );
                }
                self.usage(
                    None,
                    v.pointer("/stats/input_tokens").and_then(Value::as_u64),
                    v.pointer("/stats/output_tokens").and_then(Value::as_u64),
                    false,
                );
                self.push_usage(out);
            }
            "error" => {
                self.parsed.error = Some(str_at(v, "/message").unwrap_or("stream error").into());
            }
            _ => {}
        }
    }

    /// playdeck's own JSON-lines protocol (README, "Real agents"):
    /// `state`, `usage`, `text`, `result`, `error`.
    fn jsonl(&mut self, v: &Value, out: &mut Vec<Update>) {
        match str_at(v, "/type").unwrap_or("") {
            "state" => {
                let state = match str_at(v, "/state") {
                    Some("thinking") => ActivityState::Thinking,
                    Some("writing") => ActivityState::Writing,
                    Some("tool") => ActivityState::Tool,
                    _ => ActivityState::Waiting,
                };
                self.activity(state, str_at(v, "/tool"), out);
            }
            "usage" => {
                self.usage(
                    v.get("cost_usd").and_then(Value::as_f64),
                    v.get("input_tokens").and_then(Value::as_u64),
                    v.get("output_tokens").and_then(Value::as_u64),
                    false,
                );
                self.push_usage(out);
            }
            "text" => {
                if let Some(t) = str_at(v, "/text") {
                    self.message_text(t, out);
                }
            }
            "result" => {
                self.parsed.result = Some(match v.get("result") {
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
            "error" => {
                self.parsed.error = Some(str_at(v, "/message").unwrap_or("stream error").into());
            }
            _ => {}
        }
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// An agent's text answer as a result object: the text itself when it is
/// a JSON object, else the JSON object in a fenced block, else
/// `{ "summary": text }`.
pub fn result_from_text(text: &str) -> Value {
    if let Some(v @ Value::Object(_)) = json_in_text(text) {
        return v;
    }
    let mut m = Map::new();
    m.insert("summary".into(), Value::String(text.trim().to_string()));
    Value::Object(m)
}

fn json_in_text(text: &str) -> Option<Value> {
    let t = text.trim();
    if t.starts_with('{')
        && let Ok(v @ Value::Object(_)) = serde_json::from_str(t)
    {
        return Some(v);
    }
    // The last ```json fence wins: agents tend to end with their answer.
    let start = t.rfind("```json")? + "```json".len();
    let body = &t[start..];
    let end = body.find("```")?;
    match serde_json::from_str(body[..end].trim()) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(format: StreamFormat, lines: &[Value]) -> (Vec<Update>, Parsed) {
        let mut p = StreamParser::new(format);
        let mut out = Vec::new();
        for l in lines {
            p.feed(&l.to_string(), &mut out);
        }
        (out, p.finish())
    }

    fn states(out: &[Update]) -> Vec<(ActivityState, Option<&str>)> {
        out.iter()
            .filter_map(|u| match u {
                Update::Activity(s, t) => Some((*s, t.as_deref())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claude_stream() {
        let (out, parsed) = run(
            StreamFormat::Claude,
            &[
                json!({"type":"system","subtype":"init","model":"m"}),
                json!({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking"}}}),
                json!({"type":"stream_event","event":{"type":"content_block_delta","index":0}}),
                json!({"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"Bash"}}}),
                json!({"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{}}]}}),
                json!({"type":"user","message":{"content":[{"type":"tool_result"}]}}),
                json!({"type":"assistant","message":{"content":[{"type":"text","text":"{\"spawn_request\":{\"instruction\":\"add tests\"}}"}]}}),
                json!({"type":"result","subtype":"success","is_error":false,"result":"{\"verdict\":\"ship\"}","total_cost_usd":0.25,"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":7}}),
            ],
        );
        assert_eq!(
            states(&out),
            vec![
                (ActivityState::Thinking, None),
                (ActivityState::Tool, Some("Bash")),
                (ActivityState::Thinking, None),
                (ActivityState::Writing, None),
            ]
        );
        assert!(out.contains(&Update::Emit(
            json!({"spawn_request":{"instruction":"add tests"}})
        )));
        assert_eq!(parsed.result, Some(json!({"verdict":"ship"})));
        assert_eq!(
            parsed.usage,
            Usage {
                cost_usd: Some(0.25),
                input_tokens: Some(100),
                output_tokens: Some(7)
            }
        );
        assert_eq!(parsed.error, None);
    }

    #[test]
    fn claude_error_result() {
        let (_, parsed) = run(
            StreamFormat::Claude,
            &[json!({"type":"result","subtype":"error_max_turns","is_error":true})],
        );
        assert_eq!(parsed.error.as_deref(), Some("error_max_turns"));
    }

    #[test]
    fn codex_stream() {
        let (out, parsed) = run(
            StreamFormat::Codex,
            &[
                json!({"type":"thread.started","thread_id":"t"}),
                json!({"type":"turn.started"}),
                json!({"type":"item.completed","item":{"type":"reasoning","text":"hm"}}),
                json!({"type":"item.started","item":{"type":"command_execution","command":"ls"}}),
                json!({"type":"item.completed","item":{"type":"command_execution","command":"ls"}}),
                json!({"type":"item.started","item":{"type":"mcp_tool_call","server":"gh","tool":"issues"}}),
                json!({"type":"item.completed","item":{"type":"agent_message","text":"All done."}}),
                json!({"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":5,"output_tokens":3}}),
            ],
        );
        assert_eq!(
            states(&out),
            vec![
                (ActivityState::Thinking, None),
                (ActivityState::Tool, Some("shell")),
                (ActivityState::Thinking, None),
                (ActivityState::Tool, Some("gh.issues")),
                (ActivityState::Writing, None),
            ]
        );
        assert_eq!(parsed.text.as_deref(), Some("All done."));
        assert_eq!(parsed.usage.input_tokens, Some(10));
        let (_, parsed) = run(
            StreamFormat::Codex,
            &[json!({"type":"turn.failed","error":{"message":"quota"}})],
        );
        assert_eq!(parsed.error.as_deref(), Some("quota"));
    }

    #[test]
    fn jsonl_protocol_and_plain_text() {
        let (out, parsed) = run(
            StreamFormat::Jsonl,
            &[
                json!({"type":"state","state":"tool","tool":"Read"}),
                json!({"type":"state","state":"tool","tool":"Read"}),
                json!({"type":"usage","cost_usd":0.5}),
                json!({"type":"result","result":{"ok":true}}),
            ],
        );
        assert_eq!(states(&out), vec![(ActivityState::Tool, Some("Read"))]);
        assert_eq!(parsed.result, Some(json!({"ok":true})));
        assert_eq!(parsed.usage.cost_usd, Some(0.5));

        let mut p = StreamParser::new(StreamFormat::Copilot);
        let mut out = Vec::new();
        p.feed("Here is the plan.\n", &mut out);
        p.feed("Step one.", &mut out);
        let parsed = p.finish();
        assert_eq!(parsed.text.as_deref(), Some("Here is the plan.\nStep one."));
        assert!(parsed.any_output);
    }

    #[test]
    fn text_results() {
        assert_eq!(result_from_text(" {\"a\":1} "), json!({"a":1}));
        assert_eq!(
            result_from_text("Done.\n```json\n{\"verdict\":\"ship\"}\n```\n"),
            json!({"verdict":"ship"})
        );
        assert_eq!(
            result_from_text("just words"),
            json!({"summary":"just words"})
        );
    }
}

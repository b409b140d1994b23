//! What each format's lines tell the transcript. Shapes as the pinned CLIs
//! print them (tests/realcli/captures); what is not known is passed over,
//! as the stream parsers do.

use std::collections::HashSet;

use serde_json::Value;

use super::{Piece, args_of};
use crate::agents::def::StreamFormat;

/// What a format needs to remember between lines.
#[derive(Debug, Default)]
pub(super) struct State {
    /// claude: the message being streamed, and the messages whose text
    /// came as deltas (their `assistant` snapshot says it again).
    message: Option<String>,
    streamed: HashSet<String>,
    /// codex: its `error` line is said again by `turn.failed`.
    last_error: Option<String>,
}

/// Messages remembered as streamed: a long session's oldest are let go.
const STREAMED_KEPT: usize = 1_000;

fn s<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn owned(v: &Value, pointer: &str) -> Option<String> {
    s(v, pointer).map(String::from)
}

/// The text of a tool's result: a string, or the text blocks of an array.
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| s(b, "/text"))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Object(o)) => o
            .get("content")
            .or_else(|| o.get("message"))
            .or_else(|| o.get("text"))
            .map(|x| text_of(Some(x)))
            .unwrap_or_default(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The format a line's shape is, where it is only one format's.
pub(super) fn sniff(v: &Value) -> Option<StreamFormat> {
    let ty = s(v, "/type")?;
    Some(match ty {
        "system" | "stream_event" | "assistant" | "user" => StreamFormat::Claude,
        "thread.started" | "turn.started" | "turn.completed" | "turn.failed" => StreamFormat::Codex,
        t if t.starts_with("item.") => StreamFormat::Codex,
        _ if v.get("sessionID").is_some() => StreamFormat::Opencode,
        "step_start" | "step_finish" => StreamFormat::Opencode,
        "init" | "message" | "tool_use" | "tool_result" => StreamFormat::Gemini,
        t if t.contains('.') => StreamFormat::Copilot,
        "state" | "usage" | "text" | "session" => StreamFormat::Jsonl,
        _ => return None,
    })
}

pub(super) fn pieces(st: &mut State, f: StreamFormat, v: &Value, out: &mut Vec<Piece>) {
    match f {
        StreamFormat::Claude => claude(st, v, out),
        StreamFormat::Codex => codex(st, v, out),
        StreamFormat::Opencode => opencode(v, out),
        StreamFormat::Gemini | StreamFormat::Antigravity => gemini(v, out),
        StreamFormat::Copilot => copilot(v, out),
        StreamFormat::Jsonl => jsonl(v, out),
    }
}

fn said(key: Option<String>, text: String, delta: bool) -> Piece {
    Piece::Text {
        key,
        text,
        delta,
        thought: false,
    }
}

fn thought(key: Option<String>, text: String, delta: bool) -> Piece {
    Piece::Text {
        key,
        text,
        delta,
        thought: true,
    }
}

/// claude: text and thinking from the partial-message deltas (each
/// message's snapshot then says nothing new), tool calls from the
/// `assistant` snapshots (their input whole), results from `user` lines.
fn claude(st: &mut State, v: &Value, out: &mut Vec<Piece>) {
    match s(v, "/type") {
        Some("stream_event") => match s(v, "/event/type") {
            Some("message_start") => st.message = owned(v, "/event/message/id"),
            Some("content_block_stop" | "message_stop") => out.push(Piece::Close),
            Some("content_block_delta") => {
                let msg = st.message.clone().unwrap_or_default();
                let index = v
                    .pointer("/event/index")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let key = Some(format!("{msg}/{index}"));
                let piece = match s(v, "/event/delta/type") {
                    Some("text_delta") => owned(v, "/event/delta/text").map(|t| said(key, t, true)),
                    Some("thinking_delta") => {
                        owned(v, "/event/delta/thinking").map(|t| thought(key, t, true))
                    }
                    _ => None,
                };
                if let Some(p) = piece {
                    if st.streamed.len() >= STREAMED_KEPT {
                        st.streamed.clear();
                    }
                    st.streamed.insert(msg);
                    out.push(p);
                }
            }
            _ => {}
        },
        Some("assistant") => {
            let msg = s(v, "/message/id").unwrap_or_default();
            let streamed = st.streamed.contains(msg);
            let blocks = v.pointer("/message/content").and_then(Value::as_array);
            for b in blocks.into_iter().flatten() {
                match s(b, "/type") {
                    Some("text") if !streamed => {
                        out.extend(owned(b, "/text").map(|t| said(None, t, false)));
                    }
                    Some("thinking") if !streamed => {
                        out.extend(owned(b, "/thinking").map(|t| thought(None, t, false)));
                    }
                    Some("tool_use" | "server_tool_use") => out.push(Piece::Call {
                        id: owned(b, "/id"),
                        name: owned(b, "/name").unwrap_or_else(|| "tool".into()),
                        args: args_of(b.get("input")),
                    }),
                    _ => {}
                }
            }
        }
        Some("user") => match v.pointer("/message/content") {
            Some(Value::String(t)) => out.push(Piece::Asked(t.clone())),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match s(b, "/type") {
                        Some("tool_result") => out.push(Piece::Outcome {
                            id: owned(b, "/tool_use_id"),
                            name: None,
                            ok: b.get("is_error").and_then(Value::as_bool) != Some(true),
                            // A refusal comes in claude's own tags.
                            text: text_of(b.get("content"))
                                .replace("<tool_use_error>", "")
                                .replace("</tool_use_error>", ""),
                        }),
                        Some("text") => out.extend(owned(b, "/text").map(Piece::Asked)),
                        _ => {}
                    }
                }
            }
            _ => {}
        },
        Some("result")
            if v.get("is_error").and_then(Value::as_bool) == Some(true)
                || s(v, "/subtype").is_some_and(|t| t.starts_with("error")) =>
        {
            let errors = text_of(v.get("errors"));
            let said = if errors.is_empty() {
                owned(v, "/result").unwrap_or_else(|| {
                    s(v, "/subtype")
                        .unwrap_or("the agent reported an error")
                        .into()
                })
            } else {
                errors
            };
            out.push(Piece::Error(said));
        }
        _ => {}
    }
}

/// codex's command as it ran it, without the shell it wraps it in.
fn command_of(item: &Value) -> String {
    let c = match item.get("command") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::String(c)) => c.clone(),
        _ => return String::new(),
    };
    for shell in ["/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c "] {
        if let Some(inner) = c.strip_prefix(shell) {
            let inner = inner.trim();
            return inner
                .strip_prefix('\'')
                .and_then(|i| i.strip_suffix('\''))
                .unwrap_or(inner)
                .to_string();
        }
    }
    c
}

fn codex(st: &mut State, v: &Value, out: &mut Vec<Piece>) {
    let ty = s(v, "/type").unwrap_or_default();
    let Some(item) = v.get("item") else {
        match ty {
            "error" => {
                let m = owned(v, "/message").unwrap_or_default();
                st.last_error = Some(m.clone());
                out.push(Piece::Error(m));
            }
            "turn.failed" => {
                let m = owned(v, "/error/message").unwrap_or_else(|| "the turn failed".into());
                if st.last_error.as_deref() != Some(m.as_str()) {
                    out.push(Piece::Error(m));
                }
            }
            _ => {}
        }
        return;
    };
    let id = owned(item, "/id");
    let done = ty == "item.completed";
    match s(item, "/type").unwrap_or_default() {
        "command_execution" => {
            out.push(Piece::Call {
                id: id.clone(),
                name: "shell".into(),
                args: args_of(Some(&Value::String(command_of(item)))),
            });
            if done {
                let code = item.get("exit_code").and_then(Value::as_i64);
                let ok = s(item, "/status") == Some("completed") && code.unwrap_or(0) == 0;
                let mut text = owned(item, "/aggregated_output").unwrap_or_default();
                if !ok && text.trim().is_empty() {
                    text = match code {
                        Some(c) => format!("exit code {c}"),
                        None => s(item, "/status").unwrap_or("failed").to_string(),
                    };
                }
                out.push(Piece::Outcome {
                    id,
                    name: None,
                    ok,
                    text,
                });
            }
        }
        "agent_message" if done => out.extend(owned(item, "/text").map(|t| said(id, t, false))),
        "reasoning" if done => out.extend(owned(item, "/text").map(|t| thought(id, t, false))),
        "file_change" if done => {
            let changes = item.get("changes").and_then(Value::as_array);
            let said: Vec<String> = changes
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{} {}",
                        s(c, "/kind").unwrap_or("change"),
                        s(c, "/path").unwrap_or("?")
                    )
                })
                .collect();
            out.push(Piece::Call {
                id: id.clone(),
                name: "edit".into(),
                args: said.join(", "),
            });
            out.push(Piece::Outcome {
                id,
                name: None,
                ok: s(item, "/status") != Some("failed"),
                text: String::new(),
            });
        }
        "mcp_tool_call" => {
            out.push(Piece::Call {
                id: id.clone(),
                name: format!(
                    "{}.{}",
                    s(item, "/server").unwrap_or("mcp"),
                    s(item, "/tool").unwrap_or("tool")
                ),
                args: args_of(item.get("arguments")),
            });
            if done {
                let error = owned(item, "/error/message");
                out.push(Piece::Outcome {
                    id,
                    name: None,
                    ok: error.is_none() && s(item, "/status") != Some("failed"),
                    text: error.unwrap_or_else(|| text_of(item.pointer("/result/content"))),
                });
            }
        }
        "web_search" => out.push(Piece::Call {
            id,
            name: "web_search".into(),
            args: s(item, "/query").unwrap_or_default().to_string(),
        }),
        "error" => out.extend(owned(item, "/message").map(Piece::Error)),
        _ => {}
    }
}

fn opencode(v: &Value, out: &mut Vec<Piece>) {
    let part = v.get("part");
    let key = part.and_then(|p| owned(p, "/id"));
    match s(v, "/type") {
        Some("text") => out.extend(
            part.and_then(|p| owned(p, "/text"))
                .map(|t| said(key, t, false)),
        ),
        Some("reasoning") => {
            out.extend(
                part.and_then(|p| owned(p, "/text"))
                    .map(|t| thought(key, t, false)),
            );
        }
        Some("tool_use") => {
            let Some(p) = part else {
                return;
            };
            let id = owned(p, "/callID");
            out.push(Piece::Call {
                id: id.clone(),
                name: owned(p, "/tool").unwrap_or_else(|| "tool".into()),
                args: args_of(p.pointer("/state/input")),
            });
            match s(p, "/state/status") {
                Some("completed") => out.push(Piece::Outcome {
                    id,
                    name: None,
                    ok: true,
                    text: text_of(p.pointer("/state/output")),
                }),
                Some("error") => out.push(Piece::Outcome {
                    id,
                    name: None,
                    ok: false,
                    text: text_of(p.pointer("/state/error")),
                }),
                _ => {}
            }
        }
        Some("error") => out.push(Piece::Error(
            owned(v, "/error/data/message")
                .or_else(|| owned(v, "/error/name"))
                .unwrap_or_else(|| "an error".into()),
        )),
        _ => {}
    }
}

fn gemini(v: &Value, out: &mut Vec<Piece>) {
    match s(v, "/type") {
        Some("message") => {
            let Some(text) = owned(v, "/content") else {
                return;
            };
            if s(v, "/role") == Some("user") {
                out.push(Piece::Asked(text));
            } else {
                let delta = v.get("delta").and_then(Value::as_bool) == Some(true);
                out.push(said(None, text, delta));
            }
        }
        Some("tool_use") => out.push(Piece::Call {
            id: owned(v, "/tool_id"),
            name: owned(v, "/tool_name").unwrap_or_else(|| "tool".into()),
            args: args_of(v.get("parameters")),
        }),
        Some("tool_result") => {
            let ok = s(v, "/status") == Some("success");
            out.push(Piece::Outcome {
                id: owned(v, "/tool_id"),
                name: None,
                ok,
                text: if ok {
                    text_of(v.get("output"))
                } else {
                    text_of(v.get("error").or_else(|| v.get("output")))
                },
            });
        }
        Some("error") => {
            let m = owned(v, "/message").unwrap_or_else(|| "an error".into());
            out.push(Piece::Error(match s(v, "/severity") {
                Some(sev) if sev != "error" => format!("{sev}: {m}"),
                _ => m,
            }));
        }
        Some("result") if s(v, "/status") == Some("error") => out.push(Piece::Error(
            owned(v, "/error/message").unwrap_or_else(|| "the agent reported an error".into()),
        )),
        Some("result") => out.push(Piece::Close),
        _ => {}
    }
}

fn copilot(v: &Value, out: &mut Vec<Piece>) {
    let d = v.get("data").unwrap_or(&Value::Null);
    match s(v, "/type") {
        Some("user.message") => out.extend(owned(d, "/content").map(Piece::Asked)),
        Some("assistant.message_delta") => {
            out.extend(owned(d, "/deltaContent").map(|t| said(owned(d, "/messageId"), t, true)));
        }
        Some("assistant.message") => {
            out.extend(owned(d, "/content").map(|t| said(owned(d, "/messageId"), t, false)));
        }
        Some("assistant.reasoning_delta") => out
            .extend(owned(d, "/deltaContent").map(|t| thought(owned(d, "/reasoningId"), t, true))),
        Some("assistant.reasoning") => {
            out.extend(owned(d, "/content").map(|t| thought(owned(d, "/reasoningId"), t, false)));
        }
        Some("tool.execution_start") => out.push(Piece::Call {
            id: owned(d, "/toolCallId"),
            name: owned(d, "/toolName").unwrap_or_else(|| "tool".into()),
            args: args_of(d.get("arguments")),
        }),
        Some("tool.execution_complete") => {
            let ok = d.get("success").and_then(Value::as_bool) != Some(false);
            out.push(Piece::Outcome {
                id: owned(d, "/toolCallId"),
                name: None,
                ok,
                text: if ok {
                    text_of(d.get("result"))
                } else {
                    text_of(d.get("error"))
                },
            });
        }
        Some("session.error") => out.extend(owned(d, "/message").map(Piece::Error)),
        _ => {}
    }
}

/// playdeck's own protocol: `text`, a `state` naming a tool, `error`.
fn jsonl(v: &Value, out: &mut Vec<Piece>) {
    match s(v, "/type") {
        Some("text") => out.extend(owned(v, "/text").map(|t| said(None, t, false))),
        Some("state") if s(v, "/state") == Some("tool") => out.push(Piece::Call {
            id: None,
            name: owned(v, "/tool").unwrap_or_else(|| "tool".into()),
            args: String::new(),
        }),
        Some("error") => out.extend(owned(v, "/message").map(Piece::Error)),
        // The declared result, as words: its text, or its summary.
        Some("result") => out.extend(
            owned(v, "/result")
                .or_else(|| owned(v, "/result/summary"))
                .map(|t| said(Some("result".into()), t, false)),
        ),
        _ => {}
    }
}

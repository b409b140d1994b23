//! The parsers on lines shaped like each CLI's events (the corpus replay in
//! `tests/cli/transcripts.rs` covers real captures end to end).

use serde_json::{Value, json};

use super::*;
use crate::kernel::Usage;

/// The attempt's result as the runner makes it.
fn answer(p: &Parsed) -> Value {
    p.result
        .clone()
        .or_else(|| p.text.as_deref().map(super::result_from_text))
        .unwrap_or(Value::Null)
}

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

fn warnings(out: &[Update]) -> Vec<&str> {
    out.iter()
        .filter_map(|u| match u {
            Update::Warning(w) => Some(w.as_str()),
            _ => None,
        })
        .collect()
}

fn emitted_requests(out: &[Update]) -> usize {
    out.iter()
        .filter(|u| matches!(u, Update::Emit(Value::Object(m)) if m.contains_key("spawn_request")))
        .count()
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
            json!({"type":"assistant","message":{"content":[{"type":"text","text":"{\"verdict\":\"ship\"}"}]}}),
            json!({"type":"result","subtype":"success","is_error":false,"result":"{\"verdict\":\"ship\"}","total_cost_usd":0.25,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":90,"output_tokens":7}}),
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
    // The answer is the text (the runner makes it the result).
    assert_eq!(parsed.result, None);
    assert_eq!(answer(&parsed), json!({"verdict":"ship"}));
    assert_eq!(
        parsed.usage,
        Usage {
            cost_usd: Some(0.25),
            input_tokens: Some(105),
            cached_input_tokens: Some(90),
            output_tokens: Some(7)
        }
    );
    assert_eq!(parsed.error, None);
}

#[test]
fn claude_result_repeating_the_final_message_is_one_sighting() {
    let text = "Done.\n```json\n{\"spawn_request\":{\"instruction\":\"add tests\"}}\n```";
    let (out, parsed) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"assistant","message":{"content":[{"type":"text","text":text}]},"parent_tool_use_id":null}),
            json!({"type":"result","subtype":"success","is_error":false,"result":text}),
        ],
    );
    assert_eq!(emitted_requests(&out), 1);
    // The answer keeps its words beside the object it ends with.
    let r = answer(&parsed);
    assert_eq!(r["spawn_request"]["instruction"], "add tests");
    assert_eq!(r["summary"], text);
    // A different final text is a sighting of its own.
    let (out, _) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"assistant","message":{"content":[{"type":"text","text":"working on it"}]}}),
            json!({"type":"result","subtype":"success","is_error":false,"result":text}),
        ],
    );
    assert_eq!(emitted_requests(&out), 1);
}

#[test]
fn claude_subagent_text_is_not_the_answer() {
    let (_, parsed) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"assistant","message":{"content":[{"type":"text","text":"child"}]},"parent_tool_use_id":"t1"}),
        ],
    );
    assert_eq!(parsed.text, None);
}

#[test]
fn claude_errors_say_why() {
    let (_, parsed) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"result","subtype":"error_max_turns","is_error":true,"terminal_reason":"max_turns","errors":["Reached maximum number of turns (30)"],"usage":{"input_tokens":35,"cache_read_input_tokens":100,"output_tokens":3}}),
        ],
    );
    assert_eq!(
        parsed.error.as_deref(),
        Some("error_max_turns: Reached maximum number of turns (30)")
    );
    assert_eq!(parsed.usage.input_tokens, Some(135));
    let (_, parsed) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"result","subtype":"error_max_turns","is_error":true,"terminal_reason":"max_turns","result":null}),
        ],
    );
    assert_eq!(
        parsed.error.as_deref(),
        Some("error_max_turns: terminal reason max_turns")
    );
    // An API failure reported as success with is_error.
    let (_, parsed) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"result","subtype":"success","is_error":true,"result":"API Error: Unable to connect"}),
        ],
    );
    assert_eq!(
        parsed.error.as_deref(),
        Some("API Error: Unable to connect")
    );
}

#[test]
fn codex_stream_and_usage_meaning() {
    let (out, parsed) = run(
        StreamFormat::Codex,
        &[
            json!({"type":"thread.started","thread_id":"t"}),
            json!({"type":"turn.started"}),
            json!({"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"hm"}}),
            json!({"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls"}}),
            json!({"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls"}}),
            json!({"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[]}}),
            json!({"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"gh","tool":"issues"}}),
            json!({"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"All done."}}),
            json!({"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":6,"output_tokens":3}}),
        ],
    );
    assert_eq!(
        states(&out),
        vec![
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("shell")),
            (ActivityState::Thinking, None),
            // Reported only as completed (codex 0.46): still a tool.
            (ActivityState::Tool, Some("apply_patch")),
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("gh.issues")),
            (ActivityState::Writing, None),
        ]
    );
    assert_eq!(parsed.text.as_deref(), Some("All done."));
    // input_tokens already holds the cached ones: not added twice.
    assert_eq!(
        (
            parsed.usage.input_tokens,
            parsed.usage.cached_input_tokens,
            parsed.usage.output_tokens
        ),
        (Some(10), Some(6), Some(3))
    );
}

#[test]
fn codex_notices_do_not_fail_a_turn_that_answers() {
    let (out, parsed) = run(
        StreamFormat::Codex,
        &[
            json!({"type":"turn.started"}),
            json!({"type":"item.completed","item":{"id":"item_0","type":"error","message":"Skill descriptions were shortened"}}),
            json!({"type":"error","message":"Reconnecting... 1/5"}),
            json!({"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"ok"}}),
            json!({"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":0,"output_tokens":1}}),
        ],
    );
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.text.as_deref(), Some("ok"));
    assert_eq!(
        warnings(&out),
        [
            "codex: Skill descriptions were shortened",
            "codex: Reconnecting... 1/5"
        ]
    );
    // A turn without an answer says so, not the last notice.
    let (_, parsed) = run(
        StreamFormat::Codex,
        &[
            json!({"type":"item.completed","item":{"id":"item_0","type":"error","message":"Skill descriptions were shortened"}}),
            json!({"type":"turn.completed","usage":{}}),
        ],
    );
    assert!(parsed.error.unwrap().contains("without an answer"));
    // turn.failed fails; an error no turn recovered from fails.
    let (_, parsed) = run(
        StreamFormat::Codex,
        &[
            json!({"type":"error","message":"Reconnecting... 5/5"}),
            json!({"type":"turn.failed","error":{"message":"quota"}}),
        ],
    );
    assert_eq!(parsed.error.as_deref(), Some("quota"));
    let (_, parsed) = run(
        StreamFormat::Codex,
        &[json!({"type":"error","message":"stream disconnected"})],
    );
    assert_eq!(parsed.error.as_deref(), Some("stream disconnected"));
}

#[test]
fn codex_legacy_shape() {
    let (out, parsed) = run(
        StreamFormat::Codex,
        &[
            json!({"id":"1","msg":{"type":"task_started"}}),
            json!({"id":"1","msg":{"type":"exec_command_begin","command":["ls"]}}),
            json!({"id":"1","msg":{"type":"exec_command_end","exit_code":0}}),
            json!({"id":"1","msg":{"type":"token_count","input_tokens":1674,"cached_input_tokens":1627,"output_tokens":384}}),
            json!({"id":"1","msg":{"type":"task_complete","last_agent_message":"Done!"}}),
        ],
    );
    assert_eq!(
        states(&out),
        vec![
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("shell")),
            (ActivityState::Thinking, None),
        ]
    );
    assert_eq!(parsed.text.as_deref(), Some("Done!"));
    assert_eq!(parsed.usage.cached_input_tokens, Some(1627));
}

#[test]
fn opencode_usage_adds_the_cache_to_input() {
    let (out, parsed) = run(
        StreamFormat::Opencode,
        &[
            json!({"type":"step_start","part":{}}),
            json!({"type":"tool_use","part":{"tool":"read"}}),
            json!({"type":"step_finish","part":{"cost":0.01,"tokens":{"input":53,"output":92,"reasoning":8,"cache":{"read":16960,"write":2}}}}),
            json!({"type":"step_start","part":{}}),
            json!({"type":"text","part":{"text":"hello"}}),
            json!({"type":"step_finish","part":{"cost":0.02,"tokens":{"input":100,"output":5,"reasoning":0,"cache":{"read":0,"write":0}}}}),
        ],
    );
    assert_eq!(
        states(&out),
        vec![
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("read")),
            (ActivityState::Thinking, None),
            (ActivityState::Writing, None),
        ]
    );
    let u = parsed.usage;
    assert_eq!(
        (u.input_tokens, u.cached_input_tokens, u.output_tokens),
        (Some(53 + 16960 + 2 + 100), Some(16960), Some(92 + 8 + 5))
    );
    assert!((u.cost_usd.unwrap() - 0.03).abs() < 1e-9);
    assert_eq!(parsed.text.as_deref(), Some("hello"));
}

#[test]
fn gemini_deltas_add_up_and_input_includes_cache() {
    let (out, parsed) = run(
        StreamFormat::Gemini,
        &[
            json!({"type":"init","session_id":"s","model":"auto"}),
            json!({"type":"message","role":"user","content":"hi"}),
            json!({"type":"tool_use","tool_name":"list_directory","tool_id":"1","parameters":{}}),
            json!({"type":"tool_result","tool_id":"1","status":"success"}),
            json!({"type":"message","role":"assistant","content":"The only","delta":true}),
            json!({"type":"message","role":"assistant","content":" file.","delta":true}),
            json!({"type":"error","severity":"warning","message":"loop detected"}),
            json!({"type":"result","status":"success","stats":{"total_tokens":14289,"input_tokens":13945,"output_tokens":74,"cached":5779,"input":8166}}),
        ],
    );
    assert_eq!(
        states(&out),
        vec![
            (ActivityState::Tool, Some("list_directory")),
            (ActivityState::Thinking, None),
            (ActivityState::Writing, None),
        ]
    );
    assert_eq!(parsed.text.as_deref(), Some("The only file."));
    assert_eq!(
        (parsed.usage.input_tokens, parsed.usage.cached_input_tokens),
        (Some(13945), Some(5779))
    );
    assert_eq!(warnings(&out), ["gemini: loop detected"]);
    let (_, parsed) = run(
        StreamFormat::Gemini,
        &[
            json!({"type":"result","status":"error","error":{"type":"Error","message":"[API Error: not found]"}}),
        ],
    );
    assert_eq!(parsed.error.as_deref(), Some("[API Error: not found]"));
}

#[test]
fn copilot_answer_and_exit_code() {
    let (out, parsed) = run(
        StreamFormat::Copilot,
        &[
            json!({"type":"assistant.turn_start","data":{"turnId":"0"}}),
            json!({"type":"assistant.message","data":{"content":"","toolRequests":[{"name":"bash"}]}}),
            json!({"type":"tool.execution_start","data":{"toolName":"bash"}}),
            json!({"type":"tool.execution_complete","data":{"success":true}}),
            json!({"type":"assistant.message","data":{"content":"Done.","toolRequests":[]}}),
            json!({"type":"result","exitCode":0,"usage":{"premiumRequests":1}}),
        ],
    );
    assert_eq!(
        states(&out),
        vec![
            (ActivityState::Thinking, None),
            (ActivityState::Tool, Some("bash")),
            (ActivityState::Thinking, None),
            (ActivityState::Writing, None),
        ]
    );
    assert_eq!(
        (parsed.text.as_deref(), parsed.result),
        (Some("Done."), None)
    );
    assert_eq!(parsed.error, None);
    let (_, parsed) = run(
        StreamFormat::Copilot,
        &[
            json!({"type":"assistant.message","data":{"content":"Sorry."}}),
            json!({"type":"result","exitCode":1}),
        ],
    );
    assert!(parsed.error.unwrap().contains("exit code 1"));
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

/// Unknown event types, unknown fields and unexpected value types are
/// ignored by every parser: the answer and the usage still come through.
#[test]
fn parsers_ignore_what_they_do_not_know() {
    let odd = [
        json!({"type":"brand.new.event","data":{"x":[1,2,3]}}),
        json!({"type":42}),
        json!({"no_type":true}),
        json!({"type":"result","usage":"not an object","stats":[],"part":null}),
        json!({"type":"item.completed","item":{"type":"todo_list","items":[]}}),
        json!({"type":"assistant","message":{"content":"not an array"}}),
        json!({"type":"stream_event","event":{"type":"content_block_start","content_block":{"type":"future_block"}}}),
        json!({"type":"message","role":"system","content":{"x":1}}),
    ];
    let answers: [(StreamFormat, Vec<Value>); 6] = [
        (
            StreamFormat::Claude,
            vec![
                json!({"type":"result","subtype":"success","is_error":false,"result":"ok","new_field":{"a":1},"usage":{"input_tokens":1,"output_tokens":1,"future":2}}),
            ],
        ),
        (
            StreamFormat::Codex,
            vec![
                json!({"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ok","extra":true}}),
                json!({"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1,"reasoning_output_tokens":9}}),
            ],
        ),
        (
            StreamFormat::Opencode,
            vec![
                json!({"type":"text","part":{"text":"ok","time":{}}}),
                json!({"type":"step_finish","part":{"tokens":{"input":1,"output":1}}}),
            ],
        ),
        (
            StreamFormat::Gemini,
            vec![
                json!({"type":"message","role":"assistant","content":"ok"}),
                json!({"type":"result","status":"success","stats":{"input_tokens":1,"output_tokens":1,"models":{}}}),
            ],
        ),
        (
            StreamFormat::Copilot,
            vec![
                json!({"type":"assistant.message","data":{"content":"ok","phase":"future"}}),
                json!({"type":"result","exitCode":0,"usage":{"premiumRequests":1,"future":{}}}),
            ],
        ),
        (
            StreamFormat::Jsonl,
            vec![
                json!({"type":"text","text":"ok"}),
                json!({"type":"usage","input_tokens":1,"output_tokens":1}),
            ],
        ),
    ];
    for (format, tail) in answers {
        // In playdeck's own protocol a `result` line is the result, even an
        // empty one: that odd line is not odd there.
        let lines: Vec<Value> = odd
            .iter()
            .filter(|l| format != StreamFormat::Jsonl || l["type"] != "result")
            .cloned()
            .chain(tail)
            .collect();
        let (_, parsed) = run(format, &lines);
        assert_eq!(parsed.error, None, "{format:?}");
        let answer = parsed
            .result
            .map(|r| r["summary"].as_str().unwrap_or_default().to_string())
            .or(parsed.text);
        assert_eq!(answer.as_deref(), Some("ok"), "{format:?}");
        // copilot's JSON reports no tokens at all.
        let tokens = (format != StreamFormat::Copilot).then_some(1);
        assert_eq!(parsed.usage.input_tokens, tokens, "{format:?}");
    }
}

#[test]
fn text_results() {
    assert_eq!(result_from_text(" {\"a\":1} "), json!({"a":1}));
    assert_eq!(
        result_from_text("Done.\n```json\n{\"verdict\":\"ship\"}\n```\n"),
        json!({"verdict":"ship","summary":"Done.\n```json\n{\"verdict\":\"ship\"}\n```"})
    );
    // The agent's own summary is kept.
    assert_eq!(
        result_from_text("x\n```json\n{\"summary\":\"mine\"}\n```"),
        json!({"summary":"mine"})
    );
    assert_eq!(
        result_from_text("just words"),
        json!({"summary":"just words"})
    );
}

/// Issue 20: opencode sends a text part again when it ends, codex's legacy
/// stream repeats the last message at the turn's end: the same words twice
/// are one request; the same words after a tool ran are a new turn's.
#[test]
fn a_message_repeated_by_the_cli_is_one_sighting_until_a_tool_runs() {
    let text = "Done.\n```json\n{\"spawn_request\":{\"instruction\":\"add tests\"}}\n```";
    let part = json!({"type":"text","part":{"type":"text","text":text}});
    let (out, _) = run(StreamFormat::Opencode, &[part.clone(), part.clone()]);
    assert_eq!(emitted_requests(&out), 1);
    let tool = json!({"type":"tool_use","part":{"tool":"bash"}});
    let (out, _) = run(StreamFormat::Opencode, &[part.clone(), tool, part]);
    assert_eq!(emitted_requests(&out), 2, "asked again after a tool ran");
    let (out, _) = run(
        StreamFormat::Codex,
        &[
            json!({"id":"1","msg":{"type":"agent_message","message":text}}),
            json!({"id":"2","msg":{"type":"task_complete","last_agent_message":text}}),
        ],
    );
    assert_eq!(emitted_requests(&out), 1);
}

/// Issue 39: plain output is kept within bounds: sixty 16 MiB lines were
/// kept whole (2 GiB of memory, a 1 GB result). What is kept is the
/// newest, each line cut at 64 KiB and said so, at most 1 MiB in all.
#[test]
fn plain_output_is_kept_within_bounds() {
    let mut p = StreamParser::new(StreamFormat::Jsonl);
    let mut out = Vec::new();
    let big = "é".repeat(8 << 20); // 16 MiB, two bytes a char
    for i in 0..60 {
        p.feed(&format!("line {i} {big}"), &mut out);
    }
    p.feed("the last words", &mut out);
    let text = p.finish().text.unwrap();
    assert!(
        text.len() <= (1 << 20) + 64 * 200,
        "{} bytes kept",
        text.len()
    );
    assert!(text.ends_with("the last words"));
    assert!(text.contains("bytes cut; the attempt's log has the whole line"));
    assert!(text.contains("line 59 "), "the newest are kept");
    assert!(!text.contains("line 0 "), "the oldest went");
}

/// A long session fails many commands: each refused or failed tool call is
/// said up to a bound, then one warning says more came (the attempt's
/// warnings must not grow into an output flood).
#[test]
fn refused_tool_calls_are_said_up_to_a_bound() {
    let lines: Vec<Value> = (0..25)
        .map(|i| {
            json!({"type":"user","message":{"content":[{"type":"tool_result",
                "tool_use_id": format!("t{i}"), "is_error": true,
                "content": format!("Exit code 1\nfailure {i}")}]}})
        })
        .collect();
    let (out, _) = run(StreamFormat::Claude, &lines);
    let w = warnings(&out);
    assert_eq!(w.len(), 21, "{w:#?}");
    assert!(w[0].ends_with("Exit code 1 failure 0"), "{}", w[0]);
    assert!(
        w[20].starts_with("more than 20 tool calls refused or failed"),
        "{}",
        w[20]
    );
}

/// Each pinned CLI's real capture names its conversation where that CLI
/// does, and the parser takes it once: the first line for claude, codex,
/// opencode and gemini-cli, the last (`result`) for copilot.
#[test]
fn each_cli_names_its_session_in_its_real_capture() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realcli/captures");
    let cases = [
        (
            "claude/2.0.28",
            StreamFormat::Claude,
            "fc154e1c-3965-4bec-a639-688d3e85a753",
        ),
        (
            "claude/2.1.332",
            StreamFormat::Claude,
            "78eb587b-c312-471b-9afc-a7af20d8460f",
        ),
        (
            "codex/0.47.0",
            StreamFormat::Codex,
            "01a2374d-ba0f-74d0-99f4-5090ab71d54b",
        ),
        (
            "codex/0.171.0",
            StreamFormat::Codex,
            "01a23745-00fd-7140-9a94-4731fe176ee2",
        ),
        (
            "opencode/1.0.0",
            StreamFormat::Opencode,
            "ses_dc8ac21eaffe5B4zNfn0NKg7e4",
        ),
        (
            "opencode/1.18.33",
            StreamFormat::Opencode,
            "ses_dc8b8a0c2ffenHwOkMfeMy4m6T",
        ),
        (
            "gemini/0.11.3",
            StreamFormat::Gemini,
            "473b87b0-b737-4f27-99db-6787ee4dee17",
        ),
        (
            "gemini/0.61.0",
            StreamFormat::Gemini,
            "512df7e0-e548-4b43-9280-207f0dd36759",
        ),
        (
            "copilot/1.0.102",
            StreamFormat::Copilot,
            "9e4e2e26-c9f3-4676-97c2-669e2a896841",
        ),
    ];
    for (dir, format, id) in cases {
        let text = std::fs::read_to_string(root.join(dir).join("answer.jsonl")).unwrap();
        let mut p = StreamParser::new(format);
        let mut out = Vec::new();
        for line in text.lines() {
            p.feed(line, &mut out);
        }
        let said: Vec<&str> = out
            .iter()
            .filter_map(|u| match u {
                Update::Session(s) => Some(&**s),
                _ => None,
            })
            .collect();
        assert_eq!(said, [id], "{dir}: said once, when first seen");
        assert_eq!(p.finish().session.as_deref(), Some(id), "{dir}");
    }
}

#[test]
fn a_session_id_that_is_not_a_name_is_not_taken() {
    for bad in ["", "two words", "\u{1b}]52;c;x\u{7}", &"x".repeat(201)] {
        let (out, p) = run(
            StreamFormat::Claude,
            &[json!({"type": "system", "subtype": "init", "session_id": bad})],
        );
        assert!(
            !out.iter().any(|u| matches!(u, Update::Session(_))),
            "{bad:?}"
        );
        assert_eq!(p.session, None);
    }
    // Codex names it only on thread.started; another event's field is not it.
    let (_, p) = run(
        StreamFormat::Codex,
        &[json!({"type": "item.completed", "thread_id": "elsewhere"})],
    );
    assert_eq!(p.session, None);
}

/// What claude's live input needs from its stream: each message it took
/// (its echo: the main agent's words, not a tool's result nor a
/// subagent's prompt) and each turn's end.
#[test]
fn claude_says_what_it_took_and_when_a_turn_ended() {
    let (out, _) = run(
        StreamFormat::Claude,
        &[
            json!({"type":"user","message":{"role":"user","content":"PLAYDECK_SCENARIO=listen wait"},"parent_tool_use_id":null}),
            json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":""}]},"parent_tool_use_id":null}),
            json!({"type":"user","message":{"role":"user","content":"look at x"},"parent_tool_use_id":"toolu_task"}),
            json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"OPERATOR_SAYS=blue"}]},"parent_tool_use_id":null}),
            json!({"type":"result","subtype":"success","is_error":false,"result":"I heard: blue."}),
        ],
    );
    let live: Vec<&Update> = out
        .iter()
        .filter(|u| matches!(u, Update::Took | Update::TurnEnd))
        .collect();
    assert_eq!(live, [&Update::Took, &Update::Took, &Update::TurnEnd]);
}

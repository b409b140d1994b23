//! The transcript of what the pinned CLIs printed (tests/realcli/captures),
//! read as the follow view reads an attempt's log.

use super::*;

fn capture(cli: &str, version: &str, scenario: &str) -> String {
    let path = format!(
        "{}/tests/realcli/captures/{cli}/{version}/{scenario}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn read(format: Option<StreamFormat>, text: &str) -> Transcript {
    let mut t = Transcript::new(format);
    for l in text.lines() {
        t.feed(l);
    }
    t
}

/// The entries as one line each, for comparing.
fn said(t: &Transcript) -> Vec<String> {
    t.entries().iter().map(|e| e.one_line(120)).collect()
}

const ANSWER: &str = "● I created hello.txt containing hi.";

#[test]
fn claudes_deltas_are_assembled_into_one_message_and_its_snapshot_adds_nothing() {
    for v in ["2.0.28", "2.1.332"] {
        let text = capture("claude", v, "tool-partial");
        assert!(
            text.matches("text_delta").count() > 1,
            "{v}: deltas in the capture"
        );
        let t = read(Some(StreamFormat::Claude), &text);
        let lines = said(&t);
        assert_eq!(lines.len(), 2, "{v}: {lines:#?}");
        assert!(
            lines[0].starts_with("⚙ Write(/tmp/realcli-claude-")
                && lines[0].contains("/work/hello.txt) ✓ File created successfully"),
            "{v}: {}",
            lines[0]
        );
        assert_eq!(lines[1], ANSWER, "{v}");
        assert!(
            t.usage.output_tokens.is_some(),
            "{v}: usage from the result line"
        );
        assert_eq!(t.settled(), 2, "{v}: nothing left open");
        // Without partial messages the snapshots say the same.
        let whole = read(Some(StreamFormat::Claude), &capture("claude", v, "tool"));
        let whole = said(&whole);
        assert_eq!(whole[1], ANSWER, "{v}");
        assert!(whole[0].starts_with("⚙ Write("), "{v}");
    }
}

#[test]
fn every_cli_tells_its_tool_call_its_result_and_its_answer() {
    let cases = [
        (
            "codex",
            "0.171.0",
            StreamFormat::Codex,
            "⚙ shell(printf hi > hello.txt) ✓ done",
        ),
        ("codex", "0.47.0", StreamFormat::Codex, "⚙ shell("),
        (
            "opencode",
            "1.18.33",
            StreamFormat::Opencode,
            "⚙ write(/tmp/realcli-opencode-",
        ),
        ("opencode", "1.0.0", StreamFormat::Opencode, "⚙ write("),
        (
            "gemini",
            "0.61.0",
            StreamFormat::Gemini,
            "⚙ write_file(hello.txt) ✓ done",
        ),
        (
            "copilot",
            "1.0.102",
            StreamFormat::Copilot,
            "⚙ create(/tmp/realcli-copilot-",
        ),
    ];
    for (cli, v, format, call) in cases {
        let text = capture(cli, v, "tool");
        let t = read(Some(format), &text);
        let lines = said(&t);
        let calls: Vec<&String> = lines.iter().filter(|l| l.starts_with("⚙")).collect();
        assert_eq!(calls.len(), 1, "{cli} {v}: one call: {lines:#?}");
        assert!(calls[0].starts_with(call), "{cli} {v}: {}", calls[0]);
        assert!(
            calls[0].contains('✓'),
            "{cli} {v}: its result: {}",
            calls[0]
        );
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with('●'))
                .collect::<Vec<_>>(),
            [ANSWER],
            "{cli} {v}: the answer once, its deltas assembled: {lines:#?}"
        );
        // copilot states no tokens in its stream.
        assert_eq!(!t.usage.is_empty(), cli != "copilot", "{cli} {v}: usage");
        // Told by shape alone (a log older than `command.json`'s format).
        assert_eq!(said(&read(None, &text)), lines, "{cli} {v}: sniffed");
    }
}

#[test]
fn gemini_and_copilot_echo_the_prompt_as_what_was_asked() {
    for (cli, v) in [("gemini", "0.61.0"), ("copilot", "1.0.102")] {
        let lines = said(&read(None, &capture(cli, v, "tool")));
        assert!(
            lines[0].starts_with("▶ PLAYDECK_SCENARIO=tool Create the file hello.txt"),
            "{cli}: {lines:#?}"
        );
    }
}

#[test]
fn a_refused_call_shows_its_refusal_under_it() {
    for (cli, v, scenario) in [
        ("claude", "2.1.332", "tool-readonly"),
        ("copilot", "1.0.102", "tool-readonly"),
        ("opencode", "1.18.33", "always-tool"),
    ] {
        let lines = said(&read(None, &capture(cli, v, scenario)));
        assert!(
            lines.iter().any(|l| l.starts_with("⚙") && l.contains('✗')),
            "{cli} {v}: {lines:#?}"
        );
    }
}

#[test]
fn an_error_is_said_once() {
    let lines = said(&read(None, &capture("codex", "0.171.0", "auth")));
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with('!')).collect();
    assert_eq!(errors.len(), 1, "error and turn.failed are one: {lines:#?}");
    assert!(errors[0].contains("401 Unauthorized"), "{}", errors[0]);
    for (cli, v) in [
        ("claude", "2.1.332"),
        ("gemini", "0.61.0"),
        ("opencode", "1.18.33"),
    ] {
        let lines = said(&read(None, &capture(cli, v, "auth")));
        assert!(
            lines.iter().any(|l| l.starts_with('!')),
            "{cli}: {lines:#?}"
        );
    }
}

#[test]
fn plain_output_and_stderr_are_lines_of_their_own() {
    let mut t = Transcript::new(None);
    t.feed("compiling \x1b[31mred\x1b[0m");
    t.feed_stderr("warning: unused");
    t.feed("");
    assert_eq!(said(&t), ["compiling red", "err│ warning: unused"]);
}

#[test]
fn a_result_shows_its_first_lines_and_how_many_more() {
    let mut t = Transcript::new(Some(StreamFormat::Gemini));
    t.feed(
        r#"{"type":"tool_use","tool_name":"run","tool_id":"1","parameters":{"command":"seq 10"}}"#,
    );
    assert_eq!(t.settled(), 0, "a call waits for its result");
    t.feed(r#"{"type":"tool_result","tool_id":"1","status":"success","output":"1\n2\n3\n4\n5\n6\n7\n8\n9\n10"}"#);
    assert_eq!(t.settled(), 1);
    let lines = t.entries()[0].lines();
    assert_eq!(lines[0].text, "run(seq 10)");
    assert_eq!(lines.len(), 1 + RESULT_LINES + 1);
    assert_eq!(lines.last().unwrap().text, "… 4 more lines");
}

#[test]
fn the_oldest_entries_go_past_the_bound() {
    let mut t = Transcript::new(Some(StreamFormat::Jsonl));
    for i in 0..KEEP + 10 {
        t.feed(&format!(r#"{{"type":"text","text":"line {i}"}}"#));
    }
    assert_eq!(t.entries().len(), KEEP);
    assert_eq!(t.dropped(), 10);
    assert_eq!(t.entries()[0], Entry::Said("line 10".into()));
    assert_eq!(t.take_changed(), Some(0), "all of it is new to a reader");
    assert_eq!(t.take_changed(), None);
}

#[test]
fn arguments_are_said_by_what_the_call_does() {
    let j = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    assert_eq!(args_of(Some(&j(r#"{"command":"ls  -la\nx"}"#))), "ls -la x");
    assert_eq!(
        args_of(Some(&j(r#"{"file_path":"a.rs","content":"…"}"#))),
        "a.rs"
    );
    assert_eq!(args_of(Some(&j(r#""{\"path\":\"b\"}""#))), "b");
    assert_eq!(args_of(Some(&j(r#"{"n":1}"#))), r#"{"n":1}"#);
    assert_eq!(args_of(Some(&j("{}"))), "");
}

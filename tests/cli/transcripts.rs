//! The transcript corpus: real captured stdout of agent CLIs (sources,
//! versions and licences in `tests/transcripts/SOURCES.md`), each replayed
//! through the real binary — a one-operation play whose agent prints the
//! capture line by line — once with its trailing newline and once without,
//! and checked against the expectations file beside it
//! (`<name>.expect.json`): outcome, failure, answer, activity states and
//! tools in order, usage totals and the agent's warnings.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Every transcript with its format (the directory it is in).
fn corpus() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut all = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let format = dir.file_name().unwrap().to_str().unwrap().to_string();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "jsonl") {
                all.push((format.clone(), f));
            }
        }
    }
    all.sort();
    all
}

/// The signals of a one-operation run whose agent (of `format`, in the
/// role `role` of `roles`) prints `transcript` line by line (`trim`: a
/// directive after `@replay`).
fn replay(format: &str, transcript: &Path, trim: &str, roles: &str, role: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let agent = common::AGENT;
    let play = format!(
        "[play]\nname = \"replay\"\n[retry]\nattempts = 1\n[palette]\nroles = [{roles}]\n\
         [agents.cli]\nbinary = \"{agent}\"\nstream_format = \"{format}\"\n\
         [[operations]]\nid = \"work\"\nrole = \"{role}\"\nagent = \"cli\"\n\
         instruction = \"replay\\n@replay {}{trim}\"\n",
        transcript.display()
    );
    let play_path = dir.path().join("play.toml");
    std::fs::write(&play_path, play).unwrap();
    let out = common::playdeck()
        .env("PLAYDECK_CONFIG_DIR", dir.path())
        .args(["run", "--headless", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play_path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Roles for the spawn tests: an emitter and the role it asks for.
const SPAWN_ROLES: &str = "{ role = \"orchestrator\", disposition = \"emission_capable\" }, { role = \"technical_writer\", agent = \"noop\" }";

/// (spawned operations, spawn_dropped rows) of a replay.
fn ledger(signals: &[Value]) -> (usize, Vec<&Value>) {
    let spawned = signals.iter().filter(|s| s["type"] == "spawned").count();
    let drops = signals
        .iter()
        .filter(|s| s["type"] == "spawn_dropped")
        .collect();
    (spawned, drops)
}

/// What a replay showed, in the shape of an expectations file.
fn observe(format: &str, transcript: &Path, final_newline: bool) -> Value {
    let trim = if final_newline {
        ""
    } else {
        "\\n@no-final-newline"
    };
    let signals = replay(
        format,
        transcript,
        trim,
        "{ role = \"implementer\" }",
        "implementer",
    );
    let of = |ty: &'static str| signals.iter().filter(move |s| s["type"] == ty);
    let activity: Vec<String> = of("agent_activity")
        .filter(|s| s["state"] != "waiting")
        .map(|s| match s["tool"].as_str() {
            Some(t) => format!("{} {t}", s["state"].as_str().unwrap()),
            None => s["state"].as_str().unwrap().to_string(),
        })
        .collect();
    // The last totals of the attempt, in the one `agent_usage` meaning.
    let usage = of("agent_usage").next_back().map_or(Value::Null, |s| {
        let mut u = json!({});
        for k in [
            "input_tokens",
            "cached_input_tokens",
            "output_tokens",
            "cost_usd",
        ] {
            if let Some(v) = s.get(k) {
                u[k] = v.clone();
            }
        }
        u
    });
    let warnings: Vec<&str> = of("warning")
        .filter_map(|s| s["message"].as_str())
        .collect();
    let result = signals.iter().find(|s| s["type"] == "result");
    let mut v = json!({
        "activity": activity,
        "usage": usage,
        "warnings": warnings,
    });
    match of("failed").next() {
        Some(f) => {
            v["outcome"] = json!("failed");
            v["failure"] = json!({"category": f["category"], "error": f["error"]});
        }
        None => {
            v["outcome"] = json!("succeeded");
            let r = result.and_then(|r| {
                r["operation_results"]
                    .as_object()
                    .and_then(|m| m.values().next())
            });
            v["result"] = r.cloned().unwrap_or(Value::Null);
        }
    }
    v
}

/// The expectations file's claims, checked one by one so a failure says
/// which. `failure.error` and `warnings` are matched as substrings.
fn check(expect: &Value, seen: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut eq = |key: &str| {
        if expect[key] != seen[key] {
            wrong.push(format!(
                "{key}: expected {}, saw {}",
                expect[key], seen[key]
            ));
        }
    };
    eq("outcome");
    eq("activity");
    eq("usage");
    if expect["outcome"] == "succeeded" {
        eq("result");
    } else {
        if expect["failure"]["category"] != seen["failure"]["category"] {
            wrong.push(format!(
                "failure category: expected {}, saw {}",
                expect["failure"]["category"], seen["failure"]["category"]
            ));
        }
        let want = expect["failure"]["error"].as_str().unwrap_or("");
        let got = seen["failure"]["error"].as_str().unwrap_or("");
        if !got.contains(want) {
            wrong.push(format!("failure error: expected {want:?} in {got:?}"));
        }
    }
    let want: Vec<&str> = expect["warnings"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let got: Vec<&str> = seen["warnings"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if want.len() != got.len() || want.iter().zip(&got).any(|(w, g)| !g.contains(w)) {
        wrong.push(format!("warnings: expected {want:?}, saw {got:?}"));
    }
    wrong
}

#[test]
fn every_transcript_is_understood_with_and_without_a_final_newline() {
    let corpus = corpus();
    assert!(corpus.len() >= 16, "the corpus went missing: {corpus:?}");
    let mut failures = Vec::new();
    for (format, path) in &corpus {
        let expect_path = path.with_extension("expect.json");
        let expect: Value = match std::fs::read_to_string(&expect_path) {
            Ok(t) => serde_json::from_str(&t)
                .unwrap_or_else(|e| panic!("{}: {e}", expect_path.display())),
            Err(_) => {
                let seen = observe(format, path, true);
                failures.push(format!(
                    "{}: no expectations file; this replay saw:\n{seen:#}",
                    expect_path.display()
                ));
                continue;
            }
        };
        for final_newline in [true, false] {
            let seen = observe(format, path, final_newline);
            let wrong = check(&expect, &seen);
            if !wrong.is_empty() {
                failures.push(format!(
                    "{} (final newline: {final_newline}):\n  {}\n  this replay saw:\n{seen:#}",
                    path.display(),
                    wrong.join("\n  ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Each format's corpus holds what docs/agents.md (The corpus) promises it
/// covers.
#[test]
fn the_corpus_has_every_format() {
    let corpus = corpus();
    for (format, at_least) in [
        ("claude", 5),
        ("codex", 5),
        ("opencode", 2),
        ("gemini", 2),
        ("copilot", 1),
    ] {
        let n = corpus.iter().filter(|(f, _)| f == format).count();
        assert!(n >= at_least, "{format}: {n} transcripts, want {at_least}");
    }
    let sources = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts/SOURCES.md"),
    )
    .unwrap();
    for (_, path) in &corpus {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(sources.contains(name), "{name} has no entry in SOURCES.md");
    }
}

/// Issue 20: the CLIs repeat their final answer (claude in the last
/// assistant message and in `result`; codex in the final item and the
/// turn's end; opencode in the text part and again when the part ends). A
/// fenced spawn request in that answer is one request: one spawned
/// operation, no `duplicate` drop. Each capture has its answer replaced by
/// one that asks for a spawn; a second copy of the stream's answer line
/// stands for the CLI's own echo.
#[test]
fn a_spawn_request_in_a_repeated_final_answer_is_one_ledger_row() {
    let answer = "Done.\n```json\n{\"spawn_request\": {\"instruction\": \"write the release notes\", \"assignee\": \"technical_writer\"}}\n```";
    let esc = serde_json::to_string(answer).unwrap();
    let esc = &esc[1..esc.len() - 1];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let cases: [(&str, &str, &str, &[&str]); 3] = [
        (
            "claude",
            "claude/agentcmd-2.0.28-simple-success.jsonl",
            "\"4\"",
            &["\"type\":\"assistant\""],
        ),
        (
            "codex",
            "codex/agentcmd-0.46-simple-answer.jsonl",
            "\"4\"",
            &["\"type\":\"agent_message\""],
        ),
        (
            "opencode",
            "opencode/noldor-simple-text.jsonl",
            "\"alpha\\nbravo\\ncharlie\"",
            &["\"type\":\"text\""],
        ),
    ];
    for (format, file, old, echoed) in cases {
        let capture = std::fs::read_to_string(root.join(file)).unwrap();
        let mut lines = Vec::new();
        for l in capture.lines() {
            let l = l
                .replace(&format!("\"text\":{old}"), &format!("\"text\":\"{esc}\""))
                .replace(
                    &format!("\"result\":{old}"),
                    &format!("\"result\":\"{esc}\""),
                );
            let echo = echoed.iter().any(|e| l.contains(e));
            lines.push(l.clone());
            if echo {
                lines.push(l);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("t.jsonl");
        std::fs::write(&transcript, lines.join("\n") + "\n").unwrap();
        assert!(
            lines.iter().filter(|l| l.contains("release notes")).count() >= 2,
            "{format}: the answer is in the stream twice"
        );
        let signals = replay(format, &transcript, "", SPAWN_ROLES, "orchestrator");
        let (spawned, drops) = ledger(&signals);
        assert_eq!(spawned, 1, "{format}: one spawned operation\n{drops:?}");
        assert!(
            drops.is_empty(),
            "{format}: no ledger row for the echo: {drops:?}"
        );
    }
}

/// The other side of the same rule: an agent that really shows a request
/// twice — on its stream and again in a result of its own — gets the
/// duplicate drop the ADR records for a second sighting (ADR-0033 D3).
#[test]
fn a_request_on_the_stream_and_in_a_declared_result_is_still_a_duplicate() {
    let req = r#"{"spawn_request": {"instruction": "write the release notes", "assignee": "technical_writer"}}"#;
    let lines = [
        format!(
            r#"{{"type":"text","text":{}}}"#,
            serde_json::to_string(req).unwrap()
        ),
        format!(r#"{{"type":"result","result":{req}}}"#),
    ];
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("t.jsonl");
    std::fs::write(&transcript, lines.join("\n") + "\n").unwrap();
    let signals = replay("jsonl", &transcript, "", SPAWN_ROLES, "orchestrator");
    let (spawned, drops) = ledger(&signals);
    assert_eq!(spawned, 1, "{drops:?}");
    assert_eq!(drops.len(), 1, "{drops:?}");
    assert_eq!(drops[0]["reason"], "duplicate");
}

//! The agent's conversation kept across attempts, through the binary: a
//! retry and a resumed run continue the session the attempt before began
//! (the example agent keeps conversations as a CLI does, under HOME), an
//! agent set to `continue = "fresh"` does not, and a session the CLI no
//! longer has is said. The real CLIs are the external tier's `realcli`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common;

const PLAY: &str = include_str!("../plays/continued_session.toml");

fn run(base: &Path, play: &str, home: &Path) -> (Output, PathBuf) {
    let path = base.join("play.toml");
    std::fs::write(&path, play).unwrap();
    let dir = base.join("run");
    let out = common::playdeck()
        .env("HOME", home)
        .args(["run", "--headless", "--run-dir"])
        .arg(&dir)
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, dir)
}

/// Asserts the exit code, with what playdeck said when it differs.
fn exits(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ids `agent_session` recorded, in order.
fn sessions(evs: &[Value]) -> Vec<String> {
    of_type(evs, "agent_session")
        .iter()
        .map(|e| e["session"].as_str().unwrap().to_string())
        .collect()
}

fn events(dir: &Path) -> Vec<Value> {
    playdeck::store::whole_text(&dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

/// The `continues` of an attempt's `command.json`.
fn continues(dir: &Path, op: &str, attempt: u32) -> Option<String> {
    let text =
        std::fs::read_to_string(dir.join(format!("logs/{op}.{attempt}.command.json"))).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["continues"].as_str().map(String::from)
}

#[test]
fn a_retry_continues_the_conversation_the_failed_attempt_began() {
    let base = tempfile::tempdir().unwrap();
    let (out, dir) = run(base.path(), PLAY, &base.path().join("home"));
    exits(&out, 0);
    let evs = events(&dir);
    let sessions = sessions(&evs);
    assert_eq!(sessions.len(), 2, "one per attempt: {sessions:?}");
    assert_eq!(
        sessions[0], sessions[1],
        "the retry is the same conversation"
    );
    assert_eq!(continues(&dir, "write", 1), None);
    assert_eq!(
        continues(&dir, "write", 2).as_deref(),
        Some(sessions[0].as_str())
    );
    // The agent got the earlier turn back, and was told what ended it.
    let done = of_type(&evs, "completed")[0];
    assert_eq!(done["result"]["turns"], 2);
    let told = done["result"]["last_turn"].as_str().unwrap();
    assert!(
        told.contains(
            "stopped before it was done (server_error: exited with code 1: the server answered 500"
        ),
        "{told}"
    );
    assert!(
        told.contains("The task, as given before:\n\nwrite the parser"),
        "{told}"
    );
    assert!(
        of_type(&evs, "warning")
            .iter()
            .all(|w| !w["message"].as_str().unwrap().contains("session"))
    );
}

#[test]
fn continue_fresh_begins_each_attempt_anew() {
    let base = tempfile::tempdir().unwrap();
    let play = PLAY.replace(
        "stream_format = \"jsonl\"",
        "stream_format = \"jsonl\"\ncontinue = \"fresh\"",
    );
    let (out, dir) = run(base.path(), &play, &base.path().join("home"));
    exits(&out, 1);
    let evs = events(&dir);
    let mut sessions = sessions(&evs);
    assert_eq!(sessions.len(), 3);
    sessions.dedup();
    assert_eq!(sessions.len(), 3, "three conversations: {sessions:?}");
    for attempt in 1..=3 {
        assert_eq!(continues(&dir, "write", attempt), None);
    }
}

#[test]
fn a_conversation_the_cli_no_longer_has_is_said_and_begun_anew() {
    let base = tempfile::tempdir().unwrap();
    // A file where the agent keeps its conversations: it cannot keep any.
    let home = base.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".playdeck-agent"), "").unwrap();
    let (out, dir) = run(base.path(), PLAY, &home);
    exits(&out, 1);
    let evs = events(&dir);
    let sessions = sessions(&evs);
    assert_eq!(sessions.len(), 3);
    let warnings: Vec<&str> = of_type(&evs, "warning")
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    for pair in sessions.windows(2) {
        let said = format!(
            "agent \"pa\" did not continue session {}: it began {}, without the earlier turns",
            pair[0], pair[1]
        );
        assert!(warnings.contains(&said.as_str()), "{said}\n{warnings:#?}");
    }
}

#[test]
fn a_cli_that_refuses_a_lost_session_runs_the_attempt_anew_at_once() {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".playdeck-agent"), "").unwrap();
    let play = PLAY.replace("@sleep 0.1", "@sleep 0.1\n@strict-session");
    let (out, dir) = run(base.path(), &play, &home);
    exits(&out, 1);
    let evs = events(&dir);
    let warnings: Vec<&str> = of_type(&evs, "warning")
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    let sessions = sessions(&evs);
    assert_eq!(sessions.len(), 3, "each attempt began one: {sessions:?}");
    for (attempt, pair) in sessions.windows(2).enumerate() {
        let said = format!(
            "agent \"pa\" could not continue session {} (exited with code 42: Error resuming session: No previous sessions found for this project.): attempt {} begins anew",
            pair[0],
            attempt + 2
        );
        assert!(warnings.contains(&said.as_str()), "{said}\n{warnings:#?}");
        // The run that counts is the fresh one.
        assert_eq!(continues(&dir, "write", attempt as u32 + 2), None);
    }
}

#[test]
fn a_resumed_run_continues_the_conversation_its_stop_cut_short() {
    let base = tempfile::tempdir().unwrap();
    let play = PLAY
        .replace(
            "@fail-first the server answered 500 (internal server error)",
            "@session",
        )
        .replace("@sleep 0.1", "@sleep 8");
    let path = base.path().join("play.toml");
    std::fs::write(&path, play).unwrap();
    let dir = base.path().join("run");
    let home = base.path().join("home");
    let (err, err_path) = common::stderr_file(base.path(), "first.stderr");
    let mut first = common::playdeck()
        .env("HOME", &home)
        .args(["run", "--headless", "--run-dir"])
        .arg(&dir)
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    common::wait_for(
        "the attempt to name its session",
        Duration::from_secs(60),
        || {
            let log = common::event_types(&dir);
            match log.iter().any(|t| t == "agent_session") {
                true => Ok(()),
                false => Err(format!(
                    "the log: {log:?}\n{}",
                    common::tail_of(&err_path, 20)
                )),
            }
        },
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let out = common::playdeck()
        .env("HOME", &home)
        .args(["resume", "--headless", "--speed", "8"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    exits(&out, 0);
    let text = playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap();
    let evs: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let first_session = of_type(&evs, "agent_session")[0]["session"]
        .as_str()
        .unwrap()
        .to_string();
    let started: Vec<u64> = of_type(&evs, "started")
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    let last = *started.last().unwrap() as u32;
    assert!(last >= 2, "{started:?}");
    assert_eq!(
        continues(&dir, "write", last).as_deref(),
        Some(first_session.as_str())
    );
    let done = of_type(&evs, "completed")[0];
    assert_eq!(done["result"]["turns"], 2);
    assert!(
        done["result"]["last_turn"]
            .as_str()
            .unwrap()
            .contains("(the run stopped while this attempt ran, and was resumed)"),
        "{done}"
    );
}

/// `playdeck ctl RUN follow OP` after the run: each attempt's conversation
/// in turn, in words (no wire protocol), and how the operation ended;
/// `--raw` the lines as printed; an unknown name refused with the reason.
#[test]
fn ctl_follow_tells_each_attempt_and_how_the_operation_ended() {
    let base = tempfile::tempdir().unwrap();
    let (out, dir) = run(base.path(), PLAY, &base.path().join("home"));
    exits(&out, 0);
    let follow = |args: &[&str]| {
        common::playdeck()
            .arg("ctl")
            .arg(&dir)
            .arg("follow")
            .args(args)
            .output()
            .unwrap()
    };
    let out = follow(&["write"]);
    exits(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "── write · attempt 1 ──",
            "! the server answered 500 (internal server error)",
            "── write · attempt 2 ──",
            "⚙ Read",
            "⚙ Edit",
            "● done: write the parser",
            "── write: succeeded ──",
        ],
        "{text}"
    );
    let out = follow(&["write", "--raw"]);
    exits(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#"{"type":"state","state":"tool","tool":"Read"}"#),
        "{text}"
    );
    let out = follow(&["nope"]);
    exits(&out, 2);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(r#"no operation named "nope" in the run"#),
        "{said}"
    );
}

/// Following a live operation: what its agent said so far, then what
/// comes, until it ends — and the command ends with it.
#[test]
fn ctl_follow_waits_for_a_live_operation_and_ends_with_it() {
    let base = tempfile::tempdir().unwrap();
    let play = PLAY.replace("@sleep 0.1", "@sleep 2").replace(
        "@fail-first the server answered 500 (internal server error)",
        "",
    );
    let (mut child, dir) = host(base.path(), &play);
    wait_for(&dir, &[r#""type":"started""#]);
    let out = ctl(&dir, &["follow", "write"]);
    exits(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("── write · attempt 1 ──\n") && text.ends_with("── write: succeeded ──\n"),
        "{text}"
    );
    assert!(text.contains("● done: write the parser"), "{text}");
    assert!(child.wait().unwrap().success());
}

/// The report has the last turns of each operation that did not succeed.
#[test]
fn the_report_has_the_last_turns_of_what_failed() {
    let base = tempfile::tempdir().unwrap();
    let play = PLAY.replace("attempts = 3", "attempts = 1");
    let (out, dir) = run(base.path(), &play, &base.path().join("home"));
    exits(&out, 1);
    let out = common::playdeck().arg("report").arg(&dir).output().unwrap();
    exits(&out, 0);
    let md = String::from_utf8_lossy(&out.stdout);
    let at = md.find("## Last turns").expect(&md);
    let section = &md[at..];
    assert!(
        section.contains(
            "### write (attempt 1, failed)\n\n- ! the server answered 500 (internal server error)\n"
        ),
        "{section}"
    );
    let out = common::playdeck()
        .arg("report")
        .arg(&dir)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["last_turns"][0]["name"], "write");
    assert_eq!(
        v["last_turns"][0]["turns"][0],
        "! the server answered 500 (internal server error)"
    );
}

/// Starts `play` headless in the background, in `base`.
fn host(base: &Path, play: &str) -> (std::process::Child, PathBuf) {
    let path = base.join("play.toml");
    std::fs::write(&path, play).unwrap();
    let dir = base.join("run");
    let child = common::playdeck()
        .env("HOME", base.join("home"))
        .args(["run", "--headless", "--run-dir"])
        .arg(&dir)
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, dir)
}

/// `play` with one more operation that keeps the run open for 4 s, so an
/// operation that settled can still be spoken to.
fn kept_open(play: String) -> String {
    format!(
        "{play}\n[[operations]]\nid = \"keep\"\nrole = \"implementer\"\nagent = \"pa\"\nindependent_root = true\ninstruction = \"keep the run open\\n@sleep 4\"\n"
    )
}

/// Waits until the event log has a line with all of `parts`.
fn wait_for(dir: &Path, parts: &[&str]) {
    let started = std::time::Instant::now();
    while !playdeck::store::whole_text(&dir.join("events.jsonl"))
        .is_ok_and(|t| t.lines().any(|l| parts.iter().all(|p| l.contains(p))))
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no event with {parts:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ctl(dir: &Path, args: &[&str]) -> Output {
    common::playdeck()
        .arg("ctl")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

/// `ctl RUN say OP TEXT` to a running agent: it is stopped once out of its
/// tool call, and its next attempt continues the same conversation told
/// what the operator said — recorded with who said it, and shown first in
/// the attempt's conversation.
#[test]
fn say_reaches_a_running_agent_in_its_conversation() {
    let base = tempfile::tempdir().unwrap();
    let play = PLAY.replace("@sleep 0.1", "@sleep 3\n@session").replace(
        "@fail-first the server answered 500 (internal server error)",
        "",
    );
    let (mut child, dir) = host(base.path(), &play);
    // In its tool call: the message waits for it to end.
    wait_for(&dir, &[r#""state":"tool""#]);
    let out = ctl(&dir, &["say", "write", "use", "the", "other", "parser"]);
    exits(&out, 0);
    assert!(child.wait().unwrap().success());
    let evs = events(&dir);
    let said = of_type(&evs, "operator_action");
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["action"], "say write: use the other parser");
    assert!(said[0]["by"].as_str().unwrap().starts_with("ctl ("));
    assert_eq!(of_type(&evs, "started").len(), 2, "a second attempt");
    let sessions = sessions(&evs);
    assert_eq!(sessions[0], sessions[1], "in the same conversation");
    assert_eq!(continues(&dir, "write", 2).as_deref(), Some(&*sessions[0]));
    let done = of_type(&evs, "completed");
    let last_turn = done[0]["result"]["last_turn"].as_str().unwrap();
    assert!(
        last_turn.contains("after a tool call, to say something")
            && last_turn.ends_with("The operator says: use the other parser"),
        "{last_turn}"
    );
    let out = ctl(&dir, &["follow", "write"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let second = text.split("── write · attempt 2 ──\n").nth(1).expect(&text);
    assert!(
        second.starts_with("▶ ctl (")
            && second
                .lines()
                .next()
                .unwrap()
                .ends_with("): use the other parser"),
        "{text}"
    );
}

/// `say` on a failed operation sends it back: a new attempt in its
/// conversation with the operator's note; what a refusal looks like.
#[test]
fn say_sends_a_failed_operation_back_in_its_conversation() {
    let base = tempfile::tempdir().unwrap();
    let play = kept_open(
        PLAY.replace("attempts = 3", "attempts = 1")
            .replace("@sleep 0.1", "@sleep 0.1\n@session"),
    );
    let (mut child, dir) = host(base.path(), &play);
    wait_for(&dir, &[r#""type":"failed""#, r#""name":"write""#]);
    // Not running, not failed: refused, with why.
    let out = ctl(&dir, &["say", "nope", "hi"]);
    assert_ne!(out.status.code(), Some(0));
    let out = ctl(&dir, &["say", "write", "the server is back"]);
    exits(&out, 0);
    assert!(
        child.wait().unwrap().success(),
        "write succeeds when sent back"
    );
    let evs = events(&dir);
    let sessions: Vec<String> = of_type(&evs, "agent_session")
        .iter()
        .filter(|e| e["name"] == "write")
        .map(|e| e["session"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sessions.len(), 2);
    assert_eq!(
        sessions[0], sessions[1],
        "sent back into the same conversation"
    );
    let text = std::fs::read_to_string(dir.join("logs/write.2.command.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["asked"]["text"], "the server is back");
    let prompt = v["argv"][1].as_str().unwrap();
    assert!(
        prompt.contains("it failed: ") && prompt.ends_with("The operator says: the server is back"),
        "{prompt}"
    );
}

/// `say` on a succeeded operation nothing has built on sends it back to do
/// more, in its conversation; the run waits for it again.
#[test]
fn say_sends_a_succeeded_operation_back_while_nothing_built_on_it() {
    let base = tempfile::tempdir().unwrap();
    let play = kept_open(PLAY.replace("@sleep 0.1", "@sleep 0.1\n@session").replace(
        "@fail-first the server answered 500 (internal server error)",
        "",
    ));
    let (mut child, dir) = host(base.path(), &play);
    wait_for(&dir, &[r#""type":"completed""#, r#""name":"write""#]);
    let out = ctl(&dir, &["say", "write", "add", "the", "tests", "too"]);
    exits(&out, 0);
    assert!(child.wait().unwrap().success());
    let evs = events(&dir);
    let done: Vec<&Value> = of_type(&evs, "completed")
        .into_iter()
        .filter(|e| e["name"] == "write")
        .collect();
    assert_eq!(done.len(), 2, "it finished twice");
    let last_turn = done[1]["result"]["last_turn"].as_str().unwrap();
    assert!(
        last_turn.contains("it had finished; the operator sent it back to do more")
            && last_turn.ends_with("The operator says: add the tests too"),
        "{last_turn}"
    );
    assert_eq!(
        continues(&dir, "write", 2).as_deref(),
        Some(sessions(&evs)[0].as_str())
    );
}

//! Issue 21: `[notify]` runs a command with the event as JSON on stdin when
//! the run needs its operator; a failing or slow command is a warning in
//! the run and never holds it up.

use crate::common;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn play(notify: &str) -> String {
    format!(
        "[play]\nname = \"notified\"\n[notify]\n{notify}\n[palette]\nroles = [{{ role = \"implementer\" }}]\n\
         [[operations]]\nid = \"build\"\nrole = \"implementer\"\ninstruction = \"build\"\nsim = {{ duration_ms = 100 }}\n\
         [[operations]]\nid = \"gate\"\nrole = \"implementer\"\ninstruction = \"ship\"\napproval = true\ndepends_on = [\"build\"]\nsim = {{ duration_ms = 100 }}\n"
    )
}

/// The text of the file at `path` once it holds `needle` (20 s at most).
fn wait_for_text(path: &std::path::Path, needle: &str) -> String {
    common::wait_for(
        &format!("{needle:?} in {}", path.display()),
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.contains(needle) {
                Ok(text)
            } else {
                Err(format!("it holds: {text}"))
            }
        },
    )
}

#[test]
fn the_command_gets_each_event_as_json_while_the_run_waits() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("n.toml"),
        play(r#"command = ["sh", "-c", "cat >> notes.jsonl"]"#),
    )
    .unwrap();
    let mut run = common::playdeck()
        .args(["run", "n.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Told while the gate waits, not after.
    let notes = dir.path().join("notes.jsonl");
    let text = wait_for_text(&notes, "approval_needed");
    let ev: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(ev["event"], "approval_needed");
    assert_eq!(ev["op"], "gate");
    assert_eq!(ev["run_id"], "run");
    assert!(
        ev["message"]
            .as_str()
            .unwrap()
            .contains("gate waits for approval")
    );
    let mut stdin = run.stdin.take().unwrap();
    writeln!(stdin, "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
    let text = wait_for_text(&notes, "run_finished");
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["detail"]["outcome"], "succeeded", "{last:#}");
}

/// `playdeck run n.toml --headless` in `dir` with stdin piped.
fn start(dir: &std::path::Path, notify: &str) -> std::process::Child {
    std::fs::write(dir.join("n.toml"), play(notify)).unwrap();
    common::playdeck()
        .args(["run", "n.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_failing_command_is_a_warning_in_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(
        dir.path(),
        r#"command = ["sh", "-c", "echo no display >&2; exit 7"]"#,
    );
    let log = wait_for_text(
        &dir.path().join("run/events.jsonl"),
        "exit status: 7 no display",
    );
    let line = log.lines().find(|l| l.contains("exit status: 7")).unwrap();
    assert!(line.contains("\"type\":\"warning\""), "{line}");
    writeln!(run.stdin.take().unwrap(), "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
}

#[test]
fn a_slow_command_never_holds_the_run_up() {
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let mut run = start(
        dir.path(),
        "command = [\"sleep\", \"30\"]\ntimeout_ms = 25000",
    );
    wait_for_text(
        &dir.path().join("run/events.jsonl"),
        "\"awaiting_approval\"",
    );
    writeln!(run.stdin.take().unwrap(), "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "the run waited {:?} for a notifier that sleeps 30 s",
        t.elapsed()
    );
}

#[test]
fn an_empty_notify_command_is_refused_at_its_position() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.toml"), play("command = []")).unwrap();
    let out = common::playdeck()
        .args(["validate", "n.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("n.toml:4:") && err.contains("[notify] command is empty"),
        "{err}"
    );
}

#[test]
fn a_cap_that_pauses_the_run_calls_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("n.toml"),
        include_str!("../plays/notify_at_the_cap.toml"),
    )
    .unwrap();
    let mut run = common::playdeck()
        .args(["run", "n.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let notes = dir.path().join("notes.jsonl");
    // Both are sent; commands run side by side, so either may land first.
    wait_for_text(&notes, "budget_paused");
    let text = wait_for_text(&notes, "budget_warning");
    let mut events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events.sort_by_key(|e| e["seq"].as_u64());
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["budget_warning", "budget_paused"]);
    assert_eq!(
        events[1]["message"],
        "run run paused — budget 1.80/1.00 USD"
    );
    let mut stdin = run.stdin.take().unwrap();
    writeln!(stdin, "budget --raise usd=+5").unwrap();
    drop(stdin);
    assert!(run.wait().unwrap().success());
}

/// Six gates ready at once, a command that takes 0.3 s: every gate
/// reaches the operator (waiting ones go out together, in `ops`); before,
/// the two past the fourth running command were dropped.
#[test]
fn gates_ready_together_all_reach_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let mut play = String::from(
        "[play]\nname = \"six\"\nmax_concurrent = 6\n\
         [notify]\ncommand = [\"sh\", \"-c\", \"sleep 0.3; cat >> notes.jsonl; echo >> notes.jsonl\"]\n\
         [palette]\nroles = [{ role = \"implementer\" }]\n",
    );
    for i in 0..6 {
        play.push_str(&format!(
            "[[operations]]\nid = \"gate-{i}\"\nrole = \"implementer\"\ninstruction = \"g\"\napproval = true\nindependent_root = true\nsim = {{ duration_ms = 10 }}\n"
        ));
    }
    std::fs::write(dir.path().join("n.toml"), play).unwrap();
    let mut run = common::playdeck()
        .args(["run", "n.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let notes = dir.path().join("notes.jsonl");
    let named = || -> Vec<String> {
        let text = std::fs::read_to_string(&notes).unwrap_or_default();
        let mut ops: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "approval_needed")
            .flat_map(|e| match e["ops"].as_array() {
                Some(ops) => ops
                    .iter()
                    .filter_map(|o| o.as_str().map(String::from))
                    .collect(),
                None => vec![e["op"].as_str().unwrap_or_default().to_string()],
            })
            .collect();
        ops.sort();
        ops.dedup();
        ops
    };
    common::wait_for(
        "all six gates to reach the command",
        Duration::from_secs(30),
        || {
            let got = named();
            if got.len() >= 6 {
                return Ok(());
            }
            Err(format!(
                "only {got:?} reached the command: {:?}\n{}",
                std::fs::read_to_string(&notes),
                playdeck::store::whole_text(&dir.path().join("run/events.jsonl"))
                    .unwrap_or_default()
            ))
        },
    );
    let log = playdeck::store::whole_text(&dir.path().join("run/events.jsonl")).unwrap();
    assert!(!log.contains("not sent"), "an event was dropped");
    let mut stdin = run.stdin.take().unwrap();
    for i in 0..6 {
        writeln!(stdin, "approve gate-{i}").unwrap();
    }
    drop(stdin);
    assert!(run.wait().unwrap().success());
}

/// A command that takes half a second still gets `run_finished`: the
/// process delivers before it exits (before, it exited first).
#[test]
fn run_finished_reaches_a_slow_command_before_the_process_exits() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(
        dir.path(),
        r#"command = ["sh", "-c", "sleep 0.5; cat >> notes.jsonl"]"#,
    );
    wait_for_text(&dir.path().join("notes.jsonl"), "approval_needed");
    writeln!(run.stdin.take().unwrap(), "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
    // Read once, at exit: no waiting for a straggler.
    let text = std::fs::read_to_string(dir.path().join("notes.jsonl")).unwrap();
    assert!(text.contains("\"run_finished\""), "{text}");
}

/// Whether a process whose command line is exactly `argv` is alive.
fn alive(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
}

/// A hung command does not outlive the run: at its end (within the
/// bound) the command is ended with what it started. Before, the shell was
/// killed and its `sleep` went on.
#[test]
fn a_hung_command_ends_with_the_run_process_group_and_all() {
    let dir = tempfile::tempdir().unwrap();
    // A duration no other test uses, to find this very sleep.
    let marker = format!(
        "{}.{}",
        60 + std::process::id() % 30,
        std::process::id() % 997
    );
    let mut run = start(
        dir.path(),
        &format!("command = [\"sh\", \"-c\", \"sleep {marker}; true\"]\ntimeout_ms = 120000"),
    );
    wait_for_text(
        &dir.path().join("run/events.jsonl"),
        "\"awaiting_approval\"",
    );
    common::wait_for(
        "the command to start",
        Duration::from_secs(20),
        || match alive(&["sleep", &marker]) {
            true => Ok(()),
            false => Err(format!("no sleep {marker} is alive")),
        },
    );
    let t = Instant::now();
    writeln!(run.stdin.take().unwrap(), "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    common::wait_for(
        "the command to end with the run",
        Duration::from_secs(5),
        || match alive(&["sleep", &marker]) {
            true => Err(format!("sleep {marker} outlived the run")),
            false => Ok(()),
        },
    );
}

/// Issue 39: the operator's own `[notify]` command may read the run's
/// status (it descends from playdeck as agents do; it used to be refused
/// `peer_is_agent`), and still may not act on it.
#[test]
fn a_notify_command_may_read_status_not_act() {
    let dir = tempfile::tempdir().unwrap();
    let hook = format!(
        "import json, subprocess, sys\n\
         ev = json.loads(sys.stdin.readline())\n\
         if ev['event'] == 'approval_needed':\n\
         \x20   s = subprocess.run([{bin:?}, 'ctl', ev['run_dir'], 'status', '--json'], capture_output=True, text=True)\n\
         \x20   a = subprocess.run([{bin:?}, 'ctl', ev['run_dir'], 'approve', 'gate', '--json'], capture_output=True, text=True)\n\
         \x20   open('hook.json', 'w').write(json.dumps({{'status': s.returncode, 'out': s.stdout, 'approve': a.returncode, 'answer': a.stdout}}))\n",
        bin = common::PLAYDECK
    );
    std::fs::write(dir.path().join("hook.py"), hook).unwrap();
    let mut run = start(dir.path(), r#"command = ["python3", "hook.py"]"#);
    let text = wait_for_text(&dir.path().join("hook.json"), "answer");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], 0, "{v:#}");
    let status: serde_json::Value = serde_json::from_str(v["out"].as_str().unwrap()).unwrap();
    assert_eq!(
        status["awaiting_approval"],
        serde_json::json!(["gate"]),
        "{v:#}"
    );
    assert_ne!(v["approve"], 0, "{v:#}");
    assert!(
        v["answer"].as_str().unwrap().contains("peer_is_agent"),
        "{v:#}"
    );
    writeln!(run.stdin.take().unwrap(), "approve gate").unwrap();
    assert!(run.wait().unwrap().success());
}

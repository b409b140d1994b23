//! Capacity through the binary, against a real git repository: a release
//! never destroys an agent's work (issue 11).

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::git;
use serde_json::Value;

fn run(dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = common::playdeck()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
    )
}

/// An agent (a shell script, given its prompt on stdin) that writes a
/// file in its worktree and answers.
const PLAY: &str = include_str!("../plays/worktree_agent_writes_a_file.toml");

fn retained_reason(v: &Value) -> (&str, &str, &str) {
    let k = &v["retained"][0];
    (
        v["status"].as_str().unwrap(),
        k["name"].as_str().unwrap(),
        k["reason"].as_str().unwrap(),
    )
}

/// Issue 11: the agent leaves a file it created, uncommitted, in its
/// worktree. A live release, the run's end and a release after the run
/// all keep the worktree with the reason `uncommitted_changes` (partial,
/// exit 1) and say so in capacity.json; once the operator commits, the
/// next release removes the worktree and keeps the branch with the work.
#[test]
fn issue_11_releasing_a_worktree_never_destroys_the_agents_work() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    git(d, &["init", "-q"]);
    std::fs::write(d.join("p.toml"), PLAY).unwrap();
    git(d, &["add", "p.toml"]);
    git(d, &["commit", "-q", "-m", "the play"]);
    // Its stderr in a file of its own (not in the repository), for a
    // failure's message.
    let logs = tempfile::tempdir().unwrap();
    let (err, err_path) = common::stderr_file(logs.path(), "run.stderr");
    let mut child = common::playdeck()
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/k1",
            "p.toml",
        ])
        .current_dir(d)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path));
    // The agent's worktree is a real `git worktree add`: room on a loaded
    // machine.
    let wrote = lines.until("write's end", Duration::from_secs(120), |v| {
        v["name"] == "write" && matches!(v["type"].as_str(), Some("completed" | "failed"))
    });
    assert_eq!(wrote["type"], "completed", "{wrote:#}");
    lines.until("the gate", Duration::from_secs(60), |v| {
        v["type"] == "awaiting_approval"
    });
    let worktree = d.join(".playdeck/runs/k1/worktrees/loop-k1-coder-1");
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes/new.txt")).unwrap(),
        "the agent wrote this\n"
    );

    // Live: the operator asks for the loop's instances.
    let (code, r) = run(
        d,
        &[
            "ctl",
            "k1",
            "release",
            "--idle-only",
            "--lifetime",
            "current_loop",
            "--json",
        ],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        retained_reason(&r),
        ("partial", "loop-k1-coder-1", "uncommitted_changes")
    );
    assert!(
        r["retained"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("notes/new.txt"),
        "{r:#}"
    );
    assert!(worktree.join("notes/new.txt").exists());

    // The run ends: its end releases current_loop, and keeps it too.
    let (code, _) = run(d, &["ctl", "k1", "approve", "ship", "--json"]);
    assert_eq!(code, 0);
    // The run's end removes what it can of its worktrees (git again).
    let result = lines.until("the result", Duration::from_secs(120), |v| {
        v["type"] == "result"
    });
    assert_eq!(result["outcome"], "succeeded");
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(d.join(".playdeck/runs/k1/capacity.json")).unwrap(),
    )
    .unwrap();
    let rec = &file["agents"][0];
    assert_eq!(
        (rec["state"].as_str(), rec["reason"].as_str()),
        (Some("ready"), Some("uncommitted_changes")),
        "{file:#}"
    );
    assert!(worktree.join("notes/new.txt").exists());

    // After the run: the default release (current_round, current_loop)
    // keeps it, and says why.
    let (code, r) = run(d, &["capacity", "release", "--run", "k1", "--json"]);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        retained_reason(&r),
        ("partial", "loop-k1-coder-1", "uncommitted_changes")
    );
    let (code, s) = run(d, &["capacity", "status", "--run", "k1", "--json"]);
    assert_eq!(code, 0);
    assert!(
        s["blocked"][0]
            .as_str()
            .unwrap()
            .contains("loop-k1-coder-1 retained: uncommitted_changes"),
        "{s:#}"
    );

    // The operator commits the work on the instance's branch; then it goes
    // (asked as the capacity contract writes the call, issue 20).
    git(&worktree, &["add", "-A"]);
    git(&worktree, &["commit", "-q", "-m", "keep the agent's notes"]);
    // Issue 38: a dry run on the finished run says what would go and
    // changes nothing: not the file, not its log, not the worktree or
    // its branch (it used to release for real).
    let run_dir = d.join(".playdeck/runs/k1");
    let files = || {
        (
            std::fs::read(run_dir.join("capacity.json")).unwrap(),
            std::fs::read(run_dir.join("capacity.events.jsonl")).unwrap_or_default(),
        )
    };
    let before = files();
    let (code, r) = run(
        d,
        &[
            "capacity",
            "release",
            "--run",
            "k1",
            "--lifetime",
            "current_loop",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(
        r["released"],
        serde_json::json!(["loop-k1-coder-1"]),
        "{r:#}"
    );
    assert!(files() == before, "a dry run wrote nothing");
    assert!(worktree.exists(), "a dry run removes no worktree");
    git(d, &["rev-parse", "--verify", "playdeck/k1/loop-k1-coder-1"]);
    let words = common::playdeck()
        .args([
            "capacity",
            "release",
            "--run",
            "k1",
            "--lifetime",
            "current_loop",
            "--dry-run",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&words.stdout).starts_with("dry run (nothing released)"),
        "{words:?}"
    );
    assert!(files() == before && worktree.exists());
    let (code, r) = run(
        d,
        &[
            "capacity",
            "release",
            "--loop-id",
            "k1",
            "--idle-only",
            "--lifetime",
            "current_loop",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["status"], "ok");
    assert_eq!(r["released"], serde_json::json!(["loop-k1-coder-1"]));
    assert!(!worktree.exists(), "the clean worktree is removed");
    let kept = git(d, &["show", "playdeck/k1/loop-k1-coder-1:notes/new.txt"]);
    assert_eq!(kept, "the agent wrote this\n", "the branch keeps the work");
    let list = git(d, &["worktree", "list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
}

/// The human format reads in the order things happened: an instance is
/// made ready and leased before its operation starts on it (the lease's
/// signals were written after `started`).
#[test]
fn the_human_format_shows_the_lease_before_the_start_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.toml"),
        include_str!("../plays/one_node_two_steps.toml"),
    )
    .unwrap();
    let out = common::playdeck()
        .args([
            "run",
            "p.toml",
            "--headless",
            "--format",
            "human",
            "--run-dir",
            "run",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let at = |want: &str| {
        text.lines()
            .position(|l| l.contains(want))
            .unwrap_or_else(|| panic!("{want:?} in {text}"))
    };
    for op in ["a", "b"] {
        let busy = at(&format!("busy ({op})"));
        let started = at(&format!("started          {op} "));
        assert!(busy < started, "{op}: leased, then started:\n{text}");
    }
    assert!(at("coder-1 ready") < at("busy (a)"), "{text}");
}

/// Issue 25: `ctl RUN release --name INSTANCE` releases one instance of
/// a live run, whatever its lifetime, idle-only: a busy one is kept with
/// the reason in words (the JSON keeps the machine's reason), and a name
/// the run does not have is refused naming it and what exists.
#[test]
fn ctl_releases_one_named_instance_idle_only_with_reasons_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.toml"),
        include_str!("../plays/builder_and_kept_tester.toml"),
    )
    .unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (err, err_path) = common::stderr_file(logs.path(), "run.stderr");
    let mut child = common::playdeck()
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/n1",
            "p.toml",
        ])
        .current_dir(d)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path));
    lines.until("check's end", Duration::from_secs(60), |v| {
        v["name"] == "check" && v["type"] == "completed"
    });
    let text = |args: &[&str]| {
        let out = common::playdeck()
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // A name the run does not have: refused, naming it and what exists.
    let (code, r) = run(
        d,
        &["ctl", "n1", "release", "--name", "builder-9", "--json"],
    );
    assert_ne!(code, 0, "{r:#}");
    assert_eq!(r["error"]["code"], "unknown_instance", "{r:#}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("no instance named builder-9; this run's instances: ")
            && msg.contains("loop-n1-builder-1")
            && msg.contains("loop-n1-keeper-1"),
        "{msg}"
    );
    let (code, _, err) = text(&["ctl", "n1", "release", "--name", "builder-9"]);
    assert_ne!(code, 0);
    assert!(err.contains("no instance named builder-9"), "{err}");

    // The busy one is kept: words for people, the machine reason in JSON.
    let (code, out, _) = text(&["ctl", "n1", "release", "--name", "loop-n1-builder-1"]);
    assert_eq!(code, 1, "partial: {out}");
    assert!(
        out.contains("released 0: \nretained 1 (only idle instances are released")
            && out.contains("  loop-n1-builder-1 — busy\n"),
        "{out}"
    );
    assert!(!out.contains("runtime_state="), "{out}");
    let (code, r) = run(
        d,
        &[
            "ctl",
            "n1",
            "release",
            "--name",
            "loop-n1-builder-1",
            "--json",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        retained_reason(&r),
        ("partial", "loop-n1-builder-1", "runtime_state=busy")
    );
    let (_, out, _) = text(&["ctl", "n1", "capacity"]);
    assert!(
        out.contains("(kept: busy)")
            && out.contains("blocked: loop-n1-builder-1 kept by a release — busy"),
        "{out}"
    );

    // The idle manual_release one goes when named; nothing else does.
    let (code, r) = run(
        d,
        &[
            "ctl",
            "n1",
            "release",
            "--name",
            "loop-n1-keeper-1",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["status"], "ok");
    assert_eq!(r["names"], serde_json::json!(["loop-n1-keeper-1"]));
    assert_eq!(r["released"], serde_json::json!(["loop-n1-keeper-1"]));
    assert_eq!(r["retained"], serde_json::json!([]));
    let (_, s) = run(d, &["ctl", "n1", "capacity", "--json"]);
    let states: Vec<(&str, &str)> = s["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("loop-n1-builder-1", "retained"),
            ("loop-n1-keeper-1", "released")
        ]
    );

    let (code, _) = run(d, &["ctl", "n1", "cancel", "--json"]);
    assert_eq!(code, 0);
    drop(child.stdin.take());
    let _ = child.wait();
}

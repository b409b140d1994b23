//! The binary as a script uses it: validate, headless runs, exit codes,
//! NDJSON output, the event log and control lines on stdin.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

fn write_play(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn types(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|l| l["type"].as_str().unwrap().to_string())
        .collect()
}

/// Types of the lifecycle signals, without the palette's bookkeeping.
fn lifecycle(v: &[Value]) -> Vec<String> {
    types(v)
        .into_iter()
        .filter(|t| !matches!(t.as_str(), "role_provisioned" | "budget"))
        .collect()
}

const PIPELINE: &str = include_str!("../plays/pipeline.toml");

const GATED: &str = include_str!("../plays/gated.toml");

#[test]
fn validate_accepts_a_good_play_and_rejects_a_bad_one_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_play(dir.path(), "good.toml", PIPELINE);
    let out = common::playdeck()
        .arg("validate")
        .arg(&good)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok — play \"pipeline\", 2 operations"),
        "{stdout}"
    );

    let bad = write_play(
        dir.path(),
        "bad.toml",
        &PIPELINE.replace("id = \"b\"", "id = \"a\""),
    );
    let out = common::playdeck()
        .arg("validate")
        .arg(&bad)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Line 11 of tests/plays/pipeline.toml, b's id.
    assert!(stderr.contains("bad.toml:11:6"), "{stderr}");
    assert!(stderr.contains("duplicate operation id \"a\""), "{stderr}");
    assert!(!dir.path().join(".playdeck").exists());
}

#[test]
fn a_rejected_play_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_play(
        dir.path(),
        "bad.toml",
        include_str!("../plays/bad_name_not_a_string.toml"),
    );
    let out = common::playdeck()
        .args(["run", "--headless"])
        .arg(&bad)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join(".playdeck").exists());
    let missing = common::playdeck()
        .args(["run", "--headless", "nope.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read play file nope.toml"));
}

#[test]
fn a_headless_run_prints_ndjson_and_writes_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "p.toml", PIPELINE);
    let out = common::playdeck()
        .args(["run", "--headless"])
        .arg(&play)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = lines(&out);
    // The palette's one role is provisioned before anything runs.
    assert_eq!(types(&v)[1..3], ["role_provisioned", "budget"]);
    assert_eq!(
        lifecycle(&v),
        [
            "run_started",
            "queued",
            "queued",
            "started",
            "completed",
            "started",
            "completed",
            "round_ended",
            "run_finished",
            "result"
        ]
    );
    let result = v.last().unwrap();
    assert_eq!(result["outcome"], "succeeded");
    assert_eq!(result["completed_operations"].as_array().unwrap().len(), 2);

    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".playdeck/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
    let run_dir = runs[0].as_ref().unwrap().path();
    assert_eq!(
        std::fs::read_to_string(run_dir.join("play.toml")).unwrap(),
        PIPELINE
    );
    // The event log is the same stream the printer printed.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let printed: Vec<&str> = stdout.lines().collect();
    let log = playdeck::store::whole_text(&run_dir.join("events.jsonl")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        printed[..printed.len() - 1]
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("result.json")).unwrap())
            .unwrap();
    let mut expected = result.clone();
    expected.as_object_mut().unwrap().remove("type");
    assert_eq!(saved, expected);
    // The readable summary goes to stderr.
    assert!(String::from_utf8_lossy(&out.stderr).contains("outcome: succeeded"));
}

#[test]
fn exit_codes_follow_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let failing = write_play(
        dir.path(),
        "f.toml",
        &PIPELINE.replace(
            "sim = { duration_ms = 20 }\n[[operations]]",
            "sim = { duration_ms = 20, outcome = \"fail\" }\n[[operations]]",
        ),
    );
    let out = common::playdeck()
        .args(["run", "--headless"])
        .arg(&failing)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // The summary names the cause as the console, ctl status and the
    // report do (the skipped one is not a cause).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("outcome: failed — 1 failed: a after"), "{err}");
    let v = lines(&out);
    assert_eq!(v.last().unwrap()["outcome"], "failed");
    assert_eq!(
        v.last().unwrap()["skipped_operations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn an_approval_with_no_operator_is_denied_when_stdin_closes() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "g.toml", GATED);
    let out = common::playdeck()
        .args(["run", "--headless"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = lines(&out);
    let denied = v
        .iter()
        .find(|l| l["type"] == "denied")
        .expect("a denied signal");
    assert_eq!(
        (denied["name"].as_str(), denied["reason"].as_str()),
        (Some("gate"), Some("no operator"))
    );

    for (flag, code) in [("all", 0), ("none", 1)] {
        let out = common::playdeck()
            .args(["run", "--headless", "--approve", flag])
            .arg(&play)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "--approve {flag}");
    }
}

/// A running child whose stdout lines arrive on a channel; its stderr
/// goes to a file, read at the end or for a failure's message.
struct Live {
    child: Child,
    lines: common::JsonLines,
    stderr: PathBuf,
    _logs: tempfile::TempDir,
}

impl Live {
    fn start(args: &[&str], dir: &Path) -> Live {
        let logs = tempfile::tempdir().unwrap();
        let (err, stderr) = common::stderr_file(logs.path(), "run.stderr");
        let mut child = common::playdeck()
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap();
        let lines = common::JsonLines::read(&mut child, Some(stderr.clone()));
        Live {
            child,
            lines,
            stderr,
            _logs: logs,
        }
    }

    /// Reads until a line matches (60 s at most), returning it; failing
    /// that, says what came instead.
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.lines
            .until("the line waited for", Duration::from_secs(60), pred)
    }

    /// What it wrote on stderr so far.
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn started(&self) -> Vec<String> {
        self.lines
            .seen
            .iter()
            .filter(|v| v["type"] == "started")
            .map(|v| v["name"].as_str().unwrap().to_string())
            .collect()
    }
}

#[test]
fn stdin_control_steps_through_a_paused_graph() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "p.toml", PIPELINE);
    let mut live = Live::start(
        &["run", "--headless", "--paused", play.to_str().unwrap()],
        dir.path(),
    );
    live.until(|v| v["type"] == "paused" && v["name"] == "a");
    live.send("step");
    live.until(|v| v["type"] == "completed" && v["name"] == "a");
    live.until(|v| v["type"] == "paused" && v["name"] == "b");
    assert_eq!(live.started(), ["a"]);
    live.send("step");
    live.until(|v| v["type"] == "completed" && v["name"] == "b");
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "succeeded");
    drop(live.child.stdin.take());
    assert_eq!(live.child.wait().unwrap().code(), Some(0));
}

/// Breakpoints (issue 42): `--break b` pauses the run before b starts,
/// the cause said on `run_paused`; `step` lets it start; `break --clear`
/// on stdin takes one off, and a bad one is refused with what may be.
#[test]
fn a_breakpoint_pauses_the_run_before_its_operation_with_the_cause_said() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "p.toml", PIPELINE);
    let mut live = Live::start(
        &["run", "--headless", "--break", "b", play.to_str().unwrap()],
        dir.path(),
    );
    let set = live.until(|v| v["type"] == "breakpoints");
    assert_eq!(set["set"], serde_json::json!(["b"]));
    live.until(|v| v["type"] == "completed" && v["name"] == "a");
    let paused = live.until(|v| v["type"] == "run_paused");
    assert_eq!(
        paused["cause"], "b is about to start (breakpoint b)",
        "{paused}"
    );
    assert_eq!(live.started(), ["a"], "b waits");
    live.send("break role:");
    live.send("break --clear b");
    live.send("step");
    live.until(|v| v["type"] == "completed" && v["name"] == "b");
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "succeeded");
    drop(live.child.stdin.take());
    assert_eq!(live.child.wait().unwrap().code(), Some(0));
    let stderr = live.stderr();
    assert!(
        stderr.contains("breakpoint \"role:\": \"\" is not a role's name"),
        "{stderr}"
    );
    assert!(
        live.lines
            .seen
            .iter()
            .any(|v| v["type"] == "breakpoints" && v["set"] == serde_json::json!([])),
        "cleared"
    );
}

#[test]
fn stdin_control_approves_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "g.toml", GATED);
    let mut live = Live::start(&["run", "--headless", play.to_str().unwrap()], dir.path());
    live.until(|v| v["type"] == "awaiting_approval");
    live.send("approve nothing-here");
    live.send("launch");
    live.send("approve gate");
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "succeeded");
    drop(live.child.stdin.take());
    let status = live.child.wait().unwrap();
    let stderr = live.stderr();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("approve: no operation named \"nothing-here\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown control line \"launch\"; allowed: pause | resume"),
        "{stderr}"
    );
}

#[test]
fn a_cancel_line_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let slow = PIPELINE.replace("duration_ms = 20", "duration_ms = 60000");
    let play = write_play(dir.path(), "s.toml", &slow);
    let mut live = Live::start(&["run", "--headless", play.to_str().unwrap()], dir.path());
    live.until(|v| v["type"] == "started");
    live.send("cancel");
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "cancelled");
    assert_eq!(live.child.wait().unwrap().code(), Some(1));
}

#[test]
fn sigint_cancels_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let slow = PIPELINE.replace("duration_ms = 20", "duration_ms = 60000");
    let play = write_play(dir.path(), "s.toml", &slow);
    let mut live = Live::start(&["run", "--headless", play.to_str().unwrap()], dir.path());
    live.until(|v| v["type"] == "started");
    let pid = live.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "cancelled");
    assert_eq!(live.child.wait().unwrap().code(), Some(1));
}

#[test]
fn the_demo_play_shows_every_kind_of_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::playdeck()
        .args(["run", "--headless", "--speed", "40", "--approve", "all"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the demo fails and escalates on purpose"
    );
    let v = lines(&out);
    let t = types(&v);
    for ty in [
        "spawned",
        "spawn_dropped",
        "failed",
        "skipped",
        "escalated",
        "approved",
        "round_ended",
    ] {
        assert!(t.iter().any(|x| x == ty), "no {ty} in the demo");
    }
    let result = v.last().unwrap();
    let mut reasons: Vec<&str> = result["dropped_spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "duplicate",
            "max_spawn_exceeded",
            "palette_budget_exhausted",
            "requester_not_authorized",
            "role_provision_failed",
            "unknown_catalog_role"
        ]
    );
    assert_eq!(result["spawned_operations"], 5);
    // One expansion, and its reuse cost nothing.
    let expanded: Vec<&Value> = v
        .iter()
        .filter(|l| l["type"] == "role_provisioned" && l["origin"] == "expanded")
        .collect();
    assert_eq!(expanded.len(), 1);
    assert_eq!(expanded[0]["role"], "performance_engineer");
    let last_budget = v.iter().rev().find(|l| l["type"] == "budget").unwrap();
    assert_eq!(last_budget["consumed_new_roles"], 1);
    assert_eq!(last_budget["spawns_accepted"], 5);
    let perf_spawns = v
        .iter()
        .filter(|l| l["type"] == "spawned" && l["assignee"] == "performance_engineer")
        .count();
    assert_eq!(perf_spawns, 2);
    // Completed and skipped are disjoint and cover every operation; the
    // failed ones are among the completed (ADR-0033), and some there are.
    let ids = |k: &str| -> Vec<&str> {
        result[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect()
    };
    let (completed, failed) = (ids("completed_operations"), ids("failed_operations"));
    let mut all: Vec<&str> = completed
        .iter()
        .chain(&ids("skipped_operations"))
        .copied()
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n);
    assert_eq!(n, result["operation_names"].as_object().unwrap().len());
    assert!(!failed.is_empty() && failed.iter().all(|f| completed.contains(f)));
    let duration = v
        .iter()
        .rev()
        .find(|l| l["type"] == "run_finished")
        .unwrap()["elapsed"]
        .as_f64()
        .unwrap();
    // 30–60 s at speed 1.
    assert!((30.0..=60.0).contains(&(duration * 40.0)), "{duration}");
}

#[test]
fn a_play_without_a_palette_falls_back_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = PIPELINE.replace("[palette]\nroles = [{ role = \"tester\" }]\n", "");
    assert!(!legacy.contains("[palette]"));
    let play = write_play(dir.path(), "l.toml", &legacy);
    let out = common::playdeck()
        .args(["run", "--headless"])
        .arg(&play)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("legacy roster").count(), 1, "{stderr}");
    let v = lines(&out);
    let warnings: Vec<&Value> = v.iter().filter(|l| l["type"] == "warning").collect();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("deprecated")
    );
    // The full active roster was provisioned.
    let initial = v.iter().filter(|l| l["type"] == "role_provisioned").count();
    assert!(initial >= 15, "{initial}");
}

#[test]
fn demo_print_shows_the_embedded_play() {
    let out = common::playdeck()
        .args(["demo", "--print"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/plays/demo.toml"
    ))
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), file);
}

#[test]
fn bad_flags_are_rejected_with_what_is_allowed() {
    let out = common::playdeck()
        .args(["run", "--headless", "--speed", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowed: a number from 0.01 to 1000"));
}

#[test]
fn catalog_palette_and_prompt_views() {
    let out = common::playdeck()
        .args(["catalog", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["roles"].as_array().unwrap().len() >= 15);
    assert!(v["modes"].as_array().unwrap().len() >= 8);
    assert_eq!(v["roles"][0]["name"], "orchestrator");
    assert!(v["roles"][0]["pack"]["model"].is_string());

    let out = common::playdeck()
        .args(["palette", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["planning_context"]["max_new_roles"], 1);
    assert_eq!(v["initial"].as_array().unwrap().len(), 10);
    assert!(
        v["planning_context"]["expansion_only_roles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "performance_engineer")
    );
    assert_eq!(v["snapshot"]["consumed_new_roles"], 0);

    let out = common::playdeck()
        .args(["prompt", "--op", "kickoff"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Break the 2.4 release"));
    assert!(text.contains("<!-- playdeck:delegation:begin -->"));
    assert!(text.contains("Palette expansion is available"));

    let out = common::playdeck()
        .args(["prompt", "--op", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ids: kickoff, scope"));
}

/// Issue 13 (ADR-0033 D3, the trusted inject API): the operator adds work
/// to a live run from stdin and from `ctl`, through admission.
#[test]
fn rule_a33_inject_the_operator_adds_work_through_admission() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "p.toml", PIPELINE);
    let mut live = Live::start(
        &[
            "run",
            "--headless",
            "--paused",
            "--run-dir",
            "run",
            play.to_str().unwrap(),
        ],
        dir.path(),
    );
    live.until(|v| v["type"] == "paused" && v["name"] == "a");
    live.send("add --after a --role tester --instruction 'check a' --name check");
    let spawned = live.until(|v| v["type"] == "spawned");
    assert_eq!(spawned["name"], "check");
    assert_eq!(spawned["edges"][0]["kind"], "dependency");
    // ctl takes the same command: b also waits for check now.
    let out = common::playdeck()
        .args(["ctl", "run", "add", "--name", "b", "--after", "check"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok: added b\n");
    live.until(|v| v["type"] == "dependencies_added" && v["name"] == "b");
    // check -> b -> ... -> check would close a cycle: dropped, in the ledger.
    let out = common::playdeck()
        .args([
            "ctl", "run", "add", "--name", "check", "--after", "b", "--json",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "dropped");
    let dropped = live.until(|v| v["type"] == "spawn_dropped");
    assert_eq!(dropped["reason"], "cycle");
    live.send("resume");
    let result = live.until(|v| v["type"] == "result");
    assert_eq!(result["outcome"], "succeeded");
    assert_eq!(
        result["spawned_operations"], 2,
        "the add and the new dependency"
    );
    assert_eq!(live.started(), ["a", "check", "b"], "b waited for check");
    drop(live.child.stdin.take());
    assert_eq!(live.child.wait().unwrap().code(), Some(0));
}

/// Issue 13 (A33-12): sequential authoring is kept, but validate says how
/// each operation was placed.
#[test]
fn rule_a33_12_validate_says_how_operations_were_placed() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(dir.path(), "p.toml", PIPELINE);
    let out = common::playdeck()
        .arg("validate")
        .arg(&play)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "note: 1 operation(s) placed by sequential authoring (no depends_on): b after: a"
        ),
        "{text}"
    );
    let out = common::playdeck()
        .args(["validate", "--explain"])
        .arg(&play)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  a  root (the first operation)"), "{text}");
    assert!(
        text.contains("  b  after: a (sequential authoring)"),
        "{text}"
    );
}

/// ADR-0036 DEFERRED: new plays declare palettes; the play the README
/// shows first is one, so following the README prints no deprecation.
#[test]
fn rule_a36_67_the_readme_example_play_declares_its_palette() {
    let play = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plays/small.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = common::playdeck()
        .arg("validate")
        .arg(&play)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("legacy roster"), "{stderr}");
    let out = common::playdeck()
        .args(["run", "--headless", "--approve", "all", "--speed", "50"])
        .arg(&play)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("legacy roster"), "{stderr}");
    let v = lines(&out);
    assert!(
        !v.iter().any(|l| l["type"] == "warning"),
        "no warning at all"
    );
    let provisioned: Vec<&str> = v
        .iter()
        .filter(|l| l["type"] == "role_provisioned")
        .map(|l| l["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        provisioned,
        [
            "planner",
            "implementer",
            "technical_writer",
            "tester",
            "release_manager"
        ]
    );
}

/// ADR-0033 D1: closing the consumer early cancels and awaits the driver.
/// `playdeck run --headless … | head -1`: when stdout is gone the run is
/// cancelled as on the first SIGINT, result.json is still written, and the
/// exit code is 1.
#[test]
fn rule_a33_09_a_closed_stdout_cancels_the_run_and_still_writes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut play =
        String::from("[play]\nname = \"long\"\n[palette]\nroles = [{ role = \"tester\" }]\n");
    for i in 0..40 {
        play.push_str(&format!(
            "[[operations]]\nid = \"step{i}\"\nrole = \"tester\"\ninstruction = \"step {i}\"\nsim = {{ duration_ms = 300 }}\n"
        ));
    }
    let play = write_play(dir.path(), "long.toml", &play);
    let run_dir = dir.path().join("run");
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(&run_dir)
        .arg(&play)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `head -1`: one line, then the reader is gone.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["type"], "run_started");
    drop(out);
    let status = common::wait_for(
        "the run to end with its reader",
        Duration::from_secs(30),
        || {
            child
                .try_wait()
                .unwrap()
                .ok_or_else(|| "it went on without its reader".to_string())
        },
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("stdout cannot be written"), "{stderr}");
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("result.json")).unwrap())
            .unwrap();
    assert_eq!(result["outcome"], "cancelled");
    let skipped = result["skipped_operations"].as_array().unwrap().len();
    assert!(skipped > 30, "cancelled early: {skipped} skipped");
}

/// A33-59 (issue 43): the record keeps every drop — three identical
/// requests refused are three entries in the result's `dropped_spawns`
/// and three rows in the checkpoint's ledger; only views fold them (the
/// report says ×3).
#[test]
fn rule_a33_59_identical_drops_are_each_in_the_result_and_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let play = write_play(
        dir.path(),
        "drops.toml",
        include_str!("../plays/identical_drops.toml"),
    );
    let out = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg(&play)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run").join(f)).unwrap())
            .unwrap()
    };
    let result = read("result.json");
    let dropped = result["dropped_spawns"].as_array().unwrap();
    assert_eq!(dropped.len(), 3, "{dropped:#?}");
    assert!(dropped.iter().all(|d| d.get("count").is_none()));
    let cp = read("checkpoint.json");
    let rows = cp["state"]["ledger"].as_array().unwrap();
    assert_eq!(
        rows.iter().filter(|r| r["outcome"] == "dropped").count(),
        3,
        "{rows:#?}"
    );
    // The report, a view, folds them.
    let report = common::playdeck()
        .arg("report")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("×3"), "{text}");
}

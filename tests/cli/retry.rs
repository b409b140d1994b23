//! A retry across processes: a run killed while an operation waits for
//! its retry resumes with the next attempt. The retry policy in the kernel
//! is the fast tier's `retry`.

use crate::common;

use std::time::Duration;

use serde_json::{Value, json};

/// A run killed while an operation waits for its retry, then resumed: the
/// operation starts its next attempt at once (the wait is not kept across
/// processes) and the run ends as it would have.
#[test]
fn a_run_killed_while_a_retry_waits_resumes_with_the_next_attempt() {
    use std::process::Stdio;
    let base = tempfile::tempdir().unwrap();
    let play = base.path().join("play.toml");
    std::fs::write(&play, include_str!("../plays/rate_limited_once.toml")).unwrap();
    let dir = base.path().join("run");
    let (err, err_path) = common::stderr_file(base.path(), "first.stderr");
    let mut first = common::playdeck()
        .args(["run", "--headless", "--run-dir"])
        .arg(&dir)
        .arg(&play)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let log = dir.join("events.jsonl");
    common::wait_for("a retry to be scheduled", Duration::from_secs(60), || {
        let log = common::event_types(&dir);
        if log.iter().any(|t| t == "retry_scheduled") {
            return Ok(());
        }
        let said = format!(
            "the log: {log:?}\nstderr:\n{}",
            common::tail_of(&err_path, 30)
        );
        match first.try_wait().unwrap() {
            Some(st) => panic!("the run ended ({st}) before a retry was scheduled; {said}"),
            None => Err(said),
        }
    });
    first.kill().unwrap();
    first.wait().unwrap();
    let out = common::playdeck()
        .args(["resume", "--headless"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let waits: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "retry_scheduled")
        .collect();
    assert_eq!(waits.len(), 1);
    assert_eq!(
        (
            &waits[0]["category"],
            &waits[0]["wait_ms"],
            &waits[0]["next"]
        ),
        (&json!("rate_limit"), &json!(600000), &json!(2))
    );
    let starts: Vec<&Value> = events.iter().filter(|e| e["type"] == "started").collect();
    assert_eq!(starts.last().unwrap()["attempt"], 2);
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["outcome"], "succeeded");
}

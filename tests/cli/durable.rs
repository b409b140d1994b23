//! Durable runs: tests/plays/crash.toml killed (SIGKILL, through the
//! PLAYDECK_FAULT_KILL_AFTER fault hook) after the N-th event for 50
//! deterministic N, resumed, and checked against an uninterrupted run; and
//! damaged checkpoints and logs refused with a clear error. The play keeps
//! its events apart in time, so an uninterrupted run always ends the same.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;

const SPEED: &str = "8";
/// How every run and resume here is driven.
const HEADLESS: [&str; 5] = ["--headless", "--approve", "all", "--speed", SPEED];

fn play() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plays/crash.toml")
}

fn run_play(dir: &Path, kill_after: Option<usize>) -> Output {
    let mut c = common::playdeck();
    c.arg("run")
        .arg(play())
        .args(HEADLESS)
        .arg("--run-dir")
        .arg(dir);
    if let Some(n) = kill_after {
        c.env("PLAYDECK_FAULT_KILL_AFTER", n.to_string());
    }
    c.output().unwrap()
}

/// `playdeck resume DIR` headless, approving everything, at the tests' speed;
/// callers add what else they need.
fn resume_cmd(dir: &Path) -> Command {
    let mut c = common::playdeck();
    c.arg("resume").args(HEADLESS).arg(dir);
    c
}

fn resume(dir: &Path) -> Output {
    resume_cmd(dir).arg("--play").arg(play()).output().unwrap()
}

fn resume_killed(dir: &Path, after: usize) -> Output {
    resume_cmd(dir)
        .arg("--play")
        .arg(play())
        .env("PLAYDECK_FAULT_KILL_AFTER", after.to_string())
        .output()
        .unwrap()
}

/// Every line of the log; a line that does not parse fails the test.
fn events(dir: &Path) -> Vec<Value> {
    playdeck::store::whole_text(&dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("events.jsonl:{}: {e}: {l}", i + 1))
        })
        .collect()
}

/// The log of a killed process: its last line may be cut.
fn events_cut(dir: &Path) -> Vec<Value> {
    playdeck::store::whole_text(&dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The result envelope with ids replaced by names and timings left out.
fn outcome(dir: &Path) -> Value {
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    let names = r["operation_names"].as_object().unwrap().clone();
    let name = |id: &Value| names[id.as_str().unwrap()].clone();
    let list = |k: &str| {
        let mut v: Vec<String> = r[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| name(i).as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let results: BTreeMap<String, Value> = r["operation_results"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, v)| (names[id].as_str().unwrap().to_string(), v.clone()))
        .collect();
    let mut dropped: Vec<(String, String)> = r["dropped_spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["reason"].to_string(), d["assignee"].to_string()))
        .collect();
    dropped.sort();
    serde_json::json!({
        "outcome": r["outcome"],
        "completed": list("completed_operations"),
        "failed": list("failed_operations"),
        "skipped": list("skipped_operations"),
        "escalated": list("escalated_operations"),
        "results": results,
        "spawned": r["spawned_operations"],
        "dropped": dropped,
        "context": r["final_context"],
    })
}

/// Names whose terminal signal is in `evs`, with their results.
fn terminal(evs: &[Value]) -> HashMap<String, Value> {
    evs.iter()
        .filter(|e| ["completed", "escalated"].contains(&e["type"].as_str().unwrap()))
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["result"].clone()))
        .collect()
}

#[test]
fn killed_at_fifty_moments_and_resumed_the_run_ends_as_if_never_stopped() {
    let base = tempfile::tempdir().unwrap();
    let clean = base.path().join("clean");
    let out = run_play(&clean, None);
    assert_eq!(out.status.code(), Some(1), "one operation fails");
    let want = outcome(&clean);
    let total = events(&clean).len();
    let want_budget = last_budget(&events(&clean));
    // Five at a time: the processes mostly wait on play time.
    let seeds: Vec<usize> = (0..50).collect();
    std::thread::scope(|s| {
        for chunk in seeds.chunks(10) {
            let (base, want, want_budget) = (base.path(), &want, &want_budget);
            s.spawn(move || {
                for &seed in chunk {
                    // Spread over the whole run, the same moments every time.
                    let n = 1 + (seed * 37 + seed * seed) % total;
                    crash_and_resume(base, seed, n, want, want_budget);
                }
            });
        }
    });
}

fn last_budget(evs: &[Value]) -> Value {
    evs.iter()
        .rev()
        .find(|e| e["type"] == "budget")
        .cloned()
        .unwrap()
}

/// Issue 45: the checkpoint a resume writes at once (and every one after)
/// covers the log as it stood: its mark is the length and CRC-32 of the
/// log's lines up to the checkpoint's seq, so the next resume checks them
/// by their hash rather than reading them line by line.
fn mark_covers_the_log(dir: &Path, seed: usize) {
    let cp: Value =
        serde_json::from_slice(&std::fs::read(dir.join("checkpoint.json")).unwrap()).unwrap();
    let log = std::fs::read(dir.join("events.jsonl")).unwrap();
    let bytes = cp["log"]["bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("seed {seed}: no log mark in {}", cp["log"]))
        as usize;
    assert_eq!(
        cp["log"]["crc32"].as_u64(),
        Some(u64::from(crc32fast::hash(&log[..bytes.min(log.len())]))),
        "seed {seed}"
    );
    if cp["state"]["seq"] == 0 {
        assert_eq!(bytes, 0, "seed {seed}: nothing folded, nothing covered");
        return;
    }
    assert!(
        bytes <= log.len() && log[bytes - 1] == b'\n',
        "seed {seed}: the mark's {bytes} bytes do not end a line of the log"
    );
    let last = std::str::from_utf8(&log[..bytes])
        .unwrap()
        .lines()
        .last()
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["seq"], cp["state"]["seq"], "seed {seed}");
}

fn crash_and_resume(base: &Path, seed: usize, n: usize, want: &Value, want_budget: &Value) {
    let dir = base.join(format!("crash-{seed}"));
    let first = run_play(&dir, Some(n));
    let killed = first.status.code().is_none();
    let before = events_cut(&dir);
    if killed {
        // Every fifth seed crashes the resumed process too.
        if seed.is_multiple_of(5) {
            let second = resume_killed(&dir, 3 + seed % 17);
            assert!(
                second.status.code().is_none() || second.status.code() == Some(1),
                "seed {seed}: {}",
                String::from_utf8_lossy(&second.stderr)
            );
            mark_covers_the_log(&dir, seed);
        }
        let r = resume(&dir);
        let code = r.status.code();
        // A second crash after the end left nothing to do but the result.
        assert!(
            code == Some(1) || (seed.is_multiple_of(5) && dir.join("result.json").exists()),
            "seed {seed} (killed after {n} events): resume failed: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        mark_covers_the_log(&dir, seed);
    }
    let after = events(&dir);
    // The same end as an uninterrupted run, modulo ids and timings.
    assert_eq!(&outcome(&dir), want, "seed {seed}, killed after event {n}");
    // No completed result lost or changed.
    let done_before = terminal(&before);
    let done_after = terminal(&after);
    for (name, result) in &done_before {
        assert_eq!(done_after.get(name), Some(result), "seed {seed}: {name}");
    }
    // No terminal operation run again: nothing starts after it settled,
    // and it settles once.
    let mut settled: HashMap<String, usize> = HashMap::new();
    for e in &after {
        let ty = e["type"].as_str().unwrap();
        let Some(name) = e["name"].as_str() else {
            continue;
        };
        if ["completed", "escalated", "failed", "skipped"].contains(&ty) {
            *settled.entry(name.to_string()).or_default() += 1;
        }
        if ty == "started" {
            assert!(
                !settled.contains_key(name),
                "seed {seed}: {name} started after it settled"
            );
        }
    }
    assert!(
        settled.values().all(|&c| c == 1),
        "seed {seed}: settled twice: {settled:?}"
    );
    // No budget charged twice, no reservation leaked.
    let b = last_budget(&after);
    assert_eq!(
        b["consumed_new_roles"], want_budget["consumed_new_roles"],
        "seed {seed}"
    );
    assert_eq!(
        b["spawns_accepted"], want_budget["spawns_accepted"],
        "seed {seed}"
    );
    assert_eq!(b["reserved_roles"], serde_json::json!([]), "seed {seed}");
    // The log goes on: numbered without gaps, a `resumed` per crash.
    let seqs: Vec<u64> = after.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seed {seed}: seq gap"
    );
    if killed && after.len() > before.len() {
        let resumed = after.iter().find(|e| e["type"] == "resumed");
        let resumed = resumed.unwrap_or_else(|| panic!("seed {seed}: no resumed signal"));
        // What was running starts a new, numbered attempt.
        for name in resumed["reattempted"].as_array().unwrap() {
            let again = after.iter().find(|e| {
                e["type"] == "started"
                    && e["name"] == *name
                    && e["seq"].as_u64() > resumed["seq"].as_u64()
            });
            let e = again.unwrap_or_else(|| panic!("seed {seed}: {name} never started again"));
            assert!(e["attempt"].as_u64().unwrap() >= 2, "seed {seed}: {e}");
        }
    }
}

#[test]
fn resume_refuses_a_changed_play_and_new_run_starts_over() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    assert!(run_play(&dir, Some(20)).status.code().is_none());
    let changed = base.path().join("changed.toml");
    let text = std::fs::read_to_string(play()).unwrap();
    std::fs::write(
        &changed,
        text.replace("max_spawn = 3", "max_spawn = 4")
            .replace("max_new_roles = 1", "max_new_roles = 2"),
    )
    .unwrap();
    let r = resume_cmd(&dir)
        .arg("--play")
        .arg(&changed)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("max_spawn was 3, now 4"), "{err}");
    assert!(
        err.contains("\"max_new_roles\":1") && err.contains("\"max_new_roles\":2"),
        "{err}"
    );
    assert!(err.contains("--new-run"), "{err}");
    let log = std::fs::read(dir.join("events.jsonl")).unwrap();
    // --new-run leaves the stopped run alone and starts the play over.
    let r = resume_cmd(&dir)
        .current_dir(base.path())
        .args(["--new-run", "--play"])
        .arg(&changed)
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(std::fs::read(dir.join("events.jsonl")).unwrap(), log);
    assert!(base.path().join(".playdeck/runs").is_dir());
}

#[test]
fn a_damaged_checkpoint_or_log_is_refused_by_name() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    let first = run_play(&dir, Some(30));
    assert!(first.status.code().is_none(), "killed");
    let cp = dir.join("checkpoint.json");
    let good = std::fs::read(&cp).unwrap();
    let log_before = std::fs::read(dir.join("events.jsonl")).unwrap();

    // Cut short.
    std::fs::write(&cp, &good[..good.len() / 2]).unwrap();
    let r = resume(&dir);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("checkpoint.json") && err.contains("damaged"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("events.jsonl")).unwrap(),
        log_before,
        "nothing written"
    );
    assert!(!dir.join("result.json").exists());

    // Corrupted.
    let mut bad = good.clone();
    bad[10] = b'#';
    std::fs::write(&cp, &bad).unwrap();
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("checkpoint.json"));

    // Missing: no silent fresh start.
    std::fs::remove_file(&cp).unwrap();
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no checkpoint.json"));

    // A damaged line in the middle of the log.
    std::fs::write(&cp, &good).unwrap();
    let mut lines: Vec<String> = String::from_utf8(log_before.clone())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines[3] = "{\"v\":1,\"seq\":".into();
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    let r = resume(&dir);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("events.jsonl:4:"), "{err}");

    // Put right, it resumes and finishes.
    std::fs::write(dir.join("events.jsonl"), &log_before).unwrap();
    assert_eq!(resume(&dir).status.code(), Some(1));
    // Finished and reported: nothing more to resume.
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("already finished"));
}

/// A finished run of the crash play whose `integration` failed once (it
/// passes when retried), in `base/run`.
fn flaky_failed_run(base: &Path) -> std::path::PathBuf {
    let flaky = base.join("flaky.toml");
    let text = std::fs::read_to_string(play()).unwrap().replace(
        "outcome = \"fail\", error = \"2 tests failed\"",
        "outcome = \"fail\", error = \"2 tests failed\", fail_attempts = 1",
    );
    std::fs::write(&flaky, text).unwrap();
    let dir = base.join("run");
    let out = common::playdeck()
        .arg("run")
        .arg(&flaky)
        .args(HEADLESS)
        .arg("--run-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    dir
}

#[test]
fn a_finished_run_is_taken_up_again_to_retry_what_failed() {
    let base = tempfile::tempdir().unwrap();
    let dir = flaky_failed_run(base.path());
    let before = outcome(&dir);
    assert_eq!(before["failed"], serde_json::json!(["integration"]));
    assert_eq!(before["skipped"], serde_json::json!(["hold", "load"]));
    // Not failed: refused, with what is allowed.
    let r = common::playdeck()
        .args(["resume", "--headless", "--retry", "build"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr)
            .contains("only a failed or denied operation can be retried")
    );
    let r = resume_cmd(&dir)
        .args(["--retry", "integration"])
        .output()
        .unwrap();
    // The review still escalates, so the run still ends failed (exit 1).
    assert_eq!(
        r.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let after = outcome(&dir);
    assert_eq!(after["failed"], serde_json::json!([]));
    assert_eq!(
        after["skipped"],
        serde_json::json!(["hold"]),
        "load ran after the retry"
    );
    let evs = events(&dir);
    // The resume announces what it opens again, so views stop counting
    // it failed or skipped at once (the retried one, then what it skipped).
    let reopened: Vec<(String, Value)> = evs
        .iter()
        .skip_while(|e| e["type"] != "resumed")
        .filter(|e| e["type"] == "retried")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["because"].clone(),
            )
        })
        .collect();
    assert_eq!(reopened[0], ("integration".into(), Value::Null));
    assert!(
        reopened
            .iter()
            .any(|(n, b)| n == "load" && b == "integration"),
        "{reopened:?}"
    );
    let started: Vec<u64> = evs
        .iter()
        .filter(|e| e["type"] == "started" && e["name"] == "integration")
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(started, [1, 2]);
    // Each attempt's outcome is kept in the checkpoint.
    let cp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checkpoint.json")).unwrap())
            .unwrap();
    let node = cp["state"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["op"]["reference_id"] == "integration")
        .unwrap();
    let outcomes: Vec<&str> = node["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["failed", "succeeded"]);
}

#[test]
fn the_report_tells_what_the_run_did() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    assert_eq!(run_play(&dir, None).status.code(), Some(1));
    let out = common::playdeck()
        .args(["report", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["outcome"], "failed");
    assert_eq!(r["play"], "crash");
    let path: Vec<&str> = r["critical_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        path,
        [
            "plan",
            "build",
            "test",
            "integration",
            "recover",
            "review",
            "ship"
        ]
    );
    assert_eq!(r["operations"].as_array().unwrap().len(), 12);
    assert_eq!(r["approvals"][0]["name"], "ship");
    assert_eq!(r["approvals"][0]["by"], "policy");
    let reasons: Vec<&String> = r["dropped_spawns"].as_object().unwrap().keys().collect();
    assert_eq!(
        reasons,
        [
            "duplicate",
            "max_spawn_exceeded",
            "palette_budget_exhausted",
            "unknown_catalog_role"
        ]
    );
    assert_eq!(r["expansions"][0]["role"], "performance_engineer");
    assert_eq!(r["expansions"][0]["by"], "plan");
    assert_eq!(r["rejections"].as_array().unwrap().len(), 2);
    let coder = &r["instances"][0];
    assert!(coder["busy_secs"].as_f64().unwrap() > 0.0);
    assert_eq!(coder["operations"][0], "build");
    assert_eq!(r["lanes"]["skipped"], 2);

    let md = common::playdeck()
        .args(["report", "--out"])
        .arg(dir.join("r.md"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(md.status.success());
    let md = std::fs::read_to_string(dir.join("r.md")).unwrap();
    for h in [
        "# Run run — crash",
        "## Critical path",
        "| integration | tester | failed (2 tests failed)",
        "### max_spawn_exceeded (1)",
        "- ship **approved** by policy",
        "expanded **performance_engineer**",
        "## Capacity",
    ] {
        assert!(md.contains(h), "{h} missing from\n{md}");
    }
}

#[test]
fn resume_keeps_a_paused_run_paused_and_refuses_a_live_one() {
    use std::io::Write;
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    // Paused from the start; killed (SIGKILL) once the log shows it paused.
    let (first_err, first_err_path) = common::stderr_file(base.path(), "first.stderr");
    let mut first = common::playdeck()
        .arg("run")
        .arg(play())
        .args(["--headless", "--paused", "--speed", SPEED, "--run-dir"])
        .arg(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(first_err)
        .spawn()
        .unwrap();
    common::wait_for(
        "the run to pause",
        std::time::Duration::from_secs(60),
        || {
            let log = common::event_types(&dir);
            match log.iter().any(|t| t == "run_paused") {
                true => Ok(()),
                false => Err(format!(
                    "the log: {log:?}\nstderr:\n{}",
                    common::tail_of(&first_err_path, 30)
                )),
            }
        },
    );
    first.kill().unwrap();
    first.wait().unwrap();
    // Resumed, it is still paused: nothing starts until `resume` on stdin.
    let (err, err_path) = common::stderr_file(base.path(), "resumed.stderr");
    let mut child = resume_cmd(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let sock = dir.join("ctl/control.sock");
    common::wait_run_listening(&sock, &mut child, Some(&err_path));
    // A second process may not take up the same run.
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!(
            "is being run by another process (pid {}, playdeck resume",
            child.id()
        )),
        "{err}"
    );
    // The resume's log says it is paused again; nothing has started.
    let evs = common::wait_for(
        "the run paused again after the resume",
        std::time::Duration::from_secs(20),
        || {
            let evs = events_cut(&dir);
            let again = evs
                .iter()
                .skip_while(|e| e["type"] != "resumed")
                .any(|e| e["type"] == "run_paused");
            match again {
                true => Ok(evs),
                false => Err(format!(
                    "the log: {:?}\nstderr:\n{}",
                    common::event_types(&dir),
                    common::tail_of(&err_path, 30)
                )),
            }
        },
    );
    let resumed = evs.iter().position(|e| e["type"] == "resumed").unwrap();
    assert!(
        !evs[resumed..].iter().any(|e| e["type"] == "started"),
        "nothing starts while paused: {:?}",
        common::event_types(&dir)
    );
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "resume").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{}", common::tail_of(&err_path, 30));
    assert_eq!(outcome(&dir)["outcome"], "failed");
}

#[test]
fn a_cut_last_line_is_repaired_and_a_damaged_capacity_file_refused() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    assert!(run_play(&dir, Some(25)).status.code().is_none());
    let log = dir.join("events.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    let whole = bytes.clone();
    bytes.extend_from_slice(b"{\"v\":1,\"seq\":9999,\"elap");
    std::fs::write(&log, &bytes).unwrap();

    // A damaged capacity file: refused, nothing changed.
    let cap = dir.join("capacity.json");
    let good_cap = std::fs::read(&cap).unwrap();
    std::fs::write(&cap, b"{\"schema_version\": 1,").unwrap();
    let r = resume(&dir);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("capacity.json") && err.contains("damaged"),
        "{err}"
    );
    assert_eq!(std::fs::read(&log).unwrap(), bytes, "the log is untouched");

    std::fs::write(&cap, &good_cap).unwrap();
    assert_eq!(resume(&dir).status.code(), Some(1));
    // The cut line is gone and the log reads whole again, for every reader.
    let after = std::fs::read(&log).unwrap();
    assert!(after.starts_with(&whole));
    events(&dir);
    let report = common::playdeck().arg("report").arg(&dir).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
}

/// Issue 11: a log that disagrees with its checkpoint — a line removed,
/// repeated or moved, a log cut short of what the checkpoint covers, an
/// emptied log — is refused with file:line and what is wrong, and nothing
/// is changed.
#[test]
fn a_log_out_of_step_with_its_checkpoint_is_refused_by_line() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    let out = run_play(&dir, None);
    assert!(out.status.code().is_some());
    // Died before writing its result: resume would finish the bookkeeping.
    std::fs::remove_file(dir.join("result.json")).unwrap();
    // Changed as whole lines (each names its operation, so any one can be
    // moved), put back as written.
    let raw = std::fs::read(dir.join("events.jsonl")).unwrap();
    let log = playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let n = lines.len();
    let cp = std::fs::read(dir.join("checkpoint.json")).unwrap();
    let with = |ls: Vec<&str>| {
        let mut t = ls.join("\n");
        if !t.is_empty() {
            t.push('\n');
        }
        t
    };
    let mut removed = lines.clone();
    removed.remove(9);
    let mut repeated = lines.clone();
    repeated.insert(10, lines[9]);
    let mut swapped = lines.clone();
    swapped.swap(9, 10);
    let cut = lines[..n - 5].to_vec();
    let cases: Vec<(&str, String, String)> = vec![
        (
            "removed",
            with(removed),
            "events.jsonl:10: event 11 should be event 10".into(),
        ),
        (
            "repeated",
            with(repeated),
            "events.jsonl:11: event 10 is a repeat".into(),
        ),
        (
            "swapped",
            with(swapped),
            "events.jsonl:10: event 11 should be event 10".into(),
        ),
        (
            "cut short",
            with(cut),
            format!("ends at event {} but", n - 5),
        ),
        ("emptied", String::new(), "ends at event 0 but".into()),
    ];
    for (what, text, want) in cases {
        std::fs::write(dir.join("events.jsonl"), &text).unwrap();
        let r = resume(&dir);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(&want), "{what}: {err}");
        assert!(err.contains("nothing was changed"), "{what}: {err}");
        assert_eq!(
            playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap(),
            text,
            "{what}: the log is untouched"
        );
        assert_eq!(
            std::fs::read(dir.join("checkpoint.json")).unwrap(),
            cp,
            "{what}"
        );
        assert!(!dir.join("result.json").exists(), "{what}");
    }
    // Put back whole, it resumes (and only finishes the bookkeeping).
    std::fs::write(dir.join("events.jsonl"), &raw).unwrap();
    let r = resume(&dir);
    assert!(
        r.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(dir.join("result.json").exists());
}

/// Issue 11: two processes never drive one run. Two resumes of a crashed
/// run race: one takes it, the other is refused naming the owner; and a
/// live run whose control socket is gone still cannot be resumed beside
/// itself.
#[test]
fn two_processes_never_drive_one_run() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    let first = run_play(&dir, Some(30));
    assert!(first.status.code().is_none(), "killed");
    let start = || {
        resume_cmd(&dir)
            .arg("--paused")
            .arg("--play")
            .arg(play())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (start(), start());
    // One of them is refused at once (exit 2); the other stays, paused.
    let (a_ended, ended) = common::wait_for(
        "one of them refused",
        std::time::Duration::from_secs(20),
        || {
            if let Some(s) = a.try_wait().unwrap() {
                return Ok((true, s));
            }
            if let Some(s) = b.try_wait().unwrap() {
                return Ok((false, s));
            }
            Err("both still run".into())
        },
    );
    let (mut loser, mut owner) = match a_ended {
        true => ((a, ended), b),
        false => ((b, ended), a),
    };
    assert_eq!(loser.1.code(), Some(2));
    let mut err = String::new();
    std::io::Read::read_to_string(loser.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains(&format!(
            "is being run by another process (pid {}, playdeck resume",
            owner.id()
        )),
        "{err}"
    );
    // The lock file is deleted (a cleanup script, an operator who takes
    // it for a stale lock): still refused, the owner still named (issue 28).
    std::fs::remove_file(dir.join("lock")).unwrap();
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!("(pid {}, playdeck resume", owner.id())),
        "{err}"
    );
    // The socket breaks (removed); a third process is still refused.
    let sock = dir.join("ctl/control.sock");
    common::wait_for(
        "the owner's socket",
        std::time::Duration::from_secs(60),
        || match sock.exists() {
            true => Ok(()),
            false => Err(format!("no {}", sock.display())),
        },
    );
    std::fs::remove_file(&sock).unwrap();
    let r = resume(&dir);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("being run by another process"));
    // The owner finishes; the log has every event once.
    drop(owner.stdin.take());
    let _ = owner.kill();
    let _ = owner.wait();
    let seqs: Vec<u64> = events_cut(&dir)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let _ = loser.0.wait();
}

/// Issue 28: damage that resume used to pass. A line the checkpoint covers
/// with a good prefix and garbage after it; a checkpoint whose operations
/// were emptied; a log emptied before the first checkpoint of substance.
/// Each is refused with the file (and line), and nothing is run again.
#[test]
fn damage_under_the_checkpoint_and_an_emptied_record_are_refused() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    let out = run_play(&dir, None);
    assert!(out.status.code().is_some());
    std::fs::remove_file(dir.join("result.json")).unwrap();
    let raw = std::fs::read(dir.join("events.jsonl")).unwrap();
    let log = playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap();
    let cp_text = std::fs::read_to_string(dir.join("checkpoint.json")).unwrap();
    let refused = |what: &str, want: &str| {
        let r = resume(&dir);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
        assert!(err.contains("nothing was changed"), "{what}: {err}");
    };
    // Garbage after a good prefix, in a line the checkpoint covers.
    let mut lines: Vec<String> = log.lines().map(str::to_string).collect();
    let good = lines[4].clone();
    let prefix_end = good.find(",\"elapsed\"").unwrap();
    lines[4] = format!("{} garbage \u{1} here", &good[..prefix_end + 1]);
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    refused("garbage after the prefix", "events.jsonl:5:");
    std::fs::write(dir.join("events.jsonl"), &raw).unwrap();
    // The checkpoint's operations emptied.
    let mut cp: serde_json::Value = serde_json::from_str(&cp_text).unwrap();
    let state = cp.get_mut("state").unwrap();
    state["nodes"] = serde_json::json!([]);
    std::fs::write(dir.join("checkpoint.json"), cp.to_string()).unwrap();
    refused(
        "emptied operations",
        "the checkpoint lists 0 operations, the run started with",
    );
    std::fs::write(dir.join("checkpoint.json"), &cp_text).unwrap();
    // The log emptied and the checkpoint from before anything happened,
    // while an attempt's log shows work ran.
    let mut cp: serde_json::Value = serde_json::from_str(&cp_text).unwrap();
    cp["state"]["seq"] = serde_json::json!(0);
    std::fs::write(dir.join("checkpoint.json"), cp.to_string()).unwrap();
    std::fs::write(dir.join("events.jsonl"), "").unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("logs/build.1.stdout.log"), "done\n").unwrap();
    refused("an emptied log", "the event log holds no event, but");
    assert_eq!(
        playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap(),
        ""
    );
}

/// Issue 28: a run directory its owner can no longer write (here: made
/// read-only) is named in the refusal: the file that could not be written,
/// not a temporary one beside it. Needs root to act as an ordinary user,
/// whom the directory's mode binds (CI is root).
#[test]
fn an_unwritable_run_directory_is_named_at_the_end() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: acting as an ordinary user needs root");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = base.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let nobody = rustix::process::Uid::from_raw(65534);
    let nogroup = rustix::process::Gid::from_raw(65534);
    rustix::fs::chown(&work, Some(nobody), Some(nogroup)).unwrap();
    let dir = work.join("run");
    // Where another user can read and run them.
    let (_keep, anyones) = common::binary_for_anyone();
    let crash = work.join("crash.toml");
    std::fs::copy(play(), &crash).unwrap();
    let as_nobody = |c: &mut Command| {
        c.uid(65534)
            .gid(65534)
            .current_dir(&work)
            .env("HOME", &work)
            .env("PLAYDECK_CONFIG_DIR", work.join("config"));
    };
    let mut first = Command::new(&anyones);
    first
        .arg("run")
        .arg(&crash)
        .args(HEADLESS)
        .arg("--run-dir")
        .arg(&dir)
        .env("PLAYDECK_FAULT_KILL_AFTER", "30");
    as_nobody(&mut first);
    let out = first.output().unwrap();
    assert!(out.status.code().is_none(), "killed: {out:?}");
    // Its files stay writable; the directory does not.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let mut again = Command::new(&anyones);
    again
        .arg("resume")
        .args(HEADLESS)
        .arg(&dir)
        .arg("--play")
        .arg(&crash)
        .env_remove("PLAYDECK_FAULT_KILL_AFTER");
    as_nobody(&mut again);
    let before = std::fs::read(dir.join("events.jsonl")).unwrap();
    let out = again.output().unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write {}:",
            dir.join("checkpoint.json").display()
        )),
        "{err}"
    );
    assert!(
        !err.contains("at path"),
        "the file meant, not a temporary one: {err}"
    );
    assert_eq!(
        std::fs::read(dir.join("events.jsonl")).unwrap(),
        before,
        "nothing lost"
    );
}

/// Issue 42: `resume --retry-failed` retries every failure (`--filter`
/// narrows it by name or role); a filter that matches none starts
/// nothing and says so.
#[test]
fn retry_failed_retries_every_failure_and_a_filter_narrows_it() {
    let base = tempfile::tempdir().unwrap();
    let dir = flaky_failed_run(base.path());
    assert_eq!(outcome(&dir)["failed"], serde_json::json!(["integration"]));
    let log = playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap();
    // A filter that matches no failure: nothing starts, nothing is written.
    let r = resume_cmd(&dir)
        .args(["--retry-failed", "--filter", "deploy"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has no failed operation matching \"deploy\"; nothing was started"),
        "{err}"
    );
    assert_eq!(
        playdeck::store::whole_text(&dir.join("events.jsonl")).unwrap(),
        log
    );
    // --filter alone is refused by the parser.
    let r = resume_cmd(&dir).args(["--filter", "x"]).output().unwrap();
    assert_eq!(r.status.code(), Some(2));
    let r = resume_cmd(&dir)
        .args(["--retry-failed", "--filter", "INTEG"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("retrying 1 failed: integration"), "{err}");
    let after = outcome(&dir);
    assert_eq!(after["failed"], serde_json::json!([]), "{err}");
}

/// Issue 42: a run id resolves from any directory through the user's
/// index of runs; `latest` away from any play's folder is the user's
/// latest run; an id nobody recorded is still "no run".
#[test]
fn a_run_id_resolves_from_any_directory() {
    let state = tempfile::tempdir().unwrap();
    let here = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        here.path().join("p.toml"),
        include_str!("../plays/one_quick_op.toml"),
    )
    .unwrap();
    let out = common::playdeck()
        .env("XDG_STATE_HOME", state.path())
        .args(["run", "p.toml"])
        .args(HEADLESS)
        .current_dir(here.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let runs = here.path().join(".playdeck/runs");
    let id = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    let entry = std::fs::read_to_string(state.path().join("playdeck/runs").join(&id)).unwrap();
    assert_eq!(
        entry.trim(),
        runs.join(&id).display().to_string(),
        "the index says where"
    );
    for which in [id.as_str(), "latest"] {
        let r = common::playdeck()
            .env("XDG_STATE_HOME", state.path())
            .args(["report", which, "--format", "json"])
            .current_dir(elsewhere.path())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&r.stdout);
        assert!(r.status.success(), "{which}: {r:?}");
        assert!(out.contains(&id), "{which}: {out}");
    }
    // A run named by its directory sorts after the ids by name; latest is
    // by when each began, as in a runs directory.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = common::playdeck()
        .env("XDG_STATE_HOME", state.path())
        .args(["run", "p.toml", "--run-dir", "zzz-named"])
        .args(HEADLESS)
        .current_dir(here.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = common::playdeck()
        .env("XDG_STATE_HOME", state.path())
        .args(["run", "p.toml"])
        .args(HEADLESS)
        .current_dir(here.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let newest = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| *n != id)
        .max()
        .unwrap();
    let r = common::playdeck()
        .env("XDG_STATE_HOME", state.path())
        .args(["report", "latest", "--format", "json"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&r.stdout).contains(&newest),
        "{r:?}"
    );
    // Another user's index is not consulted: without it, the id is unknown
    // away from its folder.
    let r = common::playdeck()
        .env("XDG_STATE_HOME", elsewhere.path())
        .args(["report", &id])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains(&format!("no run {id:?}")));
}

/// Issue 56: a large run killed while it still queues, resumed, and the
/// resume killed in turn, stays resumable: the operations it had not
/// queued yet are listed in the checkpoint and in no lane, and that is no
/// disagreement. Every operation runs once, and the run succeeds.
#[test]
fn two_kills_while_a_large_run_queues_leave_it_resumable() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let mut play = String::from(
        "[play]\nname = \"wide\"\nmax_concurrent = 10000\n[palette]\nroles = [{ role = \"implementer\" }]\n",
    );
    for i in 0..20_000 {
        play.push_str(&format!(
            "[[operations]]\nid = \"op{i}\"\nrole = \"implementer\"\ninstruction = \"w\"\nagent = \"noop\"\nindependent_root = true\n"
        ));
    }
    std::fs::write(d.join("p.toml"), play).unwrap();
    let run = d.join("run");
    let mut first = common::playdeck();
    first
        .args(["run", "p.toml", "--headless", "--run-dir", "run"])
        .current_dir(d)
        .env("PLAYDECK_FAULT_KILL_AFTER", "12000");
    assert_eq!(first.output().unwrap().status.code(), None, "killed");
    let queued = events_cut(&run)
        .iter()
        .filter(|e| e["type"] == "queued")
        .count();
    assert!(
        queued > 0 && queued < 20_000,
        "killed while queueing: {queued}"
    );
    let killed = common::playdeck()
        .args(["resume", "--headless"])
        .arg(&run)
        .env("PLAYDECK_FAULT_KILL_AFTER", "10")
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "the resume killed too");
    let out = common::playdeck()
        .args(["resume", "--headless"])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = events(&run);
    let completed: std::collections::HashSet<&str> = evs
        .iter()
        .filter(|e| e["type"] == "completed")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(completed.len(), 20_000);
    assert_eq!(
        evs.iter().filter(|e| e["type"] == "completed").count(),
        20_000,
        "nothing ran twice"
    );
}

//! Issue 20: every command that prints ends quietly when its reader has
//! gone (`playdeck report RUN | head -1`), as `ls | head` does: no panic,
//! no message, exit 0 (a headless run says its output was not all read
//! with exit 1, as it did before).

use crate::common;

use std::path::Path;
use std::process::{Output, Stdio};

/// Runs `args` in `dir` with standard output a pipe whose reading end is
/// already closed: the first write meets EPIPE.
fn into_closed_pipe(dir: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    common::playdeck()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(writer)
        .output()
        .unwrap()
}

/// Ended by `code` without a panic; a command that only prints says
/// nothing at all.
fn quiet(out: &Output, what: &str, code: i32) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
}

fn silent(out: &Output, what: &str) {
    quiet(out, what, 0);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{what}");
}

const PLAY: &str = include_str!("../../examples/plays/small.toml");

/// A finished run of the small play in `dir` (`.playdeck/runs/r1`).
fn finished_run(dir: &Path) {
    std::fs::write(dir.join("p.toml"), PLAY).unwrap();
    let out = common::playdeck()
        .args([
            "run",
            "--headless",
            "--approve",
            "all",
            "--run-dir",
            ".playdeck/runs/r1",
            "p.toml",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn commands_that_print_end_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    finished_run(d);
    let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/plays/agents.toml");
    for args in [
        &["report", "r1"][..],
        &["report", "r1", "--format", "json"],
        &["catalog"],
        &["catalog", "--json"],
        &["validate", "p.toml"],
        &["palette", "p.toml"],
        &["palette", "p.toml", "--json"],
        &["prompt", "p.toml", "--op", "build"],
        &["argv", agents, "--op", "plan"],
        &["argv", agents, "--op", "plan", "--json"],
        &["demo", "--print"],
        // A finished run: the answer is an error, as JSON on stdout.
        &["ctl", "r1", "status", "--json"],
        &["capacity", "status", "--run", "r1", "--json"],
    ] {
        let out = into_closed_pipe(d, args);
        if args[0] == "argv" {
            // That play's load warnings are on stderr, as they should be.
            quiet(&out, &format!("{args:?}"), 0);
        } else {
            silent(&out, &format!("{args:?}"));
        }
    }
}

#[test]
fn a_live_runs_status_and_a_headless_run_end_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = common::live_headless_run(d);
    for args in [
        &["ctl", "live", "status"][..],
        &["ctl", "live", "status", "--json"],
        &["capacity", "status", "--run", "live", "--json"],
    ] {
        silent(&into_closed_pipe(d, args), &format!("{args:?}"));
    }
    let cancel = common::playdeck()
        .args(["ctl", "live", "cancel"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(cancel.status.success(), "{cancel:?}");
    let out = run.wait_with_output().unwrap();
    quiet(&out, "the cancelled run", 1);
    // A headless run whose reader has gone cancels itself (its agents are
    // ended and reaped), writes result.json and exits 1, without a panic.
    let out = into_closed_pipe(
        d,
        &[
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/gone",
            "slow.toml",
        ],
    );
    quiet(&out, "the headless run", 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stdout cannot be written"), "{err}");
    assert!(d.join(".playdeck/runs/gone/result.json").exists());
}

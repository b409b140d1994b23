//! `playdeck ctl` and `playdeck capacity` against a live headless run, then
//! against the same run once it has finished.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const PLAY: &str = include_str!("../plays/ctl_live_run.toml");

/// Runs a command; returns (exit code, stdout as JSON or text, stderr).
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = common::playdeck()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn scripts_drive_a_live_run_and_inspect_it_after() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.toml"), PLAY).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (err, err_path) = common::stderr_file(logs.path(), "run.stderr");
    let mut child = common::playdeck()
        .args([
            "run",
            "--headless",
            "--paused",
            "--run-dir",
            ".playdeck/runs/r1",
            "p.toml",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path));
    let mut until = |what: &str, pred: &dyn Fn(&Value) -> bool| {
        lines.until(what, Duration::from_secs(60), pred)
    };
    until("check paused", &|v| {
        v["type"] == "paused" && v["name"] == "check"
    });
    let d = dir.path();

    // The socket is the owner's only.
    let sock_dir = d.join(".playdeck/runs/r1/ctl");
    assert_eq!(
        std::fs::metadata(&sock_dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(sock_dir.join("control.sock"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    let (code, out, _) = run(d, &["ctl", ".playdeck/runs/r1", "status", "--json"]);
    assert_eq!(code, 0);
    let s = json(&out);
    assert_eq!(s["state"], "paused");
    assert_eq!(s["lanes"]["paused"], 2);

    // Ensure, and every kind of refusal.
    let (code, out, _) = run(
        d,
        &[
            "capacity",
            "ensure",
            "--run",
            "r1",
            "--profile",
            "checker",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let e = json(&out);
    assert_eq!(e["agents"].as_array().unwrap().len(), 1);
    assert_eq!(e["agents"][0]["source"], "created");
    // More than a profile allows: what fits is made, the rest rejected,
    // exit 1 (RPC-22).
    let (code, out, _) = run(
        d,
        &[
            "capacity",
            "ensure",
            "--run",
            "r1",
            "--profile",
            "coder=3",
            "--json",
        ],
    );
    assert_eq!(code, 1, "{out}");
    let e = json(&out);
    assert_eq!(e["status"], "partial");
    assert_eq!(e["agents"].as_array().unwrap().len(), 2);
    assert_eq!(e["rejected"][0]["reason"], "over_max_instances");
    let (code, out, _) = run(
        d,
        &["capacity", "ensure", "--run", "r1", "--profile", "coder=3"],
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("rejected: coder (over_max_instances): 2 of 3"),
        "{out}"
    );
    // Input mistakes are errors, exit 2, and create nothing.
    for (args, code_, err) in [
        (vec!["--profile", "nope"], 2, "unknown_profile"),
        (
            vec!["--profile", "coder", "--profile", "coder"],
            2,
            "duplicate_profile",
        ),
        (
            vec![
                "--profile",
                "coder=2",
                "--profile",
                "checker=1",
                "--profile",
                "coder=1",
            ],
            2,
            "duplicate_profile",
        ),
    ] {
        let mut a = vec!["capacity", "ensure", "--run", "r1", "--json"];
        a.extend(args.iter());
        let (code, out, _) = run(d, &a);
        assert_eq!(code, code_, "{a:?}: {out}");
        assert_eq!(json(&out)["error"]["code"], err, "{a:?}");
    }
    // A malformed count is a usage error, like any bad flag value.
    let (code, _, err) = run(
        d,
        &[
            "capacity",
            "ensure",
            "--run",
            "r1",
            "--profile",
            "coder=x",
            "--json",
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("the count is not a whole number"), "{err}");
    let (code, _, err) = run(
        d,
        &["capacity", "ensure", "--run", "r1", "--profile", "nope"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("configured profiles: coder, checker"), "{err}");

    // Step once: build starts and takes a coder instance.
    let (code, out, _) = run(d, &["ctl", "r1", "step"]);
    assert_eq!((code, out.as_str()), (0, "ok: step: build started\n"));
    until("build started", &|v| {
        v["type"] == "started" && v["name"] == "build"
    });
    // The default release takes what is due now (current_round): the
    // idle coder goes, the busy one stays with its reason — partial,
    // exit 1 (RPC-50); the manual_release checker is not touched (RPC-30).
    let (code, out, _) = run(d, &["ctl", "r1", "release", "--json"]);
    assert_eq!(code, 1, "{out}");
    let r = json(&out);
    assert_eq!(r["status"], "partial");
    assert_eq!(r["lifetimes"], serde_json::json!(["current_round"]));
    assert_eq!(r["released_count"], 1);
    assert_eq!(r["retained"][0]["name"], "loop-r1-coder-1");
    assert_eq!(r["retained"][0]["reason"], "runtime_state=busy");
    let (code, out, _) = run(d, &["ctl", "r1", "release", "--name", "nope"]);
    assert_eq!(code, 2, "{out}");

    // Refusals from the kernel are exit 1 with the reason.
    let (code, _, err) = run(d, &["ctl", "r1", "approve", "build"]);
    assert_eq!(code, 1);
    assert!(err.contains("build has no approval gate"), "{err}");
    let (code, _, err) = run(d, &["ctl", "r1", "retry", "build"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("build is running; only a failed or denied operation can be retried"),
        "{err}"
    );

    let (code, _, _) = run(d, &["ctl", "latest", "resume"]);
    assert_eq!(code, 0);
    until("ship's gate", &|v| v["type"] == "awaiting_approval");
    let (code, _, _) = run(d, &["ctl", "r1", "approve", "ship"]);
    assert_eq!(code, 0);
    let result = until("the result", &|v| v["type"] == "result");
    assert_eq!(result["outcome"], "succeeded");
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(
        !d.join(".playdeck/runs/r1/ctl/control.sock").exists(),
        "the socket goes with the run"
    );

    // After the run: it says how it finished (issue 42), and capacity
    // reads and updates the file.
    let (code, _, err) = run(d, &["ctl", "r1", "status"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("finished: succeeded; playdeck report r1 says what it did"),
        "{err}"
    );
    let (code, out, _) = run(d, &["capacity", "status", "--run", "r1", "--json"]);
    assert_eq!(code, 0);
    let s = json(&out);
    assert_eq!(s["live"], false);
    let manual: Vec<&Value> = s["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "ready")
        .collect();
    assert_eq!(
        manual.len(),
        1,
        "the manual_release checker is still there: {s:#}"
    );
    // After the run, the default release takes current_round and
    // current_loop; the manual_release checker goes when asked for.
    let (code, out, _) = run(d, &["capacity", "release", "--run", "r1", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["released_count"], 0);
    let (code, out, _) = run(
        d,
        &[
            "capacity",
            "release",
            "--run",
            "r1",
            "--lifetime",
            "manual_release",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        json(&out)["released"],
        serde_json::json!(["loop-r1-checker-1"])
    );
    let (_, out, _) = run(
        d,
        &[
            "capacity",
            "release",
            "--run",
            "r1",
            "--lifetime",
            "manual_release",
            "--json",
        ],
    );
    assert_eq!(
        json(&out)["released_count"],
        0,
        "releasing twice is idempotent"
    );
    let (code, out, _) = run(
        d,
        &[
            "capacity",
            "ensure",
            "--run",
            "r1",
            "--profile",
            "coder",
            "--json",
        ],
    );
    let e = json(&out);
    assert_eq!(
        (code, e["status"].as_str(), e["error"]["code"].as_str()),
        (1, Some("error"), Some("not_live"))
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ensure needs a live run"),
        "{e}"
    );

    let (code, _, err) = run(d, &["ctl", "nope", "status"]);
    assert_eq!(code, 2);
    assert!(err.contains("no run \"nope\""), "{err}");
}

/// RPC-41: capacity and lifecycle commands are for operators and
/// scripts, not for the run's own agents. An agent that calls `playdeck
/// ctl` on its run — with the run's tag in its environment, or with its
/// environment emptied — is refused with `peer_is_agent`, and nothing it
/// asked for happens; the operator's `ctl` works.
#[test]
fn rule_rpc_41_an_agent_cannot_drive_its_own_run() {
    let dir = tempfile::tempdir().unwrap();
    let play = format!(
        r#"
[play]
name = "self"
[palette]
roles = [{{ role = "implementer" }}, {{ role = "reviewer" }}]
[agents.sneaky]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
env_vars = {{ PD = "{bin}" }}
[[operations]]
id = "gate"
role = "reviewer"
instruction = "ship it"
approval = true
independent_root = true
sim = {{ duration_ms = 10 }}
[[operations]]
id = "sneak"
role = "implementer"
agent = "sneaky"
independent_root = true
instruction = '''
"$PD" ctl "$PLAYDECK_RUN_DIR" approve gate --json > tagged.json; t=$?
d="$PLAYDECK_RUN_DIR"; env -i PATH="$PATH" "$PD" ctl "$d" cancel --json > scrubbed.json; s=$?
printf '{{"type":"result","result":{{"tagged_exit":%s,"tagged":%s,"scrubbed_exit":%s,"scrubbed":%s}}}}\n' "$t" "$(tr -d '\n' < tagged.json)" "$s" "$(tr -d '\n' < scrubbed.json)"
exit 0
'''
"#,
        bin = common::PLAYDECK
    );
    std::fs::write(dir.path().join("p.toml"), play).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (err, err_path) = common::stderr_file(logs.path(), "run.stderr");
    let mut child = common::playdeck()
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/s1",
            "p.toml",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path));
    // The agent, a shell script, runs `playdeck ctl` twice.
    let done = lines.until("sneak's end", Duration::from_secs(120), |v| {
        v["name"] == "sneak" && (v["type"] == "completed" || v["type"] == "failed")
    });
    assert_eq!(done["type"], "completed", "{done:#}");
    let r = &done["result"];
    for which in ["tagged", "scrubbed"] {
        assert_eq!(r[format!("{which}_exit")], 1, "{which}: {r:#}");
        assert_eq!(r[which]["status"], "error", "{which}: {r:#}");
        assert_eq!(r[which]["error"]["code"], "peer_is_agent", "{which}: {r:#}");
    }
    let why = r["tagged"]["error"]["message"].as_str().unwrap();
    assert!(why.contains("one of this run's agent processes"), "{why}");

    // Nothing it asked for happened: the gate still waits, the run goes on.
    let d = dir.path();
    let (code, out, _) = run(d, &["ctl", "s1", "status", "--json"]);
    assert_eq!(code, 0, "{out}");
    let s = json(&out);
    assert_eq!(s["state"], "running");
    assert_eq!(s["awaiting_approval"], serde_json::json!(["gate"]));
    // The operator may.
    let (code, _, _) = run(d, &["ctl", "s1", "approve", "gate"]);
    assert_eq!(code, 0);
    let result = lines.until("the result", Duration::from_secs(60), |v| {
        v["type"] == "result"
    });
    assert_eq!(result["outcome"], "succeeded");
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// Issue 39: an agent that lets a child `connect()` and exit, and keeps
/// the connected socket, is still an agent: the process that connected is
/// gone when the run looks, and a connection in doubt is refused. Before,
/// the run found no process and took it for the operator's (the gate was
/// approved within a few tries).
#[test]
fn an_agent_connecting_through_a_child_that_exits_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let attack = r#"
import json, os, socket
path = os.environ["PLAYDECK_RUN_DIR"] + "/ctl/control.sock"
answers = []
for _ in range(30):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        s.connect(path)
        os._exit(0)
    os.waitpid(pid, 0)
    s.sendall(b'{"cmd":"approve","op":"gate"}\n')
    answers.append(s.makefile().readline().strip())
    s.close()
codes = [json.loads(a).get("error", {}).get("code", "none") if a else "closed" for a in answers]
print(json.dumps({"type": "result", "result": {"codes": codes}}))
"#;
    let play = format!(
        r#"
[play]
name = "fork"
[palette]
roles = [{{ role = "implementer" }}, {{ role = "reviewer" }}]
[agents.forker]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
[[operations]]
id = "gate"
role = "reviewer"
instruction = "ship it"
approval = true
independent_root = true
sim = {{ duration_ms = 10 }}
[[operations]]
id = "fork"
role = "implementer"
agent = "forker"
independent_root = true
instruction = '''
cat > attack.py <<'PY'
{attack}
PY
python3 attack.py
exit 0
'''
"#
    );
    std::fs::write(dir.path().join("p.toml"), play).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (err, err_path) = common::stderr_file(logs.path(), "run.stderr");
    let mut child = common::playdeck()
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/f1",
            "p.toml",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let mut lines = common::JsonLines::read(&mut child, Some(err_path));
    let done = lines.until("fork's end", Duration::from_secs(120), |v| {
        v["name"] == "fork" && (v["type"] == "completed" || v["type"] == "failed")
    });
    assert_eq!(done["type"], "completed", "{done:#}");
    let codes = done["result"]["codes"].as_array().unwrap();
    assert_eq!(codes.len(), 30, "{done:#}");
    assert!(
        codes.iter().all(|c| c == "peer_is_agent"),
        "every try is refused: {codes:?}"
    );
    let d = dir.path();
    let (_, out, _) = run(d, &["ctl", "f1", "status", "--json"]);
    assert_eq!(json(&out)["awaiting_approval"], serde_json::json!(["gate"]));
    let (code, _, _) = run(d, &["ctl", "f1", "approve", "gate"]);
    assert_eq!(code, 0);
    let result = lines.until("the result", Duration::from_secs(60), |v| {
        v["type"] == "result"
    });
    assert_eq!(result["outcome"], "succeeded");
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// Issue 28: two hundred clients of the same user that send half a request
/// and wait do not keep an operator's `ctl status` waiting: the server
/// drops the one that has waited longest for its own request line when it
/// needs the room.
#[test]
fn idle_half_requests_do_not_keep_ctl_waiting() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut run = common::live_headless_run(d);
    let sock = d.join(".playdeck/runs/live/ctl/control.sock");
    let idle: Vec<std::os::unix::net::UnixStream> = (0..200)
        .map(|_| {
            let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
            s.write_all(br#"{"cmd":"#).unwrap();
            s
        })
        .collect();
    let t = std::time::Instant::now();
    let (code, out, err) = self::run(d, &["ctl", "live", "status", "--json"]);
    let took = t.elapsed();
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["state"], "running", "{out}");
    // A bound, not a timing: before, it waited 20–60 s behind the idle ones.
    assert!(took < Duration::from_secs(10), "ctl waited {took:?}");
    drop(idle);
    let (code, _, _) = self::run(d, &["ctl", "live", "cancel"]);
    assert_eq!(code, 0);
    let _ = run.wait();
}

/// Issue 28: another user's `ctl`, `report` and `resume` say permission
/// denied, not "no run". Needs root to act as another user (CI is root).
#[test]
fn another_users_run_is_permission_denied_not_missing() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: acting as another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut run = common::live_headless_run(d);
    let run_dir = d.join(".playdeck/runs/live");
    let (_keep, anyones) = common::binary_for_anyone();
    for args in [
        vec!["ctl", run_dir.to_str().unwrap(), "status"],
        vec!["report", run_dir.to_str().unwrap()],
        vec!["resume", run_dir.to_str().unwrap(), "--headless"],
        vec!["ctl", run_dir.to_str().unwrap(), "events", "--follow"],
        vec!["attach", run_dir.to_str().unwrap()],
        vec!["bridge", run_dir.to_str().unwrap()],
    ] {
        let out = Command::new(&anyones)
            .args(&args)
            .env("HOME", "/")
            .env("PLAYDECK_CONFIG_DIR", "/nonexistent")
            .current_dir("/")
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("permission denied"), "{args:?}: {err}");
        assert!(err.contains("belongs to another user"), "{args:?}: {err}");
    }
    let (code, _, _) = self::run(d, &["ctl", "live", "cancel"]);
    assert_eq!(code, 0);
    let _ = run.wait();
}

/// Issue 39: `runs` reads only regular files: a FIFO put where a run's
/// log goes kept it waiting for ever (open blocks for a writer).
#[test]
fn runs_is_not_held_by_a_fifo_in_a_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("20260101-000000-fifo");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("play.toml"),
        include_str!("../plays/name_only.toml"),
    )
    .unwrap();
    let made = Command::new("mkfifo")
        .arg(run.join("events.jsonl"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut child = common::playdeck()
        .args(["runs", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("runs waited on the FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// Issue 39: in a project folder others can write (1777, a shared build
/// box), another user who made `.playdeck/runs` and left a crashed run
/// dated newest does not get the owner's `ctl latest …` or `resume
/// latest`, and the owner's own run is not put in their directory.
#[test]
fn another_users_runs_directory_is_never_taken_for_yours() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: acting as another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // As nobody: .playdeck/runs and a crashed run in it, newest.
    let made = Command::new("sh")
        .args([
            "-c",
            "mkdir -p .playdeck/runs/29991231-235959-evil && printf '[play]\\nname = \"evil\"\\n' > .playdeck/runs/29991231-235959-evil/play.toml",
        ])
        .current_dir(d)
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(made.success());
    for args in [
        vec!["ctl", "latest", "status"],
        vec!["ctl", "29991231-235959-evil", "status"],
        vec!["resume", "latest", "--headless", "--approve", "all"],
    ] {
        let (code, _, err) = run(d, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("permission denied") && err.contains("belongs to another user"),
            "{args:?}: {err}"
        );
    }
    // A new run is not put in their directory either.
    std::fs::write(d.join("p.toml"), include_str!("../plays/one_quick_op.toml")).unwrap();
    let (code, _, err) = run(d, &["run", "p.toml", "--headless"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("belongs to another user"), "{err}");
    let mut left: Vec<String> = std::fs::read_dir(d.join(".playdeck/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["29991231-235959-evil"], "nothing was created");
    // `runs` lists none of theirs as yours.
    let (_, out, _) = run(d, &["runs"]);
    assert!(!out.contains("evil"), "{out}");
}

/// `runs --watch` into a pipe (issue 42): no escape sequences, each list
/// after a line of its own.
#[test]
fn runs_watch_writes_no_escapes_into_a_pipe() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("20260101-000000-pipe");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("play.toml"),
        include_str!("../plays/name_only.toml"),
    )
    .unwrap();
    let mut child = common::playdeck()
        .args(["runs", "--watch", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    // Two lists: the second comes a second after the first.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&all).matches("--- ").count() >= 2 {
                break;
            }
        }
        let _ = tx.send(all);
    });
    let got = rx.recv_timeout(Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&got.expect("two lists within 20 s")).into_owned();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains("20260101-000000-pipe"), "{text}");
}

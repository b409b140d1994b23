//! Faults (issue 11): the disk fills up, two processes reach for one run,
//! the supervisor dies with agents alive, agents flood it. Each test
//! reproduces the fault and checks nothing is lost.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use playdeck::kernel::{GraphBuilder, Lane, RunConfig, Signal, SignalKind, SignalSink, SinkError};

/// A durable sink whose writes fail while `full` is set, keeping what it
/// could not write (as the event log does).
#[derive(Clone, Default)]
struct Disk {
    full: Arc<AtomicBool>,
    pending: Arc<Mutex<Vec<u64>>>,
    written: Arc<Mutex<Vec<u64>>>,
}

impl SignalSink for Disk {
    fn write(&mut self, s: &Arc<Signal>) {
        self.pending.lock().unwrap().push(s.seq);
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        if self.full.load(Ordering::SeqCst) {
            return Err(SinkError {
                what: "events.jsonl".into(),
                message: "No space left on device (os error 28)".into(),
            });
        }
        let mut p = self.pending.lock().unwrap();
        self.written.lock().unwrap().extend(p.drain(..));
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_log_write_stops_new_work_until_space_returns_and_loses_nothing() {
    let mut b = GraphBuilder::new();
    let a = b.add_root(op("a", "worker", sim(1000)));
    let bb = b.add_after(
        op("b", "worker", sim(1000)),
        [(a, playdeck::kernel::Condition::Succeeded)],
    );
    b.add_after(
        op("c", "worker", sim(1000)),
        [(bb, playdeck::kernel::Condition::Succeeded)],
    );
    let mut h = harness(b.build().unwrap(), RunConfig::default());
    let disk = Disk::default();
    h.run.as_mut().unwrap().add_sink(Box::new(disk.clone()));
    let run = h.spawn();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The disk fills while a runs.
    disk.full.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // a finished, but b did not start: its start could not be recorded.
    let snap = h.handle.snapshot().await.unwrap();
    let lane = |n: &str| snap.nodes.iter().find(|x| &*x.name == n).unwrap().lane;
    assert_eq!((lane("a"), lane("b")), (Lane::Succeeded, Lane::Queued));
    assert!(
        snap.run
            .storage
            .as_deref()
            .unwrap()
            .contains("No space left")
    );
    let waits = snap.nodes.iter().find(|x| &*x.name == "b").unwrap();
    assert_eq!(
        waits.waiting_for.as_deref(),
        Some("storage: the event log cannot be written")
    );
    assert_eq!(h.signals.count("storage_failed"), 1, "said once");
    assert_eq!(h.signals.count("started"), 1);
    // Space returns: within the retry interval the run goes on.
    disk.full.store(false, Ordering::SeqCst);
    let env = run.await.unwrap();
    assert_eq!(env.outcome, playdeck::kernel::Outcome::Succeeded);
    assert_eq!(h.signals.count("storage_recovered"), 1);
    // Every signal reached the disk, in order, none twice.
    let written = disk.written.lock().unwrap().clone();
    let all: Vec<u64> = h.signals.all().iter().map(|s| s.seq).collect();
    assert_eq!(written, all);
    let failed_at = h
        .signals
        .all()
        .iter()
        .find(|s| matches!(s.kind, SignalKind::StorageFailed { .. }))
        .unwrap()
        .elapsed;
    let b_started = h
        .signals
        .all()
        .iter()
        .find(|s| matches!(&s.kind, SignalKind::Started { node, .. } if &*node.name == "b"))
        .unwrap()
        .elapsed;
    assert!(b_started > failed_at + 4.0, "b waited for the disk");
}

#[tokio::test(start_paused = true)]
async fn a_run_cancelled_while_the_disk_is_full_ends_and_says_so() {
    let mut b = GraphBuilder::new();
    b.add_root(op("a", "worker", sim(60_000)));
    b.add_root(op("b", "worker", sim(60_000)));
    let cfg = RunConfig {
        max_concurrent: 1,
        ..RunConfig::default()
    };
    let mut h = harness(b.build().unwrap(), cfg);
    let disk = Disk::default();
    h.run.as_mut().unwrap().add_sink(Box::new(disk.clone()));
    let run = h.spawn();
    tokio::time::sleep(Duration::from_millis(100)).await;
    disk.full.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.handle
        .request(playdeck::kernel::Request::Cancel)
        .await
        .unwrap();
    let env = run.await.unwrap();
    assert_eq!(env.outcome, playdeck::kernel::Outcome::Cancelled);
    let snap = h.handle.snapshot().await.unwrap();
    assert!(
        snap.run.storage.is_some(),
        "the final state says the log is short"
    );
}

/// A chain of operations with long instructions: many event lines.
fn chain_play(n: usize) -> String {
    let mut s =
        String::from("[play]\nname = \"chain\"\n[palette]\nroles = [{ role = \"tester\" }]\n");
    for i in 0..n {
        s.push_str(&format!(
            "[[operations]]\nid = \"op{i}\"\nrole = \"tester\"\ninstruction = \"{}\"\nsim = {{ duration_ms = 30 }}\n",
            "check the build once more and say what changed ".repeat(4)
        ));
    }
    s
}

/// The real binary on a real, small tmpfs that fills up (in a private
/// mount namespace, so nothing outside the test sees it): the run stops
/// starting work and says why, and when space returns it finishes with a
/// log that is whole — every line once, in order — and a successful exit.
#[test]
fn a_full_disk_holds_the_run_and_freed_space_lets_it_finish_with_a_whole_log() {
    let host = tempfile::tempdir().unwrap();
    let play = host.path().join("chain.toml");
    std::fs::write(&play, chain_play(40)).unwrap();
    let mnt = host.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = r#"
set -u
mount -t tmpfs -o size=192k tmpfs "$MNT" || exit 97
# Leave a little room (the compact log needs little): the run starts,
# then the disk is full.
dd if=/dev/zero of="$MNT/filler" bs=4k count=36 2>/dev/null
timeout 120 "$BIN" run "$PLAY" --headless --speed 1 --run-dir "$MNT/run" >"$HOST/out.jsonl" 2>"$HOST/err.txt" &
pid=$!
i=0
while ! grep -q "storage:" "$HOST/err.txt" && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
# Full for a moment longer: nothing new may start meanwhile.
sleep 1.5
rm -f "$MNT/filler"
wait $pid
echo $? >"$HOST/code"
cp -r "$MNT/run" "$HOST/run"
"#;
    let out = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .env("MNT", &mnt)
        .env("HOST", host.path())
        .env("PLAY", &play)
        .env("BIN", common::PLAYDECK)
        .output()
        .expect("unshare (util-linux) runs the test in its own mount namespace");
    assert!(
        out.status.success(),
        "the namespace script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = std::fs::read_to_string(host.path().join("err.txt")).unwrap();
    assert!(
        err.contains("storage: events.jsonl: No space left on device"),
        "{err}"
    );
    assert!(err.contains("the event log is written again"), "{err}");
    let code = std::fs::read_to_string(host.path().join("code")).unwrap();
    assert_eq!(code.trim(), "0", "{err}");
    // The log is whole: numbered from 1 without a gap or a repeat, and the
    // same lines the run printed.
    let log = playdeck::store::whole_text(&host.path().join("run/events.jsonl")).unwrap();
    let printed = std::fs::read_to_string(host.path().join("out.jsonl")).unwrap();
    let seqs: Vec<u64> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let printed_events: Vec<&str> = printed
        .lines()
        .filter(|l| !l.contains("\"type\":\"result\""))
        .collect();
    assert_eq!(log.lines().collect::<Vec<_>>(), printed_events);
    // Nothing started while the disk was full.
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = events
        .iter()
        .position(|e| e["type"] == "storage_failed")
        .unwrap();
    let back = events
        .iter()
        .position(|e| e["type"] == "storage_recovered")
        .unwrap();
    assert!(
        events[failed..back].iter().all(|e| e["type"] != "started"),
        "no operation started while the log could not be written"
    );
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(host.path().join("run/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["outcome"], "succeeded");
    assert_eq!(result["completed_operations"].as_array().unwrap().len(), 40);
}

/// Everything in a run directory is the owner's only: it holds prompts,
/// agent output and results.
#[test]
fn a_run_directory_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("p.toml");
    std::fs::write(
        &play,
        include_str!("../plays/private_run.toml").replace("AGENT", common::AGENT),
    )
    .unwrap();
    let out = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
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
    let mut seen = 0;
    let mut stack = vec![dir.path().join("run")];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{}", p.display());
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if !meta.file_type().is_socket_like() {
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", p.display());
        }
        seen += 1;
    }
    assert!(seen >= 8, "the run directory holds its files ({seen})");
    assert!(
        dir.path().join("run/logs/logged.1.stdout.log").exists(),
        "agent logs were checked"
    );
}

trait SocketLike {
    fn is_socket_like(&self) -> bool;
}

impl SocketLike for std::fs::FileType {
    fn is_socket_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_socket()
    }
}

#[test]
fn control_lines_have_a_length_limit() {
    use playdeck::headless::{MAX_CONTROL_LINE, read_control_line};
    let mut input = Vec::new();
    input.extend_from_slice(b"pause\n");
    input.extend(std::iter::repeat_n(b'x', MAX_CONTROL_LINE * 3));
    input.extend_from_slice(b"\nresume");
    let mut r = std::io::BufReader::with_capacity(4096, &input[..]);
    assert_eq!(read_control_line(&mut r).as_deref(), Some("pause"));
    assert_eq!(
        read_control_line(&mut r).as_deref(),
        Some(""),
        "the long line is dropped"
    );
    assert_eq!(read_control_line(&mut r).as_deref(), Some("resume"));
    assert_eq!(read_control_line(&mut r), None);
}

/// The peak resident memory of a process, in KiB (Linux).
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
}

/// `playdeck run --headless < /dev/zero`: an endless line without a newline
/// does not grow memory, and the run still ends.
#[test]
fn an_endless_stdin_line_does_not_grow_memory() {
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("p.toml");
    std::fs::write(&play, include_str!("../plays/one_op_1500ms.toml")).unwrap();
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut peak = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(p) = peak_kib(child.id()) {
            peak = peak.max(p);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the run never ended");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert!(peak > 0 && peak < 64 * 1024, "peak RSS {peak} KiB");
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("a control line longer than 64 KiB was ignored"),
        "{err}"
    );
}

/// The control socket keeps serving when accept() fails (descriptors
/// exhausted), answers bytes that are not UTF-8 and over-long requests
/// with an error, and a client that sends nothing does not block others.
#[test]
fn the_control_socket_survives_exhausted_descriptors_and_bad_clients() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("p.toml");
    std::fs::write(&play, include_str!("../plays/one_op_100ms.toml")).unwrap();
    // Few descriptors: idle clients exhaust them.
    let mut child = std::process::Command::new("prlimit")
        .args(["--nofile=48:48", common::PLAYDECK])
        .args(["run", "--headless", "--paused", "--run-dir", "run"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.path().join("run/ctl/control.sock");
    common::wait_listening(&sock);
    let ask = |bytes: &[u8]| -> serde_json::Value {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(bytes).unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    // Idle clients: more than the process has descriptors for.
    let idle: Vec<UnixStream> = (0..60)
        .filter_map(|_| UnixStream::connect(&sock).ok())
        .collect();
    assert!(idle.len() >= 40, "{} idle clients", idle.len());
    std::thread::sleep(Duration::from_millis(300));
    drop(idle);
    // Still serving.
    let v = ask(b"{\"cmd\":\"status\"}\n");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["result"]["state"], "paused");
    let v = ask(b"\xff\xfe not utf-8\n");
    assert_eq!(
        (v["ok"].as_bool(), v["error"]["code"].as_str()),
        (Some(false), Some("bad_request"))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not UTF-8"),
        "{v}"
    );
    let mut long = vec![b'x'; 70 * 1024];
    long.push(b'\n');
    let v = ask(&long);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 65536 bytes"),
        "{v}"
    );
    // A client that says nothing does not hold the others up.
    let _silent = UnixStream::connect(&sock).unwrap();
    let v = ask(b"{\"cmd\":\"resume\"}\n");
    assert_eq!(v["ok"], true, "{v}");
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// An agent that prints spawn requests in a loop (coreutils `yes`, a real
/// program that never stops): the attempt is stopped at the request cap as
/// request_flood, every refusal is in the ledger with its own detail, and
/// memory stays small.
#[test]
fn a_request_flood_is_stopped_at_the_cap_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("flood.toml");
    std::fs::write(&play, include_str!("../plays/spawn_request_flood.toml")).unwrap();
    let (status, peak) = headless_watching_peak(&play, dir.path());
    assert_eq!(status.code(), Some(1));
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run/result.json")).unwrap())
            .unwrap();
    let dropped = result["dropped_spawns"].as_array().unwrap();
    assert!(dropped.iter().all(|d| d["reason"] == "max_spawn_exceeded"));
    assert_eq!(result["spawned_operations"], 50);
    assert_eq!(
        dropped.len() + 50,
        10_000,
        "every request up to the cap was read, each drop in the record"
    );
    // Each refusal keeps its own detail (its name): none is folded away.
    assert_eq!(dropped.len(), 9_950);
    assert!(
        dropped[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("spawn-51 refused")
            && dropped[9_949]["detail"]
                .as_str()
                .unwrap()
                .starts_with("spawn-10000 refused"),
        "{} … {}",
        dropped[0],
        dropped[9_949]
    );
    let failed = playdeck::store::whole_text(&dir.path().join("run/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "failed" && e["name"] == "flood")
        .unwrap();
    assert_eq!(failed["category"], "request_flood");
    // The agent process is gone with its attempt.
    assert!(
        !std::process::Command::new("pgrep")
            .args(["-f", "spawn_request.*again"])
            .status()
            .unwrap()
            .success(),
        "yes was killed"
    );
}

/// A play whose one operation runs the example agent with `directives`.
fn agent_play(dir: &std::path::Path, directives: &str) -> std::path::PathBuf {
    let play = dir.join("agents.toml");
    std::fs::write(
        &play,
        format!(
            r#"
[play]
name = "survivors"
[palette]
roles = [{{ role = "implementer" }}]
[agents.ex]
binary = "{}"
stream_format = "jsonl"
[[operations]]
id = "work"
role = "implementer"
agent = "ex"
instruction = """work
{directives}"""
"#,
            common::AGENT
        ),
    )
    .unwrap();
    play
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Pids the example agent reported as `what <pid>` in its output log.
fn reported(run: &std::path::Path, what: &str) -> Vec<i32> {
    let Ok(log) = std::fs::read_to_string(run.join("logs/work.1.stdout.log")) else {
        return Vec::new();
    };
    log.lines()
        .filter_map(|l| l.split(what).nth(1))
        .filter_map(|rest| {
            rest.trim()
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .collect()
}

/// While playdeck lives, a tool an agent started in a session of its own
/// ends with the attempt: it is re-parented to playdeck and found by its
/// run tag.
#[test]
fn what_an_agent_leaves_running_ends_with_its_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let play = agent_play(dir.path(), "@setsid 60\n@sleep 0.3");
    let out = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
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
    let left = reported(&dir.path().join("run"), "setsid grandchild");
    assert_eq!(left.len(), 1, "the agent reported its grandchild");
    assert!(
        !alive(left[0]),
        "the setsid grandchild {} still runs",
        left[0]
    );
}

/// SIGKILL of playdeck with an agent at work: the agent (the group leader)
/// dies with it (PR_SET_PDEATHSIG); what it started survives the crash,
/// but a resume ends it (the run tag finds the group and the setsid
/// escapee) before anything runs again, and says so.
#[test]
fn agents_do_not_outlive_a_killed_supervisor_past_its_resume() {
    let dir = tempfile::tempdir().unwrap();
    let play = agent_play(dir.path(), "@fork 60\n@setsid 60\n@sleep 60");
    let run = dir.path().join("run");
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (forked, escaped) = common::wait_for(
        "the agent to report its grandchildren",
        Duration::from_secs(20),
        || {
            let (f, e) = (
                reported(&run, "started grandchild"),
                reported(&run, "setsid grandchild"),
            );
            match (f.first(), e.first()) {
                (Some(f), Some(e)) => Ok((*f, *e)),
                _ => Err(format!("reported: {f:?} and {e:?}")),
            }
        },
    );
    let events = playdeck::store::whole_text(&run.join("events.jsonl")).unwrap();
    let pgid = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "agent_process")
        .map(|e| e["pgid"].as_i64().unwrap() as i32)
        .expect("the process group is recorded");
    child.kill().unwrap();
    child.wait().unwrap();
    common::wait_for(
        "the agent to end with playdeck",
        Duration::from_secs(5),
        || match alive(pgid) {
            true => Err(format!("process group {pgid} is alive")),
            false => Ok(()),
        },
    );
    assert!(
        alive(forked) && alive(escaped),
        "its tools survive the crash itself"
    );
    // The resume ends them before the new attempt starts.
    let mut resumed = common::playdeck()
        .args(["resume", "run", "--headless", "--paused", "--play"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for(
        "the survivors to be ended",
        Duration::from_secs(20),
        || match (alive(forked), alive(escaped)) {
            (false, false) => Ok(()),
            alive => Err(format!("alive (forked, escaped): {alive:?}")),
        },
    );
    common::wait_for("the resume to say so", Duration::from_secs(20), || {
        let log = playdeck::store::whole_text(&run.join("events.jsonl")).unwrap();
        match log.contains("the stopped run's agents left running") {
            true => Ok(()),
            false => Err(format!("the log:\n{log}")),
        }
    });
    let _ = resumed.kill();
    let _ = resumed.wait();
}

/// capacity.json of another schema, or deleted while the run had
/// instances, is refused by resume and by the offline commands — never
/// overwritten or recreated silently.
#[test]
fn a_capacity_file_of_another_schema_or_deleted_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("cap.toml");
    std::fs::write(&play, include_str!("../plays/kept_instance.toml")).unwrap();
    let bin = || {
        let mut c = common::playdeck();
        c.current_dir(dir.path());
        c
    };
    let out = bin()
        .args(["run", "--headless", "--run-dir", "run"])
        .arg(&play)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // As if it died before writing its result: resumable.
    let run = dir.path().join("run");
    std::fs::remove_file(run.join("result.json")).unwrap();
    let cap = run.join("capacity.json");
    let good = std::fs::read_to_string(&cap).unwrap();
    let newer = good.replace("\"schema_version\": 1", "\"schema_version\": 7");
    assert_ne!(newer, good);
    std::fs::write(&cap, &newer).unwrap();
    let resume = || {
        bin()
            .args(["resume", "run", "--headless"])
            .output()
            .unwrap()
    };
    let r = resume();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("schema_version 7") && err.contains("it reads 1"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&cap).unwrap(),
        newer,
        "not overwritten"
    );
    let out = bin()
        .args(["capacity", "status", "--run", "run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema_version 7"));
    // Deleted while the run had an instance (the manual_release checker).
    std::fs::remove_file(&cap).unwrap();
    let r = resume();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("capacity.json is missing") && err.contains("loop-run-checker-1"),
        "{err}"
    );
    assert!(!cap.exists(), "not recreated");
}

/// `playdeck run --headless PLAY` in `dir` (run directory `run`), watched
/// until it ends (a minute at most): how it ended and its peak RSS (KiB).
fn headless_watching_peak(
    play: &std::path::Path,
    dir: &std::path::Path,
) -> (std::process::ExitStatus, u64) {
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
        .arg(play)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut peak = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(p) = peak_kib(child.id()) {
            peak = peak.max(p);
        }
        if let Some(s) = child.try_wait().unwrap() {
            return (s, peak);
        }
        assert!(std::time::Instant::now() < deadline, "it never stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs one operation whose agent is `yes` printing `line` (its prompt, on
/// argv), or `awk` running `line` as its program (the prompt on stdin),
/// stopped after `secs` by max_runtime. Returns the event log's size,
/// playdeck's peak RSS (KiB) and the log.
fn flood_run(binary: &str, line: &str, secs: u32) -> (u64, u64, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("flood.toml");
    let (agent, instruction) = match binary {
        "awk" => (
            format!("subcommand = '''{line}'''\nprompt_via = \"stdin\"\n"),
            "flood".to_string(),
        ),
        _ => (String::new(), line.to_string()),
    };
    std::fs::write(
        &play,
        format!(
            "[play]\nname = \"flood\"\n[palette]\nroles = [{{ role = \"implementer\" }}]\n\
             [agents.flood]\nbinary = \"{binary}\"\nstream_format = \"jsonl\"\nmax_runtime = {secs}\n{agent}\
             [[operations]]\nid = \"flood\"\nrole = \"implementer\"\nagent = \"flood\"\ninstruction = '''{instruction}'''\n"
        ),
    )
    .unwrap();
    let (_, peak) = headless_watching_peak(&play, dir.path());
    let log = dir.path().join("run/events.jsonl");
    let size = std::fs::metadata(&log).unwrap().len();
    let events = playdeck::store::whole_text(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (size, peak, events)
}

fn of<'a>(events: &'a [serde_json::Value], ty: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// Issue 28: an agent printing warning, state or usage lines without end
/// adds a few events a second to the run's record, not one per line: the
/// newest usage and activity go out at most once per interval, a repeated
/// warning is one row with a count.
#[test]
fn an_agent_flooding_warnings_states_or_usage_adds_little_to_the_record() {
    // The same warning, 2 s: about one row a second, with its count.
    let (size, peak, events) = flood_run("yes", r#"{"type":"warning","message":"disk slow"}"#, 2);
    let warnings = of(&events, "warning");
    assert!(
        !warnings.is_empty() && warnings.len() <= 4,
        "{}",
        warnings.len()
    );
    let counted = warnings[0]["message"].as_str().unwrap();
    assert!(counted.starts_with("flood: disk slow (×"), "{counted}");
    assert!(size < 64 * 1024, "log {size} bytes");
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
    // Alternating states: a burst of 64 (a real agent's changes are each
    // seen), then four a second.
    let (size, _, events) = flood_run(
        "yes",
        "{\"type\":\"state\",\"state\":\"thinking\"}\n{\"type\":\"state\",\"state\":\"writing\"}",
        2,
    );
    let activity = of(&events, "agent_activity").len();
    assert!(activity <= 64 + 4 * 3 + 1, "{activity} activity events");
    assert!(size < 64 * 1024, "log {size} bytes");
    // Growing usage totals: about one a second, the last the newest.
    let (size, _, events) = flood_run(
        "awk",
        r#"BEGIN { for (i = 1; ; i++) printf "{\"type\":\"usage\",\"output_tokens\":%d}\n", i }"#,
        2,
    );
    let usage = of(&events, "agent_usage");
    assert!(
        !usage.is_empty() && usage.len() <= 4,
        "{} usage events",
        usage.len()
    );
    assert!(usage.last().unwrap()["output_tokens"].as_u64().unwrap() > 1000);
    assert!(size < 64 * 1024, "log {size} bytes");
}

/// Issue 28: what coalescing cannot fold (a different warning every line)
/// stops the attempt as `output_flood` at the cap.
#[test]
fn distinct_warnings_without_end_fail_the_attempt_as_output_flood() {
    let (size, peak, events) = flood_run(
        "awk",
        r#"BEGIN { for (i = 1; ; i++) printf "{\"type\":\"warning\",\"message\":\"w%d\"}\n", i }"#,
        30,
    );
    let failed = of(&events, "failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["category"], "output_flood", "{:?}", failed[0]);
    assert!(size < 2 * 1024 * 1024, "log {size} bytes");
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
}

/// Issue 28: an existing directory that holds no run is not taken over: a
/// project folder keeps its own play.toml and result.json, a shared
/// directory keeps its mode; an empty directory of your own is used as it
/// is.
#[test]
fn a_directory_that_is_not_a_run_is_refused_and_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let play = d.join("small.toml");
    std::fs::write(&play, include_str!("../../examples/plays/small.toml")).unwrap();
    let run = |run_dir: &std::path::Path| {
        common::playdeck()
            .args(["run", "--headless", "--approve", "all", "--run-dir"])
            .arg(run_dir)
            .arg(&play)
            .current_dir(d)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // A project folder with files of its own.
    let project = d.join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("play.toml"), "mine").unwrap();
    std::fs::write(project.join("result.json"), "mine too").unwrap();
    let out = run(&project);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not a playdeck run directory: it holds play.toml, result.json"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("play.toml")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("result.json")).unwrap(),
        "mine too"
    );
    assert_eq!(
        std::fs::read_dir(&project).unwrap().count(),
        2,
        "nothing added"
    );
    // A shared directory (mode 1777, like the system's temporary one).
    let shared = d.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = run(&shared);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("can be written by other users (mode 1777)")
    );
    let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777, "its mode never changes");
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
    // An empty directory of one's own: used, its mode kept.
    let mine = d.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o750)).unwrap();
    let out = run(&mine);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(mine.join("events.jsonl").exists());
    let mode = std::fs::metadata(&mine).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    // A new one is made private.
    let out = run(&d.join("new"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mode = std::fs::metadata(d.join("new"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o700);
}

/// Issue 28: a large answer is stored once. The attempt's stdout log keeps
/// the start of a line over a mebibyte; the result itself goes to
/// `results/<op id>.json`, and the event log, the checkpoint and
/// `result.json` name it. Resume reads it back; a damaged one is refused
/// with its path.
#[test]
fn a_large_result_is_stored_once_and_read_back_by_resume() {
    let dir = tempfile::tempdir().unwrap();
    let play = dir.path().join("big.toml");
    std::fs::write(&play, include_str!("../plays/large_result.toml")).unwrap();
    // Held at the gate, then its stdin closes: the gate is denied and the
    // run ends failed, its checkpoint final.
    let mut child = common::playdeck()
        .args(["run", "--headless", "--run-dir", "run"])
        .arg(&play)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    for l in lines.map_while(Result::ok) {
        if l.contains("\"awaiting_approval\"") {
            break;
        }
    }
    drop(child.stdin.take());
    let _ = child.wait();
    let run = dir.path().join("run");
    let blob = "\"blob\":\"aaaa";
    let log = std::fs::read_to_string(run.join("logs/big.1.stdout.log")).unwrap();
    assert!(
        log.len() < 64 * 1024,
        "the log keeps its start: {} bytes",
        log.len()
    );
    assert!(log.contains("bytes, cut here"), "and says so");
    let stored: Vec<_> = std::fs::read_dir(run.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    let text = std::fs::read_to_string(&stored[0]).unwrap();
    assert_eq!(text.matches(blob).count(), 1);
    let name = format!(
        "results/{}",
        stored[0].file_name().unwrap().to_str().unwrap()
    );
    for f in ["checkpoint.json", "events.jsonl"] {
        let t = std::fs::read_to_string(run.join(f)).unwrap();
        assert_eq!(t.matches(blob).count(), 0, "{f} holds no copy");
        assert!(t.contains(&name), "{f} names {name}");
    }
    // The whole run directory is about the answer's size, not three times it.
    let total: u64 = walk_sizes(&run);
    assert!(
        total < 3 * (1 << 21) / 2,
        "{total} bytes on disk for a 2 MiB answer"
    );
    // A damaged file is refused by name, and nothing is appended.
    let good = std::fs::read(&stored[0]).unwrap();
    std::fs::write(&stored[0], &good[..100]).unwrap();
    let log_before = std::fs::read(run.join("events.jsonl")).unwrap();
    let out = resume(dir.path());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&*stored[0].display().to_string()) || err.contains(&name),
        "{err}"
    );
    assert!(err.contains("damaged"), "{err}");
    assert_eq!(std::fs::read(run.join("events.jsonl")).unwrap(), log_before);
    // Whole again, a retry of the gate finishes with the answer read back.
    std::fs::write(&stored[0], &good).unwrap();
    let out = resume(dir.path());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result = std::fs::read_to_string(run.join("result.json")).unwrap();
    assert!(result.contains(&name), "result.json names the file");
    assert_eq!(result.matches(blob).count(), 0);
}

fn resume(cwd: &std::path::Path) -> std::process::Output {
    common::playdeck()
        .args([
            "resume",
            "run",
            "--retry",
            "after",
            "--headless",
            "--approve",
            "all",
        ])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn walk_sizes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk_sizes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

//! Issue 21: the control socket's streams. `ctl RUN events` prints the
//! event log's own lines from a sequence number, live ones as they come;
//! a watcher that stops reading never holds the run back; watchers are
//! bounded.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A headless run of `play` in `dir/run`, once its socket answers.
fn start(dir: &std::path::Path, play: &str) -> std::process::Child {
    std::fs::write(dir.join("play.toml"), play).unwrap();
    let stderr = dir.join("stderr.log");
    let mut child = common::playdeck()
        .args(["run", "play.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    // A run that ends before it listens says how, with its stderr.
    common::wait_run_listening(&dir.join("run/ctl/control.sock"), &mut child, Some(&stderr));
    child
}

fn chain(n: usize, ms: u64) -> String {
    let mut s =
        String::from("[play]\nname = \"chain\"\n[palette]\nroles = [{ role = \"implementer\" }]\n");
    for i in 0..n {
        s.push_str(&format!(
            "[[operations]]\nid = \"op{i}\"\nrole = \"implementer\"\ninstruction = \"step {i}\"\nsim = {{ duration_ms = {ms} }}\n"
        ));
    }
    s
}

fn log_lines_from(dir: &std::path::Path, from: u64) -> Vec<String> {
    playdeck::store::whole_text(&dir.join("run/events.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["seq"].as_u64().unwrap() >= from
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn events_from_a_sequence_number_then_live_are_the_logs_own_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(4, 400));
    // Joined while the run goes: from event 3, then each new one.
    let follow = common::playdeck()
        .args(["ctl", "run", "events", "--follow", "--from", "3"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(follow.status.success(), "{follow:?}");
    assert!(run.wait().unwrap().success());
    let got: Vec<String> = String::from_utf8(follow.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want = log_lines_from(dir.path(), 3);
    assert_eq!(got, want, "the same lines as the log, to its end");
    assert!(got.last().unwrap().contains("\"run_finished\""));
    // A finished run's events come from its file, the same lines.
    let after = common::playdeck()
        .args(["ctl", "run", "events", "--from", "5"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(after.status.success());
    let got: Vec<String> = String::from_utf8(after.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, log_lines_from(dir.path(), 5));
    // Following a finished run has nothing to follow: said, exit 1.
    let refused = common::playdeck()
        .args(["ctl", "run", "events", "--follow"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not live"));
}

/// A watcher stopped with SIGSTOP stops reading; the run goes on at its
/// own pace, writes its result, and its process ends.
#[test]
fn a_stopped_watcher_never_stalls_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // Enough log to fill any socket buffer many times over.
    let mut run = start(
        dir.path(),
        &format!("[play]\nspeed = 1000\n{}", &chain(3000, 1)[7..]),
    );
    let mut watcher = common::playdeck()
        .args(["ctl", "run", "events", "--follow"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = watcher.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = common::wait_for(
        "the run to end past a stopped watcher",
        Duration::from_secs(120),
        || {
            run.try_wait()
                .unwrap()
                .ok_or_else(|| "it stalled".to_string())
        },
    );
    assert!(status.success());
    let result = std::fs::read_to_string(dir.path().join("run/result.json")).unwrap();
    assert!(result.contains("\"succeeded\""));
    let log = std::fs::metadata(dir.path().join("run/events.jsonl"))
        .unwrap()
        .len();
    assert!(
        log > 1 << 20,
        "the log ({log} bytes) outgrew the watcher's buffers"
    );
    // Let go, the watcher reads what it can and ends with the run.
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut out = String::new();
    let _ = watcher.stdout.take().unwrap().read_to_string(&mut out);
    let _ = watcher.wait();
}

#[test]
fn watchers_are_bounded_and_the_one_too_many_is_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(1, 60_000));
    let sock = dir.path().join("run/ctl/control.sock");
    let mut held = Vec::new();
    for _ in 0..32 {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        writeln!(s, "{{\"cmd\":\"events\",\"follow\":true}}").unwrap();
        // Its first line arrives: it is a watcher now.
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut first = String::new();
        r.read_line(&mut first).unwrap();
        assert!(first.contains("\"run_started\""), "{first}");
        held.push((s, r));
    }
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    writeln!(s, "{{\"cmd\":\"events\",\"follow\":true}}").unwrap();
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).unwrap();
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "too_many_watchers", "{v:#}");
    // Requests are still served beside them.
    let status = common::playdeck()
        .args(["ctl", "run", "status"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    drop(held);
    let cancel = common::playdeck()
        .args(["ctl", "run", "cancel"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(cancel.status.success());
    let _ = run.wait();
}

/// Issue 38: a follower whose run's process is killed says so and exits
/// non-zero; before, it exited 0 with no word, as at the run's end.
#[test]
fn a_follower_whose_run_is_killed_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(2, 60_000));
    let mut follower = common::playdeck()
        .args(["ctl", "run", "events", "--follow"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The follower has the log so far once its first line arrives.
    let mut out = BufReader::new(follower.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.contains("run_started"), "{first}");
    run.kill().unwrap();
    run.wait().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(!rest.contains("run_finished"));
    let mut err = String::new();
    follower
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(follower.wait().unwrap().code(), Some(1), "{err}");
    assert!(
        err.contains("the stream ended before the run did") && err.contains("playdeck resume"),
        "{err}"
    );
}

/// Issue 38: a console attached late is welcomed with the run's own time,
/// so its clock (elapsed, gate waits, idle times) is the run's, not one
/// counted from when the console came.
#[test]
fn an_attaching_console_is_given_the_runs_own_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(2, 60_000));
    std::thread::sleep(Duration::from_millis(1500));
    let mut s =
        std::os::unix::net::UnixStream::connect(dir.path().join("run/ctl/control.sock")).unwrap();
    s.write_all(b"{\"cmd\":\"attach\",\"from\":0,\"read_only\":true}\n")
        .unwrap();
    let mut first = String::new();
    BufReader::new(&s).read_line(&mut first).unwrap();
    let welcome: serde_json::Value = serde_json::from_str(&first).unwrap();
    let elapsed = welcome["attached"]["elapsed"]
        .as_f64()
        .unwrap_or_else(|| panic!("no elapsed in {first}"));
    assert!(
        elapsed >= 1.4,
        "the run's time is {elapsed}, not the console's 0"
    );
    run.kill().unwrap();
    run.wait().unwrap();
}

/// Issue 38: a finished run's host waits for its attached consoles only
/// while they are alive. One that says nothing (SIGSTOP, a suspended ssh)
/// kept the host — and the run's lock, so `resume --retry` was refused —
/// for up to an hour; one that keeps sending its keep-alive keeps it.
#[test]
fn a_silent_console_does_not_keep_a_finished_runs_host() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("play.toml"), chain(1, 500)).unwrap();
    // Killed if the test fails: a host kept alive must not outlive it.
    struct Host(std::process::Child);
    impl Drop for Host {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut host = Host(
        common::playdeck()
            .args(["run", "play.toml", "--host", "--run-dir", "run"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_listening(&dir.path().join("run/ctl/control.sock"));
    let attach = || {
        let mut s = UnixStream::connect(dir.path().join("run/ctl/control.sock")).unwrap();
        s.write_all(b"{\"cmd\":\"attach\",\"from\":0,\"read_only\":true}\n")
            .unwrap();
        s
    };
    // One frozen, one alive (a blank line every 2 s, as a console's 5 s).
    let _frozen = attach();
    let mut alive = attach();
    let finished = || {
        playdeck::store::whole_text(&dir.path().join("run/events.jsonl"))
            .is_ok_and(|t| t.contains("\"run_finished\""))
    };
    common::wait_for(
        "the run to finish",
        Duration::from_secs(30),
        || match finished() {
            true => Ok(()),
            false => Err("no run_finished in its log".into()),
        },
    );
    let ended = Instant::now();
    while ended.elapsed() < Duration::from_secs(20) {
        alive.write_all(b"\n").unwrap();
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            host.0.try_wait().unwrap().is_none(),
            "the host left a live console after {:?}",
            ended.elapsed()
        );
    }
    // The live one leaves; the frozen one does not hold the host.
    drop(alive);
    let status = common::wait_for(
        "the finished run's host to leave",
        Duration::from_secs(40),
        || {
            host.0
                .try_wait()
                .unwrap()
                .ok_or_else(|| "a silent console kept it".to_string())
        },
    );
    assert!(status.success(), "{status}");
}

/// Issue 39: an agent that opens every watcher place and never reads
/// does not lock its operator out: agents hold at most 8 of the 32, and
/// the operator attaches.
#[test]
fn agents_cannot_take_every_watcher_place() {
    let dir = tempfile::tempdir().unwrap();
    let hog = r#"
import os, socket, time
path = os.environ["PLAYDECK_RUN_DIR"] + "/ctl/control.sock"
held, refused = [], 0
for _ in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b'{"cmd":"events","from":0,"follow":true}\n')
    s.settimeout(2)
    first = s.recv(200)
    if b"too_many_watchers" in first:
        refused += 1
        s.close()
    else:
        held.append(s)
open("hog.txt", "w").write("%d %d" % (len(held), refused))
deadline = time.time() + 30
while not os.path.exists("done") and time.time() < deadline:
    time.sleep(0.05)
"#;
    let play = format!(
        r#"[play]
name = "hog"
[palette]
roles = [{{ role = "implementer" }}, {{ role = "reviewer" }}]
[agents.hog]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
[[operations]]
id = "gate"
role = "reviewer"
instruction = "ship"
approval = true
independent_root = true
sim = {{ duration_ms = 10 }}
[[operations]]
id = "hog"
role = "implementer"
agent = "hog"
independent_root = true
instruction = '''
cat > hog.py <<'PY'
{hog}
PY
python3 hog.py
echo '{{"type":"result","result":"done"}}'
exit 0
'''
"#
    );
    std::fs::write(dir.path().join("play.toml"), play).unwrap();
    let mut run = common::playdeck()
        .args(["run", "play.toml", "--headless", "--run-dir", "run"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let counts = dir.path().join("hog.txt");
    common::wait_for(
        "the agent to report",
        Duration::from_secs(60),
        || match counts.exists() {
            true => Ok(()),
            false => Err(format!("no {}", counts.display())),
        },
    );
    std::thread::sleep(Duration::from_millis(100));
    let said = std::fs::read_to_string(&counts).unwrap();
    assert_eq!(said, "8 32", "held, refused");
    // The operator attaches while the agent holds its places.
    let mut s =
        std::os::unix::net::UnixStream::connect(dir.path().join("run/ctl/control.sock")).unwrap();
    s.write_all(b"{\"cmd\":\"attach\",\"from\":0,\"read_only\":true}\n")
        .unwrap();
    let mut first = String::new();
    BufReader::new(&s).read_line(&mut first).unwrap();
    assert!(first.starts_with("{\"attached\""), "{first}");
    drop(s);
    std::fs::write(dir.path().join("done"), "").unwrap();
    writeln!(run.stdin.as_mut().unwrap(), "approve gate").unwrap();
    drop(run.stdin.take());
    assert!(run.wait().unwrap().success());
}

/// Issue 39: `rm -rf <run>/ctl` left a live run unreachable and listed as
/// `crashed: resumable`; the run makes its socket again (within seconds).
#[test]
fn a_removed_control_socket_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(2, 60_000));
    std::fs::remove_dir_all(dir.path().join("run/ctl")).unwrap();
    let status = common::wait_for(
        "the run to be reachable again",
        Duration::from_secs(20),
        || {
            let out = common::playdeck()
                .args(["ctl", "run", "status"])
                .current_dir(dir.path())
                .output()
                .unwrap();
            match out.status.success() {
                true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
                false => Err(format!(
                    "ctl says: {}",
                    String::from_utf8_lossy(&out.stderr)
                )),
            }
        },
    );
    assert!(status.contains("running"), "{status}");
    let listed = common::playdeck()
        .args(["runs", "--dir", "."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(!listed.contains("crashed"), "{listed}");
    run.kill().unwrap();
    run.wait().unwrap();
}

/// Issue 56: `ctl` replaced by a link to another directory (a 1777 one) is
/// never followed: that directory's mode is unchanged, and the run takes
/// its own socket directory back. Replaced by a file, the same.
#[test]
fn a_link_or_a_file_in_the_sockets_place_is_never_followed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mut run = start(dir.path(), &chain(2, 60_000));
    let ctl = dir.path().join("run/ctl");
    for plant in ["link", "file"] {
        std::fs::remove_dir_all(&ctl).unwrap();
        match plant {
            "link" => std::os::unix::fs::symlink(shared.path(), &ctl).unwrap(),
            _ => std::fs::write(&ctl, "not a directory").unwrap(),
        }
        let status = common::wait_for(
            "the run to take its socket directory back",
            Duration::from_secs(20),
            || {
                let real = std::fs::symlink_metadata(&ctl).is_ok_and(|m| m.is_dir());
                let out = common::playdeck()
                    .args(["ctl", "run", "status"])
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                match (real, out.status.success()) {
                    (true, true) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
                    _ => Err(format!("{plant}: {}", String::from_utf8_lossy(&out.stderr))),
                }
            },
        );
        assert!(status.contains("running"), "{status}");
        let mode = std::fs::metadata(shared.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, 0o1777, "{plant}: the link's target was chmod-ed");
        assert_eq!(
            std::fs::read_dir(shared.path()).unwrap().count(),
            0,
            "{plant}"
        );
    }
    run.kill().unwrap();
    run.wait().unwrap();
}

/// Issue 56: a host stopped with SIGSTOP does not answer, and holds its
/// run: `runs` says it is stopped, never `crashed: resumable`.
#[test]
fn a_stopped_host_is_listed_as_stopped_not_crashed() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start(dir.path(), &chain(2, 60_000));
    let pid = rustix::process::Pid::from_raw(run.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let listed = common::playdeck()
        .args(["runs", "--dir", "."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(!listed.contains("crashed"), "{listed}");
    assert!(listed.contains("stopped (pid"), "{listed}");
}

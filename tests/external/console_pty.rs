//! The console in a pseudo-terminal (as in the pty tier's `console_pty`)
//! with a server from outside this repository: a real sshd, a real
//! nats-server. Without it installed, a test says so and skips.

use crate::common;

use std::time::{Duration, Instant};

use common::pty::{Console, Screen};

/// Whether what answers on `port` is an SSH server (its first line).
fn greets_as_ssh(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut first = [0u8; 8];
    s.read_exact(&mut first).is_ok() && &first == b"SSH-2.0-"
}

/// A real sshd on 127.0.0.1 with keys made for the test, and an ssh
/// client config that reaches it (host key checked against the one made).
struct Sshd {
    child: std::process::Child,
    port: u16,
    client_config: std::path::PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// None, saying why, where sshd is not installed (`.ci/run` installs
    /// Debian's openssh-server).
    fn start(dir: &std::path::Path) -> Option<Sshd> {
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(sshd) = sshd else {
            eprintln!("skipped: no sshd here (.ci/run installs openssh-server)");
            return None;
        };
        let keygen = |path: &std::path::Path| {
            let ok = std::process::Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(path)
                .status()
                .unwrap();
            assert!(ok.success());
        };
        keygen(&dir.join("host_key"));
        keygen(&dir.join("id"));
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
        // sshd cannot choose its own port and say which: take one found
        // free, and when another test's server took it meanwhile (sshd
        // exits, "Address already in use"), take another. It is ours once
        // it has written its pid file, which sshd does after it listens.
        let mut tries = 0;
        let (child, port) = loop {
            tries += 1;
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            match Sshd::spawn_on(sshd, dir, port) {
                Ok(child) => break (child, port),
                Err(why) if tries < 5 && why.contains("in use") => {}
                Err(why) => panic!("sshd on port {port} did not come up: {why}"),
            }
        };
        Some(Sshd {
            child,
            port,
            client_config: dir.join("ssh_config"),
        })
    }

    /// Writes the configs for `port` and starts sshd there; the child once
    /// it greets as SSH, or why not (with what sshd wrote).
    fn spawn_on(
        sshd: &str,
        dir: &std::path::Path,
        port: u16,
    ) -> Result<std::process::Child, String> {
        // Privilege separation wants its directory when run as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let d = dir.display();
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nLogLevel ERROR\n"
            ),
        )
        .unwrap();
        let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
        std::fs::write(
            dir.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_pub}"),
        )
        .unwrap();
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        std::fs::write(
            dir.join("ssh_config"),
            format!(
                "Host 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {d}/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
            ),
        )
        .unwrap();
        let log = dir.join("sshd.log");
        let pid_file = dir.join("sshd.pid");
        let _ = std::fs::remove_file(&pid_file);
        let mut child = std::process::Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited ({status}): {}", said()));
            }
            let listening = std::fs::read_to_string(&pid_file)
                .is_ok_and(|p| p.trim() == child.id().to_string());
            if listening && greets_as_ssh(port) {
                return Ok(child);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("not listening within 30 s: {}", said()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn env(&self) -> [(String, String); 2] {
        [
            (
                "PLAYDECK_SSH".into(),
                format!("ssh -F {}", self.client_config.display()),
            ),
            ("PLAYDECK_REMOTE_BIN".into(), common::PLAYDECK.into()),
        ]
    }
}

/// Issue 21: a run on another machine, through a real sshd: `runs` lists
/// it and `attach ssh://…#latest` is the full console on it, its actions
/// carried over ssh's stdio to the run's socket (no new listener).
#[test]
fn a_run_across_ssh_is_listed_attached_and_approved() {
    let keys = tempfile::tempdir().unwrap();
    let Some(sshd) = Sshd::start(keys.path()) else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("gates.toml"),
        include_str!("../../examples/plays/gates.toml"),
    )
    .unwrap();
    let (run_err, run_err_path) = common::stderr_file(keys.path(), "run.stderr");
    let mut run = common::playdeck()
        .args([
            "run",
            "gates.toml",
            "--headless",
            "--run-dir",
            ".playdeck/runs/far",
        ])
        .current_dir(project.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(run_err)
        .spawn()
        .unwrap();
    common::wait_run_listening(
        &project.path().join(".playdeck/runs/far/ctl/control.sock"),
        &mut run,
        Some(&run_err_path),
    );
    let addr = format!("ssh://127.0.0.1:{}{}", sshd.port, project.path().display());
    let listed = common::playdeck()
        .args(["runs", "--dir", &addr])
        .envs(sshd.env())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(text.contains("far") && text.contains("gates"), "{text}");

    let here = tempfile::tempdir().unwrap();
    let target = format!("{addr}#far");
    let mut console = Console::open_with(here.path(), &["attach", &target], &sshd.env());
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the remote run's gates", |s| {
        s.contains("approval 3") && s.contains("gates")
    });
    console.press(b"ll");
    screen.wait_for("gate-a named", |s| s.contains("gate-a: a approve"));
    console.press(b"a");
    screen.wait_for("the approval, over ssh", |s| s.contains("approved gate-a"));
    let status = common::playdeck()
        .args(["ctl", "far", "status", "--json"])
        .current_dir(project.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["awaiting_approval"].as_array().unwrap().len(), 2, "{v:#}");
    let log = playdeck::store::whole_text(&project.path().join(".playdeck/runs/far/events.jsonl"))
        .unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"approved\"") && l.contains("ssh bridge (")),
        "the approval is recorded as the ssh bridge's"
    );
    console.press(b"q");
    screen.wait_for("the detach question", |s| {
        s.contains("Detach from the run?")
    });
    console.press(b"\r");
    assert_eq!(console.wait_exit(), 0);
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: detached"));
    assert!(
        after.contains(&format!("attach: playdeck attach {addr}#far")),
        "{after}"
    );
    drop(run.stdin.take());
    let _ = run.wait();
}

#[test]
fn a_cluster_run_shows_its_workers_in_the_capacity_pane() {
    let Some(nats) = common::nats::Nats::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // No [cluster]: `--nats` sends it there, through the run host.
    std::fs::write(
        dir.path().join("play.toml"),
        include_str!("../plays/one_op_a_minute.toml"),
    )
    .unwrap();
    let w = common::nats::Worker::start(dir.path(), &nats, 2);
    let creds = [(
        "PLAYDECK_NATS_CREDS".to_string(),
        common::nats::signed_creds().display().to_string(),
    )];
    let mut console = Console::open_with(
        dir.path(),
        &["run", "play.toml", "--nats", &nats.url()],
        &creds,
    );
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    let id = format!("-{} 1/2", w.id());
    screen.wait_for("the worker in the capacity pane", |s| {
        s.contains("workers 1 · busy 1/2") && s.contains(&id) && s.contains("beating")
    });
    // Told to stop, it drains (its operation runs a minute); told again,
    // it leaves at once, and the pane says so.
    w.signal(rustix::process::Signal::TERM);
    screen.wait_for("the worker draining", |s| s.contains("draining"));
    w.signal(rustix::process::Signal::TERM);
    screen.wait_for("no worker left", |s| s.contains("workers 0 · busy 0/0"));
    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1);
}

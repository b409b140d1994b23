//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod nats;
pub mod pty;
pub mod realcli;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use playdeck::agents::{AgentRegistry, SimAgent};
use playdeck::kernel::{
    Agent, AgentOutcome, AgentResolver, BoxFuture, Envelope, Graph, Invocation, NodeBuilder, OpId,
    Operation, Run, RunConfig, RunHandle, Signal, SignalKind, SignalSink, StaticRoleBuilder,
};
use serde_json::{Map, Value, json};

/// The playdeck binary cargo built for these tests.
pub const PLAYDECK: &str = env!("CARGO_BIN_EXE_playdeck");

/// The example agent CLI (`examples/agent`), built beside it.
pub const AGENT: &str = env!("CARGO_BIN_EXE_playdeck-agent");

/// The playdeck binary as a command, for a test to add its arguments,
/// directory and pipes to. Two variables that only a caller's own
/// environment would set are taken away, so they cannot change what a
/// test sees: NO_COLOR (the human format's colours) and
/// PLAYDECK_FAULT_KILL_AFTER (a crash at an event line); a test that
/// wants one sets it.
pub fn playdeck() -> std::process::Command {
    let mut c = std::process::Command::new(PLAYDECK);
    c.env_remove("NO_COLOR")
        .env_remove("PLAYDECK_FAULT_KILL_AFTER")
        .env("XDG_STATE_HOME", state_home());
    c
}

/// The user's state directory the tests' playdeck sees (its runs index):
/// one of this test process's own, never the real one.
pub fn state_home() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("playdeck-test-state-{}", std::process::id()))
}

/// `git -C dir ARGS…` as a test's author (name and email given), its
/// stdout; a failure fails the test with git's words.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sim parameters: `sim(300)` runs 300 ms and succeeds.
pub fn sim(ms: u64) -> Value {
    json!({"duration_ms": ms, "outcome": "succeed", "result": null, "context": null, "emits": [], "error": null, "escalation": null})
}

pub fn sim_with(ms: u64, extra: Value) -> Value {
    let mut v = sim(ms);
    for (k, val) in extra.as_object().unwrap() {
        v[k] = val.clone();
    }
    v
}

pub fn op(name: &str, role: &str, params: Value) -> Operation {
    Operation::new(name, format!("do {name}"))
        .with_role(role)
        .with_agent("rec", params)
}

/// What the recording agent saw of one invocation.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    pub context: Map<String, Value>,
    pub at: tokio::time::Instant,
}

#[derive(Default)]
pub struct Record {
    pub seen: Vec<Seen>,
    pub running: usize,
    pub max_running: usize,
}

/// Wraps the sim agent, recording every invocation and the highest number
/// running at once.
#[derive(Clone)]
pub struct RecordingAgent {
    pub sim: SimAgent,
    pub record: Arc<Mutex<Record>>,
}

impl RecordingAgent {
    pub fn new() -> Self {
        RecordingAgent {
            sim: SimAgent::new(1.0),
            record: Arc::default(),
        }
    }

    pub fn invocations(&self, name: &str) -> usize {
        self.record
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.name == name)
            .count()
    }

    pub fn context_of(&self, name: &str) -> Map<String, Value> {
        let r = self.record.lock().unwrap();
        r.seen
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .context
            .clone()
    }
}

struct Dec(Arc<Mutex<Record>>);
impl Drop for Dec {
    fn drop(&mut self) {
        self.0.lock().unwrap().running -= 1;
    }
}

impl Agent for RecordingAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        {
            let mut r = self.record.lock().unwrap();
            r.seen.push(Seen {
                name: inv.name.to_string(),
                context: inv.context.clone(),
                at: tokio::time::Instant::now(),
            });
            r.running += 1;
            r.max_running = r.max_running.max(r.running);
        }
        let dec = Dec(self.record.clone());
        let fut = self.sim.invoke(inv);
        Box::pin(async move {
            let out = fut.await;
            drop(dec);
            out
        })
    }
}

pub struct Agents {
    pub rec: RecordingAgent,
    base: AgentRegistry,
}

impl AgentResolver for Agents {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Agent>> {
        if name == "rec" {
            Some(Arc::new(self.rec.clone()))
        } else {
            self.base.resolve(name)
        }
    }
}

/// Collects every signal, in order.
#[derive(Clone, Default)]
pub struct Collect(pub Arc<Mutex<Vec<Arc<Signal>>>>);

impl SignalSink for Collect {
    fn write(&mut self, s: &Arc<Signal>) {
        self.0.lock().unwrap().push(s.clone());
    }
}

impl Collect {
    pub fn all(&self) -> Vec<Arc<Signal>> {
        self.0.lock().unwrap().clone()
    }

    pub fn types_for(&self, name: &str) -> Vec<&'static str> {
        self.all()
            .iter()
            .filter(|s| s.kind.node().is_some_and(|n| &*n.name == name))
            .map(|s| s.kind.type_name())
            .collect()
    }

    pub fn count(&self, ty: &str) -> usize {
        self.all()
            .iter()
            .filter(|s| s.kind.type_name() == ty)
            .count()
    }

    /// The messages of every `warning` signal, in order.
    pub fn warnings(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter_map(|s| match &s.kind {
                SignalKind::Warning { message, .. } => Some(message.to_string()),
                _ => None,
            })
            .collect()
    }

    pub fn started_order(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter_map(|s| match &s.kind {
                SignalKind::Started { node, .. } => Some(node.name.to_string()),
                _ => None,
            })
            .collect()
    }
}

pub struct Harness {
    pub run: Option<Run>,
    pub handle: RunHandle,
    pub signals: Collect,
    pub agents: Arc<Agents>,
}

pub fn routes(roles: &[&str]) -> StaticRoleBuilder {
    StaticRoleBuilder::new(roles.iter().map(|r| playdeck::kernel::RoleRoute {
        role: Arc::from(*r),
        agent: Arc::from("rec"),
        params: Arc::new(sim(100)),
    }))
}

pub fn harness(graph: Graph, cfg: RunConfig) -> Harness {
    harness_with(
        graph,
        cfg,
        Arc::new(routes(&["worker", "tester", "orchestrator"])),
    )
}

pub fn harness_with(graph: Graph, cfg: RunConfig, builder: Arc<dyn NodeBuilder>) -> Harness {
    let agents = Arc::new(Agents {
        rec: RecordingAgent::new(),
        base: AgentRegistry::builtin(1.0),
    });
    let (mut run, handle) = Run::new(graph, cfg, agents.clone(), builder).unwrap();
    let signals = Collect::default();
    run.add_sink(Box::new(signals.clone()));
    Harness {
        run: Some(run),
        handle,
        signals,
        agents,
    }
}

impl Harness {
    pub async fn run(mut self) -> (Envelope, Collect, Arc<Agents>) {
        let env = self.run.take().unwrap().run().await;
        (env, self.signals, self.agents)
    }

    pub fn spawn(&mut self) -> tokio::task::JoinHandle<Envelope> {
        self.run.take().unwrap().spawn()
    }
}

/// name -> op_id of an envelope.
pub fn ids_by_name(env: &Envelope) -> HashMap<String, OpId> {
    env.operation_names
        .iter()
        .map(|(id, n)| (n.to_string(), *id))
        .collect()
}

pub fn names(env: &Envelope, ids: &[OpId]) -> Vec<String> {
    let mut v: Vec<String> = ids
        .iter()
        .map(|i| env.name_of(i).unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Lets spawned tasks run without moving the paused clock.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// (line:col, message) of every problem in a rejected play.
pub fn play_errors(src: &str) -> Vec<(String, String)> {
    let d = playdeck::play::Play::from_str("p.toml", src).expect_err("the play should be rejected");
    d.items
        .iter()
        .map(|i| {
            let (l, c) = d.line_col(i.span.start);
            (format!("{l}:{c}"), i.message.clone())
        })
        .collect()
}

/// A TestBackend buffer as text, one trimmed line per row, with op ids
/// (they depend on test order) redacted.
pub fn screen_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    redact_uuids(&out)
}

/// Replaces anything shaped like a UUID with `[op-id]`.
pub fn redact_uuids(s: &str) -> String {
    let b = s.as_bytes();
    let is_uuid = |w: &[u8]| {
        w.len() == 36
            && w.iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if i + 36 <= b.len() && is_uuid(&b[i..i + 36]) {
            out.push_str("[op-id]");
            i += 36;
        } else {
            let ch = s[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A live headless run, in `dir`, of one operation that waits a minute
/// (`.playdeck/runs/live`), once its control socket answers. Its stderr is
/// piped (`tests/closed_pipe.rs` reads it at the end); a run that ends
/// before it listens fails the test with it. Cancel it with `playdeck ctl
/// live cancel`.
pub fn live_headless_run(dir: &std::path::Path) -> std::process::Child {
    use std::process::Stdio;
    std::fs::write(
        dir.join("slow.toml"),
        include_str!("../plays/wait_a_minute.toml"),
    )
    .unwrap();
    let mut child = playdeck()
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/live",
            "slow.toml",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_run_listening(
        &dir.join(".playdeck/runs/live/ctl/control.sock"),
        &mut child,
        None,
    );
    child
}

/// Polls `look` every 50 ms until it gives `Ok`, and returns that; an
/// `Err` says what it saw instead. Past `within` (a deadline for a loaded
/// machine, not a pace) the test fails with `what` and the last `Err`.
/// `look` may itself fail the test where waiting on cannot help (the
/// process it waits for has ended). The pace is the one most waits had:
/// some look by running the binary (`ctl status`), which a faster one
/// would run more often beside the tests' other work.
pub fn wait_for<T>(
    what: &str,
    within: std::time::Duration,
    mut look: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = std::time::Instant::now() + within;
    loop {
        match look() {
            Ok(seen) => return seen,
            Err(seen) => assert!(
                std::time::Instant::now() < deadline,
                "waited {within:?} for {what}; {seen}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits (60 s at most) until a run's control socket at `sock` answers.
/// Where the run's process is at hand, [`wait_run_listening`] says more.
pub fn wait_listening(sock: &std::path::Path) {
    wait_for(
        &format!("the run to listen on {}", sock.display()),
        std::time::Duration::from_secs(60),
        || {
            std::os::unix::net::UnixStream::connect(sock)
                .map(drop)
                .map_err(|e| format!("connecting: {e}"))
        },
    );
}

/// Waits (60 s at most) until the control socket at `sock` of the run
/// `child` answers. A run that ends first, or never listens, fails the
/// test with how it ended and its stderr: the file `stderr` where it
/// writes there, else its stderr pipe (read only once it has ended).
pub fn wait_run_listening(
    sock: &std::path::Path,
    child: &mut std::process::Child,
    stderr: Option<&std::path::Path>,
) {
    wait_for(
        &format!(
            "the run (pid {}) to listen on {}",
            child.id(),
            sock.display()
        ),
        std::time::Duration::from_secs(60),
        || {
            if std::os::unix::net::UnixStream::connect(sock).is_ok() {
                return Ok(());
            }
            if let Some(status) = child.try_wait().unwrap() {
                let said = match (stderr, child.stderr.take()) {
                    (Some(file), _) => std::fs::read_to_string(file).unwrap_or_default(),
                    (None, Some(mut pipe)) => {
                        let mut text = String::new();
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
                        text
                    }
                    (None, None) => "(not kept)".into(),
                };
                panic!(
                    "the run ended ({status}) before it listened on {}; its stderr:\n{said}",
                    sock.display()
                );
            }
            let said = stderr.map_or("(a pipe, unread while it runs)".into(), |f| {
                std::fs::read_to_string(f).unwrap_or_default()
            });
            Err(format!("its stderr:\n{said}"))
        },
    );
}

/// A file for a child's stderr (`Stdio::from` it) in `dir`, read back
/// for failures with [`tail_of`].
pub fn stderr_file(dir: &std::path::Path, name: &str) -> (std::fs::File, std::path::PathBuf) {
    let path = dir.join(name);
    (std::fs::File::create(&path).unwrap(), path)
}

/// The last `n` lines of the file at `path` (nothing when it is not
/// there).
pub fn tail_of(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(n).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The `type` of every event in a run's `events.jsonl` (in `run_dir`).
pub fn event_types(run_dir: &std::path::Path) -> Vec<String> {
    playdeck::store::whole_text(&run_dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["type"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A child's stdout read as JSON lines on a thread, every line kept, so a
/// wait that runs out says what came instead (and the child's stderr,
/// when it writes to a file).
pub struct JsonLines {
    rx: std::sync::mpsc::Receiver<Value>,
    pub seen: Vec<Value>,
    stderr: Option<std::path::PathBuf>,
}

impl JsonLines {
    /// Takes `child`'s piped stdout; `stderr` is the file its stderr goes
    /// to, if one.
    pub fn read(child: &mut std::process::Child, stderr: Option<std::path::PathBuf>) -> JsonLines {
        use std::io::BufRead;
        let out = child.stdout.take().expect("stdout piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&l).unwrap_or(Value::String(l));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        JsonLines {
            rx,
            seen: Vec::new(),
            stderr,
        }
    }

    /// The next line that `pred` accepts, within `within` of now; failing
    /// that, the test fails with the lines seen and the stderr.
    pub fn until(
        &mut self,
        what: &str,
        within: std::time::Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        use std::sync::mpsc::RecvTimeoutError;
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}", self.missed(&format!("no {what} within {within:?}")))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "{}",
                        self.missed(&format!("the output ended before {what}"))
                    )
                }
            }
        }
    }

    fn missed(&self, why: &str) -> String {
        let from = self.seen.len().saturating_sub(40);
        let lines: Vec<String> = self.seen[from..]
            .iter()
            .map(|v| {
                let mut l = v.to_string();
                if l.len() > 300 {
                    let mut cut = 300;
                    while !l.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    l.truncate(cut);
                    l.push('…');
                }
                l
            })
            .collect();
        let stderr = self
            .stderr
            .as_deref()
            .map_or("(not kept)".into(), |f| tail_of(f, 30));
        format!(
            "{why}; {} lines seen, the last {}:\n{}\nstderr:\n{stderr}",
            self.seen.len(),
            lines.len(),
            lines.join("\n")
        )
    }
}

/// The playdeck binary copied where another user can run it (a test's
/// checkout may sit in a directory only its owner can enter, as CI's
/// does). Keep the directory as long as the path is used.
pub fn binary_for_anyone() -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("playdeck");
    // The copy is written by another process: a file this test process held
    // open for writing would be inherited by any child another test thread
    // forks meanwhile, and exec'ing the copy would fail with "Text file busy"
    // until that child execs.
    let status = std::process::Command::new("install")
        .args(["-m", "755", PLAYDECK])
        .arg(&bin)
        .status()
        .unwrap();
    assert!(status.success(), "install the binary copy: {status}");
    (dir, bin)
}

/// Child processes killed and reaped when the test ends, passed or not.
pub struct Reaped(pub Vec<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `playdeck` with a state directory of its own (runs index, web
/// devices), as no agent: a test's own user.
pub fn playdeck_in_state(state: &std::path::Path) -> std::process::Command {
    let mut c = playdeck();
    c.env("XDG_STATE_HOME", state)
        .env_remove("PLAYDECK_RUN_DIR");
    c
}

/// A headless run of `play` in `dir` (its run directory
/// `.playdeck/runs/ID`), with the state directory `state`; stdin is kept
/// open, so it waits for the operator where a person must decide.
pub fn headless_waiting(
    state: &std::path::Path,
    dir: &std::path::Path,
    id: &str,
    play: &str,
) -> std::process::Child {
    playdeck_in_state(state)
        .args([
            "run",
            "--headless",
            "--run-dir",
            &format!(".playdeck/runs/{id}"),
            play,
        ])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// `playdeck web` with the state directory `state` and `args`, in `dir`:
/// the server and the address it says it serves.
pub fn web_server(
    state: &std::path::Path,
    dir: &std::path::Path,
    args: &[&str],
) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut server = playdeck_in_state(state)
        .args(["web", "--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    (server, url)
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod nats;
pub mod realcli;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use playdeck::agents::{AgentRegistry, SimAgent};
use playdeck::kernel::{
    Agent, AgentOutcome, AgentResolver, BoxFuture, Envelope, Graph, Invocation, NodeBuilder, OpId,
    Operation, Run, RunConfig, RunHandle, Signal, SignalKind, SignalSink, StaticRoleBuilder,
};
use serde_json::{Map, Value, json};

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
/// piped; cancel it with `playdeck ctl live cancel`.
pub fn live_headless_run(dir: &std::path::Path) -> std::process::Child {
    use std::process::Stdio;
    std::fs::write(
        dir.join("slow.toml"),
        "[play]\nname = \"slow\"\n[palette]\nroles = [{ role = \"implementer\" }]\n[[operations]]\nid = \"wait\"\nrole = \"implementer\"\ninstruction = \"wait\"\nsim = { duration_ms = 60000 }\n",
    )
    .unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_playdeck"));
    let child = c
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
    wait_listening(&dir.join(".playdeck/runs/live/ctl/control.sock"));
    child
}

/// Waits (20 s at most) until a run's control socket at `sock` answers.
pub fn wait_listening(sock: &std::path::Path) {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(
            Instant::now() < deadline,
            "the run never listened on {}",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
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
        .args(["-m", "755", env!("CARGO_BIN_EXE_playdeck")])
        .arg(&bin)
        .status()
        .unwrap();
    assert!(status.success(), "install the binary copy: {status}");
    (dir, bin)
}

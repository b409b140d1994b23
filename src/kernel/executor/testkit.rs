//! A run's executor driven step by step, without a runtime loop: tests of
//! each part call its methods and read the signals it emitted.

use std::sync::{Arc, Mutex};

use super::super::agent::{Agent, AgentOutcome, AgentResolver, BoxFuture, Invocation};
use super::super::builder::StaticRoleBuilder;
use super::super::graph::{Condition, GraphBuilder, OpId, Operation};
use super::super::signal::{Signal, SignalSink};
use super::{Executor, Run, RunConfig};

/// An agent whose work never ends: tests settle nodes themselves.
struct Forever;

impl Agent for Forever {
    fn invoke(&self, _inv: Invocation) -> BoxFuture<AgentOutcome> {
        Box::pin(std::future::pending())
    }
}

struct Agents;

impl AgentResolver for Agents {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Agent>> {
        (name != "missing").then(|| Arc::new(Forever) as Arc<dyn Agent>)
    }
}

/// Every signal, in order.
#[derive(Clone, Default)]
pub(super) struct Tape(pub Arc<Mutex<Vec<Arc<Signal>>>>);

impl SignalSink for Tape {
    fn write(&mut self, s: &Arc<Signal>) {
        self.0.lock().unwrap().push(s.clone());
    }
}

impl Tape {
    /// `type name` of each signal (`queued a`, `run_paused`).
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                let v = serde_json::to_value(&**s).unwrap();
                let t = v["type"].as_str().unwrap().to_string();
                match v["name"].as_str() {
                    Some(n) => format!("{t} {n}"),
                    None => t,
                }
            })
            .collect()
    }

    /// Lines emitted since the last call.
    pub fn take(&self) -> Vec<String> {
        let lines = self.lines();
        self.0.lock().unwrap().clear();
        lines
    }
}

/// One operation, `a`, started, in a run that accepts at most `max_spawn`
/// spawns: the emitter of the admission tests.
pub(super) fn started_emitter(max_spawn: usize) -> (Executor, Tape) {
    let cfg = RunConfig {
        max_spawn,
        ..RunConfig::default()
    };
    let (mut ex, tape) = executor(&[("a", &[], false)], cfg);
    ex.begin();
    (ex, tape)
}

/// An executor over `ops`: (name, dependencies, approval gate). Nothing
/// has happened yet; `begin` emits the start.
pub(super) fn executor(ops: &[(&str, &[&str], bool)], cfg: RunConfig) -> (Executor, Tape) {
    let mut b = GraphBuilder::new();
    let mut ids: Vec<(&str, OpId)> = Vec::new();
    for (name, deps, gate) in ops {
        let op = Operation::new(*name, "x")
            .with_role("worker")
            .with_agent("forever", serde_json::Value::Null)
            .with_approval(*gate);
        let id = if deps.is_empty() {
            b.add_root(op)
        } else {
            let d: Vec<(OpId, Condition)> = deps
                .iter()
                .map(|d| {
                    (
                        ids.iter().find(|(n, _)| n == d).unwrap().1,
                        Condition::Succeeded,
                    )
                })
                .collect();
            b.add_after(op, d)
        };
        ids.push((name, id));
    }
    let (mut run, _) = Run::new(
        b.build().unwrap(),
        cfg,
        Arc::new(Agents),
        Arc::new(StaticRoleBuilder::new([super::super::builder::RoleRoute {
            role: Arc::from("worker"),
            agent: Arc::from("forever"),
            params: Arc::new(serde_json::Value::Null),
        }])),
    )
    .unwrap();
    let tape = Tape::default();
    run.add_sink(Box::new(tape.clone()));
    (run.ex, tape)
}

impl Executor {
    /// The node named `name`.
    pub(super) fn ix(&self, name: &str) -> petgraph::stable_graph::NodeIndex {
        self.resolve(name).unwrap()
    }

    /// Settles a running node as succeeded, as its agent would.
    pub(super) fn finish_ok(&mut self, name: &str) {
        let ix = self.ix(name);
        let attempt = self.graph[ix].attempt;
        self.complete(ix, attempt, Ok(serde_json::json!({"ok": true})));
    }
}

//! `checkpoint.json`: the durable state of a run, a fold of its signals.
//!
//! The checkpoint is seeded with the initial graph and then folds every
//! signal the run emits; it is rewritten atomically (write, fsync, rename)
//! when a batch of signals that matter ends, coalesced by a writer thread so
//! a burst costs one write. `events.jsonl` stays the source of truth: resume
//! loads the checkpoint and folds the log's lines after `seq` over it, so a
//! crash between the two loses nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::kernel::request::RequestId;
use crate::kernel::{
    DepRecord, DropReason, Edge, Graph, LedgerEntry, LedgerOutcome, NodeStatus, OpId, OpMetadata,
    Operation, Outcome, RunConfig, Signal, SignalKind, SignalSink, SkipReason, deep_merge,
};
use crate::palette::PaletteSnapshot;

pub const CHECKPOINT_FILE: &str = "checkpoint.json";
pub const CHECKPOINT_FORMAT: u32 = 1;

/// One attempt of an operation and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub started_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// `running` (still, or when the process died), `succeeded`,
    /// `escalated`, `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Arc<str>>,
}

/// An operator's (or the policy's) decision on an approval gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub approved: bool,
    pub by: Arc<str>,
    pub at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub op: Operation,
    /// Incoming edges.
    #[serde(default)]
    pub deps: Vec<DepRecord>,
    pub status: NodeStatus,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<SkipReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default)]
    pub held: bool,
    /// Every sighting of a spawn request it emitted that reached the
    /// ledger: (seq, identity). Resume skips these when they come again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sightings: Vec<(u64, RequestId)>,
    /// The seq of the signal that settled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_seq: Option<u64>,
    #[serde(default)]
    pub queued_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Arc<str>>,
}

/// A capacity instance as the run last reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub name: Arc<str>,
    pub profile: Arc<str>,
    pub role: Arc<str>,
    pub state: Arc<str>,
    pub lifetime: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Arc<str>>,
    /// Busy time so far, seconds.
    #[serde(default)]
    pub busy_secs: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_since: Option<f64>,
}

/// The palette the play declared and where its budgets stand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaletteRecord {
    /// `[palette]` as declared: roles with dispositions and modes, and the
    /// expansion policy.
    pub declared: Value,
    pub snapshot: PaletteSnapshot,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub format: u32,
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    /// Where the play file was when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub play_path: Option<PathBuf>,
    /// The last signal folded in.
    pub seq: u64,
    pub elapsed: f64,
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    /// Operations in the order they joined the graph.
    pub nodes: Vec<NodeRecord>,
    pub context: Map<String, Value>,
    pub spawn_seq: u64,
    pub spawn_accepted: usize,
    pub ledger: Vec<LedgerEntry>,
    pub round: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub palette: Option<PaletteRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Outcome>,
    /// How many times the run was resumed.
    #[serde(default)]
    pub resumes: u32,
    /// Paused by the operator when it stopped (resume keeps it paused).
    #[serde(default)]
    pub paused: bool,
    #[serde(skip)]
    index: BTreeMap<OpId, usize>,
}

impl Checkpoint {
    /// The state before the first signal: the initial graph and settings.
    pub fn seed(graph: &Graph, cfg: &RunConfig) -> Checkpoint {
        let mut nodes: Vec<NodeRecord> = graph
            .operations()
            .map(|op| NodeRecord::new(op.clone()))
            .collect();
        let mut index = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            index.insert(n.op.op_id, i);
        }
        for (from, to, edge) in graph.edges() {
            if let Some(&i) = index.get(&to) {
                nodes[i].deps.push(DepRecord {
                    from,
                    edge: edge.clone(),
                });
            }
        }
        Checkpoint {
            format: CHECKPOINT_FORMAT,
            run_id: cfg.run_id.clone(),
            play: cfg.play.clone(),
            play_path: None,
            seq: 0,
            elapsed: 0.0,
            max_concurrent: cfg.max_concurrent,
            reactive: cfg.reactive,
            max_spawn: cfg.max_spawn,
            nodes,
            context: cfg.context.clone(),
            spawn_seq: 0,
            spawn_accepted: 0,
            ledger: Vec::new(),
            round: 1,
            palette: None,
            instances: Vec::new(),
            warnings: Vec::new(),
            finished: None,
            resumes: 0,
            paused: false,
            index,
        }
    }

    /// Rebuilds the op-id index after deserialising.
    pub fn reindex(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.op.op_id, i))
            .collect();
    }

    pub fn node(&self, id: &OpId) -> Option<&NodeRecord> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    pub fn node_by_name(&self, name: &str) -> Option<&NodeRecord> {
        self.nodes.iter().find(|n| &*n.op.reference_id == name)
    }

    fn node_mut(&mut self, id: &OpId) -> Option<&mut NodeRecord> {
        self.index.get(id).map(|&i| &mut self.nodes[i])
    }

    /// Folds one signal in. Signals at or below `seq` are already in.
    pub fn apply(&mut self, s: &Signal) {
        if s.seq <= self.seq {
            return;
        }
        self.seq = s.seq;
        self.elapsed = s.elapsed;
        let at = s.elapsed;
        match &s.kind {
            SignalKind::Queued {
                node, instruction, ..
            } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.op.instruction = instruction.clone();
                    n.queued_at = at;
                    // Re-queued for a new attempt after a resume.
                    if n.status == NodeStatus::Running {
                        n.status = NodeStatus::Pending;
                    }
                }
            }
            SignalKind::Spawned {
                op_id,
                name,
                parent_id,
                assignee,
                instruction,
                record,
                ..
            } => {
                let op = Operation {
                    op_id: *op_id,
                    reference_id: name.clone(),
                    instruction: instruction.clone(),
                    assignee: assignee.clone(),
                    operation: record.kind,
                    metadata: OpMetadata {
                        requester_role: record.requester_role.clone(),
                        spawned_from: *parent_id,
                        approval: false,
                        agent: record.agent.clone(),
                        params: record.params.clone(),
                        spawn_reason: record.reason.clone(),
                        profile: record.profile.clone(),
                    },
                };
                let mut n = NodeRecord::new(op);
                n.deps = record.edges.clone();
                n.queued_at = at;
                self.index.insert(*op_id, self.nodes.len());
                self.nodes.push(n);
                // Only generated names take a number (a named injection
                // does not).
                self.note_spawn_number(name);
                self.spawn_accepted += 1;
                if let (Some(p), Some(id)) = (parent_id, &record.identity) {
                    self.see(p, s.seq, id);
                }
                self.ledger_row(
                    s,
                    *parent_id,
                    assignee,
                    LedgerOutcome::Accepted {
                        op_id: *op_id,
                        name: name.clone(),
                    },
                );
            }
            SignalKind::SpawnDropped {
                reason,
                assignee,
                emitter_id,
                detail,
                op_id,
                identity,
            } => {
                // Admission numbers a candidate before the cap refuses it
                // ("spawn-N refused: ...").
                if *reason == DropReason::MaxSpawnExceeded {
                    let name = detail.split_whitespace().next().unwrap_or("");
                    self.note_spawn_number(name);
                }
                if let (Some(e), Some(id)) = (emitter_id, identity) {
                    self.see(e, s.seq, id);
                }
                self.ledger_row(
                    s,
                    *emitter_id,
                    assignee,
                    LedgerOutcome::Dropped {
                        reason: *reason,
                        detail: detail.clone(),
                        op_id: *op_id,
                    },
                );
            }
            SignalKind::Started {
                node,
                attempt,
                instance,
                ..
            } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.status = NodeStatus::Running;
                    n.attempt = *attempt;
                    n.instance = instance.clone();
                    n.attempts.push(Attempt {
                        attempt: *attempt,
                        started_at: at,
                        finished_at: None,
                        outcome: "running".into(),
                        result: None,
                        error: None,
                        category: None,
                    });
                }
            }
            SignalKind::Completed { node, result } => {
                self.merge_context(result);
                self.settle(&node.op_id, NodeStatus::Succeeded, at, |n, a| {
                    n.result = Some(result.clone());
                    if let Some(a) = a {
                        a.result = Some(result.clone());
                    }
                });
            }
            SignalKind::Escalated {
                node,
                reason,
                result,
            } => {
                self.merge_context(result);
                self.settle(&node.op_id, NodeStatus::Escalated, at, |n, a| {
                    n.result = Some(result.clone());
                    n.escalation = Some(reason.clone());
                    if let Some(a) = a {
                        a.result = Some(result.clone());
                    }
                });
            }
            SignalKind::Failed {
                node,
                error,
                category,
            } => {
                self.settle(&node.op_id, NodeStatus::Failed, at, |n, a| {
                    n.error = Some(error.clone());
                    n.category = Some(category.clone());
                    n.result = Some(Arc::new(serde_json::json!({ "error": &**error })));
                    if let Some(a) = a {
                        a.error = Some(error.clone());
                        a.category = Some(category.clone());
                    }
                });
            }
            SignalKind::Skipped { node, reason } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.status = NodeStatus::Skipped;
                    n.skip_reason = Some(*reason);
                    n.finished_at = Some(at);
                }
            }
            SignalKind::AwaitingApproval { node } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.status = NodeStatus::AwaitingApproval;
                }
            }
            SignalKind::Approved { node, by } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.decision = Some(Decision {
                        approved: true,
                        by: by.clone(),
                        at,
                        reason: None,
                    });
                    if n.status == NodeStatus::AwaitingApproval {
                        n.status = NodeStatus::Ready;
                    }
                }
            }
            SignalKind::Denied { node, by, reason } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.decision = Some(Decision {
                        approved: false,
                        by: by.clone(),
                        at,
                        reason: Some(reason.clone()),
                    });
                }
            }
            SignalKind::Retried { node, because, .. } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.status = NodeStatus::Pending;
                    n.result = None;
                    n.error = None;
                    n.category = None;
                    n.skip_reason = None;
                    n.finished_at = None;
                    n.settled_seq = None;
                    // A denied gate asks again.
                    if because.is_none() && n.decision.as_ref().is_some_and(|d| !d.approved) {
                        n.decision = None;
                    }
                }
            }
            SignalKind::Held { node } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.held = true;
                }
            }
            SignalKind::Unheld { node } => {
                if let Some(n) = self.node_mut(&node.op_id) {
                    n.held = false;
                }
            }
            SignalKind::RoundEnded { round } => self.round = round + 1,
            SignalKind::Budget {
                initial_roles,
                expanded_roles,
                reserved_roles,
                consumed_new_roles,
                max_new_roles,
                ..
            } => {
                let names = |v: &[Arc<str>]| v.iter().map(|s| s.to_string()).collect();
                let snapshot = PaletteSnapshot {
                    initial_roles: names(initial_roles),
                    expanded_roles: names(expanded_roles),
                    reserved_roles: names(reserved_roles),
                    max_new_roles: *max_new_roles,
                    consumed_new_roles: *consumed_new_roles,
                };
                match &mut self.palette {
                    Some(p) => p.snapshot = snapshot,
                    None => {
                        self.palette = Some(PaletteRecord {
                            declared: Value::Null,
                            snapshot,
                        })
                    }
                }
            }
            SignalKind::Instance {
                name,
                profile,
                role,
                state,
                lifetime,
                op,
                ..
            } => {
                let i = match self.instances.iter().position(|r| r.name == *name) {
                    Some(i) => i,
                    None => {
                        self.instances.push(InstanceRecord {
                            name: name.clone(),
                            profile: profile.clone(),
                            role: role.clone(),
                            state: state.clone(),
                            lifetime: lifetime.clone(),
                            op: None,
                            busy_secs: 0.0,
                            busy_since: None,
                        });
                        self.instances.len() - 1
                    }
                };
                let r = &mut self.instances[i];
                if let Some(since) = r.busy_since.take() {
                    r.busy_secs += (at - since).max(0.0);
                }
                if &**state == "busy" {
                    r.busy_since = Some(at);
                }
                r.state = state.clone();
                r.op = op.clone();
            }
            SignalKind::Warning { message, .. } => self.warnings.push(message.clone()),
            SignalKind::RunFinished { outcome, .. } => self.finished = Some(*outcome),
            SignalKind::Resumed { resumes, .. } => {
                self.resumes = *resumes;
                self.finished = None;
                self.paused = false;
            }
            SignalKind::RunStarted { paused, .. } => self.paused = *paused,
            SignalKind::RunPaused => self.paused = true,
            SignalKind::RunResumed => self.paused = false,
            _ => {}
        }
    }

    /// A ledger row as the kernel keeps it, from the signal that recorded it.
    fn ledger_row(
        &mut self,
        s: &Signal,
        emitter: Option<OpId>,
        assignee: &Option<Arc<str>>,
        outcome: LedgerOutcome,
    ) {
        let emitter_name = emitter
            .and_then(|e| self.node(&e))
            .map(|n| n.op.reference_id.clone());
        self.ledger.push(LedgerEntry {
            seq: s.seq,
            elapsed: s.elapsed,
            emitter_id: emitter,
            emitter_name,
            assignee: assignee.clone(),
            outcome,
        });
    }

    fn note_spawn_number(&mut self, name: &str) {
        if let Some(n) = name
            .strip_prefix("spawn-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.spawn_seq = self.spawn_seq.max(n);
        }
    }

    fn see(&mut self, emitter: &OpId, seq: u64, identity: &RequestId) {
        if let Some(n) = self.node_mut(emitter) {
            n.sightings.push((seq, *identity));
        }
    }

    fn merge_context(&mut self, result: &Value) {
        if let Some(Value::Object(ctx)) = result.get("context") {
            deep_merge(&mut self.context, ctx);
        }
    }

    fn settle(
        &mut self,
        id: &OpId,
        status: NodeStatus,
        at: f64,
        f: impl FnOnce(&mut NodeRecord, Option<&mut Attempt>),
    ) {
        let seq = self.seq;
        let Some(n) = self.node_mut(id) else {
            return;
        };
        n.status = status;
        n.settled_seq = Some(seq);
        n.finished_at = Some(at);
        let attempt = n.attempt;
        // Take the attempt out to lend both mutably.
        let mut last = n.attempts.pop().filter(|a| a.attempt == attempt);
        if let Some(a) = &mut last {
            a.finished_at = Some(at);
            a.outcome = match status {
                NodeStatus::Succeeded => "succeeded",
                NodeStatus::Escalated => "escalated",
                _ => "failed",
            }
            .into();
        }
        f(n, last.as_mut());
        if let Some(a) = last {
            n.attempts.push(a);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(self).expect("a checkpoint serialises");
        b.push(b'\n');
        b
    }

    /// Reads `checkpoint.json`; a cut or corrupt file is an error naming it.
    pub fn load(path: &Path) -> Result<Checkpoint, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut c: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{}:{}:{}: the checkpoint is damaged ({e}); it is not used (nothing was changed)",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        if c.format != CHECKPOINT_FORMAT {
            return Err(format!(
                "{}: checkpoint format {} is not one this playdeck reads (it reads {CHECKPOINT_FORMAT})",
                path.display(),
                c.format
            ));
        }
        c.reindex();
        Ok(c)
    }
}

impl NodeRecord {
    fn new(op: Operation) -> Self {
        NodeRecord {
            op,
            deps: Vec::new(),
            status: NodeStatus::Pending,
            attempt: 0,
            attempts: Vec::new(),
            result: None,
            error: None,
            category: None,
            escalation: None,
            skip_reason: None,
            decision: None,
            held: false,
            sightings: Vec::new(),
            settled_seq: None,
            queued_at: 0.0,
            finished_at: None,
            instance: None,
        }
    }
}

/// Whether a signal changes what a checkpoint must remember.
fn matters(kind: &SignalKind) -> bool {
    !matches!(
        kind,
        SignalKind::AgentActivity { .. }
            | SignalKind::AgentUsage { .. }
            | SignalKind::CapacityWait { .. }
            | SignalKind::Paused { .. }
            | SignalKind::Unpaused { .. }
    )
}

/// Folds signals into the checkpoint and has a writer thread rewrite
/// `checkpoint.json` at the end of each batch that changed it. A burst
/// costs one write: requests made while a write is under way collapse into
/// the next one.
pub struct CheckpointSink {
    state: Arc<Mutex<Checkpoint>>,
    writes: Arc<std::sync::atomic::AtomicUsize>,
    /// Signals of the batch under way: folded in at `flush`, after the
    /// event log (flushed first) has them on disk, so a checkpoint never
    /// covers a line the log may still lose.
    pending: Vec<Arc<Signal>>,
    dirty: bool,
    wake: mpsc::SyncSender<()>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl CheckpointSink {
    pub fn new(dir: &Path, seed: Checkpoint) -> CheckpointSink {
        let state = Arc::new(Mutex::new(seed));
        let (wake, rx) = mpsc::sync_channel::<()>(1);
        let path = dir.join(CHECKPOINT_FILE);
        let shared = state.clone();
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = writes.clone();
        let writer = std::thread::Builder::new()
            .name("playdeck-checkpoint".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    let bytes = shared.lock().unwrap_or_else(|e| e.into_inner()).to_bytes();
                    if let Err(e) = crate::store::write_atomic(&path, &bytes) {
                        tracing::error!(path = %path.display(), "checkpoint write failed: {e}");
                    }
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .expect("a thread for the checkpoint writer");
        let sink = CheckpointSink {
            state,
            writes,
            pending: Vec::new(),
            dirty: true,
            wake,
            writer: Some(writer),
        };
        sink.request();
        sink
    }

    /// How many times the file was written (coalescing, for tests).
    pub fn writes(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.writes.clone()
    }

    /// The state as folded so far.
    pub fn state(&self) -> Arc<Mutex<Checkpoint>> {
        self.state.clone()
    }

    fn request(&self) {
        // Full: a write is already due and will carry this change too.
        let _ = self.wake.try_send(());
    }
}

impl SignalSink for CheckpointSink {
    fn write(&mut self, s: &Arc<Signal>) {
        self.dirty |= matters(&s.kind);
        self.pending.push(s.clone());
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for s in self.pending.drain(..) {
                st.apply(&s);
            }
        }
        if std::mem::take(&mut self.dirty) {
            self.request();
        }
    }
}

impl Drop for CheckpointSink {
    fn drop(&mut self) {
        // The last state reaches the disk before the run is reported done.
        if !self.pending.is_empty() {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for s in self.pending.drain(..) {
                st.apply(&s);
            }
        }
        if std::mem::take(&mut self.dirty) {
            let _ = self.wake.send(());
        }
        let (tx, _) = mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.wake, tx));
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Edges of a node as the graph builder takes them.
pub fn edges_of(n: &NodeRecord) -> Vec<(OpId, Edge)> {
    n.deps.iter().map(|d| (d.from, d.edge.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::GraphBuilder;

    fn warning(seq: u64) -> Arc<Signal> {
        Arc::new(Signal {
            v: 1,
            seq,
            elapsed: seq as f64 / 1000.0,
            kind: SignalKind::Warning {
                message: Arc::from("w"),
                op_id: None,
            },
        })
    }

    #[test]
    fn a_burst_of_signals_costs_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let g = GraphBuilder::new().build().unwrap();
        let mut sink = CheckpointSink::new(dir.path(), Checkpoint::seed(&g, &RunConfig::default()));
        let writes = sink.writes();
        for seq in 1..=1000 {
            sink.write(&warning(seq));
        }
        sink.flush();
        drop(sink);
        let n = writes.load(std::sync::atomic::Ordering::Relaxed);
        // The seed's write and the burst's, or one carrying both.
        assert!((1..=2).contains(&n), "{n} writes");
        let cp = Checkpoint::load(&dir.path().join(CHECKPOINT_FILE)).unwrap();
        assert_eq!((cp.seq, cp.warnings.len()), (1000, 1000));
    }

    #[test]
    fn a_retry_reopens_the_operation_in_the_record() {
        use crate::kernel::{NodeHeader, Operation};
        let mut b = GraphBuilder::new();
        let id = b.add_root(Operation::new("flaky", "x"));
        let g = b.build().unwrap();
        let mut cp = Checkpoint::seed(&g, &RunConfig::default());
        let header = NodeHeader {
            op_id: id,
            name: Arc::from("flaky"),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
        };
        let sig = |seq, kind| Signal {
            v: 1,
            seq,
            elapsed: 0.0,
            kind,
        };
        cp.apply(&sig(
            1,
            SignalKind::Failed {
                node: header.clone(),
                error: Arc::from("boom"),
                category: Arc::from("simulated"),
            },
        ));
        assert_eq!(cp.nodes[0].status, NodeStatus::Failed);
        cp.apply(&sig(
            2,
            SignalKind::Retried {
                node: header,
                attempt: 2,
                because: None,
            },
        ));
        let n = &cp.nodes[0];
        assert_eq!(
            (n.status, n.error.is_none(), n.result.is_none()),
            (NodeStatus::Pending, true, true)
        );
    }

    #[test]
    fn a_cut_checkpoint_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CHECKPOINT_FILE);
        let g = GraphBuilder::new().build().unwrap();
        let bytes = Checkpoint::seed(&g, &RunConfig::default()).to_bytes();
        std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
        let err = Checkpoint::load(&path).unwrap_err();
        assert!(
            err.contains("checkpoint.json:") && err.contains("damaged"),
            "{err}"
        );
    }
}

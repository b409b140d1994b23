//! The executor (ADR-0033 D1, D3, D4): one task owns the graph and every
//! piece of run state; agents, routers and operators talk to it through
//! channels. Because there is a single owner there is no graph lock to
//! nest with the palette lock, and admission is atomic by construction.

use std::collections::{HashSet, VecDeque};

// Keys here are op ids, node indices and names the kernel made or the play
// authored: a fast hasher is safe and measurably cheaper per admission.
use rustc_hash::FxHashMap as HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use futures_util::FutureExt;
use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;
use indexmap::IndexMap;
use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use super::agent::{
    AgentEvent, AgentEvents, AgentFailure, AgentMsg, AgentOutcome, AgentResolver, BoxFuture,
    InstructionDecorator, Invocation, SpawnBudget,
};
use super::builder::{Emitter, NodeBuilder, RouteResult};
use super::control::{ApprovalPolicy, Command, ControlError, FinalState, NewOperation, RunHandle};
use super::envelope::Envelope;
use super::graph::{Condition, Edge, Graph, GraphError, OpId, OpMetadata, Operation, new_op_id};
use super::lane::{Lane, lane_for};
use super::lease::{Lease, LeaseAnswer, LeaseProvider, LeaseRequest};
use super::ledger::{DropReason, DroppedSpawn, LedgerEntry, LedgerOutcome};
use super::request::{self, SpawnRequest};
use super::signal::{
    DROP_DETAIL_MAX, DepRecord, LaneCounts, NodeHeader, Outcome, PauseReason,
    SPAWNED_INSTRUCTION_MAX, Signal, SignalKind, SignalSink, SkipReason, SpawnRecord,
    truncate_chars,
};
use super::snapshot::{NodeSnapshot, NodeStatus, RunState, Snapshot};

/// How a run is configured (the `[play]` table, translated).
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    pub context: Map<String, Value>,
    pub approvals: ApprovalPolicy,
    pub start_paused: bool,
    /// Signals kept for slow observers before they are told they lagged.
    pub signal_buffer: usize,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            run_id: Arc::from("run"),
            play: Arc::from("play"),
            max_concurrent: 5,
            reactive: true,
            max_spawn: 50,
            context: Map::new(),
            approvals: ApprovalPolicy::Ask,
            start_paused: false,
            signal_buffer: 4096,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Approval {
    NotRequired,
    Undecided,
    Approved,
    Denied,
}

struct Node {
    op: Operation,
    depends_on: Arc<[OpId]>,
    status: NodeStatus,
    lane: Lane,
    lane_since: Ms,
    /// Incoming edges whose head has not settled yet.
    waiting: u32,
    has_preds: bool,
    /// At least one settled incoming edge was valid.
    any_valid: bool,
    approval: Approval,
    held: bool,
    parked: bool,
    attempt: u32,
    queued_at: Ms,
    started_at: Ms,
    finished_at: Ms,
    result: Option<Arc<Value>>,
}

/// A moment of the run in whole milliseconds (`u32::MAX` for "not yet"):
/// nodes keep four of them, and a quarter of the bytes keeps a 100 000-node
/// graph in cache.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ms(u32);

impl Ms {
    const NONE: Ms = Ms(u32::MAX);

    fn at(secs: f64) -> Ms {
        Ms((secs * 1000.0).round().min(f64::from(u32::MAX - 1)) as u32)
    }

    fn secs(self) -> Option<f64> {
        (self != Ms::NONE).then(|| f64::from(self.0) / 1000.0)
    }
}

/// What an operation has emitted so far. Kept beside the graph, for the few
/// operations that emit anything, so nodes stay small.
#[derive(Default)]
struct Emissions {
    /// Identities of requests already seen from this emitter (dedup).
    seen: HashSet<u64>,
    /// Sightings a resumed run already recorded: passed over once each.
    handled: Vec<u64>,
    /// Escalations seen on the stream before the result arrived.
    escalations: Vec<Arc<str>>,
}

/// An agent future tagged with the node and attempt it belongs to.
struct Tagged {
    ix: NodeIndex,
    attempt: u32,
    fut: BoxFuture<AgentOutcome>,
}

impl Future for Tagged {
    type Output = (NodeIndex, u32, AgentOutcome);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (ix, attempt) = (self.ix, self.attempt);
        self.fut.as_mut().poll(cx).map(|o| (ix, attempt, o))
    }
}

/// What admission needs to know about a request besides the routed result.
#[derive(Clone)]
struct RequestMeta {
    assignee: Option<Arc<str>>,
    independent: bool,
    reason: Option<Arc<str>>,
    /// The request's identity, recorded so dedup survives a resume.
    identity: Option<request::RequestId>,
}

/// A `fmt::Write` into a fixed buffer (names are short).
struct ArrayWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl std::fmt::Write for ArrayWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Role-palette counters as the router last reported them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PaletteCounts {
    pub initial: Arc<[Arc<str>]>,
    pub expanded: Arc<[Arc<str>]>,
    pub reserved: Arc<[Arc<str>]>,
    pub consumed: u32,
    pub max_new_roles: u32,
}

/// What components outside the kernel (the palette router) report into the
/// run: their signals join the run's one ordered stream.
#[derive(Debug, Clone)]
pub enum External {
    Signal(SignalKind),
    Palette(PaletteCounts),
    /// Capacity changed (an instance became ready or was released):
    /// operations waiting for it are asked again.
    CapacityChanged,
}

pub type ExternalSender = mpsc::UnboundedSender<External>;

/// Ready operations that wait for the same capacity.
struct CapQueue {
    name: Arc<str>,
    ops: VecDeque<NodeIndex>,
    /// Capacity changed since the head last had to wait: ask again.
    dirty: bool,
}

/// What woke the event loop.
enum Wake {
    Command(Option<Command>),
    External(External),
    Done((NodeIndex, u32, AgentOutcome)),
    Agent(AgentMsg),
    Routed(RoutedBatch),
}

struct RoutedBatch {
    emitter: NodeIndex,
    items: Vec<(RequestMeta, RouteResult)>,
}

struct Bus {
    seq: u64,
    t0: Instant,
    /// Run time before this process (a resumed run goes on from it).
    offset: f64,
    /// The time of the step being processed: every signal of one step of
    /// the event loop carries the same `elapsed`, read once.
    clock: f64,
    tx: broadcast::Sender<Arc<Signal>>,
    sinks: Vec<Box<dyn SignalSink>>,
}

impl Bus {
    /// Reads the clock; microsecond resolution keeps the stream readable
    /// and exact under the paused clock.
    fn tick(&mut self) -> f64 {
        self.clock = self.offset + (self.t0.elapsed().as_micros() as f64) / 1e6;
        self.clock
    }

    fn emit(&mut self, kind: SignalKind) -> (u64, f64) {
        self.seq += 1;
        let elapsed = self.clock;
        let sig = Arc::new(Signal {
            v: super::signal::SIGNAL_SCHEMA_VERSION,
            seq: self.seq,
            elapsed,
            kind,
        });
        for sink in &mut self.sinks {
            sink.write(&sig);
        }
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(sig);
        }
        (self.seq, elapsed)
    }

    fn flush(&mut self) {
        for sink in &mut self.sinks {
            sink.flush();
        }
    }
}

/// A run that has been set up but not started. Subscribe through the handle
/// before starting it to see every signal from `run_started` on.
pub struct Run {
    ex: Executor,
}

impl Run {
    /// Validates the graph (acyclic, well-formed conditions) and prepares
    /// the run. Nothing is invoked until [`Run::run`].
    pub fn new(
        graph: Graph,
        cfg: RunConfig,
        agents: Arc<dyn AgentResolver>,
        builder: Arc<dyn NodeBuilder>,
    ) -> Result<(Run, RunHandle), GraphError> {
        graph.validate()?;
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let (sig_tx, _) = broadcast::channel(cfg.signal_buffer.max(16));
        let (agent_tx, agent_rx) = mpsc::unbounded_channel();
        let (external_tx, external_rx) = mpsc::unbounded_channel();
        let final_state = Arc::new(OnceLock::new());
        let handle = RunHandle {
            tx: ctl_tx,
            signals: sig_tx.downgrade(),
            final_state: final_state.clone(),
            run_id: cfg.run_id.clone(),
        };
        let Graph { inner, index } = graph;
        let empty: Arc<[OpId]> = Arc::from(Vec::new());
        let g = inner.map_owned(|_, op| Node::new(op, empty.clone()), |_, e| e);
        let mut names = HashMap::with_capacity_and_hasher(index.len(), Default::default());
        for ix in g.node_indices() {
            names.entry(g[ix].op.reference_id.clone()).or_insert(ix);
        }
        let paused = cfg.start_paused;
        let ex = Executor {
            g,
            index,
            names,
            ready: VecDeque::new(),
            parked: VecDeque::new(),
            worklist: VecDeque::new(),
            scratch: Vec::new(),
            pred_buf: Vec::new(),
            paused,
            step_credits: 0,
            running: 0,
            terminal: 0,
            inflight: FuturesUnordered::new(),
            routing: FuturesUnordered::new(),
            agent_tx,
            agent_rx,
            control_rx: ctl_rx,
            control_open: true,
            external_tx,
            external_rx,
            decorator: None,
            preset: Vec::new(),
            palette: None,
            leases: None,
            held_leases: HashMap::default(),
            cap_queues: Vec::new(),
            cap_reason: HashMap::default(),
            bus: Bus {
                seq: 0,
                t0: Instant::now(),
                offset: 0.0,
                clock: 0.0,
                tx: sig_tx,
                sinks: Vec::new(),
            },
            flow_context: cfg.context.clone(),
            spawn_seq: 0,
            spawn_accepted: 0,
            ledger: Vec::new(),
            emissions: HashMap::default(),
            round: 1,
            round_active: false,
            agents,
            builder,
            cancelled: false,
            finished: None,
            finished_at: None,
            final_state,
            restored: None,
            empty_deps: empty,
            null_result: Arc::new(Value::Null),
            cfg,
        };
        Ok((Run { ex }, handle))
    }

    /// Prepares a resumed run: `graph` holds every operation the stopped
    /// run had (same op ids), `restore` how each stood. Terminal operations
    /// are never invoked again; running ones start a new attempt.
    pub fn restore(
        graph: Graph,
        cfg: RunConfig,
        agents: Arc<dyn AgentResolver>,
        builder: Arc<dyn NodeBuilder>,
        restore: super::restore::Restore,
    ) -> Result<(Run, RunHandle), GraphError> {
        let (mut run, handle) = Run::new(graph, cfg, agents, builder)?;
        run.ex.restored = Some(restore);
        Ok((run, handle))
    }

    /// Adds a sink that sees every signal, in order (the event log).
    pub fn add_sink(&mut self, sink: Box<dyn SignalSink>) {
        self.ex.bus.sinks.push(sink);
    }

    /// A sender for components that report into this run (the palette
    /// router). What is sent before the run starts is emitted right after
    /// `run_started`.
    pub fn external(&self) -> ExternalSender {
        self.ex.external_tx.clone()
    }

    /// Installs the capacity seam: operations it manages need a lease.
    pub fn set_leases(&mut self, provider: Arc<dyn LeaseProvider>) {
        self.ex.leases = Some(provider);
    }

    /// Installs the instruction decorator (the delegation clause).
    pub fn set_decorator(&mut self, d: Arc<dyn InstructionDecorator>) {
        self.ex.decorator = Some(d);
    }

    /// Marks an initial operation failed before anything runs: routing
    /// refused its role (ADR-0036 D2). Its dependents settle as usual.
    pub fn fail_before_start(&mut self, op_id: OpId, failure: AgentFailure) -> bool {
        let Some(&ix) = self.ex.index.get(&op_id) else {
            return false;
        };
        self.ex.preset.push((ix, failure));
        true
    }

    /// Runs to the end and returns the result envelope.
    pub async fn run(self) -> Envelope {
        self.ex.run().await
    }

    pub fn spawn(self) -> tokio::task::JoinHandle<Envelope> {
        tokio::spawn(self.run())
    }
}

impl Node {
    fn new(op: Operation, no_deps: Arc<[OpId]>) -> Self {
        let approval = if op.metadata.approval {
            Approval::Undecided
        } else {
            Approval::NotRequired
        };
        Node {
            op,
            depends_on: no_deps,
            status: NodeStatus::Pending,
            lane: Lane::Queued,
            lane_since: Ms(0),
            waiting: 0,
            has_preds: false,
            any_valid: false,
            approval,
            held: false,
            parked: false,
            attempt: 0,
            queued_at: Ms(0),
            started_at: Ms::NONE,
            finished_at: Ms::NONE,
            result: None,
        }
    }
}

struct Executor {
    cfg: RunConfig,
    g: StableDiGraph<Node, Edge>,
    index: HashMap<OpId, NodeIndex>,
    names: HashMap<Arc<str>, NodeIndex>,
    /// Ready and allowed to start, waiting for a concurrency slot (FIFO).
    ready: VecDeque<NodeIndex>,
    /// Ready but held back by a pause or an operator hold (FIFO).
    parked: VecDeque<NodeIndex>,
    /// Nodes whose dependencies just settled.
    worklist: VecDeque<NodeIndex>,
    scratch: Vec<NodeIndex>,
    pred_buf: Vec<OpId>,
    paused: bool,
    step_credits: u32,
    running: usize,
    terminal: usize,
    inflight: FuturesUnordered<Tagged>,
    routing: FuturesUnordered<BoxFuture<RoutedBatch>>,
    agent_tx: mpsc::UnboundedSender<AgentMsg>,
    agent_rx: mpsc::UnboundedReceiver<AgentMsg>,
    control_rx: mpsc::UnboundedReceiver<Command>,
    control_open: bool,
    /// Kept so the receiver never closes; senders are handed out.
    external_tx: ExternalSender,
    external_rx: mpsc::UnboundedReceiver<External>,
    decorator: Option<Arc<dyn InstructionDecorator>>,
    preset: Vec<(NodeIndex, AgentFailure)>,
    /// The palette's counters, once a router reports them; budgets are
    /// signalled only for runs that have a palette.
    palette: Option<PaletteCounts>,
    /// The capacity seam, when the play has capacity.
    leases: Option<Arc<dyn LeaseProvider>>,
    /// Leases held by running operations.
    held_leases: HashMap<NodeIndex, Lease>,
    /// Ready operations waiting for capacity, per provider queue (profile).
    cap_queues: Vec<CapQueue>,
    /// What each of them waits for.
    cap_reason: HashMap<NodeIndex, Arc<str>>,
    bus: Bus,
    flow_context: Map<String, Value>,
    spawn_seq: u64,
    spawn_accepted: usize,
    ledger: Vec<LedgerEntry>,
    emissions: HashMap<NodeIndex, Emissions>,
    round: u32,
    round_active: bool,
    agents: Arc<dyn AgentResolver>,
    builder: Arc<dyn NodeBuilder>,
    cancelled: bool,
    finished: Option<Outcome>,
    finished_at: Option<f64>,
    final_state: Arc<OnceLock<Box<dyn FinalState>>>,
    /// Where a resumed run starts from (taken when it starts).
    restored: Option<super::restore::Restore>,
    /// Shared values for the common cases, so they cost no allocation.
    empty_deps: Arc<[OpId]>,
    null_result: Arc<Value>,
}

impl FinalState for Mutex<Executor> {
    fn snapshot(&self) -> Snapshot {
        self.lock().unwrap_or_else(|e| e.into_inner()).snapshot()
    }
}

fn edge_valid(cond: &Condition, status: NodeStatus, result: Option<&Value>) -> bool {
    if !matches!(
        status,
        NodeStatus::Succeeded | NodeStatus::Escalated | NodeStatus::Failed
    ) {
        return false;
    }
    match cond {
        Condition::Succeeded => status != NodeStatus::Failed,
        Condition::Failed => status == NodeStatus::Failed,
        Condition::Always => true,
        Condition::Pointer(p) => result.and_then(|r| r.pointer(&p.pointer)) == Some(&p.equals),
    }
}

/// Deep-merges `src` into `dst`: objects merge key by key, anything else
/// replaces (ADR-0033 D4, a result's `context` flowing back).
pub fn deep_merge(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            (Some(Value::Object(d)), Value::Object(s)) => deep_merge(d, s),
            _ => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

impl Executor {
    async fn run(mut self) -> Envelope {
        self.bus.t0 = Instant::now();
        if let Some(r) = self.restored.take() {
            self.resume_from(r);
        } else {
            self.bus.emit(SignalKind::RunStarted {
                run_id: self.cfg.run_id.clone(),
                play: self.cfg.play.clone(),
                operations: self.g.node_count(),
                max_concurrent: self.cfg.max_concurrent,
                reactive: self.cfg.reactive,
                max_spawn: self.cfg.max_spawn,
                paused: self.paused,
            });
            if self.paused {
                self.bus.emit(SignalKind::RunPaused);
            }
            // What was reported before the start (initial provisioning).
            self.drain_external();
            let seeds: Vec<NodeIndex> = self.g.node_indices().collect();
            for ix in seeds {
                self.node_added(ix);
            }
        }
        for (ix, failure) in std::mem::take(&mut self.preset) {
            if self.g[ix].status == NodeStatus::Pending {
                self.fail(ix, failure);
            }
        }

        loop {
            // What the last wake-up recorded (a completion, a decision) is on
            // disk before anything acts on it.
            self.bus.flush();
            self.advance();
            self.check_round();
            self.bus.flush();
            if self.is_finished() {
                break;
            }
            let wake = tokio::select! {
                biased;
                cmd = self.control_rx.recv(), if self.control_open => Wake::Command(cmd),
                Some(ext) = self.external_rx.recv() => Wake::External(ext),
                Some(done) = self.inflight.next(), if !self.inflight.is_empty() => Wake::Done(done),
                Some(msg) = self.agent_rx.recv() => Wake::Agent(msg),
                Some(batch) = self.routing.next(), if !self.routing.is_empty() => Wake::Routed(batch),
            };
            self.bus.tick();
            match wake {
                Wake::Command(Some(cmd)) => self.command(cmd),
                Wake::Command(None) => self.control_open = false,
                Wake::External(ext) => self.external(ext),
                Wake::Done((ix, attempt, outcome)) => self.complete(ix, attempt, outcome),
                Wake::Agent(msg) => self.agent_event(msg),
                Wake::Routed(batch) => self.admit_batch(batch),
            }
        }
        self.bus.tick();
        self.finish()
    }

    fn is_finished(&self) -> bool {
        self.running == 0 && self.routing.is_empty() && self.terminal == self.g.node_count()
    }

    fn now(&self) -> f64 {
        self.bus.clock
    }

    fn header(&self, ix: NodeIndex) -> NodeHeader {
        let n = &self.g[ix];
        NodeHeader {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            parent_id: n.op.metadata.spawned_from,
            depends_on: n.depends_on.clone(),
        }
    }

    /// Emits a signal about one node and moves its lane.
    fn emit_node(&mut self, ix: NodeIndex, kind: SignalKind) {
        let lane = lane_for(self.g[ix].lane, &kind);
        let (_, at) = self.bus.emit(kind);
        let n = &mut self.g[ix];
        if lane != n.lane {
            n.lane = lane;
            n.lane_since = Ms::at(at);
        }
    }

    // ----- graph growth and readiness -------------------------------------

    /// Takes up a stopped run: the numbering and the clock go on, terminal
    /// operations stand with their results, the rest wait as they did and
    /// running ones are queued again for a new attempt.
    fn resume_from(&mut self, r: super::restore::Restore) {
        self.bus.seq = r.seq;
        if r.elapsed.is_finite() && r.elapsed > 0.0 {
            self.bus.offset = r.elapsed;
        }
        self.bus.tick();
        self.spawn_seq = r.spawn_seq;
        self.spawn_accepted = r.spawn_accepted;
        self.ledger = r.ledger;
        self.flow_context = r.flow_context;
        self.round = r.round.max(1);
        let order: Vec<NodeIndex> = self.g.node_indices().collect();
        let mut reattempt = Vec::new();
        for &ix in &order {
            let op_id = self.g[ix].op.op_id;
            let Some(rn) = r.nodes.get(&op_id) else {
                continue;
            };
            if !rn.seen.is_empty() || !rn.handled.is_empty() {
                let e = self.emissions.entry(ix).or_default();
                e.seen.extend(rn.seen.iter().copied());
                e.handled.extend(rn.handled.iter().copied());
            }
            let n = &mut self.g[ix];
            n.attempt = rn.attempt;
            n.held = rn.held;
            n.queued_at = Ms::at(rn.queued_at);
            n.approval = match (n.approval, rn.approved) {
                (Approval::NotRequired, _) => Approval::NotRequired,
                (_, Some(true)) => Approval::Approved,
                (_, Some(false)) => Approval::Denied,
                (a, None) => a,
            };
            if rn.status.is_terminal() {
                n.status = rn.status;
                n.result = rn.result.clone();
                n.finished_at = rn.finished_at.map_or(Ms::NONE, Ms::at);
                n.lane = match rn.status {
                    NodeStatus::Succeeded => Lane::Succeeded,
                    NodeStatus::Escalated => Lane::Escalated,
                    _ => Lane::Failed,
                };
                self.terminal += 1;
            } else if rn.status == NodeStatus::Running {
                reattempt.push(ix);
            }
        }
        let names: Vec<Arc<str>> = reattempt
            .iter()
            .map(|&ix| self.g[ix].op.reference_id.clone())
            .collect();
        self.bus.emit(SignalKind::Resumed {
            from_seq: r.seq,
            resumes: r.resumes,
            reattempted: Arc::from(names),
            dropped_reservations: Arc::from(r.dropped_reservations),
        });
        if self.paused {
            self.bus.emit(SignalKind::RunPaused);
        }
        self.drain_external();
        for ix in order {
            if self.g[ix].status.is_terminal() {
                continue;
            }
            if reattempt.contains(&ix) {
                // Back to the queue, where the console shows it.
                self.node_added(ix);
            } else {
                let lane = self.g[ix].lane;
                let waiting = self.link(ix);
                self.g[ix].lane = lane;
                if waiting == 0 {
                    self.worklist.push_back(ix);
                }
            }
        }
        // Requests in settled results that were still being routed when the
        // process stopped: read them again (the recorded ones are passed
        // over).
        if self.cfg.reactive {
            let settled: Vec<NodeIndex> = self
                .g
                .node_indices()
                .filter(|&ix| {
                    matches!(
                        self.g[ix].status,
                        NodeStatus::Succeeded | NodeStatus::Escalated
                    )
                })
                .collect();
            for ix in settled {
                let Some(result) = self.g[ix].result.clone() else {
                    continue;
                };
                let found = request::extract(&result);
                if !found.spawns.is_empty() {
                    self.route_spawns(ix, &found.spawns);
                }
            }
        }
    }

    /// Announces a node that is now part of the graph and works out how many
    /// of its dependencies are still outstanding.
    fn node_added(&mut self, ix: NodeIndex) {
        let waiting = self.link(ix);
        let node = self.header(ix);
        let n = &self.g[ix];
        let kind = SignalKind::Queued {
            node,
            role: n.op.assignee.clone(),
            instruction: n.op.instruction.clone(),
            approval: n.op.metadata.approval,
        };
        self.emit_node(ix, kind);
        if waiting == 0 {
            self.worklist.push_back(ix);
        }
    }

    /// Counts a node's outstanding dependencies and whether a settled one
    /// already gives it a valid path; returns how many it waits for.
    fn link(&mut self, ix: NodeIndex) -> u32 {
        let mut waiting = 0;
        let mut any_valid = false;
        let mut has_preds = false;
        // Reused buffer: most nodes have one or two predecessors, and the
        // only allocation should be the shared slice itself.
        let mut preds = std::mem::take(&mut self.pred_buf);
        preds.clear();
        for e in self.g.edges_directed(ix, Direction::Incoming) {
            use petgraph::visit::EdgeRef;
            has_preds = true;
            let head = &self.g[e.source()];
            preds.push(head.op.op_id);
            if head.status.is_terminal() {
                any_valid |= edge_valid(&e.weight().condition, head.status, head.result.as_deref());
            } else {
                waiting += 1;
            }
        }
        preds.reverse();
        let now = self.now();
        {
            let n = &mut self.g[ix];
            n.waiting = waiting;
            n.any_valid = any_valid;
            n.has_preds = has_preds;
            if !preds.is_empty() {
                n.depends_on = Arc::from(&preds[..]);
            }
            n.queued_at = Ms::at(now);
            n.lane_since = Ms::at(now);
        }
        self.pred_buf = preds;
        waiting
    }

    fn drain_worklist(&mut self) {
        while let Some(ix) = self.worklist.pop_front() {
            self.deps_settled(ix);
        }
    }

    /// Every dependency has settled: skip, ask for approval, or get ready.
    fn deps_settled(&mut self, ix: NodeIndex) {
        let n = &self.g[ix];
        if n.status != NodeStatus::Pending {
            return;
        }
        if n.has_preds && !n.any_valid {
            self.skip(ix, SkipReason::NoValidPath, true);
            return;
        }
        if n.approval == Approval::Undecided {
            match self.cfg.approvals.clone() {
                ApprovalPolicy::Ask => {
                    self.g[ix].status = NodeStatus::AwaitingApproval;
                    let node = self.header(ix);
                    self.emit_node(ix, SignalKind::AwaitingApproval { node });
                    return;
                }
                ApprovalPolicy::ApproveAll => {
                    self.g[ix].approval = Approval::Approved;
                    let node = self.header(ix);
                    self.emit_node(
                        ix,
                        SignalKind::Approved {
                            node,
                            by: Arc::from("policy"),
                        },
                    );
                }
                ApprovalPolicy::DenyAll { reason } => {
                    self.deny_node(ix, Arc::from("policy"), reason);
                    return;
                }
            }
        }
        self.enqueue(ix);
    }

    fn enqueue(&mut self, ix: NodeIndex) {
        self.g[ix].status = NodeStatus::Ready;
        if self.g[ix].held {
            self.park(ix, PauseReason::Held);
        } else if self.paused {
            if self.step_credits > 0 {
                self.step_credits -= 1;
                let op_id = Some(self.g[ix].op.op_id);
                self.bus.emit(SignalKind::Stepped { op_id });
                self.ready.push_back(ix);
            } else {
                self.park(ix, PauseReason::RunPaused);
            }
        } else {
            self.ready.push_back(ix);
        }
    }

    fn park(&mut self, ix: NodeIndex, reason: PauseReason) {
        self.g[ix].parked = true;
        self.parked.push_back(ix);
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Paused { node, reason });
    }

    fn unpark(&mut self, ix: NodeIndex) {
        self.g[ix].parked = false;
        self.parked.retain(|&p| p != ix);
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Unpaused { node });
        self.ready.push_back(ix);
    }

    /// Settles released nodes, then starts ready operations while slots are
    /// free. Waiting on dependencies, a pause or an approval never holds a
    /// slot: a slot is taken only here, at the moment an operation starts.
    /// Everything that releases nodes only queues them, and this loop drains
    /// the queue, so a long chain of skips never recurses.
    fn advance(&mut self) {
        loop {
            self.drain_worklist();
            if self.cancelled || self.running >= self.cfg.max_concurrent {
                break;
            }
            // Operations that waited for capacity go first, when it changed.
            if let Some(q) = self
                .cap_queues
                .iter()
                .position(|q| q.dirty && !q.ops.is_empty())
            {
                let ix = self.cap_queues[q].ops[0];
                match self.ask_lease(ix, true) {
                    Ok(lease) => {
                        self.cap_queues[q].ops.pop_front();
                        self.report_depth(q);
                        self.cap_reason.remove(&ix);
                        self.start(ix, lease);
                    }
                    Err((_, reason)) => {
                        self.cap_queues[q].dirty = false;
                        self.note_capacity_wait(ix, reason);
                    }
                }
                continue;
            }
            let Some(ix) = self.ready.pop_front() else {
                break;
            };
            match self.ask_lease(ix, false) {
                Ok(lease) => self.start(ix, lease),
                Err((queue, reason)) => self.wait_for_capacity(ix, queue, reason),
            }
        }
    }

    /// Asks the capacity seam for a lease; `Err` carries the queue and the
    /// reason to wait.
    fn ask_lease(
        &mut self,
        ix: NodeIndex,
        queued: bool,
    ) -> Result<Option<Lease>, (Arc<str>, Arc<str>)> {
        let Some(provider) = &self.leases else {
            return Ok(None);
        };
        let n = &self.g[ix];
        let req = LeaseRequest {
            op_id: n.op.op_id,
            name: &n.op.reference_id,
            role: n.op.assignee.as_deref(),
            profile: n.op.metadata.profile.as_deref(),
            queued,
        };
        match provider.acquire(&req) {
            LeaseAnswer::NotManaged => Ok(None),
            LeaseAnswer::Granted(lease) => Ok(Some(lease)),
            LeaseAnswer::Wait { queue, reason } => Err((queue, reason)),
        }
    }

    fn wait_for_capacity(&mut self, ix: NodeIndex, queue: Arc<str>, reason: Arc<str>) {
        let q = match self.cap_queues.iter().position(|q| q.name == queue) {
            Some(q) => q,
            None => {
                self.cap_queues.push(CapQueue {
                    name: queue,
                    ops: VecDeque::new(),
                    dirty: false,
                });
                self.cap_queues.len() - 1
            }
        };
        self.cap_queues[q].ops.push_back(ix);
        self.report_depth(q);
        self.note_capacity_wait(ix, reason);
    }

    /// Records (and signals, when it changed) what an operation waits for.
    fn note_capacity_wait(&mut self, ix: NodeIndex, reason: Arc<str>) {
        if self.cap_reason.get(&ix) == Some(&reason) {
            return;
        }
        self.cap_reason.insert(ix, reason.clone());
        let node = self.header(ix);
        self.bus.emit(SignalKind::CapacityWait { node, reason });
    }

    fn report_depth(&self, q: usize) {
        if let Some(p) = &self.leases {
            let queue = &self.cap_queues[q];
            p.queue_depth(&queue.name, queue.ops.len());
        }
    }

    fn capacity_changed(&mut self) {
        for q in &mut self.cap_queues {
            q.dirty = true;
        }
    }

    /// Takes an operation out of whichever capacity queue holds it.
    fn leave_capacity_queue(&mut self, ix: NodeIndex) -> bool {
        for q in 0..self.cap_queues.len() {
            if let Some(pos) = self.cap_queues[q].ops.iter().position(|&o| o == ix) {
                self.cap_queues[q].ops.remove(pos);
                self.report_depth(q);
                self.cap_reason.remove(&ix);
                return true;
            }
        }
        false
    }

    fn release_lease(&mut self, ix: NodeIndex) {
        if let Some(lease) = self.held_leases.remove(&ix)
            && let Some(p) = &self.leases
        {
            p.release(lease.id);
            self.capacity_changed();
        }
    }

    fn start(&mut self, ix: NodeIndex, lease: Option<Lease>) {
        let now = self.now();
        let attempt = {
            let n = &mut self.g[ix];
            n.status = NodeStatus::Running;
            n.attempt += 1;
            n.started_at = Ms::at(now);
            n.attempt
        };
        self.running += 1;
        self.round_active = true;
        let node = self.header(ix);
        let role = self.g[ix].op.assignee.clone();
        let instance = lease.as_ref().map(|l| l.instance.clone());
        let workspace = lease.as_ref().and_then(|l| l.workspace.clone());
        let leased_agent = lease.as_ref().and_then(|l| l.agent.clone());
        let profile = lease.as_ref().and_then(|l| l.profile.clone());
        if let Some(lease) = lease {
            self.held_leases.insert(ix, lease);
        }
        self.emit_node(
            ix,
            SignalKind::Started {
                node,
                attempt,
                role,
                instance: instance.clone(),
            },
        );

        let agent_name = leased_agent.unwrap_or_else(|| self.g[ix].op.metadata.agent.clone());
        let Some(agent) = self.agents.resolve(&agent_name) else {
            self.running -= 1;
            self.release_lease(ix);
            let f = AgentFailure::new("agent_not_found", format!("no agent named {agent_name:?}"));
            self.fail(ix, f);
            return;
        };
        let context = if agent.wants_context() {
            self.context_for(ix)
        } else {
            Map::new()
        };
        let n = &self.g[ix];
        let instruction = match &self.decorator {
            Some(d) => d.decorate(
                n.op.assignee.as_deref(),
                &n.op.instruction,
                SpawnBudget {
                    accepted: self.spawn_accepted,
                    max: self.cfg.max_spawn,
                },
            ),
            None => n.op.instruction.clone(),
        };
        let inv = Invocation {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            role: n.op.assignee.clone(),
            instruction,
            params: n.op.metadata.params.clone(),
            context,
            attempt,
            events: AgentEvents::new(ix.index() as u32, attempt, self.agent_tx.clone()),
            instance,
            workspace,
            profile,
        };
        let fut = agent.invoke(inv);
        self.inflight.push(Tagged { ix, attempt, fut });
    }

    /// `<pred_op_id>_result` for each predecessor with a result, then the flow
    /// context merged in.
    fn context_for(&self, ix: NodeIndex) -> Map<String, Value> {
        let mut ctx = Map::new();
        for pred in self.g.neighbors_directed(ix, Direction::Incoming) {
            let p = &self.g[pred];
            if let Some(r) = &p.result {
                ctx.insert(format!("{}_result", p.op.op_id), Value::clone(r));
            }
        }
        for (k, v) in &self.flow_context {
            ctx.insert(k.clone(), v.clone());
        }
        ctx
    }

    // ----- settling -------------------------------------------------------

    fn complete(&mut self, ix: NodeIndex, attempt: u32, outcome: AgentOutcome) {
        // Requests the agent put on its stream before finishing come first,
        // so a repeat of them in the result is recognised as a duplicate.
        while let Ok(msg) = self.agent_rx.try_recv() {
            self.agent_event(msg);
        }
        if self.g[ix].status != NodeStatus::Running || self.g[ix].attempt != attempt {
            return;
        }
        self.running -= 1;
        self.release_lease(ix);
        match outcome {
            Ok(value) => self.succeed(ix, value),
            Err(f) => self.fail(ix, f),
        }
    }

    fn succeed(&mut self, ix: NodeIndex, value: Value) {
        if let Value::Object(m) = &value
            && let Some(Value::Object(ctx)) = m.get("context")
        {
            deep_merge(&mut self.flow_context, ctx);
        }
        let result = if value.is_null() {
            self.null_result.clone()
        } else {
            Arc::new(value)
        };
        let mut escalations = self
            .emissions
            .get_mut(&ix)
            .map(|e| std::mem::take(&mut e.escalations))
            .unwrap_or_default();
        let found = if self.cfg.reactive {
            request::extract(&result)
        } else {
            request::Extracted::default()
        };
        for esc in &found.escalations {
            if self.first_sighting(ix, esc, b'e') {
                escalations.push(Arc::from(request::escalation_reason(esc)));
            }
        }
        let now = self.now();
        {
            let n = &mut self.g[ix];
            n.result = Some(result.clone());
            n.finished_at = Ms::at(now);
            n.status = if escalations.is_empty() {
                NodeStatus::Succeeded
            } else {
                NodeStatus::Escalated
            };
        }
        self.terminal += 1;
        let node = self.header(ix);
        let kind = if escalations.is_empty() {
            SignalKind::Completed {
                node,
                result: result.clone(),
            }
        } else {
            let reason: Vec<&str> = escalations.iter().map(|s| &**s).collect();
            SignalKind::Escalated {
                node,
                reason: Arc::from(reason.join("; ")),
                result: result.clone(),
            }
        };
        self.emit_node(ix, kind);
        if !found.spawns.is_empty() {
            self.route_spawns(ix, &found.spawns);
        }
        self.settle(ix);
    }

    fn fail(&mut self, ix: NodeIndex, f: AgentFailure) {
        self.mark_failed(ix, f);
        self.settle(ix);
    }

    fn mark_failed(&mut self, ix: NodeIndex, f: AgentFailure) {
        let now = self.now();
        let error: Arc<str> = Arc::from(f.message);
        {
            let n = &mut self.g[ix];
            n.status = NodeStatus::Failed;
            n.finished_at = Ms::at(now);
            n.result = Some(Arc::new(json!({ "error": &*error })));
        }
        self.terminal += 1;
        let node = self.header(ix);
        self.emit_node(
            ix,
            SignalKind::Failed {
                node,
                error,
                category: f.category,
            },
        );
    }

    fn skip(&mut self, ix: NodeIndex, reason: SkipReason, propagate: bool) {
        let now = self.now();
        {
            let n = &mut self.g[ix];
            n.status = NodeStatus::Skipped;
            n.finished_at = Ms::at(now);
            n.parked = false;
        }
        self.terminal += 1;
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Skipped { node, reason });
        if propagate {
            self.settle(ix);
        }
    }

    /// Evaluates the settled node's outgoing edges and releases successors
    /// whose last dependency this was.
    fn settle(&mut self, ix: NodeIndex) {
        let status = self.g[ix].status;
        let result = self.g[ix].result.clone();
        let mut walk = self.g.neighbors_directed(ix, Direction::Outgoing).detach();
        let mut released = std::mem::take(&mut self.scratch);
        while let Some((e, t)) = walk.next(&self.g) {
            let valid = edge_valid(&self.g[e].condition, status, result.as_deref());
            let n = &mut self.g[t];
            n.waiting = n.waiting.saturating_sub(1);
            n.any_valid |= valid;
            if n.waiting == 0 && n.status == NodeStatus::Pending {
                released.push(t);
            }
        }
        // petgraph walks newest edges first; release in authored order.
        self.worklist.extend(released.drain(..).rev());
        self.scratch = released;
    }

    fn deny_node(&mut self, ix: NodeIndex, by: Arc<str>, reason: Arc<str>) {
        self.g[ix].approval = Approval::Denied;
        let node = self.header(ix);
        self.emit_node(
            ix,
            SignalKind::Denied {
                node,
                by: by.clone(),
                reason: reason.clone(),
            },
        );
        self.fail(
            ix,
            AgentFailure::new("denied", format!("denied by {by}: {reason}")),
        );
    }

    // ----- requests, routing, admission -----------------------------------

    /// True the first time this emitter shows this request.
    fn first_sighting(&mut self, ix: NodeIndex, v: &Value, kind: u8) -> bool {
        let id = request::identity(v) ^ u64::from(kind);
        self.first_sighting_of(ix, id)
    }

    fn first_sighting_of(&mut self, ix: NodeIndex, id: u64) -> bool {
        self.emissions.entry(ix).or_default().seen.insert(id)
    }

    fn agent_event(&mut self, msg: AgentMsg) {
        let ix = NodeIndex::new(msg.node as usize);
        let Some(n) = self.g.node_weight(ix) else {
            return;
        };
        // Events from an earlier attempt or a finished node are stale.
        if n.status != NodeStatus::Running || n.attempt != msg.attempt {
            return;
        }
        let (op_id, name, attempt) = (n.op.op_id, n.op.reference_id.clone(), n.attempt);
        match msg.event {
            AgentEvent::Emitted(v) if self.cfg.reactive => {
                let found = request::extract(&v);
                for esc in &found.escalations {
                    if self.first_sighting(ix, esc, b'e') {
                        let reason = Arc::from(request::escalation_reason(esc));
                        self.emissions
                            .entry(ix)
                            .or_default()
                            .escalations
                            .push(reason);
                    }
                }
                if !found.spawns.is_empty() {
                    self.route_spawns(ix, &found.spawns);
                }
            }
            AgentEvent::Emitted(_) => {}
            AgentEvent::Activity { state, tool } => {
                self.bus.emit(SignalKind::AgentActivity {
                    op_id,
                    name,
                    attempt,
                    state,
                    tool,
                });
            }
            AgentEvent::Usage(usage) => {
                self.bus.emit(SignalKind::AgentUsage {
                    op_id,
                    name,
                    attempt,
                    usage,
                });
            }
            AgentEvent::Warning(message) => {
                self.bus.emit(SignalKind::Warning {
                    message,
                    op_id: Some(op_id),
                });
            }
        }
    }

    fn drain_external(&mut self) {
        while let Ok(ext) = self.external_rx.try_recv() {
            self.external(ext);
        }
    }

    fn external(&mut self, ext: External) {
        match ext {
            External::Signal(kind) => {
                self.bus.emit(kind);
            }
            External::Palette(counts) => {
                self.palette = Some(counts);
                self.emit_budget();
            }
            External::CapacityChanged => self.capacity_changed(),
        }
    }

    /// Both budgets, for runs with a palette (ADR-0036 D4).
    fn emit_budget(&mut self) {
        let Some(p) = &self.palette else {
            return;
        };
        let kind = SignalKind::Budget {
            initial_roles: p.initial.clone(),
            expanded_roles: p.expanded.clone(),
            reserved_roles: p.reserved.clone(),
            consumed_new_roles: p.consumed,
            max_new_roles: p.max_new_roles,
            spawns_accepted: self.spawn_accepted,
            max_spawn: self.cfg.max_spawn,
        };
        self.bus.emit(kind);
    }

    /// Makes room for `k` more operations at once, so a burst of admissions
    /// does not grow every table step by step.
    fn reserve(&mut self, k: usize) {
        self.g.reserve_nodes(k);
        self.g.reserve_edges(k);
        self.index.reserve(k);
        self.names.reserve(k);
        self.ledger.reserve(k);
    }

    fn route_spawns(&mut self, ix: NodeIndex, raws: &[&Value]) {
        self.reserve(raws.len());
        let n = &self.g[ix];
        let emitter = Emitter {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            role: n.op.assignee.clone(),
            requester_role: n.op.metadata.requester_role.clone(),
            agent: n.op.metadata.agent.clone(),
        };
        let mut pending: Vec<(RequestMeta, BoxFuture<RouteResult>)> = Vec::new();
        let assignee_of = |raw: &Value| {
            raw.get("assignee")
                .and_then(Value::as_str)
                .map(|s| Arc::from(s.trim()))
        };
        for &raw in raws {
            let id = request::identity(raw) ^ u64::from(b's');
            // Already in the ledger from before a resume: pass over once.
            if let Some(e) = self.emissions.get_mut(&ix)
                && let Some(pos) = e.handled.iter().position(|&h| h == id)
            {
                e.handled.swap_remove(pos);
                e.seen.insert(id);
                continue;
            }
            let identity = Some(request::RequestId(id));
            if !self.first_sighting_of(ix, id) {
                let assignee = assignee_of(raw);
                self.drop_spawn_as(
                    Some(ix),
                    assignee,
                    DropReason::Duplicate,
                    "the same request was already seen from this emitter".into(),
                    None,
                    identity,
                );
                continue;
            }
            let (req, warning) = match SpawnRequest::from_value(raw) {
                Ok(r) => r,
                Err(e) => {
                    let assignee = assignee_of(raw);
                    self.drop_spawn_as(
                        Some(ix),
                        assignee,
                        DropReason::BuilderError,
                        e,
                        None,
                        identity,
                    );
                    continue;
                }
            };
            if let Some(w) = warning {
                tracing::warn!(emitter = %emitter.name, "{w}");
                let op_id = Some(emitter.op_id);
                self.bus.emit(SignalKind::Warning {
                    message: Arc::from(w),
                    op_id,
                });
            }
            let meta = RequestMeta {
                assignee: req.assignee.as_deref().map(Arc::from),
                independent: req.independent,
                reason: req.reason.as_deref().map(Arc::from),
                identity,
            };
            if pending.is_empty() {
                // Decided without waiting (the static map, an existing
                // role): admit now, in request order.
                if let Some(routed) = self.builder.route_now(&req, &emitter) {
                    self.admit(Some(ix), meta, routed);
                    continue;
                }
                let mut fut = self.builder.build(&req, &emitter);
                if let Some(routed) = (&mut fut).now_or_never() {
                    self.admit(Some(ix), meta, routed);
                    continue;
                }
                pending.push((meta, fut));
            } else {
                pending.push((meta, self.builder.build(&req, &emitter)));
            }
        }
        if !pending.is_empty() {
            // Route the rest concurrently, admit in request order.
            self.routing.push(Box::pin(async move {
                let (metas, futs): (Vec<_>, Vec<_>) = pending.into_iter().unzip();
                let results = join_all(futs).await;
                RoutedBatch {
                    emitter: ix,
                    items: metas.into_iter().zip(results).collect(),
                }
            }));
        }
    }

    fn admit_batch(&mut self, batch: RoutedBatch) {
        // The router's own signals (reserved, provisioned) come before the
        // admission they led to.
        self.drain_external();
        if self.cancelled {
            return;
        }
        for (meta, routed) in batch.items {
            self.admit(Some(batch.emitter), meta, routed);
        }
    }

    fn drop_spawn(
        &mut self,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        reason: DropReason,
        detail: String,
        op_id: Option<OpId>,
    ) {
        self.drop_spawn_as(emitter, assignee, reason, detail, op_id, None);
    }

    /// A drop of a request whose identity was read.
    fn drop_spawn_as(
        &mut self,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        reason: DropReason,
        detail: String,
        op_id: Option<OpId>,
        identity: Option<request::RequestId>,
    ) {
        let detail: Arc<str> = Arc::from(truncate_chars(&detail, DROP_DETAIL_MAX));
        let emitter_id = emitter.map(|e| self.g[e].op.op_id);
        let emitter_name = emitter.map(|e| self.g[e].op.reference_id.clone());
        let (seq, elapsed) = self.bus.emit(SignalKind::SpawnDropped {
            reason,
            assignee: assignee.clone(),
            emitter_id,
            detail: detail.clone(),
            op_id,
            identity,
        });
        self.ledger.push(LedgerEntry {
            seq,
            elapsed,
            emitter_id,
            emitter_name,
            assignee,
            outcome: LedgerOutcome::Dropped {
                reason,
                detail,
                op_id,
            },
        });
    }

    /// `spawn-N` for the current sequence number, in one allocation.
    fn spawn_name(&self) -> Arc<str> {
        use std::fmt::Write;
        let mut buf = [0u8; 32];
        let mut w = ArrayWriter {
            buf: &mut buf,
            len: 0,
        };
        let _ = write!(w, "spawn-{}", self.spawn_seq);
        let len = w.len;
        Arc::from(std::str::from_utf8(&buf[..len]).expect("ascii"))
    }

    /// Admission (ADR-0033 D3 steps 1–7) of a routed request.
    fn admit(&mut self, emitter: Option<NodeIndex>, meta: RequestMeta, routed: RouteResult) {
        // The router's signals about this request come before its outcome.
        self.drain_external();
        let candidate = match routed {
            Err(rej) => {
                self.drop_spawn_as(
                    emitter,
                    meta.assignee,
                    rej.reason,
                    rej.detail,
                    None,
                    meta.identity,
                );
                return;
            }
            Ok(None) => {
                self.drop_spawn_as(
                    emitter,
                    meta.assignee,
                    DropReason::NullChild,
                    "the node builder made no operation of the request".into(),
                    None,
                    meta.identity,
                );
                return;
            }
            Ok(Some(c)) => c,
        };
        // Identity is allocated after routing, before the cap: a refused
        // candidate leaves a gap in the spawn-N sequence, as the spec allows.
        self.spawn_seq += 1;
        let name = self.spawn_name();
        let assignee = candidate.assignee.clone().or(meta.assignee);
        if self.spawn_accepted >= self.cfg.max_spawn {
            let detail = format!(
                "{name} refused: {} of max_spawn {} already accepted",
                self.spawn_accepted, self.cfg.max_spawn
            );
            self.drop_spawn_as(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
                meta.identity,
            );
            return;
        }
        let op = Operation {
            op_id: new_op_id(),
            reference_id: name,
            instruction: candidate.instruction,
            assignee: candidate.assignee,
            operation: candidate.operation,
            metadata: OpMetadata {
                requester_role: candidate.requester_role,
                spawned_from: emitter.map(|e| self.g[e].op.op_id),
                approval: false,
                agent: candidate.agent,
                params: candidate.params,
                spawn_reason: meta.reason,
                profile: None,
            },
        };
        let deps: Vec<(NodeIndex, Edge)> = match emitter {
            Some(e) if !meta.independent => vec![(e, Edge::spawn())],
            _ => Vec::new(),
        };
        self.accept_new(emitter, op, deps, meta.independent, meta.identity);
    }

    /// Inserts a brand-new node. It has only incoming edges, so it cannot
    /// close a cycle and no reachability check is needed: admission costs
    /// the same however large the graph is.
    fn accept_new(
        &mut self,
        emitter: Option<NodeIndex>,
        op: Operation,
        deps: Vec<(NodeIndex, Edge)>,
        independent: bool,
        identity: Option<request::RequestId>,
    ) -> NodeIndex {
        let op_id = op.op_id;
        let name = op.reference_id.clone();
        let assignee = op.assignee.clone();
        let cut = truncate_chars(&op.instruction, SPAWNED_INSTRUCTION_MAX);
        let instruction: Arc<str> = if cut.len() == op.instruction.len() {
            op.instruction.clone()
        } else {
            Arc::from(cut)
        };
        let record = Box::new(SpawnRecord {
            agent: op.metadata.agent.clone(),
            params: op.metadata.params.clone(),
            requester_role: op.metadata.requester_role.clone(),
            reason: op.metadata.spawn_reason.clone(),
            kind: op.operation,
            profile: op.metadata.profile.clone(),
            edges: deps
                .iter()
                .map(|(from, edge)| DepRecord {
                    from: self.g[*from].op.op_id,
                    edge: edge.clone(),
                })
                .collect(),
            identity,
        });
        let ix = self.g.add_node(Node::new(op, self.empty_deps.clone()));
        self.index.insert(op_id, ix);
        self.names.entry(name.clone()).or_insert(ix);
        for (from, edge) in deps {
            self.g.add_edge(from, ix, edge);
        }
        self.spawn_accepted += 1;
        self.emit_budget();
        let emitter_id = emitter.map(|e| self.g[e].op.op_id);
        let emitter_name = emitter.map(|e| self.g[e].op.reference_id.clone());
        let (seq, elapsed) = self.bus.emit(SignalKind::Spawned {
            op_id,
            name: name.clone(),
            parent_id: emitter_id,
            independent,
            assignee: assignee.clone(),
            instruction,
            record,
        });
        self.ledger.push(LedgerEntry {
            seq,
            elapsed,
            emitter_id,
            emitter_name,
            assignee,
            outcome: LedgerOutcome::Accepted { op_id, name },
        });
        self.node_added(ix);
        // Settle it while it is still in cache: a burst of admissions
        // otherwise walks every new node twice.
        self.drain_worklist();
        ix
    }

    /// Trusted injection: no builder, same admission.
    fn inject(&mut self, new: NewOperation) -> bool {
        if self.cancelled || self.finished.is_some() {
            return false;
        }
        let NewOperation {
            mut op,
            depends_on,
            parent,
            independent,
        } = new;
        let emitter = parent.and_then(|p| self.index.get(&p).copied());
        let assignee = op.assignee.clone();
        if parent.is_some() && emitter.is_none() {
            self.drop_spawn(
                None,
                assignee,
                DropReason::BuilderError,
                "the parent is not in this run".into(),
                None,
            );
            return true;
        }
        let mut deps = Vec::new();
        for (dep, cond) in depends_on {
            match self.index.get(&dep) {
                Some(&d) => deps.push((d, Edge::dependency(cond))),
                None => {
                    let detail = format!("dependency {dep} is not in this run");
                    self.drop_spawn(emitter, assignee, DropReason::BuilderError, detail, None);
                    return true;
                }
            }
        }
        if let Some(e) = emitter
            && !independent
        {
            deps.push((e, Edge::spawn()));
        }
        if self.spawn_accepted >= self.cfg.max_spawn {
            let detail = format!(
                "injected {} refused: {} of max_spawn {} already accepted",
                op.reference_id, self.spawn_accepted, self.cfg.max_spawn
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
            );
            return true;
        }
        if let Some(&existing) = self.index.get(&op.op_id) {
            // The child is already in the graph: new edges into it may close
            // a cycle, so this is the one case that checks reachability.
            for (from, _) in &deps {
                if *from == existing
                    || petgraph::algo::has_path_connecting(&self.g, existing, *from, None)
                {
                    let detail = format!(
                        "an edge {} -> {} would close a cycle",
                        self.g[*from].op.reference_id, self.g[existing].op.reference_id
                    );
                    self.drop_spawn(emitter, assignee, DropReason::Cycle, detail, Some(op.op_id));
                    return true;
                }
            }
            for (from, edge) in deps {
                let settled = self.g[from].status.is_terminal();
                let valid = settled
                    && edge_valid(
                        &edge.condition,
                        self.g[from].status,
                        self.g[from].result.as_deref(),
                    );
                self.g.add_edge(from, existing, edge);
                let n = &mut self.g[existing];
                n.has_preds = true;
                if settled {
                    n.any_valid |= valid;
                } else if n.status == NodeStatus::Pending {
                    n.waiting += 1;
                }
            }
            self.spawn_accepted += 1;
            self.emit_budget();
            return true;
        }
        if op.reference_id.is_empty() {
            self.spawn_seq += 1;
            op.reference_id = self.spawn_name();
        }
        op.metadata.spawned_from = emitter.map(|e| self.g[e].op.op_id);
        self.accept_new(emitter, op, deps, independent, None);
        true
    }

    // ----- operator commands ----------------------------------------------

    fn resolve(&self, name: &str) -> Result<NodeIndex, ControlError> {
        if let Some(&ix) = self.names.get(name) {
            return Ok(ix);
        }
        if let Ok(id) = name.parse::<OpId>()
            && let Some(&ix) = self.index.get(&id)
        {
            return Ok(ix);
        }
        Err(ControlError::UnknownOperation(name.to_string()))
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Pause(reply) => {
                let _ = reply.send(self.pause());
            }
            Command::Resume(reply) => {
                let _ = reply.send(self.resume());
            }
            Command::Step(reply) => {
                let _ = reply.send(self.step());
            }
            Command::Approve { op, by, reply } => {
                let _ = reply.send(self.approve(&op, by));
            }
            Command::Deny {
                op,
                by,
                reason,
                reply,
            } => {
                let _ = reply.send(self.deny(&op, by, reason));
            }
            Command::Hold { op, reply } => {
                let _ = reply.send(self.hold(&op));
            }
            Command::Retry { op, reply } => {
                let _ = reply.send(self.retry(&op));
            }
            Command::Unhold { op, reply } => {
                let _ = reply.send(self.unhold(&op));
            }
            Command::SetApprovalPolicy(policy, reply) => {
                self.set_approval_policy(policy);
                let _ = reply.send(Ok(()));
            }
            Command::Cancel(reply) => {
                self.cancel();
                let _ = reply.send(Ok(()));
            }
            Command::Inject { op, reply } => {
                let _ = reply.send(self.inject(*op));
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
        }
        // The answer goes out after the signals it caused are durable.
        self.bus.flush();
    }

    /// Answers a command that arrived after the run ended.
    fn refuse(&self, cmd: Command) {
        let done = Err(ControlError::RunFinished);
        match cmd {
            Command::Pause(r)
            | Command::Resume(r)
            | Command::Step(r)
            | Command::Cancel(r)
            | Command::SetApprovalPolicy(_, r)
            | Command::Approve { reply: r, .. }
            | Command::Deny { reply: r, .. }
            | Command::Hold { reply: r, .. }
            | Command::Retry { reply: r, .. }
            | Command::Unhold { reply: r, .. } => {
                let _ = r.send(done);
            }
            Command::Inject { reply, .. } => {
                let _ = reply.send(false);
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
        }
    }

    fn pause(&mut self) -> Result<(), ControlError> {
        if self.paused {
            return Ok(());
        }
        self.paused = true;
        self.step_credits = 0;
        self.bus.emit(SignalKind::RunPaused);
        // Operations waiting for a slot or for capacity were about to start:
        // they wait here.
        let mut waiting: Vec<NodeIndex> = self.ready.drain(..).collect();
        for q in 0..self.cap_queues.len() {
            waiting.extend(self.cap_queues[q].ops.drain(..));
            self.report_depth(q);
        }
        for ix in waiting {
            self.cap_reason.remove(&ix);
            self.park(ix, PauseReason::RunPaused);
        }
        Ok(())
    }

    fn resume(&mut self) -> Result<(), ControlError> {
        if !self.paused {
            return Ok(());
        }
        self.paused = false;
        self.step_credits = 0;
        self.bus.emit(SignalKind::RunResumed);
        let parked: Vec<NodeIndex> = self
            .parked
            .iter()
            .copied()
            .filter(|&ix| !self.g[ix].held)
            .collect();
        for ix in parked {
            self.unpark(ix);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), ControlError> {
        if !self.paused {
            return Err(ControlError::NotPaused);
        }
        match self.parked.iter().copied().find(|&ix| !self.g[ix].held) {
            Some(ix) => {
                let op_id = Some(self.g[ix].op.op_id);
                self.bus.emit(SignalKind::Stepped { op_id });
                self.unpark(ix);
            }
            None => {
                self.step_credits += 1;
                self.bus.emit(SignalKind::Stepped { op_id: None });
            }
        }
        Ok(())
    }

    fn check_gate(&self, ix: NodeIndex) -> Result<(), ControlError> {
        let n = &self.g[ix];
        let name = n.op.reference_id.to_string();
        if !n.op.metadata.approval {
            return Err(ControlError::NoApprovalGate { name });
        }
        match n.approval {
            Approval::Approved => Err(ControlError::AlreadyDecided {
                name,
                decision: "approved",
            }),
            Approval::Denied => Err(ControlError::AlreadyDecided {
                name,
                decision: "denied",
            }),
            _ if n.status.is_terminal() => Err(ControlError::AlreadyDecided {
                name,
                decision: "settled",
            }),
            _ => Ok(()),
        }
    }

    fn approve(&mut self, op: &str, by: Arc<str>) -> Result<(), ControlError> {
        let ix = self.resolve(op)?;
        self.check_gate(ix)?;
        self.g[ix].approval = Approval::Approved;
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Approved { node, by });
        if self.g[ix].status == NodeStatus::AwaitingApproval {
            self.g[ix].status = NodeStatus::Pending;
            self.enqueue(ix);
        }
        Ok(())
    }

    fn deny(&mut self, op: &str, by: Arc<str>, reason: Arc<str>) -> Result<(), ControlError> {
        let ix = self.resolve(op)?;
        self.check_gate(ix)?;
        self.deny_node(ix, by, reason);
        Ok(())
    }

    /// A new attempt of a failed or denied operation; what was skipped only
    /// because of it waits again (and is decided again when it settles).
    fn retry(&mut self, op: &str) -> Result<(), ControlError> {
        let ix = self.resolve(op)?;
        let n = &self.g[ix];
        if n.status != NodeStatus::Failed {
            let state = match n.status {
                NodeStatus::Succeeded | NodeStatus::Escalated => "completed",
                NodeStatus::Skipped => "skipped",
                NodeStatus::Running => "running",
                _ => "not started",
            };
            return Err(ControlError::CannotRetry {
                name: n.op.reference_id.to_string(),
                state,
            });
        }
        if self.cancelled {
            return Err(ControlError::RunFinished);
        }
        let because = n.op.reference_id.clone();
        // Every status first, then the counts: a node reached by two paths
        // must see all of its reopened predecessors as unsettled.
        let mut reopened = vec![ix];
        self.reopen(ix, None);
        let mut stack = vec![ix];
        while let Some(from) = stack.pop() {
            let succ: Vec<NodeIndex> = self
                .g
                .neighbors_directed(from, Direction::Outgoing)
                .collect();
            for t in succ {
                if self.g[t].status == NodeStatus::Skipped {
                    self.reopen(t, Some(because.clone()));
                    reopened.push(t);
                    stack.push(t);
                }
            }
        }
        // Waiting dependents of what reopened count it again.
        let mut relink: Vec<NodeIndex> = reopened.clone();
        for &r in &reopened {
            for t in self.g.neighbors_directed(r, Direction::Outgoing) {
                if self.g[t].status == NodeStatus::Pending && !relink.contains(&t) {
                    relink.push(t);
                }
            }
        }
        for t in relink {
            let lane = self.g[t].lane;
            let waiting = self.link(t);
            self.g[t].lane = lane;
            if waiting == 0 {
                self.worklist.push_back(t);
            }
        }
        self.round_active = true;
        Ok(())
    }

    /// Puts a settled node back to waiting (its counts are redone after).
    fn reopen(&mut self, ix: NodeIndex, because: Option<Arc<str>>) {
        {
            let n = &mut self.g[ix];
            n.status = NodeStatus::Pending;
            n.result = None;
            n.finished_at = Ms::NONE;
            n.parked = false;
            if because.is_none() && n.approval == Approval::Denied {
                // A denied gate asks again.
                n.approval = Approval::Undecided;
            }
        }
        // Dedup outlives the attempt: what it spawned before is not spawned
        // again.
        self.terminal -= 1;
        let node = self.header(ix);
        let attempt = self.g[ix].attempt + u32::from(because.is_none());
        self.emit_node(
            ix,
            SignalKind::Retried {
                node,
                attempt,
                because,
            },
        );
    }

    fn hold(&mut self, op: &str) -> Result<(), ControlError> {
        let ix = self.resolve(op)?;
        let n = &self.g[ix];
        let state = match n.status {
            NodeStatus::Running => Some("running"),
            s if s.is_terminal() => Some("settled"),
            _ => None,
        };
        if let Some(state) = state {
            return Err(ControlError::CannotHold {
                name: n.op.reference_id.to_string(),
                state,
            });
        }
        if n.held {
            return Ok(());
        }
        self.g[ix].held = true;
        let node = self.header(ix);
        self.bus.emit(SignalKind::Held { node });
        if self.g[ix].status == NodeStatus::Ready && !self.g[ix].parked {
            self.ready.retain(|&r| r != ix);
            self.leave_capacity_queue(ix);
            self.park(ix, PauseReason::Held);
        }
        Ok(())
    }

    fn unhold(&mut self, op: &str) -> Result<(), ControlError> {
        let ix = self.resolve(op)?;
        if !self.g[ix].held {
            return Err(ControlError::NotHeld {
                name: self.g[ix].op.reference_id.to_string(),
            });
        }
        self.g[ix].held = false;
        let node = self.header(ix);
        self.bus.emit(SignalKind::Unheld { node });
        if self.g[ix].parked && !self.paused {
            self.unpark(ix);
        }
        Ok(())
    }

    fn set_approval_policy(&mut self, policy: ApprovalPolicy) {
        self.cfg.approvals = policy.clone();
        if let ApprovalPolicy::DenyAll { reason } = policy {
            let waiting: Vec<NodeIndex> = self
                .g
                .node_indices()
                .filter(|&ix| self.g[ix].status == NodeStatus::AwaitingApproval)
                .collect();
            for ix in waiting {
                self.deny_node(ix, Arc::from("policy"), reason.clone());
            }
        }
    }

    fn cancel(&mut self) {
        if self.cancelled {
            return;
        }
        self.cancelled = true;
        // Dropping the futures cancels the agents (and kills their processes).
        self.inflight = FuturesUnordered::new();
        self.routing = FuturesUnordered::new();
        self.ready.clear();
        self.parked.clear();
        for q in 0..self.cap_queues.len() {
            self.cap_queues[q].ops.clear();
            self.report_depth(q);
        }
        self.cap_reason.clear();
        let all: Vec<NodeIndex> = self.g.node_indices().collect();
        for &ix in &all {
            if self.g[ix].status == NodeStatus::Running {
                self.running -= 1;
                self.release_lease(ix);
                self.mark_failed(ix, AgentFailure::new("cancelled", "cancelled"));
            }
        }
        for ix in all {
            if !self.g[ix].status.is_terminal() {
                self.skip(ix, SkipReason::Cancelled, false);
            }
        }
    }

    fn check_round(&mut self) {
        if self.round_active
            && self.running == 0
            && self.ready.is_empty()
            && self.routing.is_empty()
            && !self.leases.as_ref().is_some_and(|p| p.pending())
        {
            self.bus.emit(SignalKind::RoundEnded { round: self.round });
            if let Some(p) = &self.leases {
                p.round_ended(self.round);
                self.capacity_changed();
            }
            self.round += 1;
            self.round_active = false;
        }
    }

    // ----- views ----------------------------------------------------------

    fn waiting_for(&self, ix: NodeIndex) -> Option<String> {
        let n = &self.g[ix];
        match n.status {
            NodeStatus::Pending => {
                let dep = self
                    .g
                    .neighbors_directed(ix, Direction::Incoming)
                    .filter(|&p| !self.g[p].status.is_terminal())
                    .last()?;
                Some(format!("dependency {}", self.g[dep].op.reference_id))
            }
            NodeStatus::AwaitingApproval => Some("approval".into()),
            NodeStatus::Ready if self.cap_reason.contains_key(&ix) => {
                self.cap_reason.get(&ix).map(|r| r.to_string())
            }
            NodeStatus::Ready if n.held => Some("held by the operator".into()),
            NodeStatus::Ready if n.parked => Some("paused".into()),
            NodeStatus::Ready => Some(format!(
                "concurrency limit ({} of {} running)",
                self.running, self.cfg.max_concurrent
            )),
            _ => None,
        }
    }

    fn snapshot(&self) -> Snapshot {
        let nodes = self
            .g
            .node_indices()
            .map(|ix| {
                let n = &self.g[ix];
                NodeSnapshot {
                    op_id: n.op.op_id,
                    name: n.op.reference_id.clone(),
                    role: n.op.assignee.clone(),
                    instruction: n.op.instruction.clone(),
                    lane: n.lane,
                    status: n.status,
                    held: n.held,
                    approval: n.op.metadata.approval,
                    parent_id: n.op.metadata.spawned_from,
                    depends_on: n.depends_on.clone(),
                    attempt: n.attempt,
                    lane_since: n.lane_since.secs().unwrap_or(0.0),
                    queued_at: n.queued_at.secs().unwrap_or(0.0),
                    started_at: n.started_at.secs(),
                    finished_at: n.finished_at.secs(),
                    result: n.result.clone(),
                    error: match (n.status, n.result.as_deref()) {
                        (NodeStatus::Failed, Some(Value::Object(m))) => {
                            m.get("error").and_then(Value::as_str).map(Arc::from)
                        }
                        _ => None,
                    },
                    waiting_for: self.waiting_for(ix),
                }
            })
            .collect();
        Snapshot {
            seq: self.bus.seq,
            elapsed: self.finished_at.unwrap_or_else(|| self.now()),
            run: RunState {
                run_id: self.cfg.run_id.clone(),
                play: self.cfg.play.clone(),
                paused: self.paused,
                step_credits: self.step_credits,
                round: self.round,
                running: self.running,
                max_concurrent: self.cfg.max_concurrent,
                reactive: self.cfg.reactive,
                max_spawn: self.cfg.max_spawn,
                spawn_accepted: self.spawn_accepted,
                finished: self.finished,
            },
            nodes,
            ledger: self.ledger.clone(),
        }
    }

    fn counts(&self) -> LaneCounts {
        let mut c = LaneCounts::default();
        for n in self.g.node_weights() {
            match n.lane {
                Lane::Queued => c.queued += 1,
                Lane::Running => c.running += 1,
                Lane::AwaitingApproval => c.awaiting_approval += 1,
                Lane::Paused => c.paused += 1,
                Lane::Succeeded => c.succeeded += 1,
                Lane::Failed if n.status == NodeStatus::Skipped => c.skipped += 1,
                Lane::Failed => c.failed += 1,
                Lane::Escalated => c.escalated += 1,
            }
        }
        c
    }

    fn finish(mut self) -> Envelope {
        let any_failed = self
            .g
            .node_weights()
            .any(|n| matches!(n.status, NodeStatus::Failed | NodeStatus::Escalated));
        let outcome = if self.cancelled {
            Outcome::Cancelled
        } else if any_failed {
            Outcome::Failed
        } else {
            Outcome::Succeeded
        };
        self.finished = Some(outcome);
        if let Some(p) = &self.leases {
            p.run_finished();
        }
        // What the capacity seam reported as it wound down comes first.
        self.drain_external();
        let counts = self.counts();
        let (_, at) = self.bus.emit(SignalKind::RunFinished { outcome, counts });
        self.finished_at = Some(at);
        self.bus.flush();

        let n = self.g.node_count();
        let mut env = Envelope {
            outcome,
            completed_operations: Vec::new(),
            failed_operations: Vec::new(),
            skipped_operations: Vec::new(),
            operation_results: IndexMap::with_capacity_and_hasher(n, Default::default()),
            final_context: std::mem::take(&mut self.flow_context),
            operation_names: IndexMap::with_capacity_and_hasher(n, Default::default()),
            spawned_operations: None,
            escalated_operations: None,
            dropped_spawns: None,
        };
        let mut escalated = Vec::new();
        for n in self.g.node_weights() {
            let id = n.op.op_id;
            env.operation_names.insert(id, n.op.reference_id.clone());
            match n.status {
                NodeStatus::Succeeded | NodeStatus::Escalated => {
                    env.completed_operations.push(id);
                    if n.status == NodeStatus::Escalated {
                        escalated.push(id);
                    }
                }
                NodeStatus::Failed => env.failed_operations.push(id),
                _ => env.skipped_operations.push(id),
            }
            if n.status != NodeStatus::Skipped
                && let Some(r) = &n.result
            {
                env.operation_results.insert(id, r.clone());
            }
        }
        if self.cfg.reactive {
            env.spawned_operations = Some(self.spawn_accepted);
            env.escalated_operations = Some(escalated);
            env.dropped_spawns = Some(
                self.ledger
                    .iter()
                    .filter_map(|e| match &e.outcome {
                        LedgerOutcome::Dropped {
                            reason,
                            detail,
                            op_id,
                        } => Some(DroppedSpawn {
                            reason: *reason,
                            assignee: e.assignee.clone(),
                            emitter_id: e.emitter_id,
                            detail: detail.clone(),
                            op_id: *op_id,
                        }),
                        LedgerOutcome::Accepted { .. } => None,
                    })
                    .collect(),
            );
        }
        debug_assert!(env.check_disjoint().is_ok());

        // Close the streams: sinks are dropped (the headless printer sees
        // its channel end) and broadcast observers are told the run is over.
        self.bus.sinks.clear();
        self.bus.tx = broadcast::channel(1).0;
        // Commands sent from now on fail at once, and handles fall back to
        // the final state; commands already queued are answered "finished".
        self.control_rx.close();
        while let Ok(cmd) = self.control_rx.try_recv() {
            self.refuse(cmd);
        }
        let state = self.final_state.clone();
        let _ = state.set(Box::new(Mutex::new(self)));
        env
    }
}

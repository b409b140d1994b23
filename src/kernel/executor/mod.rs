//! The executor (ADR-0033 D1, D3, D4): one task owns the graph and every
//! piece of run state; agents, routers and operators talk to it through
//! channels. Because there is a single owner there is no graph lock to
//! nest with the palette lock, and admission is atomic by construction.
//!
//! The state is split by owner: [`bus`] numbers and fans out signals,
//! [`schedule`] decides readiness and settling, [`capacity`] gates starts on
//! leases, [`admission`] routes and admits spawn requests into the ledger,
//! [`commands`] carries out operator commands, [`resume`] takes up a
//! stopped run and [`view`] answers snapshots and builds the envelope.

mod admission;
mod bus;
mod capacity;
mod commands;
mod node;
mod resume;
mod schedule;
mod view;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
// Keys here are op ids, node indices and names the kernel made or the play
// authored: a fast hasher is safe and measurably cheaper per admission.
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use super::agent::{
    AgentEvent, AgentEvents, AgentFailure, AgentMsg, AgentOutcome, AgentResolver, Backlog,
    BoxFuture, InstructionDecorator, Invocation, SpawnBudget,
};
use super::builder::{NodeBuilder, RouteResult};
use super::command::CommandError;
use super::control::{ApprovalPolicy, Command, FinalState, RunHandle};
use super::envelope::Envelope;
use super::graph::{Edge, Graph, GraphError, OpId};
use super::lane::lane_for;
use super::lease::{Lease, LeaseProvider};
use super::request;
use super::restore::Restore;
use super::signal::{NodeHeader, Outcome, SignalKind, SignalSink};
use super::snapshot::NodeStatus;
use admission::{Admission, RequestMeta};
use bus::Bus;
use capacity::CapacityGate;
use node::{Ms, Node};
use schedule::Schedule;

/// How a run is configured (the `[play]` table, translated).
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    /// Requests (spawns and escalations) one attempt may put on its stream
    /// and in its result; beyond that the attempt is stopped as a flood.
    pub max_requests: usize,
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
            max_requests: DEFAULT_MAX_REQUESTS,
            context: Map::new(),
            approvals: ApprovalPolicy::Ask,
            start_paused: false,
            signal_buffer: 4096,
        }
    }
}

/// What a caught panic said (its message when it has one), for people.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// The failure of an attempt whose agent panicked.
fn panicked(payload: &(dyn std::any::Any + Send)) -> AgentFailure {
    AgentFailure::new(
        "agent_panic",
        format!("the agent panicked: {}", panic_message(payload)),
    )
}

/// Requests one attempt may make before it is stopped as a flood.
pub const DEFAULT_MAX_REQUESTS: usize = 10_000;

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

/// An agent future tagged with the node and attempt it belongs to. It can
/// be aborted alone (the attempt is stopped; dropping the agent's future
/// kills its processes).
struct Tagged {
    ix: NodeIndex,
    attempt: u32,
    fut: Abortable<BoxFuture<AgentOutcome>>,
}

impl Future for Tagged {
    /// `None` when the attempt was aborted.
    type Output = (NodeIndex, u32, Option<AgentOutcome>);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (ix, attempt) = (self.ix, self.attempt);
        Pin::new(&mut self.fut)
            .poll(cx)
            .map(|o| (ix, attempt, o.ok()))
    }
}

/// Requests of one emitter whose routing had to wait, in request order.
struct RoutedBatch {
    emitter: NodeIndex,
    items: Vec<(RequestMeta, RouteResult)>,
}

/// One request of a batch being routed: still waiting, or decided.
enum RouteSlot {
    Waiting(BoxFuture<RouteResult>),
    Decided(RouteResult),
}

/// A batch whose routing is under way. Each request is polled on its own,
/// so a cancel can tell which were decided and which still waited on a
/// role being provisioned, and account for every one of them.
struct Routing {
    emitter: NodeIndex,
    items: Vec<(RequestMeta, RouteSlot)>,
}

impl Future for Routing {
    type Output = RoutedBatch;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RoutedBatch> {
        let mut waiting = false;
        for (_, slot) in &mut self.items {
            if let RouteSlot::Waiting(fut) = slot {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(r) => *slot = RouteSlot::Decided(r),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            return Poll::Pending;
        }
        let emitter = self.emitter;
        let items = std::mem::take(&mut self.items)
            .into_iter()
            .map(|(meta, slot)| match slot {
                RouteSlot::Decided(r) => (meta, r),
                RouteSlot::Waiting(_) => unreachable!("every slot was decided"),
            })
            .collect();
        Poll::Ready(RoutedBatch { emitter, items })
    }
}

/// How long a run whose event log cannot be written waits before trying
/// again.
const STORAGE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Agent events taken in one step of the loop, at most.
const AGENT_BATCH: usize = 1024;

/// Other wake-ups taken in one step of the loop, at most.
const STEP_BATCH: usize = 1024;

/// What woke the event loop.
enum Wake {
    /// Time to try writing the event log again.
    Storage,
    Command(Option<Command>),
    External(External),
    Done((NodeIndex, u32, Option<AgentOutcome>)),
    Agent(AgentMsg),
    Routed(RoutedBatch),
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
        let (ctl_tx, control_rx) = mpsc::unbounded_channel();
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
        let graph = inner.map_owned(|_, op| Node::new(op, empty.clone()), |_, e| e);
        let mut names = HashMap::with_capacity_and_hasher(index.len(), Default::default());
        for ix in graph.node_indices() {
            names.entry(graph[ix].op.reference_id.clone()).or_insert(ix);
        }
        let sched = Schedule {
            paused: cfg.start_paused,
            ..Schedule::default()
        };
        let ex = Executor {
            graph,
            index,
            names,
            sched,
            scratch: Vec::new(),
            pred_buf: Vec::new(),
            gate: CapacityGate::default(),
            adm: Admission::default(),
            inflight: FuturesUnordered::new(),
            aborts: HashMap::default(),
            routing: FuturesUnordered::new(),
            agent_tx,
            backlog: Arc::new(Backlog::default()),
            agent_rx,
            control_rx,
            control_open: true,
            external_tx,
            external_rx,
            decorator: None,
            preset: Vec::new(),
            palette: None,
            bus: Bus::new(sig_tx),
            flow_context: cfg.context.clone(),
            round: 1,
            round_active: false,
            agents,
            builder,
            cancelled: false,
            storage: None,
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
        restore: Restore,
    ) -> Result<(Run, RunHandle), GraphError> {
        let (mut run, handle) = Run::new(graph, cfg, agents, builder)?;
        run.ex.restored = Some(restore);
        Ok((run, handle))
    }

    /// Its operations and edges as they stand (before [`Run::run`]: the
    /// initial graph), so a checkpoint can be seeded without a second
    /// copy of the graph alive beside this one.
    pub fn graph_parts(
        &self,
    ) -> (
        usize,
        impl Iterator<Item = Arc<super::graph::Operation>>,
        impl Iterator<Item = (OpId, OpId, &Edge)>,
    ) {
        use petgraph::visit::{EdgeRef, IntoEdgeReferences};
        let g = &self.ex.graph;
        (
            g.node_count(),
            g.node_indices().map(move |ix| g[ix].op.clone()),
            g.edge_references()
                .map(move |e| (g[e.source()].op.op_id, g[e.target()].op.op_id, e.weight())),
        )
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
        self.ex.gate.set_provider(provider);
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

struct Executor {
    cfg: RunConfig,
    graph: StableDiGraph<Node, Edge>,
    index: HashMap<OpId, NodeIndex>,
    names: HashMap<Arc<str>, NodeIndex>,
    sched: Schedule,
    scratch: Vec<NodeIndex>,
    pred_buf: Vec<OpId>,
    gate: CapacityGate,
    adm: Admission,
    inflight: FuturesUnordered<Tagged>,
    /// How to stop each running attempt alone.
    aborts: HashMap<NodeIndex, AbortHandle>,
    routing: FuturesUnordered<Routing>,
    agent_tx: mpsc::UnboundedSender<AgentMsg>,
    /// Agent events sent and not taken yet (back-pressure on readers).
    backlog: Arc<Backlog>,
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
    bus: Bus,
    flow_context: Map<String, Value>,
    round: u32,
    round_active: bool,
    agents: Arc<dyn AgentResolver>,
    builder: Arc<dyn NodeBuilder>,
    cancelled: bool,
    /// Why the event log cannot be written now: nothing new starts.
    storage: Option<Arc<str>>,
    finished: Option<Outcome>,
    finished_at: Option<f64>,
    final_state: Arc<OnceLock<Box<dyn FinalState>>>,
    /// Where a resumed run starts from (taken when it starts).
    restored: Option<Restore>,
    /// Shared values for the common cases, so they cost no allocation.
    empty_deps: Arc<[OpId]>,
    null_result: Arc<Value>,
}

impl Executor {
    async fn run(mut self) -> Envelope {
        self.bus.t0 = Instant::now();
        self.begin();
        loop {
            // What the last wake-up recorded (a completion, a decision) is on
            // disk before anything acts on it.
            self.commit();
            self.advance();
            self.check_round();
            // What is ready already (an agent that answered at once) is
            // taken before writing: its lines go out with what advance
            // wrote, in one write at the top of the loop.
            if self.take_ready(0).await {
                continue;
            }
            self.commit();
            if self.is_finished() {
                break;
            }
            let Some(wake) = self.next_wake(true).await else {
                continue;
            };
            self.bus.tick();
            self.wake(wake);
            self.take_ready(1).await;
        }
        self.bus.tick();
        self.finish()
    }

    /// Takes what is ready now, up to a step's worth (`taken` already):
    /// a burst of completions is one commit (one write) rather than one
    /// each. Nothing starts before the commit at the top of the loop.
    /// Whether anything was taken.
    async fn take_ready(&mut self, taken: usize) -> bool {
        let mut any = false;
        for _ in taken..STEP_BATCH {
            let Some(w) = self.next_wake(false).await else {
                break;
            };
            if !any && taken == 0 {
                self.bus.tick();
            }
            any = true;
            self.wake(w);
        }
        any
    }

    /// What wakes the loop next: waits for it (`wait`), or only takes what
    /// is ready now.
    async fn next_wake(&mut self, wait: bool) -> Option<Wake> {
        let failing = self.storage.is_some();
        let wake = tokio::select! {
            biased;
            cmd = self.control_rx.recv(), if self.control_open => Wake::Command(cmd),
            () = tokio::time::sleep(STORAGE_RETRY), if failing && wait => Wake::Storage,
            Some(ext) = self.external_rx.recv() => Wake::External(ext),
            Some(done) = self.inflight.next(), if !self.inflight.is_empty() => Wake::Done(done),
            Some(msg) = self.agent_rx.recv() => Wake::Agent(msg),
            Some(batch) = self.routing.next(), if !self.routing.is_empty() => Wake::Routed(batch),
            () = std::future::ready(()), if !wait => return None,
        };
        Some(wake)
    }

    fn wake(&mut self, wake: Wake) {
        match wake {
            // The commit at the top of the loop tries again.
            Wake::Storage => {}
            Wake::Command(Some(cmd)) => self.command(cmd),
            Wake::Command(None) => self.control_open = false,
            Wake::External(ext) => self.external(ext),
            Wake::Done((ix, attempt, Some(outcome))) => self.complete(ix, attempt, outcome),
            // Aborted: the node was settled when it was stopped.
            Wake::Done((ix, _, None)) => {
                self.aborts.remove(&ix);
            }
            Wake::Agent(msg) => {
                self.agent_event(msg);
                // What else agents sent is taken in the same step: one
                // commit for a burst.
                for _ in 0..AGENT_BATCH {
                    match self.agent_rx.try_recv() {
                        Ok(msg) => self.agent_event(msg),
                        Err(_) => break,
                    }
                }
            }
            Wake::Routed(batch) => self.admit_batch(batch),
        }
    }

    /// `run_started` (or `resumed`) and the initial graph.
    fn begin(&mut self) {
        if let Some(r) = self.restored.take() {
            self.resume_from(r);
        } else {
            self.bus.emit(SignalKind::RunStarted {
                run_id: self.cfg.run_id.clone(),
                play: self.cfg.play.clone(),
                operations: self.graph.node_count(),
                max_concurrent: self.cfg.max_concurrent,
                reactive: self.cfg.reactive,
                max_spawn: self.cfg.max_spawn,
                paused: self.sched.paused,
            });
            if self.sched.paused {
                self.bus.emit(SignalKind::RunPaused);
            }
            // What was reported before the start (initial provisioning).
            self.drain_external();
            let seeds: Vec<NodeIndex> = self.graph.node_indices().collect();
            for ix in seeds {
                self.node_added(ix);
            }
        }
        for (ix, failure) in std::mem::take(&mut self.preset) {
            if self.graph[ix].status == NodeStatus::Pending {
                self.fail(ix, failure);
            }
        }
    }

    /// A commit point. When the event log cannot be written, the run stops
    /// starting anything (a pause with the reason `storage`, shown to the
    /// operator) and tries again each wake-up and every second; when the
    /// write goes through, it goes on.
    fn commit(&mut self) {
        match self.bus.flush() {
            Ok(()) => {
                if self.storage.take().is_some() {
                    tracing::info!("the event log is written again; the run goes on");
                    self.bus.emit(SignalKind::StorageRecovered);
                }
            }
            Err(e) => {
                if self.storage.is_none() {
                    tracing::error!("{e}; nothing new starts until it can be written");
                    let error: Arc<str> = Arc::from(e.to_string());
                    self.storage = Some(error.clone());
                    self.bus.emit(SignalKind::StorageFailed { error });
                }
            }
        }
    }

    /// All settled, nothing routing — and recorded: a run whose log cannot
    /// be written has not finished (unless the operator gave up on it).
    fn is_finished(&self) -> bool {
        self.sched.running == 0
            && self.routing.is_empty()
            && self.sched.terminal == self.graph.node_count()
            && (self.storage.is_none() || self.cancelled)
    }

    fn now(&self) -> f64 {
        self.bus.clock
    }

    fn header(&self, ix: NodeIndex) -> NodeHeader {
        let n = &self.graph[ix];
        NodeHeader {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            parent_id: n.op.metadata.spawned_from,
            depends_on: n.depends_on.clone(),
        }
    }

    /// Emits a signal about one node and moves its lane; returns the
    /// signal's seq and time.
    fn emit_node(&mut self, ix: NodeIndex, kind: SignalKind) -> (u64, f64) {
        let lane = lane_for(self.graph[ix].lane, &kind);
        let (seq, at) = self.bus.emit(kind);
        let n = &mut self.graph[ix];
        if lane != n.lane {
            n.lane = lane;
            n.lane_since = Ms::at(at);
        }
        (seq, at)
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Request { req, reply } => {
                let _ = reply.send(self.apply(req));
            }
            Command::SetApprovalPolicy(policy, reply) => {
                self.set_approval_policy(policy);
                let _ = reply.send(());
            }
            Command::Inject { op, reply } => {
                // ADR-0033 D5: outside an active reactive run, inject()
                // returns nothing and says why; there is no ledger to
                // record it in (a non-reactive envelope has none).
                let refused = if !self.cfg.reactive {
                    Some("inject refused: the run is not reactive (reactive = false)")
                } else if self.cancelled {
                    Some("inject refused: the run was cancelled")
                } else if self.finished.is_some() {
                    Some("inject refused: the run has ended")
                } else {
                    None
                };
                let joined = match refused {
                    Some(why) => {
                        tracing::warn!(operation = %op.op.reference_id, "{why}");
                        self.bus.emit(SignalKind::Warning {
                            message: Arc::from(why),
                            op_id: None,
                        });
                        None
                    }
                    None => self.inject(*op),
                };
                let _ = reply.send(joined.map(|ix| self.graph[ix].op.op_id));
            }
            Command::Snapshot { nodes, reply } => {
                let _ = reply.send(self.snapshot_with(nodes));
            }
        }
        // The answer goes out after the signals it caused are durable.
        self.commit();
    }

    /// Answers a command that arrived after the run ended.
    fn refuse(&self, cmd: Command) {
        match cmd {
            Command::Request { reply, .. } => {
                let _ = reply.send(Err(CommandError::RunFinished));
            }
            Command::SetApprovalPolicy(_, reply) => {
                let _ = reply.send(());
            }
            Command::Inject { op, reply } => {
                tracing::warn!(
                    operation = %op.op.reference_id,
                    "inject refused: the run has ended"
                );
                let _ = reply.send(None);
            }
            Command::Snapshot { nodes, reply } => {
                let _ = reply.send(self.snapshot_with(nodes));
            }
        }
    }

    fn start(&mut self, ix: NodeIndex, lease: Option<Lease>) {
        let now = self.now();
        let attempt = {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Running;
            n.attempt += 1;
            n.started_at = Ms::at(now);
            n.attempt
        };
        self.sched.running += 1;
        self.round_active = true;
        let node = self.header(ix);
        let role = self.graph[ix].op.assignee.clone();
        let instance = lease.as_ref().map(|l| l.instance.clone());
        let workspace = lease.as_ref().and_then(|l| l.workspace.clone());
        let leased_agent = lease.as_ref().and_then(|l| l.agent.clone());
        let profile = lease.as_ref().and_then(|l| l.profile.clone());
        if let Some(lease) = lease {
            self.gate.hold(ix, lease);
        }
        let started = SignalKind::Started {
            node,
            attempt,
            role,
            instance: instance.clone(),
        };
        self.emit_node(ix, started);

        let agent_name = leased_agent.unwrap_or_else(|| self.graph[ix].op.metadata.agent.clone());
        let Some(agent) = self.agents.resolve(&agent_name) else {
            self.sched.running -= 1;
            self.gate.release(ix);
            let f = AgentFailure::new("agent_not_found", format!("no agent named {agent_name:?}"));
            self.fail(ix, f);
            return;
        };
        let context = if agent.wants_context() {
            self.context_for(ix)
        } else {
            Map::new()
        };
        let n = &self.graph[ix];
        let instruction = match &self.decorator {
            Some(d) => d.decorate(
                n.op.assignee.as_deref(),
                &n.op.instruction,
                SpawnBudget {
                    accepted: self.adm.accepted,
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
            events: AgentEvents::new(
                ix.index() as u32,
                attempt,
                self.agent_tx.clone(),
                self.backlog.clone(),
            ),
            instance,
            workspace,
            profile,
        };
        // A panicking agent fails its own operation (ADR-0033 D4: an
        // unexpected error becomes an error result), never the run.
        let invoked = match std::panic::catch_unwind(AssertUnwindSafe(|| agent.invoke(inv))) {
            Ok(fut) => fut,
            Err(p) => {
                self.sched.running -= 1;
                self.gate.release(ix);
                self.fail(ix, panicked(&*p));
                return;
            }
        };
        let caught: BoxFuture<AgentOutcome> = Box::pin(
            AssertUnwindSafe(invoked)
                .catch_unwind()
                .map(|r| r.unwrap_or_else(|p| Err(panicked(&*p)))),
        );
        let (handle, registration) = AbortHandle::new_pair();
        let fut = Abortable::new(caught, registration);
        self.aborts.insert(ix, handle);
        self.inflight.push(Tagged { ix, attempt, fut });
    }

    /// `<pred_op_id>_result` for each predecessor with a result, then the flow
    /// context merged in.
    fn context_for(&self, ix: NodeIndex) -> Map<String, Value> {
        let mut ctx = Map::new();
        for pred in self.graph.neighbors_directed(ix, Direction::Incoming) {
            let p = &self.graph[pred];
            if let Some(r) = &p.result {
                ctx.insert(format!("{}_result", p.op.op_id), Value::clone(r));
            }
        }
        for (k, v) in &self.flow_context {
            ctx.insert(k.clone(), v.clone());
        }
        ctx
    }

    fn complete(&mut self, ix: NodeIndex, attempt: u32, outcome: AgentOutcome) {
        // Requests the agent put on its stream before finishing come first,
        // so a repeat of them in the result is recognised as a duplicate.
        while let Ok(msg) = self.agent_rx.try_recv() {
            self.agent_event(msg);
        }
        if self.graph[ix].status != NodeStatus::Running || self.graph[ix].attempt != attempt {
            return;
        }
        self.aborts.remove(&ix);
        self.sched.running -= 1;
        self.gate.release(ix);
        match outcome {
            Ok(value) => self.succeed(ix, value),
            Err(f) => self.fail(ix, f),
        }
    }

    fn agent_event(&mut self, msg: AgentMsg) {
        self.backlog.took();
        let ix = NodeIndex::new(msg.node as usize);
        let Some(n) = self.graph.node_weight(ix) else {
            return;
        };
        // Events from an earlier attempt or a finished node are stale.
        if n.status != NodeStatus::Running || n.attempt != msg.attempt {
            return;
        }
        let (op_id, name, attempt) = (n.op.op_id, n.op.reference_id.clone(), n.attempt);
        let kind = match msg.event {
            AgentEvent::Emitted(v) => {
                if self.cfg.reactive {
                    self.emitted(ix, &v);
                }
                return;
            }
            AgentEvent::Activity { state, tool } => SignalKind::AgentActivity {
                op_id,
                name,
                attempt,
                state,
                tool,
            },
            AgentEvent::Usage(usage) => SignalKind::AgentUsage {
                op_id,
                name,
                attempt,
                usage,
            },
            AgentEvent::Warning(message) => SignalKind::Warning {
                message,
                op_id: Some(op_id),
            },
            AgentEvent::Process { pgid } => SignalKind::AgentProcess {
                op_id,
                name,
                attempt,
                pgid,
            },
        };
        self.bus.emit(kind);
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
            External::CapacityChanged => self.gate.changed(),
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
            spawns_accepted: self.adm.accepted,
            max_spawn: self.cfg.max_spawn,
        };
        self.bus.emit(kind);
    }
}

#[cfg(test)]
mod testkit;

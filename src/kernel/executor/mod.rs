//! The executor (ADR-0033 D1, D3, D4): one task owns the graph and every
//! piece of run state; agents, routers and operators talk to it through
//! channels. Because there is a single owner there is no graph lock to
//! nest with the palette lock, and admission is atomic by construction.
//!
//! The state is split by owner: [`run_loop`] takes wake-ups and commits,
//! [`attempt`] starts and completes one attempt of an operation, [`bus`]
//! numbers and fans out signals, [`schedule`] decides readiness and
//! settling, [`capacity`] gates starts on leases, [`routing`] hands spawn
//! requests to the node builder, [`admission`] admits or drops them,
//! [`emissions`] keeps the counters, the ledger and what each emitter has
//! shown, [`inject`] takes trusted operations, [`commands`] carries out
//! operator commands, [`resume`] takes up a stopped run and [`view`]
//! answers snapshots and builds the envelope.

mod admission;
mod attempt;
mod backoff;
mod breaks;
mod budget;
mod bus;
mod capacity;
mod commands;
mod emissions;
mod inject;
mod node;
mod providers;
mod resume;
mod routing;
mod run_loop;
mod schedule;
mod view;

use std::sync::{Arc, OnceLock};

use futures_util::stream::FuturesUnordered;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
// Keys here are op ids, node indices and names the kernel made or the play
// authored: a fast hasher is safe and measurably cheaper per admission.
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc};

use super::agent::{AgentFailure, AgentMsg, AgentResolver, Backlog, InstructionDecorator};
use super::builder::NodeBuilder;
use super::control::{ApprovalPolicy, Command, FinalState, RunHandle};
use super::envelope::Envelope;
use super::graph::{Edge, Graph, GraphError, OpId};
use super::lease::LeaseProvider;
use super::restore::Restore;
use super::signal::{NodeHeader, Outcome, SignalKind, SignalSink};
use super::transition::lane_for;
use attempt::Tagged;
use bus::Bus;
use capacity::CapacityGate;
use emissions::Admission;
use node::{Ms, Node};
use routing::Routing;
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
    /// Which failed attempts come back by themselves.
    pub retry: super::retry::RetryPolicies,
    /// Spend caps, if the run has any.
    pub budget: Option<super::spend::Budget>,
    /// Caps set on the command line (`--budget`): over the play's, and on
    /// a resume over the ones the log kept.
    pub budget_set: Vec<super::spend::CapChange>,
    /// Breakpoints set on the command line (`--break`).
    pub breakpoints: Vec<super::breakpoint::Breakpoint>,
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
            retry: super::retry::RetryPolicies::default(),
            budget: None,
            budget_set: Vec::new(),
            breakpoints: Vec::new(),
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

/// A run that has been set up but not started. Subscribe through the handle
/// before starting it to see every signal from `run_started` on.
pub struct Run {
    ex: Executor,
}

/// A run's graph, read in the parts a checkpoint is seeded from.
pub struct GraphParts<'a>(&'a Executor);

impl<'a> GraphParts<'a> {
    pub fn len(&self) -> usize {
        self.0.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn operations(&self) -> impl Iterator<Item = Arc<super::graph::Operation>> + 'a {
        let g = &self.0.graph;
        g.node_indices().map(move |ix| g[ix].op.clone())
    }

    /// Edges as (from, position of the target among [`Self::operations`]):
    /// nodes are never removed, so an index is a position.
    pub fn edges(&self) -> impl Iterator<Item = (OpId, usize, &'a Edge)> + 'a {
        use petgraph::visit::{EdgeRef, IntoEdgeReferences};
        let g = &self.0.graph;
        g.edge_references()
            .map(move |e| (g[e.source()].op.op_id, e.target().index(), e.weight()))
    }

    /// Each operation's position by id, in the index's own order.
    pub fn positions(&self) -> impl ExactSizeIterator<Item = (OpId, u32)> + 'a {
        self.0.index.iter().map(|(id, ix)| (*id, ix.index() as u32))
    }
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
        let clock = Arc::new(OnceLock::new());
        let handle = RunHandle {
            tx: ctl_tx,
            signals: sig_tx.downgrade(),
            final_state: final_state.clone(),
            clock: clock.clone(),
            run_id: cfg.run_id.clone(),
        };
        let Graph { inner, index } = graph;
        let empty: Arc<[OpId]> = Arc::from(Vec::new());
        let graph = inner.map_owned(|_, op| Node::new(op, empty.clone()), |_, e| e);
        let sched = Schedule {
            paused: cfg.start_paused,
            ..Schedule::default()
        };
        let ex = Executor {
            graph,
            index,
            names: std::cell::OnceCell::new(),
            sched,
            scratch: Vec::new(),
            pred_buf: Vec::new(),
            gate: CapacityGate::default(),
            adm: Admission::default(),
            inflight: FuturesUnordered::new(),
            inboxes: std::collections::HashMap::new(),
            questions: std::collections::HashMap::new(),
            shown: HashMap::default(),
            landing: HashMap::default(),
            retried_by: None,
            breaks: std::collections::BTreeSet::new(),
            run_to: None,
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
            clock,
            restored: None,
            empty_deps: empty,
            null_result: Arc::new(Value::Null),
            acting: Arc::from(super::command::OPERATOR),
            backoff: std::collections::BinaryHeap::new(),
            meter: Default::default(),
            budget: cfg.budget.clone(),
            caps_reached: Default::default(),
            spend_wait: Vec::new(),
            workers: None,
            provider_holds: HashMap::default(),
            provider_wait: Vec::new(),
            provider_refused: Vec::new(),
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

    /// Its graph as it stands (before [`Run::run`]: the initial one), so a
    /// checkpoint can be seeded without a second copy of the graph alive
    /// beside this one.
    pub fn graph_parts(&self) -> GraphParts<'_> {
        GraphParts(&self.ex)
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

/// A question waiting for the operator: the attempt that asked it, the
/// question, and the seq of the `permission_asked` that showed it.
struct Asked {
    attempt: u32,
    q: super::agent::Question,
    seq: u64,
}

/// The operator's retry or send-back, as its `retried` signal records it.
struct RetriedBy {
    by: Arc<str>,
    note: Option<Arc<str>>,
    on: Option<Arc<str>>,
}

struct Executor {
    cfg: RunConfig,
    graph: StableDiGraph<Node, Edge>,
    index: super::graph::OpIdMap<NodeIndex>,
    /// Operations by name, for commands that name one: made on the first
    /// such command (a million-operation run that is never asked by name
    /// does not hold 50 MB of it), kept current from then on.
    names: std::cell::OnceCell<HashMap<Arc<str>, NodeIndex>>,
    sched: Schedule,
    scratch: Vec<NodeIndex>,
    pred_buf: Vec<OpId>,
    gate: CapacityGate,
    adm: Admission,
    inflight: FuturesUnordered<Tagged>,
    /// The attempts that read the operator's messages live, by node, with
    /// the attempt each belongs to (few: claude's, while they run).
    inboxes: std::collections::HashMap<NodeIndex, (u32, super::agent::Inbox)>,
    /// Questions waiting for an operator, by node, with the attempt that
    /// asked and the seq of the signal that showed it (claude asks one at
    /// a time).
    questions: std::collections::HashMap<NodeIndex, Asked>,
    /// The seq of the signal that put each gate waiting for approval, and
    /// each failed or escalated operation, before the operator: the basis
    /// a decision on it names (few: only operations in those lanes).
    shown: HashMap<NodeIndex, u64>,
    /// Attempts whose work the run let land (`may_land` said yes): a
    /// message to one of them comes after its work is on the branch.
    landing: HashMap<NodeIndex, u32>,
    /// Who retries or sends back the operation being re-opened now, for
    /// its `retried` signal (taken by it).
    retried_by: Option<RetriedBy>,
    /// Where the run pauses by itself (`break`, `--break`).
    breaks: std::collections::BTreeSet<super::breakpoint::Breakpoint>,
    /// `run_to`: the operation before whose start the run pauses, once.
    run_to: Option<NodeIndex>,
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
    /// The run clock's start, shared with its handles once it begins.
    clock: Arc<OnceLock<(tokio::time::Instant, f64)>>,
    /// Where a resumed run starts from (taken when it starts).
    restored: Option<Restore>,
    /// Shared values for the common cases, so they cost no allocation.
    empty_deps: Arc<[OpId]>,
    null_result: Arc<Value>,
    /// Who asked for the command being carried out (recorded in
    /// approvals, denials and `operator_action`).
    acting: Arc<str>,
    /// Operations waiting to be retried, soonest first.
    backoff: std::collections::BinaryHeap<std::cmp::Reverse<backoff::Due>>,
    /// What the run's attempts spent.
    meter: super::spend::Meter,
    /// The caps as raised so far (from `cfg.budget`).
    budget: Option<super::spend::Budget>,
    /// Caps reached and said so, until raised.
    caps_reached: std::collections::HashSet<(Option<String>, super::spend::Measure)>,
    /// Ready operations a cap holds back, in the order they were ready.
    spend_wait: Vec<NodeIndex>,
    /// A `[cluster]` run's workers as its hub last said, and when.
    workers: Option<(Arc<[super::signal::WorkerSeen]>, f64)>,
    /// Agents whose provider refused work: until when (none: until the
    /// operator resumes).
    provider_holds: HashMap<Arc<str>, Option<tokio::time::Instant>>,
    /// Ready operations a provider hold keeps back, in order.
    provider_wait: Vec<NodeIndex>,
    /// Agents held on a refused key, and what the provider said: with
    /// nobody to fix it, their work ends at once instead of waiting.
    provider_refused: Vec<(Arc<str>, Arc<str>)>,
}

impl Executor {
    fn now(&self) -> f64 {
        self.bus.clock
    }

    /// [`Self::now`] as a node records it.
    fn now_ms(&self) -> Ms {
        self.bus.clock_ms
    }

    fn header(&self, ix: NodeIndex) -> NodeHeader {
        let n = &self.graph[ix];
        NodeHeader {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            parent_id: n.op.metadata.spawned_from,
            depends_on: n.depends_on.clone(),
            pos: ix.index() as u32,
        }
    }

    /// Emits a signal about one node and moves its lane; returns the
    /// signal's seq and time.
    fn emit_node(&mut self, ix: NodeIndex, kind: SignalKind) -> (u64, f64) {
        let lane = lane_for(self.graph[ix].lane, &kind);
        // What puts it before the operator is what their decision names.
        let before_operator = matches!(
            kind,
            SignalKind::AwaitingApproval { .. }
                | SignalKind::Failed { .. }
                | SignalKind::Escalated { .. }
        );
        let (seq, at) = self.bus.emit(kind);
        if before_operator {
            self.shown.insert(ix, seq);
        } else if !matches!(
            lane,
            super::Lane::AwaitingApproval | super::Lane::Failed | super::Lane::Escalated
        ) && !self.shown.is_empty()
        {
            self.shown.remove(&ix);
        }
        let since = self.now_ms();
        let n = &mut self.graph[ix];
        if lane != n.lane {
            n.lane = lane;
            n.lane_since = since;
        }
        (seq, at)
    }

    fn drain_external(&mut self) {
        while let Ok(ext) = self.external_rx.try_recv() {
            self.external(ext);
        }
    }

    fn external(&mut self, ext: External) {
        match ext {
            External::Signal(kind) => {
                if let SignalKind::Workers { workers } = &kind {
                    // A finished run's log ends with its outcome; who
                    // serves the cluster afterwards is not its story.
                    if self.finished.is_some() {
                        return;
                    }
                    self.workers = Some((workers.clone(), self.now()));
                }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_merge_key_by_key_and_anything_else_replaces() {
        let mut dst = json!({"a": {"x": 1, "y": 2}, "b": [1], "c": 3});
        let src = json!({"a": {"y": 20, "z": 30}, "b": [2], "c": {"now": "object"}});
        deep_merge(dst.as_object_mut().unwrap(), src.as_object().unwrap());
        assert_eq!(
            dst,
            json!({"a": {"x": 1, "y": 20, "z": 30}, "b": [2], "c": {"now": "object"}})
        );
    }

    #[test]
    fn a_panic_says_what_it_said_or_that_it_said_nothing() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        assert_eq!(panic_message(&*caught(|| panic!("plain"))), "plain");
        assert_eq!(panic_message(&*caught(|| panic!("{}", 7))), "7");
        let silent = std::panic::catch_unwind(|| std::panic::panic_any(3_u8)).unwrap_err();
        assert_eq!(panic_message(&*silent), "a panic without a message");
    }

    #[test]
    fn only_an_operation_of_the_run_can_be_failed_before_it_starts() {
        let (ex, _tape) = testkit::executor(&[("a", &[], false)], RunConfig::default());
        let a = ex.graph[ex.ix("a")].op.op_id;
        let mut run = Run { ex };
        let failure = || AgentFailure::new("unknown_role", "no role");
        assert!(run.fail_before_start(a, failure()));
        assert!(!run.fail_before_start(super::super::graph::new_op_id(), failure()));
        run.ex.begin();
        assert_eq!(
            run.ex.graph[run.ex.ix("a")].status,
            super::super::snapshot::NodeStatus::Failed
        );
    }
}

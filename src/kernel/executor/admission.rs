//! Live admission (ADR-0033 D3): requests an operation emits are routed
//! through the node builder, checked against the spawn cap and recorded in
//! the ledger, accepted or dropped with a reason; trusted injection takes
//! the same path without the builder.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::FutureExt;
use petgraph::stable_graph::NodeIndex;
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use super::super::agent::{AgentFailure, BoxFuture};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::super::builder::{Emitter, Rejection, RouteResult};
use super::super::control::NewOperation;
use super::super::graph::{Edge, OpId, OpMetadata, Operation, OperationKind, new_op_id};
use super::super::ledger::{DropReason, LedgerEntry, LedgerOutcome, RequestPayload};
use super::super::request::{self, RequestId, SpawnRequest};
use super::super::signal::{
    DROP_DETAIL_MAX, DepRecord, SPAWNED_INSTRUCTION_MAX, SignalKind, SpawnRecord, truncate_chars,
};
use super::super::snapshot::NodeStatus;
use super::node::Node;
use super::{Executor, RouteSlot, RoutedBatch, Routing};

/// What an operation has emitted so far. Kept beside the graph, for the few
/// operations that emit anything, so nodes stay small.
#[derive(Default)]
struct Emissions {
    /// The attempt the counts below are of.
    attempt: u32,
    /// Requests read in that attempt, for the flood cap.
    read: usize,
    /// Spawn requests that attempt put on its stream (identity -> how many
    /// times): their repeat in its result is a duplicate (ADR-0033 D3).
    /// Identical requests on the stream, or in the result, are each a
    /// request of their own.
    streamed: HashMap<u64, u32>,
    /// Escalations that attempt showed (on its stream and in its result
    /// they are one).
    seen: HashSet<u64>,
    /// Sightings a resumed run already recorded: passed over once each.
    handled: Vec<u64>,
    /// Escalations that attempt put on its stream before its result: they
    /// are the attempt's, so a failed attempt's never reach a later one.
    escalations: Vec<Arc<str>>,
}

/// The spawn counters, the ledger and what each emitter has shown.
#[derive(Default)]
pub(super) struct Admission {
    /// The last `spawn-N` number given.
    pub spawn_seq: u64,
    pub accepted: usize,
    pub ledger: Vec<LedgerEntry>,
    emissions: HashMap<NodeIndex, Emissions>,
}

impl Admission {
    /// The emitter's record, reset when a new attempt begins.
    fn of(&mut self, ix: NodeIndex, attempt: u32) -> &mut Emissions {
        let e = self.emissions.entry(ix).or_default();
        if e.attempt != attempt {
            e.attempt = attempt;
            e.read = 0;
            e.streamed.clear();
            e.seen.clear();
            e.escalations.clear();
        }
        e
    }

    /// True the first time `ix`'s attempt shows the escalation with
    /// identity `id`.
    pub fn first_sighting(&mut self, ix: NodeIndex, attempt: u32, id: u64) -> bool {
        self.of(ix, attempt).seen.insert(id)
    }

    /// A spawn request `ix`'s attempt put on its stream.
    fn streamed(&mut self, ix: NodeIndex, attempt: u32, id: u64) {
        *self.of(ix, attempt).streamed.entry(id).or_default() += 1;
    }

    /// Whether a request in `ix`'s result repeats one its stream carried
    /// (each stream sighting answers for one result sighting).
    fn repeats_stream(&mut self, ix: NodeIndex, attempt: u32, id: u64) -> bool {
        match self.of(ix, attempt).streamed.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// A sighting a resumed run already recorded is passed over, once.
    fn already_handled(&mut self, ix: NodeIndex, id: u64) -> bool {
        let Some(e) = self.emissions.get_mut(&ix) else {
            return false;
        };
        let Some(pos) = e.handled.iter().position(|&h| h == id) else {
            return false;
        };
        e.handled.swap_remove(pos);
        true
    }

    /// What a resumed run's emitter had shown before it stopped: `streamed`
    /// the spawn requests its last attempt put on its stream, `handled` the
    /// sightings already in the ledger that it will make again.
    pub fn restore(&mut self, ix: NodeIndex, attempt: u32, streamed: &[u64], handled: &[u64]) {
        if streamed.is_empty() && handled.is_empty() {
            return;
        }
        for &id in streamed {
            self.streamed(ix, attempt, id);
        }
        let e = self.emissions.entry(ix).or_default();
        e.handled.extend(handled.iter().copied());
    }

    /// Counts `n` more requests read from `ix`'s attempt; returns the
    /// attempt's total.
    pub fn read(&mut self, ix: NodeIndex, attempt: u32, n: usize) -> usize {
        let e = self.of(ix, attempt);
        e.read += n;
        e.read
    }

    pub fn push_escalation(&mut self, ix: NodeIndex, attempt: u32, reason: Arc<str>) {
        self.of(ix, attempt).escalations.push(reason);
    }

    /// The escalations `ix`'s attempt streamed; an earlier attempt's are
    /// not its own.
    pub fn take_escalations(&mut self, ix: NodeIndex, attempt: u32) -> Vec<Arc<str>> {
        match self.emissions.get_mut(&ix) {
            Some(e) if e.attempt == attempt => std::mem::take(&mut e.escalations),
            _ => Vec::new(),
        }
    }

    /// The next generated name, `spawn-N`, in one allocation.
    pub fn next_name(&mut self) -> Arc<str> {
        self.spawn_seq += 1;
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(self.spawn_seq).as_bytes();
        let mut buf = [0u8; 26];
        buf[..6].copy_from_slice(b"spawn-");
        buf[6..6 + digits.len()].copy_from_slice(digits);
        Arc::from(std::str::from_utf8(&buf[..6 + digits.len()]).expect("ascii"))
    }
}

/// A request whose routing panicked.
fn router_panicked(payload: &(dyn std::any::Any + Send)) -> Rejection {
    Rejection::new(
        DropReason::RoleProvisionFailed,
        format!(
            "routing the request panicked: {}",
            super::panic_message(payload)
        ),
    )
}

/// What admission needs to know about a request besides the routed result.
#[derive(Clone)]
pub(super) struct RequestMeta {
    assignee: Option<Arc<str>>,
    independent: bool,
    reason: Option<Arc<str>>,
    /// The request's identity, recorded so dedup survives a resume.
    identity: Option<RequestId>,
    /// Kept for the ledger, should the request be dropped.
    instruction: Arc<str>,
    operation: OperationKind,
}

impl RequestMeta {
    fn asked(&self) -> Asked {
        Asked {
            identity: self.identity,
            request: Some(RequestPayload::new(
                &self.instruction,
                self.operation.as_str(),
                self.reason.as_ref(),
                self.independent,
            )),
        }
    }
}

/// What a dropped request's ledger row says of the request itself.
pub(super) struct Asked {
    identity: Option<RequestId>,
    request: Option<Arc<RequestPayload>>,
}

impl Asked {
    /// What the operator asked for (no identity: it is not an agent's).
    pub(super) fn operator(instruction: &str) -> Asked {
        Asked {
            identity: None,
            request: Some(RequestPayload::new(
                instruction,
                OperationKind::Operate.as_str(),
                None,
                false,
            )),
        }
    }
}

impl From<Option<RequestId>> for Asked {
    fn from(identity: Option<RequestId>) -> Self {
        Asked {
            identity,
            request: None,
        }
    }
}

impl Executor {
    /// Requests (and escalations) an operation put on its stream while it
    /// runs.
    pub(super) fn emitted(&mut self, ix: NodeIndex, v: &Value) {
        let found = request::extract(v);
        if !self.within_cap(ix, found.spawns.len() + found.escalations.len()) {
            return;
        }
        let attempt = self.graph[ix].attempt;
        for esc in &found.escalations {
            if self
                .adm
                .first_sighting(ix, attempt, request::identity(esc) ^ u64::from(b'e'))
            {
                let reason = Arc::from(request::escalation_reason(esc));
                self.adm.push_escalation(ix, attempt, reason);
            }
        }
        if !found.spawns.is_empty() {
            self.route_spawns(ix, &found.spawns, false);
        }
    }

    /// Counts requests read from `ix`'s current attempt; past the cap the
    /// attempt is stopped and fails as `request_flood` (an agent printing
    /// requests in a loop cannot grow the run without bound).
    pub(super) fn within_cap(&mut self, ix: NodeIndex, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let attempt = self.graph[ix].attempt;
        if self.adm.read(ix, attempt, n) <= self.cfg.max_requests {
            return true;
        }
        if self.graph[ix].status == NodeStatus::Running {
            if let Some(h) = self.aborts.remove(&ix) {
                h.abort();
            }
            self.sched.running -= 1;
            self.gate.release(ix);
            let message = format!(
                "the agent made more than {} requests in one attempt (max_requests); the attempt was stopped",
                self.cfg.max_requests
            );
            self.fail(ix, AgentFailure::new("request_flood", message));
        }
        false
    }

    /// Makes room for `k` more operations at once, so a burst of admissions
    /// does not grow every table step by step.
    fn reserve(&mut self, k: usize) {
        self.graph.reserve_nodes(k);
        self.graph.reserve_edges(k);
        self.index.reserve(k);
        self.names.reserve(k);
        self.adm.ledger.reserve(k);
    }

    /// Routes the spawn requests `ix` made, on its stream or (`in_result`)
    /// in its result.
    pub(super) fn route_spawns(&mut self, ix: NodeIndex, raws: &[&Value], in_result: bool) {
        let attempt = self.graph[ix].attempt;
        self.reserve(raws.len());
        let n = &self.graph[ix];
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
            if self.adm.already_handled(ix, id) {
                // Recorded before a crash: passed over, but a stream
                // sighting still answers for its repeat in the result.
                if !in_result {
                    self.adm.streamed(ix, attempt, id);
                }
                continue;
            }
            let identity = Some(RequestId(id));
            if !in_result {
                self.adm.streamed(ix, attempt, id);
            } else if self.adm.repeats_stream(ix, attempt, id) {
                let detail =
                    "the result repeats a request this attempt already put on its stream".into();
                self.drop_spawn(
                    Some(ix),
                    assignee_of(raw),
                    DropReason::Duplicate,
                    detail,
                    None,
                    Asked {
                        identity,
                        request: RequestPayload::read(raw),
                    },
                );
                continue;
            }
            let (req, warning) = match SpawnRequest::from_value(raw) {
                Ok(r) => r,
                Err(e) => {
                    self.drop_spawn(
                        Some(ix),
                        assignee_of(raw),
                        DropReason::BuilderError,
                        e,
                        None,
                        Asked {
                            identity,
                            request: RequestPayload::read(raw),
                        },
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
                instruction: req.instruction.clone(),
                operation: req.operation,
            };
            if pending.is_empty() {
                // Decided without waiting (the static map, an existing
                // role): admit now, in request order.
                let now = catch_unwind(AssertUnwindSafe(|| self.builder.route_now(&req, &emitter)))
                    .unwrap_or_else(|p| Some(Err(router_panicked(&*p))));
                if let Some(routed) = now {
                    self.admit(Some(ix), meta, routed);
                    continue;
                }
                let mut fut = self.build_caught(&req, &emitter);
                if let Some(routed) = (&mut fut).now_or_never() {
                    self.admit(Some(ix), meta, routed);
                    continue;
                }
                pending.push((meta, fut));
            } else {
                pending.push((meta, self.build_caught(&req, &emitter)));
            }
        }
        if !pending.is_empty() {
            // Route the rest concurrently, admit in request order.
            self.routing.push(Routing {
                emitter: ix,
                items: pending
                    .into_iter()
                    .map(|(meta, fut)| (meta, RouteSlot::Waiting(fut)))
                    .collect(),
            });
        }
    }

    /// The node builder's future for one request. A builder or provisioner
    /// that panics drops that request as `role_provision_failed` with what
    /// the panic said; the run goes on (ADR-0036 D3: router exceptions do
    /// not escape as untyped executor errors).
    fn build_caught(&self, req: &SpawnRequest, emitter: &Emitter) -> BoxFuture<RouteResult> {
        match catch_unwind(AssertUnwindSafe(|| self.builder.build(req, emitter))) {
            Ok(fut) => Box::pin(
                AssertUnwindSafe(fut)
                    .catch_unwind()
                    .map(|r| r.unwrap_or_else(|p| Err(router_panicked(&*p)))),
            ),
            Err(p) => Box::pin(std::future::ready(Err(router_panicked(&*p)))),
        }
    }

    /// The run is cancelled while requests are being routed: every one of
    /// them ends in the ledger, with its identity, so the ledger, the
    /// checkpoint and the envelope agree (ADR-0033 P6). A request already
    /// refused keeps its reason; one still waiting on a role being
    /// provisioned, and one held behind it for request order, is dropped as
    /// `role_provision_failed` with a detail that says the run was
    /// cancelled. Dropping the routing futures rolls the provisioning back
    /// (the router's own signals say so first).
    pub(super) fn drop_routing(&mut self) {
        let batches: Vec<Routing> = std::mem::take(&mut self.routing).into_iter().collect();
        let mut drops = Vec::new();
        for batch in batches {
            let mut items = Vec::with_capacity(batch.items.len());
            let mut provisioning: Vec<Arc<str>> = Vec::new();
            for (meta, slot) in batch.items {
                let decided = match slot {
                    RouteSlot::Decided(r) => Some(r),
                    RouteSlot::Waiting(mut fut) => (&mut fut).now_or_never(),
                };
                if decided.is_none()
                    && let Some(a) = &meta.assignee
                    && !provisioning.contains(a)
                {
                    provisioning.push(a.clone());
                }
                items.push((meta, decided));
            }
            drops.push((batch.emitter, items, provisioning));
        }
        // What the router said while its provisioning was dropped comes
        // before the ledger rows it explains.
        self.drain_external();
        for (emitter, items, provisioning) in drops {
            let waited_on = if provisioning.is_empty() {
                "a role".to_string()
            } else {
                provisioning.join(", ")
            };
            for (meta, decided) in items {
                let (reason, detail) = match decided {
                    Some(Err(rej)) => (rej.reason, rej.detail),
                    Some(Ok(None)) => (
                        DropReason::NullChild,
                        "the node builder made no operation of the request".into(),
                    ),
                    Some(Ok(Some(_))) => (
                        DropReason::RoleProvisionFailed,
                        format!(
                            "cancelled before admission: the run was cancelled while {waited_on} was being provisioned, and this request waited behind it for request order"
                        ),
                    ),
                    None => (
                        DropReason::RoleProvisionFailed,
                        format!(
                            "cancelled: the run was cancelled while {} was being provisioned",
                            meta.assignee.as_deref().unwrap_or("its role")
                        ),
                    ),
                };
                self.drop_spawn(
                    Some(emitter),
                    meta.assignee.clone(),
                    reason,
                    detail,
                    None,
                    meta.asked(),
                );
            }
        }
    }

    pub(super) fn admit_batch(&mut self, batch: RoutedBatch) {
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

    /// Records a dropped request in the ledger and signals it.
    pub(super) fn drop_spawn(
        &mut self,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        reason: DropReason,
        detail: String,
        op_id: Option<OpId>,
        asked: impl Into<Asked>,
    ) {
        let Asked { identity, request } = asked.into();
        let detail: Arc<str> = Arc::from(truncate_chars(&detail, DROP_DETAIL_MAX));
        let emitter_id = emitter.map(|e| self.graph[e].op.op_id);
        // A drop folded into the last row shows that row's request: a
        // flood of them does not repeat its text in the log.
        let request = request.filter(|_| {
            !crate::kernel::ledger::repeats_last(
                &self.adm.ledger,
                emitter_id,
                reason,
                assignee.as_ref(),
            )
        });
        let emitter_name = emitter.map(|e| self.graph[e].op.reference_id.clone());
        let (seq, elapsed) = self.bus.emit(SignalKind::SpawnDropped {
            reason,
            assignee: assignee.clone(),
            emitter_id,
            detail: detail.clone(),
            op_id,
            identity,
            request: request.clone(),
        });
        crate::kernel::ledger::record(
            &mut self.adm.ledger,
            LedgerEntry {
                seq,
                elapsed,
                emitter_id,
                emitter_name,
                assignee,
                outcome: LedgerOutcome::Dropped {
                    reason,
                    detail,
                    op_id,
                    request,
                },
                repeats: 0,
            },
        );
    }

    /// Admission (ADR-0033 D3 steps 1–7) of a routed request.
    fn admit(&mut self, emitter: Option<NodeIndex>, meta: RequestMeta, routed: RouteResult) {
        // The router's signals about this request come before its outcome.
        self.drain_external();
        let candidate = match routed {
            Err(rej) => {
                self.drop_spawn(
                    emitter,
                    meta.assignee.clone(),
                    rej.reason,
                    rej.detail,
                    None,
                    meta.asked(),
                );
                return;
            }
            Ok(None) => {
                let detail = "the node builder made no operation of the request".into();
                self.drop_spawn(
                    emitter,
                    meta.assignee.clone(),
                    DropReason::NullChild,
                    detail,
                    None,
                    meta.asked(),
                );
                return;
            }
            Ok(Some(c)) => c,
        };
        // Identity is allocated after routing, before the cap: a refused
        // candidate leaves a gap in the spawn-N sequence, as the spec allows.
        let name = self.adm.next_name();
        let assignee = candidate.assignee.clone().or_else(|| meta.assignee.clone());
        if self.adm.accepted >= self.cfg.max_spawn {
            let detail = format!(
                "{name} refused: {} of max_spawn {} already accepted",
                self.adm.accepted, self.cfg.max_spawn
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
                meta.asked(),
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
                spawned_from: emitter.map(|e| self.graph[e].op.op_id),
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
        identity: Option<RequestId>,
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
                    from: self.graph[*from].op.op_id,
                    edge: edge.clone(),
                })
                .collect(),
            identity,
        });
        let ix = self.graph.add_node(Node::new(op, self.empty_deps.clone()));
        self.index.insert(op_id, ix);
        self.names.entry(name.clone()).or_insert(ix);
        for (from, edge) in deps {
            self.graph.add_edge(from, ix, edge);
        }
        self.adm.accepted += 1;
        self.emit_budget();
        let emitter_id = emitter.map(|e| self.graph[e].op.op_id);
        let emitter_name = emitter.map(|e| self.graph[e].op.reference_id.clone());
        let (seq, elapsed) = self.bus.emit(SignalKind::Spawned {
            op_id,
            name: name.clone(),
            parent_id: emitter_id,
            independent,
            assignee: assignee.clone(),
            instruction,
            record,
        });
        crate::kernel::ledger::record(
            &mut self.adm.ledger,
            LedgerEntry {
                seq,
                elapsed,
                emitter_id,
                emitter_name,
                assignee,
                outcome: LedgerOutcome::Accepted { op_id, name },
                repeats: 0,
            },
        );
        self.node_added(ix);
        // Settle it while it is still in cache: a burst of admissions
        // otherwise walks every new node twice.
        self.drain_worklist();
        ix
    }

    /// Trusted injection: no builder, same admission. Returns the node
    /// that joined (`None` when it was dropped, with a ledger row).
    pub(super) fn inject(&mut self, new: NewOperation) -> Option<NodeIndex> {
        let NewOperation {
            mut op,
            depends_on,
            parent,
            independent,
        } = new;
        let emitter = parent.and_then(|p| self.index.get(&p).copied());
        let assignee = op.assignee.clone();
        if parent.is_some() && emitter.is_none() {
            let detail = "the parent is not in this run".into();
            self.drop_spawn(None, assignee, DropReason::BuilderError, detail, None, None);
            return None;
        }
        let mut deps = Vec::new();
        for (dep, cond) in depends_on {
            match self.index.get(&dep) {
                Some(&d) => deps.push((d, Edge::dependency(cond))),
                None => {
                    let detail = format!("dependency {dep} is not in this run");
                    self.drop_spawn(
                        emitter,
                        assignee,
                        DropReason::BuilderError,
                        detail,
                        None,
                        None,
                    );
                    return None;
                }
            }
        }
        if let Some(e) = emitter
            && !independent
        {
            deps.push((e, Edge::spawn()));
        }
        if self.adm.accepted >= self.cfg.max_spawn {
            let detail = format!(
                "injected {} refused: {} of max_spawn {} already accepted",
                op.reference_id, self.adm.accepted, self.cfg.max_spawn
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
                None,
            );
            return None;
        }
        if let Some(&existing) = self.index.get(&op.op_id) {
            return self.add_edges_into(existing, emitter, assignee, deps);
        }
        if op.reference_id.is_empty() {
            op.reference_id = self.adm.next_name();
        }
        op.metadata.spawned_from = emitter.map(|e| self.graph[e].op.op_id);
        Some(self.accept_new(emitter, op, deps, independent, None))
    }

    /// The injected child is already in the graph: new edges into it may
    /// close a cycle, so this is the one case that checks reachability. It
    /// must not have started; if it was about to, it waits again.
    pub(super) fn add_edges_into(
        &mut self,
        existing: NodeIndex,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        deps: Vec<(NodeIndex, Edge)>,
    ) -> Option<NodeIndex> {
        let target = self.graph[existing].op.reference_id.clone();
        let op_id = Some(self.graph[existing].op.op_id);
        let status = self.graph[existing].status;
        for (from, _) in &deps {
            if *from == existing
                || petgraph::algo::has_path_connecting(&self.graph, existing, *from, None)
            {
                let detail = format!(
                    "an edge {} -> {target} would close a cycle",
                    self.graph[*from].op.reference_id
                );
                self.drop_spawn(emitter, assignee, DropReason::Cycle, detail, op_id, None);
                return None;
            }
        }
        if status == NodeStatus::Running || status.is_terminal() {
            let detail = format!(
                "{target} has already started; dependencies can be added only to an operation that has not"
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::BuilderError,
                detail,
                op_id,
                None,
            );
            return None;
        }
        let records: Vec<DepRecord> = deps
            .iter()
            .map(|(from, edge)| DepRecord {
                from: self.graph[*from].op.op_id,
                edge: edge.clone(),
            })
            .collect();
        for (from, edge) in deps {
            self.graph.add_edge(from, existing, edge);
        }
        // About to start, or asking for approval: it waits for the new
        // dependencies first (and asks again after them).
        if matches!(status, NodeStatus::Ready | NodeStatus::AwaitingApproval) {
            self.sched.ready.retain(|&r| r != existing);
            self.sched.unpark(existing);
            self.gate.leave(existing);
            let n = &mut self.graph[existing];
            n.parked = false;
            n.status = NodeStatus::Pending;
        }
        self.relink(existing);
        self.adm.accepted += 1;
        let node = self.header(existing);
        let emitter_id = emitter.map(|e| self.graph[e].op.op_id);
        let kind = SignalKind::DependenciesAdded {
            node,
            edges: records,
            emitter_id,
        };
        let (seq, elapsed) = self.emit_node(existing, kind);
        let emitter_name = emitter.map(|e| self.graph[e].op.reference_id.clone());
        crate::kernel::ledger::record(
            &mut self.adm.ledger,
            LedgerEntry {
                seq,
                elapsed,
                emitter_id,
                emitter_name,
                assignee: self.graph[existing].op.assignee.clone(),
                outcome: LedgerOutcome::Accepted {
                    op_id: self.graph[existing].op.op_id,
                    name: target,
                },
                repeats: 0,
            },
        );
        self.emit_budget();
        Some(existing)
    }

    /// What admission said of the last thing it dropped, as a refusal.
    pub(super) fn last_drop(&self) -> crate::kernel::CommandError {
        match self.adm.ledger.last().map(|e| &e.outcome) {
            Some(LedgerOutcome::Dropped { reason, detail, .. }) => {
                crate::kernel::CommandError::Dropped {
                    reason: reason.as_str(),
                    detail: detail.to_string(),
                }
            }
            _ => crate::kernel::CommandError::RunFinished,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_count_up_from_one_and_survive_a_resume() {
        let mut a = Admission::default();
        assert_eq!(&*a.next_name(), "spawn-1");
        assert_eq!(&*a.next_name(), "spawn-2");
        a.spawn_seq = 41;
        assert_eq!(&*a.next_name(), "spawn-42");
    }

    #[test]
    fn a_result_repeats_each_stream_sighting_once_and_attempts_start_afresh() {
        let mut a = Admission::default();
        let (x, y) = (NodeIndex::new(0), NodeIndex::new(1));
        // Twice on purpose on the stream, once more in the result.
        a.streamed(x, 1, 7);
        a.streamed(x, 1, 7);
        assert!(a.repeats_stream(x, 1, 7));
        assert!(a.repeats_stream(x, 1, 7));
        assert!(
            !a.repeats_stream(x, 1, 7),
            "a third copy is a request of its own"
        );
        assert!(
            !a.repeats_stream(y, 1, 7),
            "another emitter's request is its own"
        );
        // A new attempt has a stream of its own.
        a.streamed(x, 1, 9);
        assert!(!a.repeats_stream(x, 2, 9));
    }

    #[test]
    fn escalations_are_one_whether_streamed_or_in_the_result() {
        let mut a = Admission::default();
        let x = NodeIndex::new(0);
        assert!(a.first_sighting(x, 1, 7));
        assert!(!a.first_sighting(x, 1, 7));
        assert!(a.first_sighting(x, 2, 7), "a new attempt escalates anew");
    }

    #[test]
    fn recorded_sightings_are_passed_over_once_each() {
        let mut a = Admission::default();
        let x = NodeIndex::new(3);
        a.restore(x, 2, &[6], &[5, 5]);
        assert!(a.already_handled(x, 5));
        assert!(a.already_handled(x, 5));
        assert!(!a.already_handled(x, 5), "only as often as recorded");
        assert!(!a.already_handled(NodeIndex::new(4), 5));
        assert!(
            a.repeats_stream(x, 2, 6),
            "what it streamed before is known"
        );
    }

    #[test]
    fn escalations_wait_for_the_result_and_are_taken_once() {
        let mut a = Admission::default();
        let x = NodeIndex::new(0);
        a.push_escalation(x, 1, Arc::from("security"));
        assert_eq!(a.take_escalations(x, 1), vec![Arc::<str>::from("security")]);
        assert!(a.take_escalations(x, 1).is_empty());
        // A failed attempt's escalation is not the next attempt's.
        a.push_escalation(x, 1, Arc::from("unsure"));
        assert!(a.take_escalations(x, 2).is_empty());
    }
}

//! Routing (ADR-0033 D3 step 1, ADR-0036 D3): the requests an operation
//! emits are extracted, counted against the flood cap and handed to the
//! node builder. What it decides at once is admitted at once, in request
//! order; what waits on a role being provisioned is routed concurrently and
//! admitted in request order when all of its batch is decided.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::FutureExt;
use petgraph::stable_graph::NodeIndex;
use serde_json::Value;

use super::super::agent::{AgentFailure, BoxFuture};
use super::super::builder::{Emitter, Rejection, RouteResult};
use super::super::graph::OperationKind;
use super::super::ledger::{DropReason, RequestPayload};
use super::super::request::{self, RequestId, SpawnRequest};
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::Executor;
use super::admission::Asked;

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
/// Requests of one emitter whose routing had to wait, in request order.
pub(super) struct RoutedBatch {
    emitter: NodeIndex,
    items: Vec<(RequestMeta, RouteResult)>,
}

/// One request of a batch being routed: still waiting, or decided.
pub(super) enum RouteSlot {
    Waiting(BoxFuture<RouteResult>),
    Decided(RouteResult),
}

/// A batch whose routing is under way. Each request is polled on its own,
/// so a cancel can tell which were decided and which still waited on a
/// role being provisioned, and account for every one of them.
pub(super) struct Routing {
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

/// What admission needs to know about a request besides the routed result.
#[derive(Clone)]
pub(super) struct RequestMeta {
    pub assignee: Option<Arc<str>>,
    pub independent: bool,
    pub reason: Option<Arc<str>>,
    /// The request's identity, recorded so dedup survives a resume.
    pub identity: Option<RequestId>,
    /// Kept for the ledger, should the request be dropped.
    pub instruction: Arc<str>,
    pub operation: OperationKind,
}

impl RequestMeta {
    pub(super) fn asked(&self) -> Asked {
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
            self.stop_attempt(ix);
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
                if self.adm.restated(ix, attempt) {
                    // The CLI's own echo of its answer: the same emission.
                    continue;
                }
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
                        e.to_string(),
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::RunConfig;
    use super::super::testkit::executor;
    use super::*;
    use crate::kernel::ledger::LedgerOutcome;

    fn spawn(instruction: &str) -> Value {
        json!({"spawn_request": {"instruction": instruction, "assignee": "worker"}})
    }

    fn meta(assignee: &str) -> RequestMeta {
        RequestMeta {
            assignee: Some(Arc::from(assignee)),
            independent: false,
            reason: None,
            identity: Some(RequestId(7)),
            instruction: Arc::from("x"),
            operation: OperationKind::Operate,
        }
    }

    fn dropped(ex: &Executor) -> Vec<(DropReason, String)> {
        ex.adm
            .ledger
            .iter()
            .filter_map(|e| match &e.outcome {
                LedgerOutcome::Dropped { reason, detail, .. } => {
                    Some((*reason, detail.to_string()))
                }
                LedgerOutcome::Accepted { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_streamed_request_is_admitted_at_once_and_its_repeat_in_the_result_is_a_duplicate() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        tape.take();
        let a = ex.ix("a");
        let raw = spawn("write the tests");
        ex.emitted(a, &raw);
        assert!(ex.routing.is_empty(), "a static route decides at once");
        assert_eq!(ex.adm.accepted, 1);
        // The result carries the request twice: extraction hands over what
        // is under `spawn_request`.
        let inner = &raw["spawn_request"];
        ex.route_spawns(a, &[inner, inner], true);
        assert_eq!(
            ex.adm.accepted, 2,
            "the second copy is a request of its own"
        );
        assert_eq!(
            dropped(&ex),
            [(
                DropReason::Duplicate,
                "the result repeats a request this attempt already put on its stream".into()
            )]
        );
    }

    #[test]
    fn a_request_that_is_not_an_object_is_dropped_with_what_was_found() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        ex.emitted(a, &json!({"spawn_request": 3}));
        assert_eq!(
            dropped(&ex),
            [(
                DropReason::BuilderError,
                "invalid spawn request: expected an object, found a number".into()
            )]
        );
    }

    #[test]
    fn past_the_flood_cap_the_attempt_is_stopped_and_nothing_more_is_read() {
        let cfg = RunConfig {
            max_requests: 2,
            ..RunConfig::default()
        };
        let (mut ex, tape) = executor(&[("a", &[], false)], cfg);
        ex.begin();
        ex.advance();
        tape.take();
        let a = ex.ix("a");
        ex.emitted(a, &json!([spawn("one"), spawn("two")]));
        assert_eq!(ex.adm.accepted, 2);
        ex.emitted(a, &spawn("three"));
        assert_eq!(ex.adm.accepted, 2, "the third request is not read");
        assert_eq!(ex.graph[a].status, NodeStatus::Failed);
        assert_eq!(ex.sched.running, 0, "its slot is given back");
        let failed = tape.0.lock().unwrap().iter().any(|s| {
            let v = serde_json::to_value(&**s).unwrap();
            v["type"] == "failed" && v.to_string().contains("request_flood")
        });
        assert!(failed, "{:?}", tape.lines());
    }

    #[test]
    fn a_batch_is_decided_request_by_request_and_given_back_in_request_order() {
        let mut batch = Routing {
            emitter: NodeIndex::new(0),
            items: vec![
                (meta("first"), RouteSlot::Decided(Ok(None))),
                (
                    meta("second"),
                    RouteSlot::Waiting(Box::pin(std::future::ready(Err(Rejection::new(
                        DropReason::UnknownCatalogRole,
                        "no",
                    ))))),
                ),
            ],
        };
        let done = (&mut batch).now_or_never().expect("every slot is ready");
        let order: Vec<_> = done
            .items
            .iter()
            .map(|(m, _)| m.assignee.as_deref().unwrap().to_string())
            .collect();
        assert_eq!(order, ["first", "second"]);
        assert!(
            matches!(done.items[1].1, Err(ref r) if r.reason == DropReason::UnknownCatalogRole)
        );

        let mut waiting = Routing {
            emitter: NodeIndex::new(0),
            items: vec![(
                meta("x"),
                RouteSlot::Waiting(Box::pin(std::future::pending())),
            )],
        };
        assert!((&mut waiting).now_or_never().is_none());
    }

    #[test]
    fn a_cancel_during_routing_accounts_for_every_request_with_its_reason() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        let a = ex.ix("a");
        let rejected = Rejection::new(DropReason::UnknownCatalogRole, "no role named x");
        ex.routing.push(Routing {
            emitter: a,
            items: vec![
                (meta("x"), RouteSlot::Decided(Err(rejected))),
                (
                    meta("slow"),
                    RouteSlot::Waiting(Box::pin(std::future::pending())),
                ),
                (meta("worker"), RouteSlot::Decided(Ok(None))),
            ],
        });
        ex.drop_routing();
        assert!(ex.routing.is_empty());
        assert_eq!(
            dropped(&ex),
            [
                (DropReason::UnknownCatalogRole, "no role named x".into()),
                (
                    DropReason::RoleProvisionFailed,
                    "cancelled: the run was cancelled while slow was being provisioned".into()
                ),
                (
                    DropReason::NullChild,
                    "the node builder made no operation of the request".into()
                ),
            ]
        );
        assert!(
            ex.adm
                .ledger
                .iter()
                .all(|e| e.emitter_name.as_deref() == Some("a")),
            "each row names its emitter"
        );
    }
}

//! The node-builder seam (ADR-0033 D3): a spawn request becomes a candidate
//! operation, or a typed rejection. It is async so the palette router can
//! provision roles behind it; the static role map is the default.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::agent::BoxFuture;
use super::graph::{OpId, OperationKind};
use super::ledger::DropReason;
use super::request::SpawnRequest;

/// The operation that emitted a request, as the kernel knows it. The
/// requester role is the trusted metadata stamped by the graph builder.
#[derive(Debug, Clone)]
pub struct Emitter {
    pub op_id: OpId,
    pub name: Arc<str>,
    pub role: Option<Arc<str>>,
    pub requester_role: Option<Arc<str>>,
    pub agent: Arc<str>,
}

/// What a builder makes of a request: everything but identity, which the
/// kernel allocates (`spawn-N`, a fresh op_id) at admission.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub instruction: Arc<str>,
    pub assignee: Option<Arc<str>>,
    /// Trusted identity of the new operation's route.
    pub requester_role: Option<Arc<str>>,
    pub agent: Arc<str>,
    pub params: Arc<Value>,
    pub operation: OperationKind,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub reason: DropReason,
    pub detail: String,
}

impl Rejection {
    pub fn new(reason: DropReason, detail: impl Into<String>) -> Self {
        Rejection {
            reason,
            detail: detail.into(),
        }
    }
}

/// `Ok(None)` is a null child: the builder made nothing of the request.
pub type RouteResult = Result<Option<Candidate>, Rejection>;

pub trait NodeBuilder: Send + Sync {
    fn build(&self, request: &SpawnRequest, emitter: &Emitter) -> BoxFuture<RouteResult>;

    /// Decides without waiting when it can (an existing route, a static
    /// map); `None` sends the request through [`NodeBuilder::build`]. Both
    /// must decide the same way.
    fn route_now(&self, _request: &SpawnRequest, _emitter: &Emitter) -> Option<RouteResult> {
        None
    }

    /// The route of a role the run has now, for work the operator adds
    /// (trusted: no authority or budget applies, and no role is created),
    /// or why work for it cannot be added.
    fn route_role(&self, role: &str) -> Result<RoleRoute, Rejection> {
        Err(no_role(role, &[]))
    }
}

/// Operator-added work names a role the run does not have.
fn no_role(role: &str, roles: &[Arc<str>]) -> Rejection {
    let names: Vec<&str> = roles.iter().map(|r| &**r).collect();
    Rejection::new(
        DropReason::BuilderError,
        format!(
            "no role {role:?} in this run: add work only for a role the run has ({})",
            names.join(", ")
        ),
    )
}

/// A role the static map can route to.
#[derive(Debug, Clone)]
pub struct RoleRoute {
    pub role: Arc<str>,
    pub agent: Arc<str>,
    /// Agent parameters for operations spawned onto this route.
    pub params: Arc<Value>,
}

/// The static role map: a named assignee must already be a route; an
/// omitted one uses the emitter's own route.
#[derive(Debug, Default, Clone)]
pub struct StaticRoleBuilder {
    routes: HashMap<Arc<str>, RoleRoute>,
}

impl StaticRoleBuilder {
    pub fn new(routes: impl IntoIterator<Item = RoleRoute>) -> Self {
        StaticRoleBuilder {
            routes: routes.into_iter().map(|r| (r.role.clone(), r)).collect(),
        }
    }

    pub fn roles(&self) -> Vec<Arc<str>> {
        let mut v: Vec<_> = self.routes.keys().cloned().collect();
        v.sort();
        v
    }

    /// The synchronous routing decision, shared with other builders.
    pub fn route(&self, request: &SpawnRequest, emitter: &Emitter) -> RouteResult {
        if request.instruction.trim().is_empty() {
            return Ok(None);
        }
        let route = match &request.assignee {
            Some(name) => match self.routes.get(name.as_str()) {
                Some(r) => r.clone(),
                None => {
                    return Err(Rejection::new(
                        DropReason::BuilderError,
                        format!(
                            "unknown assignee {name:?}; routes: {}",
                            self.roles().join(", ")
                        ),
                    ));
                }
            },
            None => match emitter.role.as_ref().and_then(|r| self.routes.get(r)) {
                Some(r) => r.clone(),
                None => RoleRoute {
                    role: emitter.role.clone().unwrap_or_else(|| Arc::from("")),
                    agent: emitter.agent.clone(),
                    params: Arc::new(Value::Null),
                },
            },
        };
        let role = (!route.role.is_empty()).then(|| route.role.clone());
        Ok(Some(Candidate {
            instruction: request.instruction.clone(),
            assignee: role.clone(),
            requester_role: role,
            agent: route.agent,
            params: route.params,
            operation: request.operation,
        }))
    }
}

impl NodeBuilder for StaticRoleBuilder {
    fn build(&self, request: &SpawnRequest, emitter: &Emitter) -> BoxFuture<RouteResult> {
        let out = self.route(request, emitter);
        Box::pin(std::future::ready(out))
    }

    fn route_now(&self, request: &SpawnRequest, emitter: &Emitter) -> Option<RouteResult> {
        Some(self.route(request, emitter))
    }

    fn route_role(&self, role: &str) -> Result<RoleRoute, Rejection> {
        self.routes
            .get(role)
            .cloned()
            .ok_or_else(|| no_role(role, &self.roles()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emitter(role: Option<&str>) -> Emitter {
        Emitter {
            op_id: uuid::Uuid::nil(),
            name: "e".into(),
            role: role.map(Arc::from),
            requester_role: role.map(Arc::from),
            agent: "sim".into(),
        }
    }

    fn builder() -> StaticRoleBuilder {
        StaticRoleBuilder::new([RoleRoute {
            role: "tester".into(),
            agent: "sim".into(),
            params: Arc::new(Value::Null),
        }])
    }

    #[test]
    fn unknown_assignee_is_a_builder_error_listing_routes() {
        let err = builder()
            .route(
                &SpawnRequest::new("x").to("astrologer"),
                &emitter(Some("tester")),
            )
            .unwrap_err();
        assert_eq!(err.reason, DropReason::BuilderError);
        assert!(err.detail.contains("\"astrologer\""));
        assert!(err.detail.contains("tester"));
    }

    #[test]
    fn omitted_assignee_uses_the_emitter_route() {
        let c = builder()
            .route(&SpawnRequest::new("x"), &emitter(Some("tester")))
            .unwrap()
            .unwrap();
        assert_eq!(c.assignee.as_deref(), Some("tester"));
        assert_eq!(c.requester_role.as_deref(), Some("tester"));
    }

    #[test]
    fn blank_instruction_is_a_null_child() {
        assert!(
            builder()
                .route(&SpawnRequest::new("   "), &emitter(Some("tester")))
                .unwrap()
                .is_none()
        );
    }
}

//! The operation graph: operations (nodes), conditioned edges, and the
//! builder that makes the three ways of placing an operation explicit
//! (ADR-0033 D2 / P3: "after the current heads", "after these", and
//! "independent root" are distinct calls, so fan-out is never serialised by
//! accident).

mod build;
pub use build::*;

use std::fmt;
use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences, NodeIndexable};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Canonical lifecycle identity of an operation (ADR-0033 D5).
pub type OpId = Uuid;

static SEQUENTIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// This process's op ids: a random (version 4) UUID with a count in its
/// low 48 bits (exclusive or), so ids made one after another are neighbours
/// in [`OpIdHasher`]'s tables. Another process has another base: ids of two
/// processes meet only if their bases agree in 74 random bits.
static BASE: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh op_id, unique in the run (see [`BASE`]); sequential after
/// [`use_sequential_ids`].
pub fn new_op_id() -> OpId {
    let n = SEQUENTIAL.load(std::sync::atomic::Ordering::Relaxed);
    if n == 0 {
        let base = *BASE.get_or_init(|| Uuid::new_v4().as_u128());
        counted_id(
            base,
            COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        )
    } else {
        let n = SEQUENTIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Uuid::from_u128((0x0000_5eed_u128 << 96) | u128::from(n))
    }
}

/// The `n`-th id from `base`: its low 48 bits (clear of the version and
/// variant bits) changed by `n`.
fn counted_id(base: u128, n: u64) -> OpId {
    Uuid::from_u128(base ^ u128::from(n & ((1 << 48) - 1)))
}

/// Hashes an op id by its low 64 bits, which are random for a version 4
/// UUID and count up for ids of one process (see [`new_op_id`]): a run's
/// operations, made in order, fill a table front to back and are looked
/// up in the same order, where a mixing hash (Fx) scatters a million of
/// them so that every probe misses the cache. The top 7 bits (hashbrown's
/// tag) take the low 7 so neighbours still tell apart in a group.
#[derive(Debug, Default, Clone, Copy)]
pub struct OpIdHasher(u64);

impl std::hash::Hasher for OpIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // A Uuid hashes as its 16 bytes, big-endian (after their length,
        // which the match below overwrites): the last 8 are the low bits.
        match <[u8; 16]>::try_from(bytes) {
            Ok(b) => self.0 = u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
            Err(_) => {
                for &x in bytes {
                    self.0 = (self.0.rotate_left(5) ^ u64::from(x))
                        .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
                }
            }
        }
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 << 57)
    }
}

pub type OpIdBuildHasher = std::hash::BuildHasherDefault<OpIdHasher>;
/// A map by op id (see [`OpIdHasher`]).
pub type OpIdMap<V> = std::collections::HashMap<OpId, V, OpIdBuildHasher>;

/// Makes op_ids sequential for the rest of the process, so a rendering of
/// a run (a screenshot) is the same every time. Never used for real runs.
pub fn use_sequential_ids() {
    let _ = SEQUENTIAL.compare_exchange(
        0,
        1,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// The condition on an edge, evaluated when the edge's head settles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The head completed (succeeded, possibly with an escalation).
    Succeeded,
    /// The head failed (including denied and cancelled).
    Failed,
    /// The head settled with any outcome except skipped.
    Always,
    /// The head's result has `equals` at the JSON pointer `pointer`.
    Pointer(Box<PointerCondition>),
}

/// Boxed inside [`Condition`] so an ordinary edge stays small.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointerCondition {
    pub pointer: String,
    pub equals: Value,
}

impl Condition {
    pub fn pointer(pointer: impl Into<String>, equals: Value) -> Self {
        Condition::Pointer(Box::new(PointerCondition {
            pointer: pointer.into(),
            equals,
        }))
    }

    /// Checks what can be checked before the run: the pointer's syntax.
    pub fn validate(&self) -> Result<(), PointerError> {
        match self {
            Condition::Pointer(p) => validate_json_pointer(&p.pointer),
            _ => Ok(()),
        }
    }
}

/// A JSON pointer that RFC 6901 does not allow, with the pointer and how
/// to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    #[error("JSON pointer {0:?} must be empty or start with '/' (for example \"/verdict\")")]
    NoLeadingSlash(String),
    #[error(
        "JSON pointer {0:?} has a '~' not followed by 0 or 1 (write ~0 for '~' and ~1 for '/')"
    )]
    BadEscape(String),
}

/// RFC 6901: empty, or `/`-separated tokens where `~` is only `~0` or `~1`.
pub fn validate_json_pointer(p: &str) -> Result<(), PointerError> {
    if !p.is_empty() && !p.starts_with('/') {
        return Err(PointerError::NoLeadingSlash(p.to_string()));
    }
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(PointerError::BadEscape(p.to_string()));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Authored or builder-made dependency.
    Dependency,
    /// From an emitter to the child it spawned.
    Spawn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub condition: Condition,
    pub kind: EdgeKind,
}

impl Edge {
    pub fn dependency(condition: Condition) -> Self {
        Edge {
            condition,
            kind: EdgeKind::Dependency,
        }
    }
    pub fn spawn() -> Self {
        Edge {
            condition: Condition::Succeeded,
            kind: EdgeKind::Spawn,
        }
    }
}

/// The operations a spawn request may ask for (ADR-0033 D3). Anything else
/// falls back to `operate`, so model output cannot reach custom operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OperationKind {
    #[default]
    #[serde(rename = "operate")]
    Operate,
    #[serde(rename = "chat")]
    Chat,
    #[serde(rename = "communicate")]
    Communicate,
    #[serde(rename = "ReAct")]
    ReAct,
}

impl OperationKind {
    pub const ALLOWED: [&'static str; 4] = ["operate", "chat", "communicate", "ReAct"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "operate" => Some(Self::Operate),
            "chat" => Some(Self::Chat),
            "communicate" => Some(Self::Communicate),
            "ReAct" => Some(Self::ReAct),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Operate => "operate",
            Self::Chat => "chat",
            Self::Communicate => "communicate",
            Self::ReAct => "ReAct",
        }
    }
}

/// Trusted metadata, written by graph builders and routers, never copied
/// from model output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpMetadata {
    // What is unset is left out of the JSON: a checkpoint holds one of
    // these per operation.
    /// The canonical role this operation acts as when it emits requests
    /// (ADR-0036 D4). `None` is unauthorised for palette expansion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_role: Option<Arc<str>>,
    /// The emitter this operation was spawned from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_from: Option<OpId>,
    /// Waits for an operator's approve/deny before it may start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// Name of the agent that runs it (`sim`, `noop`, ...).
    pub agent: Arc<str>,
    /// Agent-specific parameters (the sim behaviour, ...), opaque here.
    #[serde(default, skip_serializing_if = "is_null")]
    pub params: Arc<Value>,
    /// The reason a spawn request gave, kept for the inspector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_reason: Option<Arc<str>>,
    /// A role profile named explicitly (capacity); otherwise the profile
    /// whose role matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Arc<str>>,
}

fn is_null(v: &Arc<Value>) -> bool {
    v.is_null()
}

impl Default for OpMetadata {
    fn default() -> Self {
        OpMetadata {
            requester_role: None,
            spawned_from: None,
            approval: false,
            agent: Arc::from("sim"),
            params: Arc::new(Value::Null),
            spawn_reason: None,
            profile: None,
        }
    }
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub op_id: OpId,
    /// Presentation name: the authored id, or `spawn-N` for spawned work.
    pub reference_id: Arc<str>,
    pub instruction: Arc<str>,
    /// The role (assignee) the operation is routed to.
    pub assignee: Option<Arc<str>>,
    pub operation: OperationKind,
    pub metadata: OpMetadata,
}

impl Operation {
    pub fn new(reference_id: impl Into<Arc<str>>, instruction: impl Into<Arc<str>>) -> Self {
        Operation {
            op_id: new_op_id(),
            reference_id: reference_id.into(),
            instruction: instruction.into(),
            assignee: None,
            operation: OperationKind::Operate,
            metadata: OpMetadata::default(),
        }
    }

    /// Assigns the role and stamps it as the trusted requester role, which is
    /// what a graph builder does for the routes it creates.
    pub fn with_role(mut self, role: impl Into<Arc<str>>) -> Self {
        let role = role.into();
        self.metadata.requester_role = Some(role.clone());
        self.assignee = Some(role);
        self
    }

    pub fn with_agent(mut self, agent: impl Into<Arc<str>>, params: Value) -> Self {
        self.metadata.agent = agent.into();
        self.metadata.params = Arc::new(params);
        self
    }

    pub fn with_approval(mut self, approval: bool) -> Self {
        self.metadata.approval = approval;
        self
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GraphError {
    #[error("Graph must be acyclic for flow execution: cycle {}", CyclePath(.path))]
    Cycle { path: Vec<(OpId, Arc<str>)> },
    #[error("edge {from} -> {to} names an operation that is not in the graph")]
    UnknownOperation { from: OpId, to: OpId },
    #[error("invalid condition on edge {from_name} -> {to_name}: {message}")]
    InvalidCondition {
        from_name: Arc<str>,
        to_name: Arc<str>,
        message: PointerError,
    },
    #[error("operation {0} was added twice")]
    DuplicateOperation(OpId),
    #[error("operation {0} depends on itself")]
    SelfDependency(Arc<str>),
}

struct CyclePath<'a>(&'a [(OpId, Arc<str>)]);

impl fmt::Display for CyclePath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (_, name)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" -> ")?;
            }
            f.write_str(name)?;
        }
        if let Some((_, first)) = self.0.first() {
            write!(f, " -> {first}")?;
        }
        Ok(())
    }
}

/// A validated, acyclic graph ready for the executor.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Each operation behind an `Arc`: the run's graph takes it over without
    /// moving it (a million definitions are not held twice while it does).
    pub(crate) inner: StableDiGraph<Arc<Operation>, Edge>,
    pub(crate) index: OpIdMap<NodeIndex>,
}

impl Graph {
    pub fn len(&self) -> usize {
        self.inner.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.node_count() == 0
    }

    /// Operations in insertion order.
    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.inner.node_indices().map(move |ix| &*self.inner[ix])
    }

    pub fn get(&self, op_id: OpId) -> Option<&Operation> {
        self.index.get(&op_id).map(|&ix| &*self.inner[ix])
    }

    /// Predecessors of an operation with the condition on each edge.
    pub fn predecessors(&self, op_id: OpId) -> Vec<(OpId, &Edge)> {
        let Some(&ix) = self.index.get(&op_id) else {
            return Vec::new();
        };
        let mut preds: Vec<_> = self
            .inner
            .edges_directed(ix, Direction::Incoming)
            .map(|e| (self.inner[e.source()].op_id, e.weight()))
            .collect();
        // petgraph lists the newest edge first; callers want authored order.
        preds.reverse();
        preds
    }

    /// Edges as (from, to, edge).
    pub fn edges(&self) -> impl Iterator<Item = (OpId, OpId, &Edge)> {
        self.inner.edge_references().map(move |e| {
            (
                self.inner[e.source()].op_id,
                self.inner[e.target()].op_id,
                e.weight(),
            )
        })
    }

    /// Each operation's position in [`Graph::operations`] by id, in the
    /// index's own order.
    pub fn positions(&self) -> impl ExactSizeIterator<Item = (OpId, u32)> + '_ {
        self.index.iter().map(|(id, ix)| (*id, ix.index() as u32))
    }

    /// Edges as (from, position of `to` in [`Graph::operations`]): nodes
    /// are never removed, so a node's index is its position.
    pub fn edges_to_positions(&self) -> impl Iterator<Item = (OpId, usize, &Edge)> {
        self.inner
            .edge_references()
            .map(move |e| (self.inner[e.source()].op_id, e.target().index(), e.weight()))
    }

    /// Rejects cycles and invalid conditions (ADR-0033 D1: both checked before
    /// work begins).
    pub fn validate(&self) -> Result<(), GraphError> {
        // Every edge from an earlier node to a later one (a play in authored
        // order) cannot close a cycle: no search needed.
        let mut forward = true;
        for e in self.inner.edge_references() {
            forward &= e.source().index() < e.target().index();
            if let Err(message) = e.weight().condition.validate() {
                return Err(GraphError::InvalidCondition {
                    from_name: self.inner[e.source()].reference_id.clone(),
                    to_name: self.inner[e.target()].reference_id.clone(),
                    message,
                });
            }
        }
        if !forward && let Some(cycle) = find_cycle(&self.inner) {
            return Err(GraphError::Cycle {
                path: cycle
                    .into_iter()
                    .map(|ix| {
                        let op = &self.inner[ix];
                        (op.op_id, op.reference_id.clone())
                    })
                    .collect(),
            });
        }
        Ok(())
    }
}

/// Finds one cycle and returns it as a path (first node not repeated), or
/// `None` when the graph is acyclic. Iterative, so a 100 000-long chain does
/// not exhaust the stack; deterministic, starting from the earliest node.
pub(crate) fn find_cycle<N, E>(g: &StableDiGraph<N, E>) -> Option<Vec<NodeIndex>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        White,
        Gray,
        Black,
    }
    let bound = g.node_bound();
    let mut color = vec![Color::White; bound];
    for start in g.node_indices() {
        if color[start.index()] != Color::White {
            continue;
        }
        // Stack of (node, remaining successors); `path` mirrors the gray nodes.
        let mut stack: Vec<(NodeIndex, Vec<NodeIndex>)> = Vec::new();
        let succs = |n: NodeIndex| {
            let mut v: Vec<NodeIndex> = g.neighbors_directed(n, Direction::Outgoing).collect();
            v.reverse();
            v
        };
        color[start.index()] = Color::Gray;
        stack.push((start, succs(start)));
        while let Some((node, rest)) = stack.last_mut() {
            let node = *node;
            if let Some(next) = rest.pop() {
                match color[next.index()] {
                    Color::White => {
                        color[next.index()] = Color::Gray;
                        stack.push((next, succs(next)));
                    }
                    Color::Gray => {
                        let pos = stack.iter().position(|(n, _)| *n == next)?;
                        return Some(stack[pos..].iter().map(|(n, _)| *n).collect());
                    }
                    Color::Black => {}
                }
            } else {
                color[node.index()] = Color::Black;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;

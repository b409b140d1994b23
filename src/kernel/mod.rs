//! ADR-0033: the operation-graph kernel. One executor for every surface:
//! dependency waits, edge conditions, the concurrency limit, soft pause at
//! operation boundaries, live admission, lifecycle signals and the result
//! envelope. Nothing here knows about the console.

pub mod agent;
pub mod basis;
pub mod breakpoint;
pub mod builder;
pub mod command;
pub mod control;
pub mod envelope;
pub mod executor;
pub mod graph;
pub mod lane;
pub mod lease;
pub mod ledger;
pub mod request;
pub mod restore;
pub mod retry;
pub mod signal;
pub use signal::log_line;
pub mod snapshot;
pub mod spend;
pub mod transition;

pub use agent::{
    ActivityState, Agent, AgentEvent, AgentEvents, AgentFailure, AgentOutcome, AgentResolver,
    BoxFuture, CarryOn, InstructionDecorator, Invocation, SpawnBudget, Usage,
};
pub use basis::{Basis, BasisKind};
pub use builder::{
    Candidate, Emitter, NodeBuilder, Rejection, RoleRoute, RouteResult, StaticRoleBuilder,
};
pub use command::{Answer, CommandError, Request};
pub use control::{ApprovalPolicy, NewOperation, Observed, RunHandle, Subscription};
pub use envelope::Envelope;
pub use executor::{
    External, ExternalSender, PaletteCounts, Run, RunConfig, deep_merge, panic_message,
};
pub use graph::{
    Condition, Edge, EdgeKind, Graph, GraphBuilder, GraphError, OpId, OpMetadata, Operation,
    OperationKind,
};
pub use lane::Lane;
pub use lease::{
    CAPACITY_UNAVAILABLE, Lease, LeaseAnswer, LeaseId, LeaseProvider, LeaseRequest, Retained,
};
pub use ledger::{DropReason, DroppedSpawn, LedgerEntry, LedgerOutcome, RequestPayload};
pub use request::SpawnRequest;
pub use restore::{Restore, RestoredNode};
pub use retry::{RetryPolicies, RetryPolicy};
pub use signal::{
    DepRecord, NodeHeader, Outcome, PauseReason, RoleOrigin, Signal, SignalKind, SignalSink,
    SinkError, SkipReason, SpawnRecord, WorkerSeen,
};
pub use snapshot::{AskedNow, Deciding, NodeSnapshot, NodeStatus, Snapshot};
pub use transition::lane_for;

//! Role profiles and capacity (`role-profiles-and-capacity.md`): concrete
//! instances per profile within `max_instances` and `max_nodes`, leased to
//! operations by the reconciler that runs inside every run, released by
//! lifetime or by the operator, idle-only, never deleting uncommitted work.

pub mod config;
pub mod offline;
pub mod reconciler;
pub mod state;
pub mod workspace;

pub use config::{CapacityConfig, Lifetime, Reuse, RoleProfile, Thinking, WorkspaceMode};
pub use reconciler::Reconciler;
pub use state::{
    CapacityError, CapacityFile, EnsureResult, InstanceRecord, InstanceState, Outcome,
    RejectReason, Rejected, ReleaseResult, RetainedEntry, StatusResult, UNCOMMITTED_CHANGES,
    reason_words,
};

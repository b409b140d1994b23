//! The acquire-a-lease seam: how the kernel asks for capacity without
//! knowing what capacity is. An operation that needs an instance asks
//! before it takes a concurrency slot; if it must wait, it waits in a
//! queue named by the provider (a profile) holding no slot, and the kernel
//! retries that queue when the provider says it changed.

use std::path::PathBuf;
use std::sync::Arc;

use super::graph::OpId;

pub type LeaseId = u64;

/// What the kernel knows about the operation asking.
#[derive(Debug, Clone)]
pub struct LeaseRequest<'a> {
    pub op_id: OpId,
    pub name: &'a str,
    pub role: Option<&'a str>,
    /// A profile the operation names explicitly.
    pub profile: Option<&'a str>,
    /// The operation already waits in a queue (this is a retry), so it is
    /// counted in that queue's depth.
    pub queued: bool,
}

/// A granted lease: the instance the operation runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub id: LeaseId,
    pub instance: Arc<str>,
    pub workspace: Option<PathBuf>,
    /// The agent the instance's provider names; overrides the operation's.
    pub agent: Option<Arc<str>>,
    /// The role profile of the instance (its model, thinking, flags).
    pub profile: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LeaseAnswer {
    /// Capacity does not govern this operation; it runs as before.
    NotManaged,
    Granted(Lease),
    /// Not now. `queue` groups operations that wait for the same thing;
    /// `reason` is shown to the operator (`capacity: profile coder at
    /// max_instances 2`).
    Wait {
        queue: Arc<str>,
        reason: Arc<str>,
    },
    /// Never: nothing the run does will give this operation an instance
    /// (a pinned profile without instances, a profile that cannot start
    /// any, every node held by instances nobody may reclaim). The
    /// operation fails at once with the category `capacity_unavailable`
    /// and this reason, rather than waiting forever.
    Unavailable {
        reason: Arc<str>,
    },
}

/// The failure category of an operation capacity can never serve.
pub const CAPACITY_UNAVAILABLE: &str = "capacity_unavailable";

pub trait LeaseProvider: Send + Sync {
    /// Called for an operation about to start, with a slot free.
    fn acquire(&self, req: &LeaseRequest<'_>) -> LeaseAnswer;
    /// The operation holding the lease settled (or was cancelled).
    fn release(&self, lease: LeaseId);
    /// How many operations wait in `queue` now (desired counts, reasons).
    fn queue_depth(&self, _queue: &str, _depth: usize) {}
    /// Work is under way that will change capacity by itself (an instance
    /// starting): the run has not drained while this is true.
    fn pending(&self) -> bool {
        false
    }
    /// The run drained: a round ended.
    fn round_ended(&self, _round: u32) {}
    /// The run is over.
    fn run_finished(&self) {}
}

/// One instance a release kept, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Retained {
    pub name: Arc<str>,
    pub reason: Arc<str>,
    pub runtime_state: Arc<str>,
    pub queue_depth: usize,
}

//! What a resumed run starts from: how each operation stood and the run's
//! counters, as the durable record (checkpoint and event log) tells. The
//! kernel takes it as given; the store works it out.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::graph::OpId;
use super::ledger::LedgerEntry;
use super::snapshot::NodeStatus;

/// One operation of a resumed run.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredNode {
    /// Terminal statuses stand (their results are reused); `Running` starts
    /// a new attempt; anything else waits as it did.
    pub status: NodeStatus,
    /// Attempts so far; the next one is numbered after them.
    pub attempt: u32,
    pub result: Option<Arc<Value>>,
    /// `Some(true)` approved, `Some(false)` denied, `None` undecided.
    pub approved: Option<bool>,
    pub held: bool,
    /// Request identities seen from it before it settled (duplicates of
    /// these are dropped as duplicates).
    pub seen: Vec<u64>,
    /// Sightings already in the ledger that it will make again (a new
    /// attempt re-emitting, a settled result re-read): each is passed over
    /// once, silently.
    pub handled: Vec<u64>,
    pub queued_at: f64,
    pub finished_at: Option<f64>,
    /// The conversation its next attempt continues, and what ended the
    /// attempt that had it: (session, ended).
    pub carry: Option<(Arc<str>, Arc<str>)>,
    /// The seq of the signal that settled it (a failure's basis).
    pub settled_seq: Option<u64>,
    /// Its last attempt failed on a merge conflict nobody resolved.
    pub resolvable: bool,
    /// Its new attempt only lands what its worktree holds (`resume
    /// --resolve`).
    pub land_only: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Restore {
    pub nodes: HashMap<OpId, RestoredNode>,
    pub spawn_seq: u64,
    pub spawn_accepted: usize,
    pub operator_added: usize,
    pub ledger: Vec<LedgerEntry>,
    pub flow_context: Map<String, Value>,
    pub round: u32,
    /// The last signal of the stopped process: numbering goes on from it.
    pub seq: u64,
    /// Run time when it stopped: `elapsed` goes on from it.
    pub elapsed: f64,
    pub resumes: u32,
    /// Roles whose provisioning was in flight when it stopped (dropped).
    pub dropped_reservations: Vec<Arc<str>>,
    /// Settled operations the resume opens again, in order: a retried one
    /// (`None`) or one skipped because of it, or because of the cancel the
    /// resume undoes (`Some(why)`). Each is announced with a `retried`
    /// signal so views stop showing it settled.
    pub reopened: Vec<(OpId, Option<Arc<str>>)>,
    /// Spent before it stopped (USD, tokens): the run's and per role.
    pub spent: (f64, f64),
    pub spent_by_role: Vec<(Arc<str>, (f64, f64))>,
    /// The caps in force when it stopped (raises included); the play's
    /// when `None`.
    pub budget: Option<super::spend::Budget>,
}

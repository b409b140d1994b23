//! The spawn ledger: every accepted and every dropped spawn request, with
//! its reason (ADR-0033 D3/D5, ADR-0036 D4).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::graph::OpId;

/// Why a spawn request did not become an operation. The kernel's reasons
/// and the palette router's share one ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    BuilderError,
    NullChild,
    Cycle,
    MaxSpawnExceeded,
    Duplicate,
    UnknownCatalogRole,
    RequesterNotAuthorized,
    PaletteBudgetExhausted,
    RoleProvisionFailed,
}

impl DropReason {
    pub const ALL: [DropReason; 9] = [
        DropReason::BuilderError,
        DropReason::NullChild,
        DropReason::Cycle,
        DropReason::MaxSpawnExceeded,
        DropReason::Duplicate,
        DropReason::UnknownCatalogRole,
        DropReason::RequesterNotAuthorized,
        DropReason::PaletteBudgetExhausted,
        DropReason::RoleProvisionFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::BuilderError => "builder_error",
            DropReason::NullChild => "null_child",
            DropReason::Cycle => "cycle",
            DropReason::MaxSpawnExceeded => "max_spawn_exceeded",
            DropReason::Duplicate => "duplicate",
            DropReason::UnknownCatalogRole => "unknown_catalog_role",
            DropReason::RequesterNotAuthorized => "requester_not_authorized",
            DropReason::PaletteBudgetExhausted => "palette_budget_exhausted",
            DropReason::RoleProvisionFailed => "role_provision_failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LedgerOutcome {
    Accepted {
        op_id: OpId,
        name: Arc<str>,
    },
    Dropped {
        reason: DropReason,
        detail: Arc<str>,
        op_id: Option<OpId>,
    },
}

/// One row of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Sequence number of the signal that recorded it.
    pub seq: u64,
    pub elapsed: f64,
    pub emitter_id: Option<OpId>,
    pub emitter_name: Option<Arc<str>>,
    pub assignee: Option<Arc<str>>,
    #[serde(flatten)]
    pub outcome: LedgerOutcome,
    /// More drops just like this one (same emitter, reason and assignee,
    /// one after the other), folded into this row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeats: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Adds a row to a ledger: a drop that repeats the last row (same
/// emitter, reason and assignee) is counted there instead, so an agent that
/// repeats itself cannot flood the ledger. One rule for the kernel and
/// every fold of the signals.
pub fn record(ledger: &mut Vec<LedgerEntry>, e: LedgerEntry) {
    if let LedgerOutcome::Dropped { reason, .. } = &e.outcome
        && let Some(last) = ledger.last_mut()
        && let LedgerOutcome::Dropped { reason: before, .. } = &last.outcome
        && before == reason
        && last.emitter_id == e.emitter_id
        && last.assignee == e.assignee
    {
        last.repeats += 1;
        return;
    }
    ledger.push(e);
}

/// A dropped spawn as the result envelope lists it (D5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedSpawn {
    pub reason: DropReason,
    pub assignee: Option<Arc<str>>,
    pub emitter_id: Option<OpId>,
    pub detail: Arc<str>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub op_id: Option<OpId>,
    /// How many requests this entry stands for (repeats folded in).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

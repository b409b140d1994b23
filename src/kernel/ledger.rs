//! The spawn ledger: every accepted and every dropped spawn request, with
//! its reason (ADR-0033 D3/D5, ADR-0036 D4).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::graph::OpId;

/// Longest instruction carried by a `spawned` signal (ADR-0033 D5).
pub const SPAWNED_INSTRUCTION_MAX: usize = 512;
/// Longest `detail` of a dropped spawn (ADR-0033 D5).
pub const DROP_DETAIL_MAX: usize = 500;

/// Cuts `s` to at most `max` characters, on a character boundary.
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

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
        /// What the request asked for, when it could be read (logs written
        /// before it was recorded have none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<Arc<RequestPayload>>,
    },
}

/// What a dropped spawn request asked for, as far as it could be read: an
/// operator sees what was refused without the agent's transcript. The
/// assignee is on the ledger row itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestPayload {
    /// Cut to SPAWNED_INSTRUCTION_MAX, as a `spawned` signal's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Arc<str>>,
    /// Why the agent asked (the request's `reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub independent: bool,
}

impl RequestPayload {
    /// What a request that was read asked for.
    pub fn new(
        instruction: &str,
        operation: &str,
        reason: Option<&Arc<str>>,
        independent: bool,
    ) -> Arc<RequestPayload> {
        Arc::new(RequestPayload {
            instruction: Some(Arc::from(truncate_chars(
                instruction,
                SPAWNED_INSTRUCTION_MAX,
            ))),
            operation: Some(Arc::from(operation)),
            reason: reason.cloned(),
            independent,
        })
    }

    /// Whatever a raw request object (one that may not be valid) says:
    /// its string fields, as written. `None` when it says nothing.
    pub fn read(raw: &serde_json::Value) -> Option<Arc<RequestPayload>> {
        let text = |k: &str| {
            raw.get(k)
                .and_then(serde_json::Value::as_str)
                .map(|s| Arc::from(truncate_chars(s, SPAWNED_INSTRUCTION_MAX)))
        };
        let p = RequestPayload {
            instruction: text("instruction"),
            operation: text("operation"),
            reason: text("reason"),
            independent: raw.get("independent") == Some(&serde_json::Value::Bool(true)),
        };
        (p != RequestPayload::default()).then(|| Arc::new(p))
    }
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
    /// More drops just like this one (the same in every field but their
    /// sequence and time, one after the other), folded into this row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeats: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Adds a row to a ledger: a drop that is the last row again — same
/// emitter, assignee, reason, detail, operation and request — is counted
/// there instead, so an agent that repeats itself cannot flood the
/// ledger; a drop that differs in anything, its detail included, is a row
/// of its own (nothing an operator could read is folded away). One rule
/// for the kernel and every fold of the signals.
pub fn record(ledger: &mut Vec<LedgerEntry>, e: LedgerEntry) {
    if let Some(last) = ledger.last_mut()
        && matches!(e.outcome, LedgerOutcome::Dropped { .. })
        && last.outcome == e.outcome
        && last.emitter_id == e.emitter_id
        && last.assignee == e.assignee
    {
        last.repeats += 1;
        return;
    }
    ledger.push(e);
}

/// The ledger as the record (the checkpoint) keeps it: every drop a row of
/// its own (A33-59: `len` is the number of drops), folded again when read.
/// Only views fold; the kernel and the projection keep the fold in memory
/// so that a flood of one request stays small. A folded row's repeats are
/// written with its sequence and time: theirs are in the event log only.
pub mod unfolded {
    use super::{LedgerEntry, record};
    use serde::{Deserialize, Deserializer, Serializer, ser::SerializeSeq};

    pub fn serialize<S: Serializer>(rows: &[LedgerEntry], s: S) -> Result<S::Ok, S::Error> {
        let n: usize = rows.iter().map(|r| 1 + r.repeats as usize).sum();
        let mut seq = s.serialize_seq(Some(n))?;
        for r in rows {
            let one = LedgerEntry {
                repeats: 0,
                ..r.clone()
            };
            for _ in 0..=r.repeats {
                seq.serialize_element(&one)?;
            }
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LedgerEntry>, D::Error> {
        let rows = Vec::<LedgerEntry>::deserialize(d)?;
        let mut out: Vec<LedgerEntry> = Vec::with_capacity(rows.len());
        for r in rows {
            // A row written folded (an older checkpoint) keeps its count.
            let extra = r.repeats;
            let before = out.len();
            record(&mut out, LedgerEntry { repeats: 0, ..r });
            let folded = out.len() == before;
            if let Some(last) = out.last_mut() {
                if folded {
                    last.repeats += extra;
                } else {
                    last.repeats = extra;
                }
            }
        }
        Ok(out)
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Signal, SignalKind};

    #[test]
    fn rule_a33_59_every_drops_detail_is_kept_and_only_exact_repeats_fold() {
        let drop = |seq, detail: &str| LedgerEntry {
            seq,
            elapsed: seq as f64,
            emitter_id: Some(uuid::Uuid::from_u128(1)),
            emitter_name: Some("plan".into()),
            assignee: Some("tester".into()),
            outcome: LedgerOutcome::Dropped {
                reason: DropReason::RoleProvisionFailed,
                detail: detail.into(),
                op_id: None,
                request: None,
            },
            repeats: 0,
        };
        let mut ledger = Vec::new();
        record(&mut ledger, drop(1, "the role could not be provisioned"));
        record(&mut ledger, drop(2, "provisioning was cancelled"));
        record(&mut ledger, drop(3, "provisioning was cancelled"));
        let details: Vec<_> = ledger
            .iter()
            .map(|e| match &e.outcome {
                LedgerOutcome::Dropped { detail, .. } => (detail.to_string(), e.repeats),
                LedgerOutcome::Accepted { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(
            details,
            [
                ("the role could not be provisioned".to_string(), 0),
                ("provisioning was cancelled".to_string(), 1),
            ]
        );
        // The fold is the memory's and the views'; the record (the
        // checkpoint's form) keeps every drop a row of its own, and reads
        // back folded.
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Rec {
            #[serde(with = "unfolded")]
            ledger: Vec<LedgerEntry>,
        }
        let text = serde_json::to_string(&Rec {
            ledger: ledger.clone(),
        })
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["ledger"].as_array().unwrap().len(), 3, "{v}");
        assert!(!text.contains("repeats"), "{text}");
        let back: Rec = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ledger, ledger);
        // A checkpoint written folded (before) keeps its count.
        let mut old = ledger.clone();
        old[1].repeats = 4;
        let old_text = format!("{{\"ledger\":{}}}", serde_json::to_string(&old).unwrap());
        let back: Rec = serde_json::from_str(&old_text).unwrap();
        assert_eq!(back.ledger, old);
    }

    #[test]
    fn a_dropped_spawn_logged_before_requests_were_kept_still_reads() {
        let old = r#"{"v":1,"seq":7,"elapsed":0.1,"type":"spawn_dropped","reason":"duplicate","assignee":null,"emitter_id":null,"detail":"again","op_id":null}"#;
        let s: Signal = serde_json::from_str(old).unwrap();
        let SignalKind::SpawnDropped { request, .. } = &s.kind else {
            panic!("{s:?}");
        };
        assert_eq!(request, &None);
        // And a signal without one writes the line as before.
        assert!(!serde_json::to_string(&s).unwrap().contains("request"));
    }

    #[test]
    fn a_request_that_cannot_be_read_keeps_what_it_said() {
        let raw = serde_json::json!({"instruction": 42, "operation": "chat", "reason": "why"});
        let p = RequestPayload::read(&raw).unwrap();
        assert_eq!(p.instruction, None);
        assert_eq!(p.operation.as_deref(), Some("chat"));
        assert_eq!(p.reason.as_deref(), Some("why"));
        assert_eq!(RequestPayload::read(&serde_json::json!([1])), None);
        let long = "x".repeat(SPAWNED_INSTRUCTION_MAX + 10);
        let p = RequestPayload::new(&long, "operate", None, false);
        assert_eq!(
            p.instruction.as_deref().map(str::len),
            Some(SPAWNED_INSTRUCTION_MAX)
        );
    }
}

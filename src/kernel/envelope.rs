//! The result envelope (ADR-0033 D5).

use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::graph::{OpId, OpIdBuildHasher};
use super::ledger::DroppedSpawn;
use super::signal::Outcome;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub outcome: Outcome,
    pub completed_operations: Vec<OpId>,
    pub failed_operations: Vec<OpId>,
    pub skipped_operations: Vec<OpId>,
    /// Completed results, and `{"error": ...}` for failed invocations;
    /// skipped operations have none.
    pub operation_results: IndexMap<OpId, Arc<Value>, OpIdBuildHasher>,
    pub final_context: Map<String, Value>,
    /// op_id -> presentation name, so a reader need not keep the graph.
    pub operation_names: IndexMap<OpId, Arc<str>, OpIdBuildHasher>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spawned_operations: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub escalated_operations: Option<Vec<OpId>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dropped_spawns: Option<Vec<DroppedSpawn>>,
}

impl Envelope {
    /// Completed and skipped ids never overlap (D5), nor repeat; failed
    /// ids are completed ones (ADR-0033 keeps every settled operation not
    /// skipped in `completed_operations`; `failed_operations` is
    /// playdeck's list of those that failed).
    pub fn check_disjoint(&self) -> Result<(), OpId> {
        let mut completed = std::collections::HashSet::new();
        for id in &self.completed_operations {
            if !completed.insert(*id) {
                return Err(*id);
            }
        }
        let mut skipped = std::collections::HashSet::new();
        for id in &self.skipped_operations {
            if completed.contains(id) || !skipped.insert(*id) {
                return Err(*id);
            }
        }
        let mut failed = std::collections::HashSet::new();
        for id in &self.failed_operations {
            if !completed.contains(id) || !failed.insert(*id) {
                return Err(*id);
            }
        }
        Ok(())
    }

    pub fn name_of(&self, id: &OpId) -> Option<&str> {
        self.operation_names.get(id).map(|n| &**n)
    }

    pub fn result_of(&self, id: &OpId) -> Option<&Value> {
        self.operation_results.get(id).map(|v| &**v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_in_two_outcome_lists_is_found() {
        let id: OpId = uuid::Uuid::from_u128(7);
        let mut env: Envelope = serde_json::from_value(serde_json::json!({
            "outcome": "succeeded", "completed_operations": [], "failed_operations": [],
            "skipped_operations": [], "operation_results": {}, "final_context": {},
            "operation_names": {}
        }))
        .unwrap();
        env.completed_operations.push(id);
        assert_eq!(env.check_disjoint(), Ok(()));
        // Failed is among completed.
        env.failed_operations.push(id);
        assert_eq!(env.check_disjoint(), Ok(()));
        env.skipped_operations.push(id);
        assert_eq!(env.check_disjoint(), Err(id));
        env.skipped_operations.clear();
        // Failed but not completed.
        let other: OpId = uuid::Uuid::from_u128(8);
        env.failed_operations.push(other);
        assert_eq!(env.check_disjoint(), Err(other));
    }
}

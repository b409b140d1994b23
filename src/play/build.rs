//! From a validated play to what the kernel runs: the graph (built with the
//! explicit placement calls) and the run settings.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Placement, Play};
use crate::kernel::{
    Graph, GraphBuilder, GraphError, OpId, OpMetadata, Operation, OperationKind, RunConfig,
};

/// A play turned into kernel inputs. Each build makes fresh op_ids.
pub struct BuiltPlay {
    pub graph: Graph,
    /// op_id of each operation, in file order.
    pub op_ids: Vec<OpId>,
}

impl Play {
    /// Builds the graph. The play was validated, so this cannot fail.
    pub fn build(&self) -> BuiltPlay {
        let (graph, op_ids) = self
            .graph()
            .expect("a validated play builds an acyclic graph");
        BuiltPlay { graph, op_ids }
    }

    /// The agent each role's spawned work runs on: the agent of the first
    /// operation of that role.
    pub fn role_agents(&self) -> HashMap<String, Arc<str>> {
        let mut m = HashMap::new();
        for op in &self.operations {
            m.entry(op.role.clone())
                .or_insert_with(|| Arc::from(op.agent.as_str()));
        }
        m
    }

    /// (op_id, role) of each initial operation, for palette preparation.
    pub fn op_roles(&self, built: &BuiltPlay) -> Vec<(OpId, String)> {
        built
            .op_ids
            .iter()
            .zip(&self.operations)
            .map(|(id, o)| (*id, o.role.clone()))
            .collect()
    }

    fn graph(&self) -> Result<(Graph, Vec<OpId>), GraphError> {
        let op_ids: Vec<OpId> = self
            .operations
            .iter()
            .map(|_| crate::kernel::graph::new_op_id())
            .collect();
        let by_name: HashMap<&str, OpId> = self
            .operations
            .iter()
            .zip(&op_ids)
            .map(|(o, id)| (o.id.as_str(), *id))
            .collect();
        let mut b = GraphBuilder::with_capacity(self.operations.len());
        for (def, &op_id) in self.operations.iter().zip(&op_ids) {
            let role: Arc<str> = Arc::from(def.role.as_str());
            let params = def.params();
            let op = Operation {
                op_id,
                reference_id: Arc::from(def.id.as_str()),
                instruction: Arc::from(def.instruction.as_str()),
                assignee: Some(role.clone()),
                operation: OperationKind::Operate,
                metadata: OpMetadata {
                    requester_role: Some(role),
                    spawned_from: None,
                    approval: def.approval,
                    agent: Arc::from(def.agent.as_str()),
                    params: Arc::new(params),
                    spawn_reason: None,
                    profile: def.profile.as_deref().map(Arc::from),
                },
            };
            match &def.placement {
                Placement::AfterHeads => {
                    b.add_after_heads(op);
                }
                Placement::Root => {
                    b.add_root(op);
                }
                Placement::After(deps) => {
                    let deps: Vec<_> = deps
                        .iter()
                        .filter_map(|(d, _)| {
                            by_name.get(d.as_str()).map(|id| (*id, def.when.clone()))
                        })
                        .collect();
                    b.add_after(op, deps);
                }
            }
        }
        Ok((b.build()?, op_ids))
    }

    /// Run settings from `[play]`.
    pub fn run_config(&self, run_id: &str) -> RunConfig {
        RunConfig {
            run_id: Arc::from(run_id),
            play: Arc::from(self.name.as_str()),
            max_concurrent: self.max_concurrent,
            reactive: self.reactive,
            max_spawn: self.max_spawn,
            max_requests: self.max_requests,
            context: self.context.clone(),
            ..RunConfig::default()
        }
    }
}

impl super::OpDef {
    /// The operation's agent parameters: its sim behaviour, and for agent
    /// CLIs its flag profile and ToolSet (keys both kinds of agent ignore
    /// when they are not theirs, so a role profile may move it between
    /// them).
    pub fn params(&self) -> Value {
        let mut m = match &self.sim {
            Some(spec) => match serde_json::to_value(spec).expect("a sim spec serialises") {
                Value::Object(m) => m,
                _ => unreachable!("a sim spec is an object"),
            },
            None => serde_json::Map::new(),
        };
        let own = crate::agents::AgentParams {
            flag_profile: self.flag_profile.clone(),
            tools: self.tools.clone(),
        };
        if let Value::Object(o) = own.to_value() {
            m.extend(o);
        }
        if m.is_empty() {
            Value::Null
        } else {
            Value::Object(m)
        }
    }
}

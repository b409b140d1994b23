//! From a validated play to what the kernel runs: the graph (built with the
//! explicit placement calls) and the run settings.

use rustc_hash::FxHashMap as HashMap;
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

    /// What each role's spawned (and operator-added) work runs on — the
    /// agent, flag profile and ToolSet of its route (ADR-0036 D3), first
    /// found of:
    ///
    /// 1. `agent` (with `flag_profile`, `tools`) on its `[palette] roles`
    ///    entry;
    /// 2. its first operation's `agent`, `flag_profile` and `tools`, so
    ///    spawned work runs as the play wrote the role's own work;
    /// 3. its capacity role profile's `provider` (the profile's flag
    ///    profile and ToolSet apply on its instances, as for any operation);
    /// 4. `[palette.defaults]`;
    /// 5. the `sim` agent, only when none of the play's work runs on an
    ///    agent CLI.
    ///
    /// Otherwise the role has none: a recruited role fails provisioning
    /// and work for an initial one is refused, both as
    /// `role_provision_failed` — never silently simulated.
    pub fn role_setups(&self) -> crate::palette::RoleSetups {
        use crate::agents::{AgentParams, BUILTIN_AGENTS};
        use crate::palette::{AgentSetup, RoleSetup, RoleSetups, SetupError};
        let builtin = |a: &str| BUILTIN_AGENTS.contains(&a);
        let declared = |setup: &AgentSetup, what: &str| -> Result<RoleSetup, SetupError> {
            let agent = setup.agent.as_str();
            if !builtin(agent) && !self.agents.contains_key(agent) {
                let mut known: Vec<&str> = BUILTIN_AGENTS.to_vec();
                known.extend(self.agents.keys().map(String::as_str));
                return Err(SetupError::Invalid(format!(
                    "{what} names agent {agent:?}, which is neither built in nor defined; available agents: {}",
                    known.join(", ")
                )));
            }
            if let (Some(def), Some(tools)) = (self.agents.get(agent), &setup.tools) {
                crate::agents::argv::check_toolset(def.stream_format, tools)
                    .map_err(|e| SetupError::Invalid(format!("{what}: {e}")))?;
            }
            let params = AgentParams {
                flag_profile: setup.flag_profile.clone(),
                tools: setup.tools.clone(),
                ..AgentParams::default()
            };
            Ok(RoleSetup {
                agent: Arc::from(agent),
                params: Arc::new(params.to_value()),
            })
        };
        let mut roles = std::collections::HashMap::new();
        for pr in &self.palette.palette.roles {
            if let Some(setup) = &pr.setup {
                let what = format!("the [palette] roles entry of {}", pr.role);
                roles.insert(pr.role.clone(), declared(setup, &what));
            }
        }
        for op in &self.operations {
            roles.entry(op.role.clone()).or_insert_with(|| {
                let params = AgentParams {
                    flag_profile: op.flag_profile.clone(),
                    tools: op.tools.as_deref().cloned(),
                    agent_tools: op.agent_toolsets(),
                    ..AgentParams::default()
                };
                Ok(RoleSetup {
                    agent: Arc::from(op.agent.as_str()),
                    params: Arc::new(params.to_value()),
                })
            });
        }
        if let Some(cap) = self.capacity.as_ref().filter(|c| c.enabled) {
            for p in cap.profiles.values() {
                roles
                    .entry(p.role.clone())
                    .or_insert_with(|| Ok(RoleSetup::plain(&p.provider)));
            }
        }
        let mut clis: Vec<&str> = self
            .operations
            .iter()
            .map(|op| self.runs_on(op))
            .chain(
                self.palette
                    .palette
                    .roles
                    .iter()
                    .filter_map(|r| r.setup.as_ref().map(|s| s.agent.as_str())),
            )
            .filter(|a| !builtin(a))
            .collect();
        clis.sort_unstable();
        clis.dedup();
        let fallback = match &self.palette.palette.defaults {
            Some(d) => declared(d, "[palette.defaults]"),
            None if clis.is_empty() => Ok(RoleSetup::plain("sim")),
            None => Err(SetupError::Missing(format!(
                "this play's work runs on agent CLIs ({}), and [palette.defaults] names no agent for roles without one of their own",
                clis.join(", ")
            ))),
        };
        RoleSetups { roles, fallback }
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
        let mut b = GraphBuilder::with_capacity(self.operations.len());
        // Roles, agents and profiles are a handful of names over many
        // operations, and most operations have no parameters: each is
        // allocated once and shared.
        let mut names: HashMap<String, Arc<str>> = HashMap::default();
        let mut shared = |s: &str| -> Arc<str> {
            if let Some(a) = names.get(s) {
                return a.clone();
            }
            let a: Arc<str> = Arc::from(s);
            names.insert(s.to_string(), a.clone());
            a
        };
        let no_params = Arc::new(Value::Null);
        let positions = self.dep_positions();
        let mut dep_at = &positions[..];
        let n = self.operations.len();
        for (def, &op_id) in self.operations.iter().zip(&op_ids) {
            let role = shared(&def.role);
            let params = match def.params() {
                Value::Null => no_params.clone(),
                p => Arc::new(p),
            };
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
                    agent: shared(&def.agent),
                    params,
                    spawn_reason: None,
                    profile: def.profile.as_deref().map(&mut shared),
                },
            };
            match &def.placement {
                // The builder takes the i-th definition as its i-th
                // operation: a position names a dependency.
                Placement::After(deps) => {
                    let (these, rest) = dep_at.split_at(deps.len().min(dep_at.len()));
                    dep_at = rest;
                    let when = &def.when;
                    b.add_after_at(
                        op,
                        these
                            .iter()
                            .map(|&j| j as usize)
                            .filter(|&j| j < n)
                            .map(|j| (j, when.clone())),
                    );
                }
                Placement::AfterHeads => {
                    b.add_after_heads(op);
                }
                Placement::Root => {
                    b.add_root(op);
                }
            }
        }
        Ok((b.build()?, op_ids))
    }

    /// [`Play::dep_at`], or (should it not match the definitions) the
    /// same found again by name.
    fn dep_positions(&self) -> std::borrow::Cow<'_, [u32]> {
        let deps = || {
            self.operations.iter().flat_map(|d| match &d.placement {
                Placement::After(deps) => &deps[..],
                _ => &[],
            })
        };
        if deps().count() == self.dep_at.len() {
            return std::borrow::Cow::Borrowed(&self.dep_at);
        }
        let by_name: HashMap<&str, u32> = self
            .operations
            .iter()
            .enumerate()
            .map(|(i, o)| (o.id.as_str(), i as u32))
            .collect();
        // An unknown name (not in a validated play) is a position past the
        // end, left out by the build.
        deps()
            .map(|(name, _)| by_name.get(name.as_str()).copied().unwrap_or(u32::MAX))
            .collect()
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
            retry: self.retry_policies(),
            budget: self.budget.clone(),
            ..RunConfig::default()
        }
    }

    /// `[retry]` over the built-in policy, and each agent's `retry` over
    /// that.
    pub fn retry_policies(&self) -> crate::kernel::RetryPolicies {
        let default = self.retry.over(&crate::kernel::RetryPolicy::default());
        let by_agent = self
            .agents
            .iter()
            .filter_map(|(name, a)| Some((name.clone(), a.retry.as_ref()?.over(&default))))
            .collect();
        crate::kernel::RetryPolicies { default, by_agent }
    }
}

impl super::OpDef {
    /// `agent_tools` by agent, as the runner looks them up.
    pub fn agent_toolsets(&self) -> std::collections::BTreeMap<String, crate::vocab::ToolSet> {
        self.agent_tools
            .iter()
            .map(|(name, tools, _)| (name.clone(), tools.clone()))
            .collect()
    }

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
            tools: self.tools.as_deref().cloned(),
            agent_tools: self.agent_toolsets(),
            review: self.review,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operation's predecessors by name, in authored order.
    fn preds(play: &Play) -> Vec<(String, Vec<(String, crate::kernel::Condition)>)> {
        let built = play.build();
        let name = |id: OpId| built.graph.get(id).unwrap().reference_id.to_string();
        built
            .op_ids
            .iter()
            .map(|&id| {
                let p = built.graph.predecessors(id);
                let p = p.into_iter().map(|(f, e)| (name(f), e.condition.clone()));
                (name(id), p.collect())
            })
            .collect()
    }

    #[test]
    fn dependencies_found_while_checking_build_the_graph_the_names_say() {
        let src = r#"
[play]
name = "p"
[[operations]]
id = "a"
role = "tester"
instruction = "x"
depends_on = ["c", "b"]
when = "failed"
[[operations]]
id = "b"
role = "tester"
instruction = "x"
independent_root = true
[[operations]]
id = "c"
role = "tester"
instruction = "x"
depends_on = ["b"]
[[operations]]
id = "d"
role = "tester"
instruction = "x"
"#;
        let mut play = Play::from_str("p.toml", src).unwrap();
        // Positions, in file order: a's two (one of them ahead), then c's.
        assert_eq!(play.dep_at, vec![2, 1, 1]);
        use crate::kernel::Condition::{Failed, Succeeded};
        let want = vec![
            ("a".into(), vec![("c".into(), Failed), ("b".into(), Failed)]),
            ("b".into(), vec![]),
            ("c".into(), vec![("b".into(), Succeeded)]),
            ("d".into(), vec![("a".into(), Succeeded)]),
        ];
        assert_eq!(preds(&play), want);
        // Positions that do not match the definitions are found again by
        // name: the same graph.
        play.dep_at = vec![0];
        assert_eq!(preds(&play), want);
    }
}

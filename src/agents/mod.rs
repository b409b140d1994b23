//! ADR-011's agent registry (built-ins for now: `sim` and `noop`).

pub mod noop;
pub mod sim;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kernel::{Agent, AgentResolver};

pub use noop::NoopAgent;
pub use sim::{SimAgent, SimEmit, SimOutcome, SimSpec};

/// Names of the agents every play has.
pub const BUILTIN_AGENTS: [&str; 2] = ["sim", "noop"];

/// Agents by name.
#[derive(Clone, Default)]
pub struct AgentRegistry {
    agents: BTreeMap<String, Arc<dyn Agent>>,
}

impl AgentRegistry {
    /// `sim` (scaled by `speed`) and `noop`.
    pub fn builtin(speed: f64) -> Self {
        let mut r = AgentRegistry::default();
        r.insert("sim", Arc::new(SimAgent::new(speed)));
        r.insert("noop", Arc::new(NoopAgent));
        r
    }

    pub fn insert(&mut self, name: &str, agent: Arc<dyn Agent>) {
        self.agents.insert(name.to_string(), agent);
    }

    pub fn names(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }
}

impl AgentResolver for AgentRegistry {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Agent>> {
        self.agents.get(name).cloned()
    }
}

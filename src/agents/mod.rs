//! ADR-011's agent registry: the built-in `sim` and `noop`, and agent CLIs
//! defined under `[agents.<name>]` (run as subprocesses).

pub mod ancestry;
pub mod argv;
pub mod cause;
pub mod command;
pub mod def;
pub mod env;
pub mod noop;
pub mod outflow;
pub mod prices;
pub mod process;
pub mod sim;
pub mod stream;
pub mod tails;
pub mod transcript;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kernel::{Agent, AgentResolver};

pub use command::{AgentParams, CommandAgent, ProfileOverlay, RunContext};
pub use def::{AgentDef, Continue, EnvPolicy, Permission, PromptVia, StreamFormat, ToolSet};
pub use noop::NoopAgent;
pub use sim::{SimAgent, SimEmit, SimOutcome, SimSpec};
pub use tails::Tails;

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

    /// The built-ins plus a command agent per definition, sharing `ctx`.
    pub fn with_commands<'a>(
        speed: f64,
        defs: impl IntoIterator<Item = &'a AgentDef>,
        ctx: Arc<RunContext>,
    ) -> Self {
        let mut r = AgentRegistry::builtin(speed);
        for d in defs {
            r.insert(
                &d.name,
                Arc::new(CommandAgent::new(Arc::new(d.clone()), ctx.clone())),
            );
        }
        r
    }

    /// Replaces each agent named in `names` by what `wrap` makes of it.
    pub fn wrap<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a str>,
        wrap: impl Fn(Arc<dyn Agent>) -> Arc<dyn Agent>,
    ) {
        for name in names {
            if let Some(a) = self.agents.get_mut(name) {
                *a = wrap(a.clone());
            }
        }
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

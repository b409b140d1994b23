//! What the registry knows about an agent CLI (ADR-011): how to call it,
//! which named flag bundles it offers, how its stream reads, and the
//! ToolSet an invocation runs under.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocab::word_enum;
pub use crate::vocab::{DEFAULT_MAX_TURNS, Permission, ToolSet};

word_enum!(
    /// How an agent's stdout reads. Closed: playdeck ships a parser and a
    /// ToolSet translation per value (ADR-011's design rule).
    StreamFormat {
        Claude = "claude",
        Codex = "codex",
        Opencode = "opencode",
        Gemini = "gemini",
        Antigravity = "antigravity",
        Copilot = "copilot",
        Jsonl = "jsonl",
    }
);
word_enum!(
    /// Which of the parent's environment variables a child sees: all
    /// (`inherit`), an allowlist — what a program needs, the variables its
    /// CLI documents and the pass-list (`filtered`) — or only what a
    /// program needs plus the pass-list (`clean`). `env_vars` always.
    EnvPolicy { Inherit = "inherit", Filtered = "filtered", Clean = "clean" }
);
word_enum!(
    PromptVia { Argv = "argv", Stdin = "stdin" }
);
word_enum!(
    /// What an attempt after one that ended early (a retry, a rate-limit
    /// wait, a resumed run, an operator's "send back") talks in: the same
    /// conversation where the CLI can continue it, or a new one.
    Continue { Session = "session", Fresh = "fresh" }
);
impl StreamFormat {
    /// Whether the CLI reports what an attempt cost (claude
    /// `total_cost_usd`, opencode `cost`, a jsonl program's `usage`); the
    /// others report tokens only, so a USD cap cannot be kept on them.
    pub fn reports_cost(self) -> bool {
        matches!(
            self,
            StreamFormat::Claude | StreamFormat::Opencode | StreamFormat::Jsonl
        )
    }
}

/// What stands in the prompt's place in argv when it goes on stdin.
pub const STDIN_SENTINEL: &str = "-";

pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(300);

/// One `[agents.<name>]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    pub name: String,
    /// A bare name is looked up on PATH (then beside the playdeck
    /// executable); a path with a `/` was resolved against the file that
    /// defined the agent.
    pub binary: String,
    /// Omitted from argv when empty.
    pub subcommand: String,
    pub model: Option<String>,
    pub stream_format: StreamFormat,
    /// Flag profiles: consumer-named bundles of arguments.
    pub flags: BTreeMap<String, Vec<String>>,
    pub env_vars: BTreeMap<String, String>,
    pub env_policy: EnvPolicy,
    pub env_passlist: Vec<String>,
    pub prompt_via: PromptVia,
    pub stall_timeout: Duration,
    pub max_runtime: Option<Duration>,
    /// Kill the process group when it stalls (otherwise warn once and wait).
    pub kill_on_stall: bool,
    /// Its own retry policy, over the play's `[retry]`.
    pub retry: Option<crate::kernel::retry::RetrySettings>,
    /// `continue`: whether a new attempt continues the conversation.
    pub continue_with: Continue,
    /// Where it was defined, for messages (`play.toml` or the user file).
    pub origin: PathBuf,
}

impl AgentDef {
    /// A definition with defaults, for tests and programmatic use.
    pub fn new(name: &str, binary: &str, format: StreamFormat) -> Self {
        AgentDef {
            name: name.to_string(),
            binary: binary.to_string(),
            subcommand: String::new(),
            model: None,
            stream_format: format,
            flags: BTreeMap::new(),
            env_vars: BTreeMap::new(),
            env_policy: EnvPolicy::Filtered,
            env_passlist: Vec::new(),
            prompt_via: PromptVia::Argv,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_runtime: None,
            kill_on_stall: true,
            retry: None,
            continue_with: Continue::Session,
            origin: PathBuf::new(),
        }
    }

    pub fn profile_names(&self) -> Vec<&str> {
        self.flags.keys().map(String::as_str).collect()
    }
}

//! The play file: one TOML file with the initial graph and its settings.
//! Loading validates everything and reports all problems at once, with
//! positions; a rejected play creates nothing.

mod agents_section;
mod budget_section;
pub mod build;
mod capacity_section;
pub mod cluster_section;
pub mod demo;
pub mod diag;
pub mod notify_section;
mod palette_section;
pub mod parse;
mod prices_section;
pub mod reader;
mod retry_section;
mod segments;
pub mod workspace_section;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::agents::SimSpec;
use crate::kernel::Condition;

pub use agents_section::UserFile;
pub use build::BuiltPlay;
pub use diag::{Diagnostic, Diagnostics, Span};

/// Defaults from ADR-0033 D1 (inherited compatibility values).
pub const DEFAULT_MAX_CONCURRENT: usize = 5;
pub const DEFAULT_MAX_SPAWN: usize = 50;

/// A validated play.
#[derive(Debug, Clone)]
pub struct Play {
    /// The path as the user gave it (or `<demo>`), for messages.
    pub file: Arc<str>,
    pub source: Arc<str>,
    pub name: String,
    pub objective: Option<String>,
    /// Already 1 when `parallel = false`.
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    /// Requests one attempt may make before it fails as a flood.
    pub max_requests: usize,
    pub speed: f64,
    pub context: Map<String, Value>,
    pub operations: Vec<OpDef>,
    /// ADR-0036: the palette, pack and profiles.
    pub palette: crate::palette::PaletteConfig,
    /// Printed once when the play is loaded (the legacy palette fallback).
    pub warnings: Vec<String>,
    /// `[capacity]` and `[role_profiles]`, when present.
    pub capacity: Option<crate::capacity::CapacityConfig>,
    /// The play's directory: the run's shared workspace.
    pub dir: std::path::PathBuf,
    /// Agent CLIs: the user's agents file under the play's `[agents]`.
    pub agents: std::collections::BTreeMap<String, crate::agents::AgentDef>,
    /// `[notify]`: a command run when the run needs its operator.
    pub notify: Option<notify_section::NotifyConfig>,
    /// `[cluster]`: agents performed on workers through NATS.
    pub cluster: Option<cluster_section::ClusterConfig>,
    /// `[retry]`: which failed attempts come back by themselves.
    pub retry: crate::kernel::retry::RetrySettings,
    /// `[budget]`: spend caps.
    pub budget: Option<crate::kernel::spend::Budget>,
    /// `[workspace]`: where attempts work and how their work lands.
    pub workspace: workspace_section::WorkspaceConfig,
    /// `[prices]`: the user's agents file's under the play's.
    pub prices: crate::agents::prices::Prices,
    /// `[play] flag_profile`: the default selection (none by default).
    pub flag_profile: Option<String>,
    /// Where each `depends_on` entry points, as positions in `operations`,
    /// in file order (every dependency of the first such operation, then
    /// the next): found while checking the graph, so building it looks no
    /// name up again.
    pub(crate) dep_at: Vec<u32>,
}

/// How an operation is placed in the graph (ADR-0033 D2: three explicit
/// forms).
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// No `depends_on`: after the operations that are heads at this point
    /// of the file (sequential authoring).
    AfterHeads,
    /// `depends_on = [...]`: after exactly these, each edge with `when`.
    After(Vec<(String, Span)>),
    /// `independent_root = true`.
    Root,
}

/// How an authored operation without `depends_on` was placed, which is
/// easy to miss: said in the console's inspector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placed {
    IndependentRoot,
    FirstOperation,
    AfterAbove,
}

impl Placed {
    pub fn words(self) -> &'static str {
        match self {
            Placed::IndependentRoot => "root (independent_root)",
            Placed::FirstOperation => "root (the first operation)",
            Placed::AfterAbove => {
                "after the operations above it (sequential authoring: no depends_on)"
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpDef {
    pub id: String,
    pub id_span: Span,
    pub role: String,
    pub role_span: Span,
    pub instruction: String,
    pub placement: Placement,
    pub when: Condition,
    pub when_span: Option<Span>,
    pub approval: bool,
    /// Its work waits for the operator's review before it lands.
    pub review: bool,
    pub agent: String,
    pub sim: Option<Box<SimSpec>>,
    /// A role profile named explicitly (`profile = "coder"`).
    pub profile: Option<String>,
    pub profile_span: Option<Span>,
    /// ADR-011: the flag profile, over `[play] flag_profile`.
    pub flag_profile: Option<String>,
    pub flag_profile_span: Option<Span>,
    /// Boxed: a ToolSet is 128 bytes and most operations have none (a
    /// million definitions are 120 MB smaller while the graph is built).
    pub tools: Option<Box<crate::vocab::ToolSet>>,
    pub tools_span: Option<Span>,
    /// ADR-011: a ToolSet per agent, over `tools` when the operation runs
    /// on that agent (with where each is written).
    pub agent_tools: Vec<(String, crate::vocab::ToolSet, Span)>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read play file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
    #[error(
        "play file {path} is {size} bytes; allowed: at most {max} bytes (a play that large is not a play)"
    )]
    TooLarge { path: String, size: u64, max: u64 },
}

/// The largest play file read: a million generated operations fit, and a
/// stray multi-gigabyte file is refused before it is read.
pub const MAX_PLAY_BYTES: u64 = 256 << 20;

/// A play's bytes as text; bytes that are not UTF-8 are an error at their
/// line and column.
fn text_of(file: &str, bytes: Vec<u8>) -> Result<String, LoadError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let source: Arc<str> = Arc::from(String::from_utf8_lossy(e.as_bytes()).as_ref());
        // The lossy text is the same up to `at`.
        let span = at..(at + 1).min(source.len());
        LoadError::Invalid(Diagnostics {
            file: Arc::from(file),
            source,
            items: vec![
                Diagnostic::new(span, "the play file is not UTF-8 text", "not UTF-8")
                    .help("play files are TOML, which is UTF-8; save the file as UTF-8"),
            ],
        })
    })
}

impl Play {
    /// Reads and validates a play file, with the user's agents file
    /// (`<config dir>/agents.toml`) under its `[agents]`.
    pub fn load(path: &Path) -> Result<Play, LoadError> {
        let user = agents_section::load_user_file()?;
        let shown = path.display().to_string();
        let io = |source| LoadError::Io {
            path: shown.clone(),
            source,
        };
        let size = std::fs::metadata(path).map_err(io)?.len();
        if size > MAX_PLAY_BYTES {
            return Err(LoadError::TooLarge {
                path: shown,
                size,
                max: MAX_PLAY_BYTES,
            });
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        Play::read(&shown, bytes, &dir, &user)
    }

    /// Validates a play file's bytes, as [`Play::load`] does once it has
    /// read them (without the user's agents file): UTF-8 first, then TOML
    /// and the play's rules. `file` names it in diagnostics; `dir` is where
    /// it lives.
    pub fn from_bytes_in(file: &str, bytes: Vec<u8>, dir: &Path) -> Result<Play, LoadError> {
        Play::read(file, bytes, dir, &Default::default())
    }

    fn read(file: &str, bytes: Vec<u8>, dir: &Path, user: &UserFile) -> Result<Play, LoadError> {
        // Held once: the play keeps this text (`source`), and the parse
        // reads it in place.
        let text: Arc<str> = Arc::from(text_of(file, bytes)?);
        parse::parse_shared(file, &text, dir, user).map_err(LoadError::Invalid)
    }

    /// Validates play text; `file` names it in diagnostics. The play's
    /// directory is the current one.
    pub fn from_str(file: &str, text: &str) -> Result<Play, Diagnostics> {
        Play::from_str_in(file, text, std::path::Path::new("."))
    }

    /// Validates play text that lives in `dir`.
    pub fn from_str_in(file: &str, text: &str, dir: &std::path::Path) -> Result<Play, Diagnostics> {
        parse::parse(file, text, dir, &Default::default())
    }

    /// The built-in demo play.
    pub fn demo() -> Play {
        Play::from_str(demo::DEMO_FILE, demo::DEMO_PLAY).expect("the embedded demo play is valid")
    }

    pub fn op(&self, id: &str) -> Option<&OpDef> {
        self.operations.iter().find(|o| o.id == id)
    }

    /// The role profile an operation's instances come from, when capacity
    /// governs it.
    pub fn profile_for(&self, op: &OpDef) -> Option<&crate::capacity::RoleProfile> {
        self.capacity
            .as_ref()
            .filter(|c| c.enabled)?
            .profile_for(Some(&op.role), op.profile.as_deref())
    }

    /// The agent an operation runs on: its profile's provider, else its
    /// own `agent`.
    pub fn runs_on<'a>(&'a self, op: &'a OpDef) -> &'a str {
        self.profile_for(op).map_or(&op.agent, |p| &p.provider)
    }

    /// How each operation was placed in the graph, in file order: (id,
    /// `root (independent_root)` | `after: plan (depends_on)` |
    /// `after: plan, lint (sequential authoring)` | ...), from the graph the
    /// run would get.
    pub fn placements(&self) -> Vec<(String, String)> {
        let built = self.build();
        let names: std::collections::HashMap<crate::kernel::OpId, &str> = built
            .op_ids
            .iter()
            .zip(&self.operations)
            .map(|(id, o)| (*id, o.id.as_str()))
            .collect();
        built
            .op_ids
            .iter()
            .zip(&self.operations)
            .map(|(id, op)| {
                let preds: Vec<&str> = built
                    .graph
                    .predecessors(*id)
                    .iter()
                    .filter_map(|(p, _)| names.get(p).copied())
                    .collect();
                let how = match (&op.placement, preds.is_empty()) {
                    (Placement::Root, _) => "root (independent_root)".to_string(),
                    (Placement::AfterHeads, true) => "root (the first operation)".to_string(),
                    (Placement::AfterHeads, false) => {
                        format!("after: {} (sequential authoring)", preds.join(", "))
                    }
                    (Placement::After(_), _) => {
                        let when = match &op.when {
                            Condition::Succeeded => String::new(),
                            Condition::Failed => ", when failed".into(),
                            Condition::Always => ", always".into(),
                            Condition::Pointer(p) => {
                                format!(", when {} = {}", p.pointer, p.equals)
                            }
                        };
                        format!("after: {} (depends_on{when})", preds.join(", "))
                    }
                };
                (op.id.clone(), how)
            })
            .collect()
    }

    /// What `validate` says of operations placed by sequential authoring
    /// (no `depends_on`, not a root): they wait for the operations above
    /// them, which is easy to miss.
    pub fn sequential_note(&self) -> Option<String> {
        let seq: Vec<String> = self
            .placements()
            .into_iter()
            .filter(|(_, how)| how.ends_with("(sequential authoring)"))
            .map(|(id, how)| format!("{id} {}", how.trim_end_matches(" (sequential authoring)")))
            .collect();
        (!seq.is_empty()).then(|| {
            format!(
                "{} operation(s) placed by sequential authoring (no depends_on): {}; `playdeck validate --explain` shows every placement",
                seq.len(),
                diag::list(&seq, 6)
            )
        })
    }

    /// Lets go of the operations' definitions and the source text once a
    /// run's graph is built from them: the graph holds what the run needs,
    /// and a 100 000-operation play keeps about 50 MB in them otherwise.
    /// What is left (name, palette, capacity, agents) still describes the
    /// run.
    /// The operations placed without `depends_on`, by id (the rest are
    /// placed by theirs).
    pub fn placed(&self) -> Vec<(&str, Placed)> {
        self.operations
            .iter()
            .enumerate()
            .filter_map(|(i, op)| {
                let how = match op.placement {
                    Placement::Root => Placed::IndependentRoot,
                    Placement::AfterHeads if i == 0 => Placed::FirstOperation,
                    Placement::AfterHeads => Placed::AfterAbove,
                    Placement::After(_) => return None,
                };
                Some((op.id.as_str(), how))
            })
            .collect()
    }

    /// `source` without its operations: what a console attached to a run
    /// reads of the run's play (see `parse::parse_sections`).
    pub fn sections_of(source: &str) -> std::borrow::Cow<'_, str> {
        segments::without_operations(source)
    }

    /// [`Play::placed`] as the JSON object a console is welcomed with
    /// (`{"plan": "first_operation", ...}`): the console reads the play's
    /// other sections itself but not its operations, which a large play
    /// would make it parse for seconds.
    pub fn placed_json(&self) -> String {
        // Written straight out: a million independent roots are not made a
        // map of a million JSON values first.
        let mut out = Vec::with_capacity(2 + self.operations.len() * 32);
        out.push(b'{');
        for (i, (id, how)) in self.placed().into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Strings and a unit enum: serialising them cannot fail.
            let _ = serde_json::to_writer(&mut out, id);
            out.push(b':');
            let _ = serde_json::to_writer(&mut out, &how);
        }
        out.push(b'}');
        String::from_utf8(out).unwrap_or_else(|_| "{}".into())
    }

    pub fn release_definitions(&mut self) {
        self.operations = Vec::new();
        self.dep_at = Vec::new();
        self.source = Arc::from("");
    }

    /// One line for `playdeck validate`.
    pub fn summary(&self) -> String {
        let approvals = self.operations.iter().filter(|o| o.approval).count();
        let used: std::collections::BTreeSet<&str> =
            self.operations.iter().map(|o| o.role.as_str()).collect();
        // The palette's roles (what the run has), and how many of them the
        // operations use; a legacy play has only the roles it uses.
        let roles = if self.palette.legacy {
            format!("{} roles", used.len())
        } else {
            format!(
                "{} roles ({} used by operations)",
                self.palette.palette.roles.len(),
                used.len()
            )
        };
        format!(
            "{}: ok — play \"{}\", {} operations, {roles}, {} approval gate{}, max_concurrent {}, max_spawn {}{}",
            self.file,
            self.name,
            self.operations.len(),
            approvals,
            if approvals == 1 { "" } else { "s" },
            self.max_concurrent,
            self.max_spawn,
            if self.reactive { "" } else { ", not reactive" },
        )
    }
}

pub use crate::vocab::{is_spawn_name, is_valid_name};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_pattern() {
        for ok in ["a", "A1", "build-api", "v1.2_x", "0"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", ".a", "_a", "a b", "a/b", "é"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        assert!(is_spawn_name("spawn-12"));
        assert!(!is_spawn_name("spawn-x"));
        assert!(!is_spawn_name("spawner"));
    }

    #[test]
    fn demo_play_is_valid() {
        let demo = Play::demo();
        assert!(demo.operations.len() >= 20 && demo.operations.len() <= 30);
    }

    /// Issue 45: a million definitions are alive beside the graph built
    /// from them, at a large run's peak; a definition stays within its
    /// size (its ToolSet boxed).
    #[test]
    fn a_definition_stays_small() {
        assert!(std::mem::size_of::<OpDef>() <= 360);
    }

    /// The welcome's `placed`, written straight out, is the JSON object
    /// of [`Play::placed`].
    #[test]
    fn placed_json_is_the_object_of_placed() {
        let demo = Play::demo();
        let got: serde_json::Map<String, Value> =
            serde_json::from_str(&demo.placed_json()).unwrap();
        let want: serde_json::Map<String, Value> = demo
            .placed()
            .into_iter()
            .map(|(id, how)| (id.to_string(), serde_json::to_value(how).unwrap()))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want);
    }
}

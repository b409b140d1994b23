//! The shared vocabulary: closed sets of words written in play files and
//! carried in signals (permissions, lifetimes, reuse, thinking, instance
//! states), ToolSets, and the shape of names. A leaf: it imports nothing of
//! playdeck, so every other module may depend on it without a cycle.

use serde::{Deserialize, Serialize};

macro_rules! word_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALLOWED: &'static [&'static str] = &[$($text),+];

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::vocab::WordError;

            /// Errors name the value and the words allowed (for clap and
            /// for control lines).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s).ok_or_else(|| $crate::vocab::WordError {
                    value: s.to_string(),
                    allowed: Self::ALLOWED,
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use word_enum;

/// A word outside its closed set: the value and the words allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not allowed; allowed: {}", allowed.join(", "))]
pub struct WordError {
    pub value: String,
    pub allowed: &'static [&'static str],
}

/// Longest name: names become file names (`logs/<id>.<attempt>...`), and
/// a file name has at most 255 bytes.
pub const NAME_MAX: usize = 128;

/// `^[A-Za-z0-9][A-Za-z0-9._-]*$`, at most [`NAME_MAX`] characters: the
/// shape of ids and profile names.
pub fn is_valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= NAME_MAX
        && matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// What [`is_valid_name`] allows, for messages.
pub const NAME_RULE: &str = "^[A-Za-z0-9][A-Za-z0-9._-]*$ (a letter or digit, then letters, digits, '.', '_' or '-'), at most 128 characters";

/// The slowest and fastest speed a run may play at: slower than 1/100
/// would make a second last minutes of sim time per step.
pub const SPEED_RANGE: (f64, f64) = (0.01, 1000.0);

/// `spawn-<digits>` names belong to spawned operations.
pub fn is_spawn_name(s: &str) -> bool {
    s.strip_prefix("spawn-")
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

word_enum!(
    /// How much an invocation may touch. Infrastructure vocabulary: each
    /// value has a translation per stream format.
    Permission { ReadOnly = "read-only", WorkspaceWrite = "workspace-write", FullAccess = "full-access" }
);

// word_enum! owns the derives, so Default is written out.
#[allow(clippy::derivable_impls)]
impl Default for Permission {
    fn default() -> Self {
        Permission::ReadOnly
    }
}

pub const DEFAULT_MAX_TURNS: u32 = 25;

/// Tool access for one invocation (ADR-009 as amended by ADR-011).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSet {
    #[serde(default)]
    pub internal: Vec<String>,
    #[serde(default)]
    pub mcp: Vec<String>,
    /// MCP tools of `mcp` the play vouches only read: nothing in an MCP
    /// tool's name says whether it writes, so `read-only` takes one only
    /// when the play says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_read_only: Vec<String>,
    #[serde(default)]
    pub permission: Permission,
    /// As written; `None` when the play sets none (claude then gets
    /// [`DEFAULT_MAX_TURNS`], the other formats have no turn limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Tool calls the ToolSet does not allow outright that ask the
    /// operator instead of being refused: `Bash`, `Bash(rm *)` (a `*`
    /// matches any run of characters of what the call does), `*` for
    /// every one. Other calls outside the ToolSet are refused without
    /// asking, as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
    /// Seconds a question waits for the operator before it is denied
    /// (default [`DEFAULT_ASK_TIMEOUT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_timeout: Option<u64>,
}

/// How long a permission question waits for an answer by default.
pub const DEFAULT_ASK_TIMEOUT: u64 = 300;

impl ToolSet {
    /// Whether a call (`tool`, and what it does said short, see
    /// `agents::transcript::args_of`) asks the operator.
    pub fn asks(&self, tool: &str, args: &str) -> bool {
        self.ask.iter().any(|p| ask_matches(p, tool, args))
    }

    /// Whether any call of `tool` may ask (the pattern names it, or `*`).
    pub fn may_ask(&self, tool: &str) -> bool {
        self.ask
            .iter()
            .any(|p| p == "*" || p.split_once('(').map_or(p.as_str(), |(name, _)| name) == tool)
    }

    pub fn ask_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.ask_timeout.unwrap_or(DEFAULT_ASK_TIMEOUT))
    }
    /// The turn limit claude is given.
    pub fn turns(&self) -> u32 {
        self.max_turns.unwrap_or(DEFAULT_MAX_TURNS)
    }
}

impl Default for ToolSet {
    fn default() -> Self {
        ToolSet {
            internal: Vec::new(),
            mcp: Vec::new(),
            mcp_read_only: Vec::new(),
            permission: Permission::ReadOnly,
            max_turns: None,
            ask: Vec::new(),
            ask_timeout: None,
        }
    }
}

/// `Name`, `Name(glob)` or `*` against a call: the name is exact; in the
/// glob a `*` matches any run of characters, the rest is literal. `args`
/// is the call's whole argument, never a view's cut of it. A shell
/// command that chains or nests others (`;`, `&`, `|`, a newline, a
/// backtick, `$(`, `<(`, `>(` anywhere in it, quoted or not) never
/// matches a glob that names one command: `Bash(echo *)` must not carry
/// `echo hi; rm -rf ~` to the operator as if it were an echo.
pub fn ask_matches(pattern: &str, tool: &str, args: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.split_once('(') {
        None => pattern == tool,
        Some((name, rest)) => {
            name == tool
                && rest.strip_suffix(')').is_some_and(|glob| {
                    (!SHELL_TOOLS.contains(&tool) || compound(glob) || !compound(args))
                        && glob_matches(glob, args)
                })
        }
    }
}

/// The tools whose argument is a shell command line.
const SHELL_TOOLS: [&str; 4] = ["Bash", "shell", "exec_command", "run_shell_command"];

/// Whether a shell command line runs more than one command (or reads
/// another's output): redirections of a descriptor (`2>&1`, `&>`) do not
/// count.
fn compound(cmd: &str) -> bool {
    let plain = cmd.replace(">&", "").replace("&>", "").replace("<&", "");
    plain.contains([';', '&', '|', '\n', '\r', '`'])
        || ["$(", "<(", ">("].iter().any(|o| plain.contains(o))
}

/// Whether `text` is `glob`, where `*` is any run of characters.
fn glob_matches(glob: &str, text: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    if parts.len() == 1 {
        return glob == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod ask_tests {
    use super::ask_matches;

    #[test]
    fn ask_patterns_match_a_name_or_what_the_call_does() {
        assert!(ask_matches("Bash", "Bash", "ls"));
        assert!(!ask_matches("Bash", "Write", "a.rs"));
        assert!(ask_matches("*", "Write", "a.rs"));
        assert!(ask_matches("Bash(rm *)", "Bash", "rm -rf build"));
        assert!(!ask_matches("Bash(rm *)", "Bash", "git rm x"));
        assert!(ask_matches("Bash(*build*)", "Bash", "rm -rf build/x"));
        assert!(ask_matches("Write(src/*.rs)", "Write", "src/lib.rs"));
        assert!(!ask_matches("Write(src/*.rs)", "Write", "src/lib.toml"));
        assert!(ask_matches("Bash(ls)", "Bash", "ls"));
        assert!(!ask_matches("Bash(ls", "Bash", "ls"));
    }

    /// A single command's pattern never carries a chain of commands to the
    /// operator, however long the harmless head of it.
    #[test]
    fn a_compound_shell_command_never_matches_a_single_command_pattern() {
        let head = format!("echo {}", "a".repeat(400));
        for tail in [
            " ; rm -rf DIR",
            " && rm -rf DIR",
            " || rm -rf DIR",
            " | sh",
            " & rm -rf DIR",
            "\nrm -rf DIR",
            " $(rm -rf DIR)",
            " `rm -rf DIR`",
            " <(rm -rf DIR)",
        ] {
            let cmd = format!("{head}{tail}");
            assert!(!ask_matches("Bash(echo *)", "Bash", &cmd), "{tail:?}");
            assert!(!ask_matches("Bash(*)", "Bash", &cmd), "{tail:?}");
        }
        // A redirection is one command; a pattern that names a chain
        // matches it; a tool that is not a shell is not parsed; the tool
        // named alone asks every call.
        assert!(ask_matches("Bash(cargo *)", "Bash", "cargo build 2>&1"));
        assert!(ask_matches("Bash(make && *)", "Bash", "make && make test"));
        assert!(ask_matches("Write(*)", "Write", "a;b"));
        assert!(ask_matches("Bash", "Bash", "ls; rm x"));
    }
}

word_enum!(
    /// When a generated instance is released.
    Lifetime { CurrentRound = "current_round", CurrentLoop = "current_loop", ManualRelease = "manual_release" }
);
word_enum!(
    /// How an operation finds an instance.
    Reuse { PreferIdle = "prefer_idle", AlwaysNew = "always_new", Pinned = "pinned" }
);
word_enum!(
    /// Provider-neutral reasoning intensity.
    Thinking { Low = "low", Medium = "medium", High = "high" }
);
word_enum!(
    WorkspaceMode { Inplace = "inplace", GitWorktree = "git-worktree" }
);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Planned,
    Starting,
    Ready,
    Busy,
    /// A release found it busy or starting; it keeps working.
    Retained,
    Released,
    Failed,
}

impl InstanceState {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Planned => "planned",
            InstanceState::Starting => "starting",
            InstanceState::Ready => "ready",
            InstanceState::Busy => "busy",
            InstanceState::Retained => "retained",
            InstanceState::Released => "released",
            InstanceState::Failed => "failed",
        }
    }

    /// Counts against `max_instances` and `max_nodes`.
    pub fn is_active(self) -> bool {
        !matches!(self, InstanceState::Released | InstanceState::Failed)
    }
}

word_enum!(
    /// How a succeeded operation's work goes into the run's branch
    /// (`[workspace] land`): a merge commit, its commits replayed on the
    /// branch, or not at all (it stays on its own branch).
    LandMode {
        Merge = "merge",
        Rebase = "rebase",
        None = "none",
    }
);

/// Whether an instance was made for this run or taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceSource {
    Created,
    Reused,
}

impl InstanceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceSource::Created => "created",
            InstanceSource::Reused => "reused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    word_enum!(Colour { Red = "red", Light = "light-blue" });

    #[test]
    fn a_word_outside_its_set_names_the_value_and_every_word_allowed() {
        assert_eq!("light-blue".parse(), Ok(Colour::Light));
        assert_eq!(
            "green".parse::<Colour>().unwrap_err().to_string(),
            r#""green" is not allowed; allowed: red, light-blue"#
        );
    }
}

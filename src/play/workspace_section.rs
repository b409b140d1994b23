//! `[workspace]`: where agent attempts work, and what becomes of their
//! changes. Without the section every attempt works in the play's
//! directory, as always; `isolation = "worktree"` gives each operation a
//! git worktree of its own, made from the run's branch, and `land` says how
//! its work goes into that branch once it succeeds.

use super::diag::Diagnostic;
use super::reader::{Reader, Table};

const WORKSPACE_KEYS: &[&str] = &[
    "isolation",
    "land",
    "commit",
    "include",
    "setup",
    "teardown",
];

/// Where an attempt works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// The play's directory, shared by every operation.
    #[default]
    Shared,
    /// A git worktree per operation, made from the run's branch.
    Worktree,
}

pub use crate::vocab::LandMode;

/// The `[workspace]` section, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceConfig {
    pub isolation: Isolation,
    pub land: LandMode,
    /// Whether what an agent left uncommitted is committed for it before
    /// its work lands (`<op>: <first line of the instruction>`).
    pub commit: bool,
    /// Files git ignores, copied from the play's repository into each new
    /// worktree (relative to the repository's top).
    pub include: Vec<String>,
    /// Shell commands run in each new worktree before its first attempt.
    pub setup: Vec<String>,
    /// Shell commands run in a worktree before it is removed.
    pub teardown: Vec<String>,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        WorkspaceConfig {
            isolation: Isolation::Shared,
            land: LandMode::Merge,
            commit: true,
            include: Vec::new(),
            setup: Vec::new(),
            teardown: Vec::new(),
        }
    }
}

impl WorkspaceConfig {
    /// Whether operations work in worktrees of their own.
    pub fn isolated(&self) -> bool {
        self.isolation == Isolation::Worktree
    }
}

pub(super) fn read(
    r: &mut Reader,
    root: &Table<'_, '_>,
    repo: Option<&std::path::Path>,
    dir: &std::path::Path,
) -> Option<WorkspaceConfig> {
    let t = root.table(r, "workspace")?;
    t.deny_unknown(r, WORKSPACE_KEYS);
    let mut cfg = WorkspaceConfig::default();
    if let Some((i, span)) = t.choice(r, "isolation", &["shared", "worktree"])
        && i == "worktree"
    {
        cfg.isolation = Isolation::Worktree;
        if repo.is_none() {
            r.push(
                Diagnostic::new(
                    span,
                    "[workspace] isolation = \"worktree\" needs the play in a git repository",
                    "no git repository",
                )
                .help(format!(
                    "move the play into a git repository, or use isolation = \"shared\" (looked from {})",
                    dir.display()
                )),
            );
        }
    }
    if let Some((l, _)) = t.choice(r, "land", LandMode::ALLOWED) {
        cfg.land = LandMode::parse(&l).expect("checked by choice");
    }
    if let Some((c, _)) = t.bool(r, "commit") {
        cfg.commit = c;
    }
    if let Some(list) = t.strings(r, "include") {
        for (p, span) in list {
            let path = std::path::Path::new(&p);
            let escapes = path.is_absolute()
                || path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
            if p.trim().is_empty() || escapes {
                r.error(
                    span,
                    format!(
                        "[workspace] include {p:?} is not a path inside the repository; allowed: a relative path without `..` (\".env\", \"config/local.toml\")"
                    ),
                    "not inside the repository",
                );
            } else {
                cfg.include.push(p);
            }
        }
    }
    for (key, into) in [("setup", &mut cfg.setup), ("teardown", &mut cfg.teardown)] {
        if let Some(list) = t.strings(r, key) {
            for (c, span) in list {
                if c.trim().is_empty() {
                    r.error(
                        span,
                        format!("[workspace] {key} has an empty command; allowed: shell commands (\"npm ci\")"),
                        "empty command",
                    );
                } else {
                    into.push(c);
                }
            }
        }
    }
    let given: Vec<&str> = ["land", "commit", "include", "setup", "teardown"]
        .into_iter()
        .filter(|k| t.contains(k))
        .collect();
    if !cfg.isolated() && !given.is_empty() {
        r.push(
            Diagnostic::new(
                root.key_span("workspace"),
                format!(
                    "[workspace] {} applies only with isolation = \"worktree\"",
                    given.join(", ")
                ),
                "no worktrees",
            )
            .help("add isolation = \"worktree\", or remove them"),
        );
    }
    Some(cfg)
}

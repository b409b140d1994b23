//! `[capacity]` and `[role_profiles.<name>]`: which role/provider/model
//! combinations may run, and how many concrete instances of each.

use std::path::PathBuf;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

pub use crate::vocab::{Lifetime, Reuse, Thinking, WorkspaceMode};

pub const DEFAULT_NAME_TEMPLATE: &str = "loop-{loop_id}-{profile}-{index}";
pub const DEFAULT_MAX_NODES: u32 = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleProfile {
    pub name: String,
    /// A catalog role or a user profile (canonical).
    pub role: String,
    /// The agent that runs it.
    pub provider: String,
    pub model: Option<String>,
    pub thinking: Option<Thinking>,
    pub workspace_mode: WorkspaceMode,
    pub workspace_group: Option<String>,
    pub startup_args: Vec<String>,
    pub provider_profile: Option<String>,
    pub max_instances: u32,
    pub reuse: Option<Reuse>,
    /// playdeck's addition: a lifetime per profile (default from
    /// `[capacity] default_lifetime`).
    pub lifetime: Option<Lifetime>,
    /// Tool access for operations on its instances (below an operation's
    /// own `tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<crate::vocab::ToolSet>,
    /// `reuse = "pinned"` only: instances the run creates when it starts,
    /// the profile's whole set (0: only `capacity ensure` creates them).
    #[serde(default)]
    pub pinned: u32,
    /// Work of operations on its instances waits for review before it
    /// lands (`[workspace]`).
    pub review: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityConfig {
    pub enabled: bool,
    pub max_nodes: u32,
    pub default_lifetime: Lifetime,
    pub name_template: String,
    pub reuse: Reuse,
    pub profiles: IndexMap<String, RoleProfile>,
    /// The git repository the play lives in, for git-worktree profiles.
    pub repo_root: Option<PathBuf>,
    /// The run's shared workspace (the play's directory): where `inplace`
    /// instances work.
    pub workspace: PathBuf,
}

impl CapacityConfig {
    /// The profile an operation runs on: the one it names, else the first
    /// whose role matches.
    pub fn profile_for(&self, role: Option<&str>, named: Option<&str>) -> Option<&RoleProfile> {
        if !self.enabled {
            return None;
        }
        match named {
            Some(n) => self.profiles.get(n),
            None => {
                let role = role?;
                self.profiles.values().find(|p| p.role == role)
            }
        }
    }

    pub fn lifetime_of(&self, p: &RoleProfile) -> Lifetime {
        p.lifetime.unwrap_or(self.default_lifetime)
    }

    pub fn reuse_of(&self, p: &RoleProfile) -> Reuse {
        p.reuse.unwrap_or(self.reuse)
    }

    /// Renders an instance name from the template.
    pub fn instance_name(&self, loop_id: &str, profile: &str, index: u32) -> String {
        render_name(&self.name_template, loop_id, profile, index)
    }
}

pub fn render_name(template: &str, loop_id: &str, profile: &str, index: u32) -> String {
    template
        .replace("{loop_id}", loop_id)
        .replace("{profile}", profile)
        .replace("{index}", &index.to_string())
}

/// Walks up from `dir` to the directory that holds a repository's `.git`.
///
/// Only what git itself would take counts: a `.git` directory with `HEAD`
/// and `objects`, or a `.git` file (a worktree's) naming such a directory.
/// An empty `.git` is not a repository: codex's sandbox leaves one as a
/// mount point in every directory it may write, `/tmp` among them.
pub fn find_repo_root(dir: &std::path::Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    dir.ancestors()
        .find(|d| is_git_entry(&d.join(".git")))
        .map(|d| d.to_path_buf())
}

fn is_git_entry(dot_git: &std::path::Path) -> bool {
    // A linked worktree's git directory has `commondir` in place of `objects`.
    let is_git_dir = |d: &std::path::Path| {
        d.join("HEAD").is_file() && (d.join("objects").is_dir() || d.join("commondir").is_file())
    };
    if dot_git.is_dir() {
        return is_git_dir(dot_git);
    }
    let Ok(text) = std::fs::read_to_string(dot_git) else {
        return false;
    };
    let Some(target) = text.trim_end().strip_prefix("gitdir: ") else {
        return false;
    };
    // A relative gitdir is relative to the directory holding the file.
    let target = dot_git
        .parent()
        .map_or_else(|| PathBuf::from(target), |p| p.join(target));
    is_git_dir(&target)
}

/// Flags in `startup_args` that would set what `model` and `thinking` own.
/// What `-c KEY=VALUE` (codex's config override) sets of the model or the
/// thinking level, by its key.
pub fn config_sets_model_or_thinking(kv: &str) -> Option<&'static str> {
    match kv.split('=').next().unwrap_or(kv).trim() {
        "model" => Some("the model"),
        "model_reasoning_effort" => Some("thinking"),
        // A config profile or a provider chooses the model too.
        "profile" => Some("the model (a config profile)"),
        "model_provider" => Some("the model (its provider)"),
        _ => None,
    }
}

/// The config override an argument carries on its own (`--config=K=V`,
/// `-cK=V`), if any.
pub fn inline_config(arg: &str) -> Option<&str> {
    arg.strip_prefix("--config=")
        .or_else(|| arg.strip_prefix("-c").filter(|rest| !rest.is_empty()))
}

pub fn sets_model_or_thinking(arg: &str) -> Option<&'static str> {
    let flag = arg.split('=').next().unwrap_or(arg);
    match flag {
        "--model" | "-m" => Some("the model"),
        // `-mo3`: the short form with its value attached.
        f if f.starts_with("-m") && !f.starts_with("--") => Some("the model"),
        // codex: a config profile, or the local open-source provider.
        "--profile" => Some("the model (a config profile)"),
        "--oss" => Some("the model (the local open-source provider)"),
        "--thinking" | "--effort" | "--reasoning-effort" | "--reasoning" | "--think" => {
            Some("thinking")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_render_and_enums_round_trip() {
        assert_eq!(
            render_name(DEFAULT_NAME_TEMPLATE, "r1", "coder", 2),
            "loop-r1-coder-2"
        );
        for w in Lifetime::ALLOWED {
            assert_eq!(Lifetime::parse(w).unwrap().as_str(), *w);
        }
        assert_eq!(
            WorkspaceMode::parse("git-worktree"),
            Some(WorkspaceMode::GitWorktree)
        );
        assert_eq!(sets_model_or_thinking("--model=opus"), Some("the model"));
        assert_eq!(sets_model_or_thinking("--verbose"), None);
    }
}

//! What the run watches of the repository besides its own branch: the
//! ground an agent (same user) can change under everyone — the shared
//! `config`, `hooks/` and `info/`, which the user's own git obeys later,
//! and the user's branches, which no run moves. A change is said once,
//! as a warning; playdeck's own git already runs without hooks and
//! without drivers the repository's config names (see `git`).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

use super::{Landing, git, short};

/// What was seen last.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// `None` until first looked at.
    shared: Option<[u64; 3]>,
    /// The user's branches (not the runs'), name to tip.
    branches: Option<BTreeMap<String, String>>,
}

const SHARED: [&str; 3] = ["config", "hooks/", "info/"];

impl Landing {
    /// Looks at the shared repository files and the user's branches; what
    /// changed since the last look, in words (nothing the first time).
    pub(super) async fn look_around(&self) -> Vec<String> {
        let shared = shared_now(&self.common);
        let branches = self.user_branches().await;
        let mut said = Vec::new();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(before) = seen.shared {
            let changed: Vec<&str> = SHARED
                .iter()
                .zip(before.iter().zip(shared.iter()))
                .filter(|(_, (a, b))| a != b)
                .map(|(name, _)| *name)
                .collect();
            if !changed.is_empty() {
                said.push(format!(
                    "the repository's shared {} in {} changed during the run: an agent of the run can write them, and your own git obeys them (hooks, filters, diff drivers); playdeck's git runs none of them. Look at what changed before you run git there",
                    changed.join(", "),
                    self.common.display()
                ));
            }
        }
        seen.shared = Some(shared);
        if let Some(branches) = branches {
            if let Some(before) = &seen.branches {
                for (name, tip) in &branches {
                    match before.get(name) {
                        Some(was) if was != tip => said.push(format!(
                            "your branch {name} moved during the run, {} → {}: no run moves it (only `playdeck land --into` does, when you say so); if you did not, an agent of the run did",
                            short(was),
                            short(tip)
                        )),
                        None => said.push(format!(
                            "a branch {name} appeared during the run at {}: if you did not make it, an agent of the run did",
                            short(tip)
                        )),
                        _ => {}
                    }
                }
                for name in before.keys().filter(|n| !branches.contains_key(*n)) {
                    said.push(format!(
                        "your branch {name} was deleted during the run: if you did not delete it, an agent of the run did"
                    ));
                }
            }
            seen.branches = Some(branches);
        }
        said
    }

    /// The repository's branches that are no run's (`playdeck/…` are).
    async fn user_branches(&self) -> Option<BTreeMap<String, String>> {
        let out = git::ok(
            &self.repo,
            &[
                "for-each-ref",
                "--format=%(objectname) %(refname:short)",
                "refs/heads/",
            ],
        )
        .await
        .ok()?;
        Some(
            out.lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(_, name)| !name.starts_with("playdeck/"))
                .map(|(tip, name)| (name.to_string(), tip.to_string()))
                .collect(),
        )
    }
}

/// A digest of each of the shared config (with `config.worktree`),
/// `hooks/` and `info/`: names, modes, link targets and contents.
fn shared_now(common: &Path) -> [u64; 3] {
    let digest = |paths: &[&str]| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for p in paths {
            walk(&common.join(p), &mut h);
        }
        h.finish()
    };
    [
        digest(&["config", "config.worktree"]),
        digest(&["hooks"]),
        digest(&["info"]),
    ]
}

fn walk(path: &Path, h: &mut impl Hasher) {
    use std::os::unix::fs::MetadataExt;
    path.hash(h);
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        0u8.hash(h);
        return;
    };
    meta.mode().hash(h);
    if meta.file_type().is_symlink() {
        std::fs::read_link(path).ok().hash(h);
    } else if meta.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.sort();
        for n in names {
            walk(&n, h);
        }
    } else if meta.is_file() {
        std::fs::read(path).ok().hash(h);
    }
}

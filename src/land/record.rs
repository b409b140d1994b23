//! `landing.json`: where a run's work lands, for readers outside the run
//! (`playdeck land`, the console's diff view, the report).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Landing, OpenError};
use crate::play::workspace_section::LandMode;

pub const LANDING_FILE: &str = "landing.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LandingFile {
    /// The repository's top directory.
    pub repo: PathBuf,
    /// The run's branch (`playdeck/<run-id>`).
    pub branch: String,
    /// The commit it was made from (HEAD when the run started).
    pub base: String,
    pub mode: LandMode,
    /// Where each operation's worktree is made.
    pub worktrees: PathBuf,
    /// Each tip the run's landings made, oldest first (full ids): the
    /// branch holds nothing else, and `land --into` takes nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tips: Vec<String>,
}

impl LandingFile {
    /// Every tip the run made its branch hold: its base, then each
    /// landing's.
    pub fn made(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.base.as_str()).chain(self.tips.iter().map(String::as_str))
    }
}

impl LandingFile {
    /// The run's landing record, if the run lands work.
    pub fn read(run_dir: &Path) -> Option<LandingFile> {
        let bytes = std::fs::read(run_dir.join(LANDING_FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// `made`: the base, then each landing's tip.
pub(super) fn write(run_dir: &Path, l: &Landing, made: &[String]) -> Result<(), OpenError> {
    let rec = LandingFile {
        repo: l.repo.clone(),
        branch: l.branch.clone(),
        base: made.first().cloned().unwrap_or_default(),
        mode: l.cfg.land,
        worktrees: l.worktrees.clone(),
        tips: made.iter().skip(1).cloned().collect(),
    };
    let path = run_dir.join(LANDING_FILE);
    let json = serde_json::to_vec_pretty(&rec).expect("a landing record serialises");
    crate::files::write_atomic(&path, &json).map_err(|error| OpenError::Write {
        path: path.display().to_string(),
        error,
    })
}

//! The runs the page lists: the user's runs index (every run, from any
//! directory), each read as `playdeck runs` reads it. A run is found by
//! its id among those only: a path in a URL never names a directory.

use std::path::PathBuf;

use super::Web;
use crate::control::listing::RunRow;

impl Web {
    /// The directories of the runs listed, with their ids.
    pub fn run_dirs(&self) -> Vec<(String, PathBuf)> {
        match &self.runs {
            Some(dirs) => dirs
                .iter()
                .map(|d| {
                    let id = d
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    (id, d.clone())
                })
                .collect(),
            None => crate::store::index::all(),
        }
    }

    /// The directory of the listed run `id`.
    pub fn run_dir(&self, id: &str) -> Option<PathBuf> {
        self.run_dirs()
            .into_iter()
            .find(|(i, _)| i == id)
            .map(|(_, d)| d)
    }

    /// Every listed run, read (live ones asked over their sockets), newest
    /// first, those that need a person before the rest.
    pub async fn rows(&self) -> Vec<RunRow> {
        let dirs = self.run_dirs();
        let mut rows = tokio::task::spawn_blocking(move || {
            dirs.iter()
                .map(|(_, d)| crate::control::listing::row(d))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        rows.sort_by(|a, b| {
            (b.live && !b.awaiting_approval.is_empty())
                .cmp(&(a.live && !a.awaiting_approval.is_empty()))
                .then(b.live.cmp(&a.live))
                .then(b.started.cmp(&a.started))
                .then(b.id.cmp(&a.id))
        });
        rows
    }
}

//! The user's index of their runs, so a run id resolves from any directory
//! (`playdeck attach 20261203-…` away from the play's folder). One small
//! file per run under the user's state directory
//! (`$XDG_STATE_HOME/playdeck/runs/<run-id>`, else
//! `~/.local/state/playdeck/runs/<run-id>`), holding the run directory's
//! absolute path. The run directory stays the truth: an entry whose
//! directory is gone, or is not the user's, is no run.
//!
//! Best effort: a run whose entry could not be written still runs, and is
//! found from its own folder as before.

use std::path::{Path, PathBuf};

/// Where the entries are; `None` with neither `XDG_STATE_HOME` nor `HOME`.
pub fn dir() -> Option<PathBuf> {
    Some(state_dir()?.join("runs"))
}

/// The user's playdeck state: `$XDG_STATE_HOME/playdeck`, else
/// `~/.local/state/playdeck` (the runs index, the web page's devices).
pub fn state_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(s) => PathBuf::from(s),
        None => {
            PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".local/state")
        }
    };
    Some(base.join("playdeck"))
}

/// Every run recorded that still holds a run of the user's: (id, dir).
pub fn all() -> Vec<(String, PathBuf)> {
    let Some(rd) = own_dir().and_then(|d| std::fs::read_dir(d).ok()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = rd
        .filter_map(Result::ok)
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            let dir = lookup(&id)?;
            crate::files::not_yours(&dir).is_none().then_some((id, dir))
        })
        .collect();
    out.sort();
    out
}

/// Records that run `id` lives in `run_dir`.
pub fn record(id: &str, run_dir: &Path) {
    if let Err(e) = try_record(id, run_dir) {
        tracing::warn!("the runs index has no entry for {id}: {e}");
    }
}

fn try_record(id: &str, run_dir: &Path) -> std::io::Result<()> {
    let Some(index) = dir() else {
        return Ok(());
    };
    if !safe_id(id) {
        return Ok(());
    }
    crate::files::private_dir(&index)?;
    let abs = std::path::absolute(run_dir)?;
    let text = format!("{}\n", abs.display());
    crate::files::write_atomic(&index.join(id), text.as_bytes())?;
    prune(&index, id);
    Ok(())
}

/// Entries past this many are looked over, and those whose run is gone
/// are removed: the index does not grow without end.
const KEPT: usize = 500;

/// Removes the entries whose directory is gone; never `keep` (the run just
/// recorded, whose `play.toml` may not be written yet), nor one whose
/// directory is there (a run still starting).
fn prune(index: &Path, keep: &str) {
    let Ok(rd) = std::fs::read_dir(index) else {
        return;
    };
    let ids: Vec<String> = rd
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if ids.len() <= KEPT {
        return;
    }
    for id in ids.iter().filter(|id| **id != keep) {
        let gone = entry(&index.join(id))
            .map(|t| !Path::new(t.trim_end_matches('\n')).is_dir())
            .unwrap_or(true);
        if gone {
            let _ = std::fs::remove_file(index.join(id));
        }
    }
}

/// The index directory, when it is the user's own: one another user owns
/// (or anyone may write) is not read, as `.playdeck` is not.
fn own_dir() -> Option<PathBuf> {
    let d = dir()?;
    match crate::files::not_yours(&d) {
        Some(why) => {
            tracing::warn!("the runs index is not read: {why}");
            None
        }
        None => Some(d),
    }
}

/// An entry's text: a small regular file of the user's, opened without
/// blocking and never through a link (a FIFO planted as an entry would
/// hang whoever reads it).
fn entry(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW).bits() as i32)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return None;
    }
    let mut text = String::new();
    f.take(64 * 1024).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The run directory recorded for `id`, when it still holds a run.
pub fn lookup(id: &str) -> Option<PathBuf> {
    if !safe_id(id) {
        return None;
    }
    let text = entry(&own_dir()?.join(id))?;
    let path = PathBuf::from(text.trim_end_matches('\n'));
    path.join("play.toml").is_file().then_some(path)
}

/// The run started last (by its `play.toml`, as `latest` in a runs
/// directory is), of those recorded that still hold a run of the user's.
pub fn latest() -> Option<PathBuf> {
    std::fs::read_dir(own_dir()?)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| lookup(&e.file_name().to_string_lossy()))
        .filter(|d| crate::files::not_yours(d).is_none())
        .filter_map(|d| {
            let t = d
                .join("play.toml")
                .metadata()
                .and_then(|m| m.modified())
                .ok()?;
            Some((t, d))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, d)| d)
}

/// Whether `id` is recorded as living in `run_dir` (so the id alone names
/// it from anywhere).
pub fn names(id: &str, run_dir: &Path) -> bool {
    let (Some(found), Ok(here)) = (lookup(id), std::path::absolute(run_dir)) else {
        return false;
    };
    found == here || std::fs::canonicalize(&found).ok() == std::fs::canonicalize(&here).ok()
}

/// A run id is a file name here: nothing that leaves the index.
fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_would_leave_the_index_are_not_ids() {
        assert!(safe_id("20261203-101500-ab12"));
        assert!(safe_id("my-run_2"));
        for bad in ["", ".", "..", "../x", "a/b", "a b"] {
            assert!(!safe_id(bad), "{bad:?}");
        }
    }
}

//! Finding a run directory from what a person typed.

use std::path::{Path, PathBuf};

use super::ErrorCode;
use super::Failure;

/// A path, a run id under `.playdeck/runs`, or `latest` (the most recently
/// started run there).
pub fn resolve_run(arg: &str) -> Result<PathBuf, Failure> {
    let runs = Path::new(crate::store::RUNS_DIR);
    let refuse = |why: String| {
        Failure::new(
            ErrorCode::NoRun,
            format!("permission denied: {why} (run directories are their owner's only)"),
        )
    };
    // Away from any play's folder: the latest of the user's index.
    if arg == "latest" && !runs.is_dir() {
        return crate::store::index::latest()
            .filter(|d| crate::files::not_yours(d).is_none())
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::NoRun,
                    format!(
                        "no runs in {} here, and none recorded for you anywhere else",
                        runs.display()
                    ),
                )
            });
    }
    if arg == "latest" {
        crate::store::runs_dir_is_yours().map_err(refuse)?;
        let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(runs)
            .map_err(|e| {
                Failure::new(
                    ErrorCode::NoRun,
                    format!("no runs in {} ({e})", runs.display()),
                )
            })?
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            // Only yours: another user's run is never the latest of yours.
            .filter(|e| {
                crate::files::not_yours(&e.path()).is_none()
                    && crate::files::not_yours(&e.path().join("play.toml")).is_none()
            })
            .filter_map(|e| {
                let t = e
                    .path()
                    .join("play.toml")
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()?;
                Some((t, e.path()))
            })
            .collect();
        dirs.sort();
        return dirs.pop().map(|(_, p)| p).ok_or_else(|| {
            Failure::new(ErrorCode::NoRun, format!("no runs in {}", runs.display()))
        });
    }
    let direct = Path::new(arg);
    let by_id = runs.join(arg);
    for dir in [direct, by_id.as_path()] {
        match std::fs::metadata(dir.join("play.toml")) {
            Ok(m) if m.is_file() => {
                if let Some(why) = crate::files::not_yours(dir) {
                    return Err(refuse(why));
                }
                if dir == by_id.as_path() {
                    crate::store::runs_dir_is_yours().map_err(refuse)?;
                }
                return Ok(dir.to_path_buf());
            }
            // Another user's run: it is there, and it is not ours to read.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Failure::new(
                    ErrorCode::NoRun,
                    format!(
                        "permission denied: {} belongs to another user (run directories are their owner's only)",
                        dir.display()
                    ),
                ));
            }
            _ => {}
        }
    }
    // Started in another folder: the user's index knows where.
    if let Some(dir) = crate::store::index::lookup(arg) {
        if let Some(why) = crate::files::not_yours(&dir) {
            return Err(refuse(why));
        }
        return Ok(dir);
    }
    let mut known: Vec<String> = std::fs::read_dir(runs)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    known.sort();
    let recent: Vec<&str> = known.iter().rev().take(5).map(String::as_str).collect();
    Err(Failure::new(
        ErrorCode::NoRun,
        format!(
            "no run {arg:?}: give a run directory, a run id or `latest` (recent runs: {})",
            if recent.is_empty() {
                "none".to_string()
            } else {
                recent.join(", ")
            }
        ),
    ))
}

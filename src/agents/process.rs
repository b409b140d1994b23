//! Child processes: finding the binary, and a guard that owns a child's
//! whole process group so no descendant outlives its operation.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tokio::process::Child;

/// Where a bare binary name was looked for, for the error message.
#[derive(Debug, Clone, PartialEq)]
pub struct NotFound {
    pub binary: String,
    pub searched: Vec<PathBuf>,
}

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.binary.contains('/') {
            return write!(
                f,
                "binary {:?} does not exist or is not executable",
                self.binary
            );
        }
        let dirs: Vec<String> = self
            .searched
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        write!(
            f,
            "binary {:?} not found on PATH or beside playdeck (searched {})",
            self.binary,
            dirs.join(":")
        )
    }
}

/// A path (containing `/`) is taken as is; a bare name is looked up on
/// `path_var`, then beside the running playdeck executable (where
/// `cargo build` puts the example agent).
pub fn resolve_binary(binary: &str, path_var: Option<&OsStr>) -> Result<PathBuf, NotFound> {
    if binary.contains('/') {
        let p = PathBuf::from(binary);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(NotFound {
                binary: binary.to_string(),
                searched: Vec::new(),
            })
        };
    }
    let mut searched: Vec<PathBuf> = path_var
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        searched.push(dir);
    }
    for dir in &searched {
        let candidate = dir.join(binary);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(NotFound {
        binary: binary.to_string(),
        searched,
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Owns a child spawned as the leader of its own process group. Killing
/// (explicitly or on drop) kills the whole group, so tools the agent
/// started die with it.
pub struct Group {
    pub child: Child,
    pgid: Option<i32>,
}

impl Group {
    /// `child` must have been spawned with `process_group(0)`.
    pub fn new(child: Child) -> Self {
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        Group { child, pgid }
    }

    /// SIGKILL to every process of the group. Safe to repeat.
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg takes two integers and touches no memory of
            // ours. The group id is our child's pid, which cannot be reused
            // while the group has members; an empty group gives ESRCH.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }

    /// Kills what the exited leader left in its group, then forgets the
    /// group: once the leader is reaped its id may be reused, and a later
    /// kill must not reach someone else's group.
    pub fn kill_after_exit(&mut self) {
        self.kill();
        self.pgid = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The operation was cancelled (or finished): nothing it started
        // may stay. tokio reaps the dropped child in the background.
        self.kill();
    }
}

//! One owner per run: a process that drives a run (`run`, `resume`) holds
//! an exclusive `flock` on `<run>/lock` for as long as it does. The kernel
//! drops the lock when the process ends, however it ends (SIGKILL
//! included), so a crashed run can be resumed at once while a live one can
//! never be driven twice. The file holds the owner's pid, for the message.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

pub const LOCK_FILE: &str = "lock";

/// Held while the process owns the run; released on drop or exit.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{dir} is being run by another process (pid {pid}); one run has one owner — drive it with `playdeck ctl {dir} …`, or wait for it to end"
    )]
    Owned { dir: String, pid: String },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl RunLock {
    /// Takes the run in `dir`, or says which process has it.
    pub fn take(dir: &Path) -> Result<RunLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if e == rustix::io::Errno::WOULDBLOCK {
                // The owner writes its pid just after it takes the lock;
                // until then the file is empty or still holds a previous
                // owner's pid (a crashed run), which is no live process.
                let mut pid = String::new();
                for _ in 0..25 {
                    pid.clear();
                    let _ = file.rewind();
                    let _ = file.read_to_string(&mut pid);
                    if alive(pid.trim()) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let pid = pid.trim();
                return Err(LockError::Owned {
                    dir: dir.display().to_string(),
                    pid: if pid.is_empty() {
                        "unknown".into()
                    } else {
                        pid.to_string()
                    },
                });
            }
            return Err(io(e.into()));
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(RunLock { _file: file })
    }
}

/// Whether `pid` names a live process.
fn alive(pid: &str) -> bool {
    pid.parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_has_one_owner_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::take(dir.path()).unwrap();
        let e = RunLock::take(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        RunLock::take(dir.path()).unwrap();
    }

    #[test]
    fn a_dead_owners_pid_is_not_named() {
        assert!(alive(&std::process::id().to_string()));
        assert!(!alive(""));
        assert!(!alive("not a pid"));
        // pid_max is at most 2^22: this one is no process.
        assert!(!alive("4194305"));
    }
}

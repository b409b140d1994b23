//! One owner per run: a process that drives a run (`run`, `resume`) holds
//! an exclusive `flock` on the run directory itself for as long as it does.
//! The kernel drops the lock when the process ends, however it ends
//! (SIGKILL included), so a crashed run can be resumed at once while a
//! live one can never be driven twice. The lock is on the directory, not on
//! a file in it: a lock file can be deleted (by a cleanup script, or by an
//! operator who takes it for a stale lock) and a second process would then
//! lock a new file of the same name. `<run>/lock` still holds the owner's
//! pid, for people; the owner named in a refusal comes from the kernel's
//! table of locks (`/proc/locks`), which lists only live holders.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

pub const LOCK_FILE: &str = "lock";

/// Attempts at the lock, 20 ms apart, before a refusal.
const LOCK_TRIES: u32 = 15;

/// Held while the process owns the run; released on drop or exit.
#[derive(Debug)]
pub struct RunLock {
    _dir: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{dir} is being run by another process ({owner}); one run has one owner — drive it with `playdeck ctl {dir} …`, or wait for it to end. The lock is the system's and ends with its owner: a process that died holds nothing, so this refusal always names a live one (`ps -p PID` shows it)"
    )]
    Owned { dir: String, owner: String },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl RunLock {
    /// Takes the run in `dir`, or says which process has it.
    pub fn take(dir: &Path) -> Result<RunLock, LockError> {
        let io = |path: &Path, source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let handle = File::open(dir).map_err(|e| io(dir, e))?;
        // An owner that is ending (its process exiting, or its session
        // being dropped on another thread) lets go within moments: asked
        // again for a little while before the answer is no.
        let mut tries = 0;
        while let Err(e) = flock(&handle, FlockOperation::NonBlockingLockExclusive) {
            if e != rustix::io::Errno::WOULDBLOCK {
                return Err(io(dir, e.into()));
            }
            tries += 1;
            if tries == LOCK_TRIES {
                return Err(LockError::Owned {
                    dir: dir.display().to_string(),
                    owner: owner(dir, &handle),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // For people (and older tools): who owns it now.
        let path = dir.join(LOCK_FILE);
        let mut file = crate::files::create_private(&path).map_err(|e| io(&path, e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io(&path, e))?;
        Ok(RunLock { _dir: handle })
    }
}

/// The live process that holds the lock on `dir`, as the kernel's lock
/// table says (`pid 1234, playdeck resume r1`), else what the lock file
/// says.
fn owner(dir: &Path, handle: &File) -> String {
    let held = handle
        .metadata()
        .ok()
        .and_then(|m| holder(m.dev(), m.ino()));
    match held {
        Some(pid) => match command_of(pid) {
            Some(cmd) => format!("pid {pid}, {cmd}"),
            None => format!("pid {pid}"),
        },
        None => {
            let pid = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap_or_default();
            match pid.trim() {
                "" => "pid unknown".into(),
                p => format!("pid {p}, as {LOCK_FILE} says"),
            }
        }
    }
}

/// The live process that owns the run in `dir` (its pid and command), as
/// the kernel's lock table says; none when no process holds it.
pub fn owner_of(dir: &Path) -> Option<(u32, String)> {
    let m = std::fs::metadata(dir).ok()?;
    let pid = holder(m.dev(), m.ino())?;
    Some((pid, command_of(pid).unwrap_or_else(|| "?".into())))
}

/// A process's state letter (`R`, `S`, `T` for stopped…), from
/// `/proc/<pid>/stat`: the field after the command's closing parenthesis.
pub fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The pid holding a `flock` on the file `dev`/`ino`, from `/proc/locks`
/// (`1: FLOCK  ADVISORY  WRITE 26929 fe:00:5431585 0 EOF`; device numbers
/// in hex).
fn holder(dev: u64, ino: u64) -> Option<u32> {
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    );
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // A blocked waiter's line starts with "->": not the holder.
        (f.len() >= 6 && f[1] == "FLOCK" && f[5] == want)
            .then(|| f[4].parse().ok())
            .flatten()
    })
}

/// A process's command line, for a message (`playdeck run p.toml`).
fn command_of(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let (first, rest) = words.split_first()?;
    let prog = first.rsplit('/').next().unwrap_or(first);
    let mut s = prog.to_string();
    for w in rest.iter().take(6) {
        s.push(' ');
        s.push_str(w);
    }
    Some(crate::printable::printable(&s).into_owned())
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

    /// Issue 28: deleting the lock file does not make a second owner.
    #[test]
    fn a_deleted_lock_file_does_not_free_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let _first = RunLock::take(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        let e = RunLock::take(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("(pid {}, ", std::process::id())),
            "the kernel's table names the live owner: {e}"
        );
    }
}

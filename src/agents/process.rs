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

/// The environment variable every agent process gets: the run directory,
/// a tag no other run shares (a run directory is never reused). Whatever an
/// agent starts inherits it, so what it left behind can be found again —
/// after playdeck itself was killed, too.
pub const RUN_TAG: &str = "PLAYDECK_RUN_DIR";

/// Prepares `cmd` to run supervised: the leader of a process group of its
/// own (a kill reaches every tool it started), killed if its future is
/// dropped, and killed by the kernel if playdeck dies (SIGKILL included).
pub fn supervised(cmd: &mut tokio::process::Command) {
    cmd.process_group(0).kill_on_drop(true);
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: prctl(PR_SET_PDEATHSIG) and
    // getppid are raw system calls that neither allocate nor take locks,
    // an io::Error made from an errno holds no allocation, and on an error
    // std reports it through its pipe and leaves with _exit (not exit,
    // which would run atexit handlers in a forked copy of a threaded
    // process). The closure captures only a plain integer.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent died between fork and prctl: nobody will send it.
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

/// Makes playdeck the reaper of orphans its agents leave (a grandchild that
/// left the group with setsid and outlived its parent is re-parented here,
/// not to init), so they can be found and ended.
pub fn become_subreaper() {
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        tracing::warn!("cannot become the reaper of agents' orphans: {e}");
    }
}

/// Ends every process (other than this one) whose environment says
/// `tag_name=tag` and, when given, `PLAYDECK_OP_ID=op` and
/// `PLAYDECK_ATTEMPT=attempt`: SIGKILL, reaped when it is our child (an
/// orphan re-parented here), waited for otherwise. Returns their pids.
pub fn end_tagged(tag: &str, op: Option<(&str, u32)>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let want_tag = format!("{RUN_TAG}={tag}");
    let want_op = op.map(|(id, attempt)| {
        (
            format!("PLAYDECK_OP_ID={id}"),
            format!("PLAYDECK_ATTEMPT={attempt}"),
        )
    });
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut ended = Vec::new();
    for e in dir.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        let has = |v: &str| vars.contains(&v.as_bytes());
        let mine = has(&want_tag) && want_op.as_ref().is_none_or(|(o, a)| has(o) && has(a));
        if !mine {
            continue;
        }
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            ended.push(pid);
        }
    }
    // Reap our own (re-parented orphans) and wait for the others to go.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    for &pid in &ended {
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            if let Some(p) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
            }
            if std::time::Instant::now() > deadline || is_zombie_of_others(pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    ended
}

/// A zombie someone else will reap: it is dead, nothing to wait for.
fn is_zombie_of_others(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Owns a child spawned as the leader of its own process group (see
/// [`supervised`]). Killing (explicitly or on drop) kills the whole group,
/// so tools the agent started die with it.
pub struct Group {
    pub child: Child,
    pgid: Option<rustix::process::Pid>,
}

impl Group {
    /// `child` must have been prepared with [`supervised`].
    pub fn new(child: Child) -> Self {
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        Group { child, pgid }
    }

    /// The group's id (its leader's pid), while it is known.
    pub fn pgid(&self) -> Option<i32> {
        self.pgid.map(|p| p.as_raw_nonzero().get())
    }

    /// SIGKILL to every process of the group. Safe to repeat: the group id
    /// is our child's pid, which cannot be reused while the group has
    /// members; an empty group gives ESRCH.
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
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

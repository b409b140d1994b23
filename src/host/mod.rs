//! The run host: a run as a process of its own that consoles attach to
//! and leave, as tmux's server is. Starting one (this binary with
//! `--host`, in a session of its own) and waiting until its control
//! socket answers; the host's own first step; reaching a run on another
//! machine over ssh (`ssh`); how its watchers step back for it (`nice`).
//! What to start it with is the commands' business (`cmd/attach.rs`).

pub mod nice;
pub mod ssh;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A run host leaves the session of the terminal that started it, so the
/// terminal's hangup (a closed pane, a dropped ssh session) never reaches
/// it: the run outlives its console.
pub fn leave_terminal_session() {
    if let Err(e) = rustix::process::setsid() {
        tracing::warn!("the run host stays in its terminal's session: {e}");
    }
}

/// How a started run host came out.
pub enum Started {
    /// Its control socket answers: consoles can attach.
    Listening,
    /// It ended before it listened (a refused play, a run already live),
    /// with its exit code and what it said on stderr.
    Ended { code: i32, said: String },
}

/// Starts the run host `cmd` for the run directory `dir` (its stdio
/// detached, stderr kept to say why it ended) and waits until its socket
/// answers or it ends. A host that listens is reaped by a thread of this
/// process while it lives, and by init after.
pub fn start(mut cmd: Command, dir: &Path) -> std::io::Result<Started> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // The host leaves this terminal's session as it starts
    // (`leave_terminal_session`).
    let mut child = cmd.spawn()?;
    let mut said = child.stderr.take().expect("piped");
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut said, &mut s);
        s
    });
    let socket = crate::control::socket_path(dir);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Started::Ended {
                code: status.code().unwrap_or(1),
                said: said.join().unwrap_or_default(),
            });
        }
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(Started::Listening)
}

//! The run directory `.playdeck/runs/<run-id>/`: a copy of the play, the
//! event log (`events.jsonl`, the same signal stream every observer sees)
//! and the result envelope.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

pub mod checkpoint;
pub mod report;
pub mod resume;

use crate::kernel::{Envelope, Signal, SignalSink};

pub const RUNS_DIR: &str = ".playdeck/runs";

/// A new run id: sortable by start time, unique by a random suffix.
pub fn new_run_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..4];
    format!("{}-{}-{suffix}", &digits[..8], &digits[8..14])
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename, fsync of the directory. Readers see the old or
/// the new file, never half, and a power loss keeps one of them.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] with the content written by `fill` into a buffered
/// writer (large files are serialised straight to disk).
pub fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&mut File>) -> io::Result<T>,
) -> io::Result<T> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let out = {
        let mut w = BufWriter::with_capacity(256 * 1024, tmp.as_file_mut());
        let out = fill(&mut w)?;
        w.flush()?;
        out
    };
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)?;
    Ok(out)
}

/// fsync of a directory: a rename or a new file in it survives power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    pub run_id: String,
}

impl RunDir {
    /// Creates the run directory: `explicit` when given (`--run-dir`), else
    /// `.playdeck/runs/<new id>` under the current directory. Refuses a
    /// directory that already holds a run.
    pub fn create(explicit: Option<&Path>, play_text: &str) -> io::Result<RunDir> {
        let (path, run_id) = match explicit {
            Some(p) => {
                let id = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(new_run_id);
                (p.to_path_buf(), id)
            }
            None => {
                let id = new_run_id();
                (Path::new(RUNS_DIR).join(&id), id)
            }
        };
        if path.join("events.jsonl").exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already holds a run (events.jsonl exists); choose another --run-dir",
                    path.display()
                ),
            ));
        }
        fs::create_dir_all(&path)?;
        write_atomic(&path.join("play.toml"), play_text.as_bytes())?;
        Ok(RunDir { path, run_id })
    }

    pub fn events_path(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    pub fn event_log(&self) -> io::Result<EventLog> {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.events_path())?;
        Ok(EventLog {
            out: BufWriter::with_capacity(64 * 1024, file),
            error: None,
            path: self.events_path(),
            kill_after: std::env::var("PLAYDECK_FAULT_KILL_AFTER")
                .ok()
                .and_then(|n| n.parse().ok()),
            written: 0,
        })
    }

    pub fn write_result(&self, env: &Envelope) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(env).map_err(io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&self.path.join("result.json"), &bytes)
    }
}

/// `events.jsonl`: one signal per line, appended in order and flushed at
/// the kernel's commit points.
pub struct EventLog {
    out: BufWriter<File>,
    error: Option<io::Error>,
    path: PathBuf,
    /// Fault injection for the crash tests: `PLAYDECK_FAULT_KILL_AFTER=N`
    /// kills the process (SIGKILL, nothing flushed) after the N-th line of
    /// this process.
    kill_after: Option<u64>,
    written: u64,
}

impl EventLog {
    fn note(&mut self, r: io::Result<()>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            tracing::error!(path = %self.path.display(), "event log write failed: {e}");
            self.error = Some(e);
        }
    }
}

impl SignalSink for EventLog {
    fn write(&mut self, signal: &Arc<Signal>) {
        if self.error.is_some() {
            return;
        }
        let r = serde_json::to_writer(&mut self.out, &**signal)
            .map_err(io::Error::other)
            .and_then(|()| self.out.write_all(b"\n"));
        self.note(r);
        self.written += 1;
        if self.kill_after == Some(self.written) {
            // SAFETY: kill and getpid take and return integers; this is a
            // deliberate crash for the durability tests.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }

    fn flush(&mut self) {
        let r = self.out.flush();
        self.note(r);
    }
}

/// Forwards every signal to a channel, losslessly and without blocking the
/// kernel: the headless printer reads the other end.
pub struct ChannelSink(pub mpsc::UnboundedSender<Arc<Signal>>);

impl SignalSink for ChannelSink {
    fn write(&mut self, signal: &Arc<Signal>) {
        let _ = self.0.send(signal.clone());
    }
}

/// Reads a run's `events.jsonl`.
pub fn read_events(path: &Path) -> io::Result<Vec<Signal>> {
    let text = fs::read_to_string(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}:{}: {e}", path.display(), i + 1),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_sort_by_time_and_differ() {
        let a = new_run_id();
        let b = new_run_id();
        assert_eq!(a.len(), "20261129-192505-abcd".len());
        assert_ne!(a, b);
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_run_directory_is_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r1");
        let rd = RunDir::create(Some(&p), "x").unwrap();
        assert_eq!(rd.run_id, "r1");
        fs::write(rd.events_path(), "").unwrap();
        assert!(RunDir::create(Some(&p), "x").is_err());
    }
}

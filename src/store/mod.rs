//! The run directory `.playdeck/runs/<run-id>/`: a copy of the play, the
//! event log (`events.jsonl`, the same signal stream every observer sees)
//! and the result envelope.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

pub mod checkpoint;
pub use checkpoint::LogMark;
pub mod index;
pub mod lock;

pub use lock::RunLock;
pub mod report;
pub mod results;
pub mod resume;

use crate::files::{
    append_private, commit_temp, not_yours, private_dir, write_atomic, write_atomic_with,
    write_temp, writeback,
};
use crate::kernel::log_line::{LineDecoder, LineEncoder};
use crate::kernel::{Envelope, Signal, SignalSink, SinkError};

pub const RUNS_DIR: &str = ".playdeck/runs";

/// A new run id: sortable by start time, unique by a random suffix.
pub fn new_run_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..4];
    format!("{}-{}-{suffix}", &digits[..8], &digits[8..14])
}

/// The default runs directory and its `.playdeck`, when they are there,
/// are yours alone: a run is never put in, nor taken from, one another
/// user made or can write.
pub fn runs_dir_is_yours() -> Result<(), String> {
    let runs = Path::new(RUNS_DIR);
    for p in [runs.parent().unwrap_or(runs), runs] {
        if let Some(why) = not_yours(p) {
            return Err(format!(
                "{why}: runs in it are not taken as yours; remove it, or give --run-dir a directory of your own"
            ));
        }
    }
    Ok(())
}

/// Makes git ignore the `.playdeck` directory that holds `path` (its run
/// directories, logs, live worktrees), from the moment playdeck makes it:
/// a `.gitignore` of its own, holding `*`, so `git add -A` in the checkout
/// never takes a log or a worktree. One there already is left as it is.
pub fn ignored_by_git(path: &Path) {
    let Some(dir) = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".playdeck"))
    else {
        return;
    };
    if !dir.is_dir() {
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link, never over a file of someone else's.
    if let Ok(mut f) = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(".gitignore"))
    {
        let _ = f.write_all(
            b"# playdeck's own files (runs, their logs and worktrees): never the repository's\n*\n",
        );
    }
}

/// What playdeck itself leaves in a run directory before its event log
/// exists (a run that died in its first moments): such a directory may be
/// claimed again.
const CLAIM_LEFTOVERS: [&str; 3] = ["lock", "play.toml", "ctl"];

/// Makes `path` a run directory: a new one is created private (0700); an
/// existing one must be empty (or hold only what a run that died before its
/// first event left) and yours alone, and its mode is never changed — a
/// shared directory is not chmod-ed, a project folder's own `play.toml` or
/// `result.json` is not overwritten. A refusal changes nothing.
fn claim_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta = match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return private_dir(path)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot create {shown}: {e}")));
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("{shown}: {e}"))),
        Ok(m) => m,
    };
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{shown} exists and is not a directory; --run-dir needs a new or empty directory"
            ),
        ));
    }
    // Root reads every directory: it still takes only its own, reached
    // directly or through a link.
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{shown} belongs to another user (uid {}); a run directory must be yours alone: give a new directory (nothing was changed)",
                meta.uid()
            ),
        ));
    }
    let names: Vec<String> = fs::read_dir(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {shown}: {e}")))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Only a directory playdeck claimed (its lock file first) may hold its
    // leftovers: a project's own play.toml is not one.
    let claimed = names.iter().any(|n| n == "lock");
    let mut foreign: Vec<String> = names
        .into_iter()
        .filter(|n| !(claimed && (CLAIM_LEFTOVERS.contains(&n.as_str()) || n.starts_with(".tmp"))))
        .collect();
    if !foreign.is_empty() {
        foreign.sort();
        let n = foreign.len();
        let shown_files: Vec<&str> = foreign.iter().take(4).map(String::as_str).collect();
        let more = if n > 4 {
            format!(" and {} more", n - 4)
        } else {
            String::new()
        };
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{shown} is not a playdeck run directory: it holds {}{more}; a run needs a new or empty directory (nothing was changed)",
                shown_files.join(", ")
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{shown} can be written by other users (mode {:o}); a run directory must be yours alone: give a new directory and playdeck makes it 0700 (nothing was changed)",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// The play's copy being written into a run directory.
#[must_use = "wait for the copy before the run starts"]
pub struct PlayCopy(Option<Result<io::Result<()>, std::thread::JoinHandle<io::Result<()>>>>);

impl PlayCopy {
    /// The copy is on disk, or why not.
    pub fn wait(mut self) -> io::Result<()> {
        self.join()
    }

    fn join(&mut self) -> io::Result<()> {
        match self.0.take() {
            None => Ok(()),
            Some(Ok(done)) => done,
            Some(Err(h)) => h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("writing the play's copy panicked"))),
        }
    }
}

impl Drop for PlayCopy {
    /// A session that fails before its run starts leaves no writer behind.
    fn drop(&mut self) {
        let _ = self.join();
    }
}

#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    pub run_id: String,
}

impl RunDir {
    /// Creates the run directory: `explicit` when given (`--run-dir`), else
    /// `.playdeck/runs/<new id>` under the current directory, and takes it
    /// (the lock is held while the returned [`RunLock`] lives). Refuses a
    /// directory that already holds a run. Writes `play_text` as its
    /// `play.toml`.
    pub fn create(explicit: Option<&Path>, play_text: &str) -> io::Result<(RunDir, RunLock)> {
        let (dir, lock) = RunDir::claim(explicit)?;
        write_atomic(&dir.path.join("play.toml"), play_text.as_bytes())?;
        Ok((dir, lock))
    }

    /// [`RunDir::create`] without the play's copy: see [`RunDir::copy_play`].
    pub fn claim(explicit: Option<&Path>) -> io::Result<(RunDir, RunLock)> {
        let (path, run_id) = match explicit {
            Some(p) => {
                let id = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(new_run_id);
                (p.to_path_buf(), id)
            }
            None => {
                runs_dir_is_yours()
                    .map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?;
                let id = new_run_id();
                (Path::new(RUNS_DIR).join(&id), id)
            }
        };
        let taken = if path.join("events.jsonl").exists() {
            None
        } else {
            claim_dir(&path)?;
            ignored_by_git(&path);
            Some(
                RunLock::take(&path)
                    .map_err(|e| io::Error::new(io::ErrorKind::AlreadyExists, e))?,
            )
        };
        // Checked again under the lock: two processes may race for a name.
        let Some(lock) = taken.filter(|_| !path.join("events.jsonl").exists()) else {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already holds a run (events.jsonl exists); choose another --run-dir",
                    path.display()
                ),
            ));
        };
        index::record(&run_id, &path);
        Ok((RunDir { path, run_id }, lock))
    }

    /// Writes `play.toml` and makes it durable (fsync, rename, fsync of
    /// the directory) on a thread of its own: a 100 MB play's write and
    /// fsync then overlap the graph's build instead of preceding it. The
    /// thread holds the shared text until it is written. [`PlayCopy::wait`]
    /// before the run's first line.
    pub fn copy_play(&self, text: Arc<str>) -> PlayCopy {
        let path = self.path.join("play.toml");
        let write = move || {
            let (tmp, ()) = write_temp(&path, |w| w.write_all(text.as_bytes()))?;
            drop(text);
            commit_temp(tmp, &path)
        };
        match std::thread::Builder::new()
            .name("playdeck-play-copy".into())
            .spawn(write)
        {
            Ok(h) => PlayCopy(Some(Err(h))),
            // No thread to be had: the session does not start, and says
            // why.
            Err(e) => PlayCopy(Some(Ok(Err(e)))),
        }
    }

    pub fn events_path(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    pub fn event_log(&self) -> io::Result<EventLog> {
        let file = append_private(&self.events_path())?;
        let len = file.metadata()?.len();
        let behind = writeback::Behind::at(len);
        // A log is written in one version: one whole-line log (written
        // before the compact form) goes on whole when it is resumed.
        let whole = len > 0 && first_line_is_whole(&self.events_path());
        // The running CRC-32 goes on from the bytes already there.
        let mut crc = crc32fast::Hasher::new();
        if len > 0 {
            hash_into(&mut crc, &self.events_path(), len)?;
        }
        let mark = LogMark {
            seq: 0,
            bytes: len,
            crc32: crc.clone().finalize(),
        };
        Ok(EventLog {
            crc,
            bytes: len,
            encoder: (!whole).then(LineEncoder::new),
            dir: self.path.clone(),
            file,
            behind,
            buf: Vec::with_capacity(64 * 1024),
            buf_seq: 0,
            mark: Arc::new(std::sync::Mutex::new(mark)),
            failing: false,
            kill_after: fault::kill_after(),
            lines: 0,
        })
    }

    /// Writes `result.json`, serialised straight into the file: no copy of
    /// the envelope's text in memory.
    /// Writes `result.json`; an error names the file.
    pub fn write_result(&self, env: &Envelope) -> io::Result<()> {
        // Large results are named by reference (see `results`), as in the log.
        let referenced = results::with_references(&self.path, env);
        let env = referenced.as_ref().unwrap_or(env);
        // Indented for a person to read; a large run's on one line, where
        // the indentation was a tenth of the file.
        let pretty = env.operation_names.len() <= PRETTY_RESULT_MAX;
        write_atomic_with(&self.path.join("result.json"), |w| {
            if pretty {
                serde_json::to_writer_pretty(&mut *w, env)
            } else {
                serde_json::to_writer(&mut *w, env)
            }
            .map_err(io::Error::other)?;
            w.write_all(b"\n")
        })
    }
}

/// Runs of up to this many operations get an indented `result.json`.
pub const PRETTY_RESULT_MAX: usize = 10_000;

/// `events.jsonl`: one signal per line, appended in order. Lines gather in
/// memory and go to the file in one `write` per commit point (the kernel
/// flushes before it acts on what it wrote). A write that fails (the disk
/// is full) keeps what was not written and reports it; the next flush
/// writes it, so no line is lost or doubled, and the kernel starts nothing
/// new meanwhile.
pub struct EventLog {
    /// The run directory (large results go beside the log).
    dir: PathBuf,
    file: File,
    /// Its writeback, started as it grows.
    behind: writeback::Behind,
    /// Lines not written yet.
    buf: Vec<u8>,
    /// The seq of the last line in `buf`.
    buf_seq: u64,
    /// The last line in the file, with the file's length and CRC-32 there
    /// (the checkpoint never covers more than this).
    mark: SharedMark,
    /// The CRC-32 of every byte written so far, and how many.
    crc: crc32fast::Hasher,
    bytes: u64,
    failing: bool,
    /// Fault injection for the crash tests (see [`fault`]).
    kill_after: Option<u64>,
    lines: u64,
    /// Compact lines (v2); `None` for a log begun in whole lines (v1).
    encoder: Option<LineEncoder>,
}

/// Whether the log at `path` begins with a whole (v1) line.
fn first_line_is_whole(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 8];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head.starts_with(br#"{"v":1,"#))
}

/// How far the event log is written, shared with the checkpoint writer.
pub type SharedMark = Arc<std::sync::Mutex<LogMark>>;

impl EventLog {
    /// How far the file is written, kept current.
    pub fn written(&self) -> SharedMark {
        self.mark.clone()
    }
}

/// Feeds the first `len` bytes of the file at `path` to `crc`.
pub fn hash_into(crc: &mut crc32fast::Hasher, path: &Path, len: u64) -> io::Result<()> {
    use std::io::Read as _;
    let mut f = fs::File::open(path)?.take(len);
    let mut buf = vec![0u8; 1 << 20];
    let mut seen = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc.update(&buf[..n]);
        seen += n as u64;
    }
    if seen < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{} is shorter than {len} bytes", path.display()),
        ));
    }
    Ok(())
}

impl SignalSink for EventLog {
    fn write(&mut self, signal: &Arc<Signal>) {
        // A large result is written to its own file first, the line names it.
        let small = results::spill(&self.dir, signal).unwrap_or_else(|e| {
            // Kept whole in the line instead: nothing is lost.
            tracing::error!("{e}; the result stays in events.jsonl");
            None
        });
        let line: &Signal = small.as_ref().unwrap_or(signal);
        match &mut self.encoder {
            Some(enc) => enc.write(line, &mut self.buf).expect("a signal serialises"),
            None => {
                serde_json::to_writer(&mut self.buf, line).expect("a signal serialises");
                self.buf.push(b'\n');
            }
        }
        self.buf_seq = signal.seq;
        self.lines += 1;
        if self.kill_after == Some(self.lines) {
            fault::crash();
        }
        // A large commit (100 000 operations queued at once) goes out in
        // pieces: the log may run ahead of the kernel, never behind, and
        // the buffer stays small. A failure here is kept for the flush to
        // retry and report.
        if self.buf.len() >= EARLY_WRITE && !self.failing {
            let _ = self.write_out();
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.write_out()
    }
}

/// Lines gathered past this many bytes are written before the commit.
const EARLY_WRITE: usize = 1 << 20;

impl EventLog {
    fn write_out(&mut self) -> Result<(), SinkError> {
        let mut done = 0;
        while done < self.buf.len() {
            match self.file.write(&self.buf[done..]) {
                Ok(0) => {
                    self.buf.drain(..done);
                    return self.failed(io::Error::from(io::ErrorKind::WriteZero));
                }
                Ok(n) => {
                    self.crc.update(&self.buf[done..done + n]);
                    self.bytes += n as u64;
                    done += n;
                    self.behind.wrote(&self.file, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // What went through stays written; the rest is kept.
                    self.buf.drain(..done);
                    return self.failed(e);
                }
            }
        }
        self.buf.clear();
        *self.mark.lock().unwrap_or_else(|e| e.into_inner()) = LogMark {
            seq: self.buf_seq,
            bytes: self.bytes,
            crc32: self.crc.clone().finalize(),
        };
        if std::mem::take(&mut self.failing) {
            tracing::info!("events.jsonl is written again");
        }
        Ok(())
    }

    fn failed(&mut self, e: io::Error) -> Result<(), SinkError> {
        if !std::mem::replace(&mut self.failing, true) {
            tracing::error!("events.jsonl write failed: {e}");
        }
        Err(SinkError {
            what: "events.jsonl".into(),
            message: e.to_string(),
        })
    }
}

/// Fault injection for the durability tests, compiled only into debug
/// builds (or with the `fault-injection` feature), so a release binary
/// cannot be made to crash by its environment.
pub mod fault {
    /// `PLAYDECK_FAULT_KILL_AFTER=N`: SIGKILL after the N-th event line of
    /// this process (nothing flushed).
    pub fn kill_after() -> Option<u64> {
        if cfg!(any(debug_assertions, feature = "fault-injection")) {
            std::env::var("PLAYDECK_FAULT_KILL_AFTER")
                .ok()
                .and_then(|n| n.parse().ok())
        } else {
            None
        }
    }

    /// `PLAYDECK_FAULT_KILL_AT=POINT`: SIGKILL when the run reaches the
    /// named point (`before_land`: an operation's work is committed, not yet
    /// on the run's branch; `after_land`: it is, not yet recorded).
    pub fn kill_at(point: &str) {
        if cfg!(any(debug_assertions, feature = "fault-injection"))
            && std::env::var("PLAYDECK_FAULT_KILL_AT").is_ok_and(|p| p == point)
        {
            crash();
        }
    }

    /// A deliberate crash: SIGKILL, so nothing is flushed or cleaned up.
    pub fn crash() {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Forwards every signal to a channel, losslessly and without blocking the
/// kernel: the headless printer reads the other end. Signals go in batches,
/// one per commit point, so a reader on another thread is woken once per
/// step of the run rather than once per signal.
pub struct ChannelSink {
    tx: mpsc::UnboundedSender<Vec<Arc<Signal>>>,
    pending: Vec<Arc<Signal>>,
}

impl ChannelSink {
    pub fn new(tx: mpsc::UnboundedSender<Vec<Arc<Signal>>>) -> ChannelSink {
        ChannelSink {
            tx,
            pending: Vec::new(),
        }
    }
}

impl SignalSink for ChannelSink {
    fn write(&mut self, signal: &Arc<Signal>) {
        self.pending.push(signal.clone());
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        if !self.pending.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.pending));
        }
        Ok(())
    }
}

impl Drop for ChannelSink {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A run's `events.jsonl` as whole (v1) lines, each naming its operation:
/// what `playdeck ctl RUN events` prints. A line that does not read is
/// kept as it is.
pub fn whole_text(path: &Path) -> io::Result<String> {
    let text = fs::read_to_string(path)?;
    let mut dec = LineDecoder::new();
    let mut out = String::with_capacity(text.len() * 2);
    for l in text.lines() {
        match dec.decode(l.as_bytes()) {
            Ok(s) => out.push_str(&serde_json::to_string(&s).map_err(io::Error::other)?),
            Err(_) => out.push_str(l),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Reads a run's `events.jsonl`.
pub fn read_events(path: &Path) -> io::Result<Vec<Signal>> {
    let text = fs::read_to_string(path)?;
    let mut dec = LineDecoder::new();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            dec.decode(l.as_bytes()).map_err(|e| {
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
    fn the_plays_copy_is_on_disk_when_waited_for_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let (rd, _lock) = RunDir::claim(Some(&dir.path().join("r"))).unwrap();
        assert!(!rd.path.join("play.toml").exists());
        rd.copy_play(Arc::from("[play]\nname = \"x\"\n"))
            .wait()
            .unwrap();
        assert_eq!(
            fs::read_to_string(rd.path.join("play.toml")).unwrap(),
            "[play]\nname = \"x\"\n"
        );
        // The directory is gone: the copy's error, not silence.
        fs::remove_dir_all(&rd.path).unwrap();
        assert!(rd.copy_play(Arc::from("y")).wait().is_err());
    }

    #[test]
    fn a_run_directory_is_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r1");
        let (rd, _lock) = RunDir::create(Some(&p), "x").unwrap();
        assert_eq!(rd.run_id, "r1");
        fs::write(rd.events_path(), "").unwrap();
        assert!(RunDir::create(Some(&p), "x").is_err());
    }
}

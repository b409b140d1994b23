//! A log file read as it grows, whole lines at a time: the follow view and
//! `playdeck ctl RUN follow` read an attempt's logs, and the run's event
//! log, through it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What is read of a log that was already long when the view opened: its
/// end. The pager (`O`) shows all of it.
pub const BACKLOG: u64 = 2 << 20;
/// Bytes read of one log per poll, so a flood of output never holds up a
/// frame for long; the rest comes at the next one.
const READ_MAX: u64 = BACKLOG;

/// One log file, read from where the last read stopped.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    file: Option<File>,
    offset: u64,
    /// The start of a line whose newline has not been written yet.
    partial: Vec<u8>,
    /// Read from the start, however long the file is.
    whole: bool,
}

/// What one read of a log found.
#[derive(Debug, Default)]
pub struct Got {
    pub lines: Vec<String>,
    /// The file was longer than the backlog: its start was skipped.
    pub skipped: bool,
    /// The file is shorter than what was read: it was written anew.
    pub restarted: bool,
}

impl LogTail {
    /// A reader of a log's end: what was written before the last
    /// [`BACKLOG`] bytes when it is first opened is skipped (said so).
    pub fn tail(path: PathBuf) -> LogTail {
        LogTail {
            path,
            file: None,
            offset: 0,
            partial: Vec::new(),
            whole: false,
        }
    }

    /// A reader of the whole log, from its first line.
    pub fn whole(path: PathBuf) -> LogTail {
        LogTail {
            whole: true,
            ..LogTail::tail(path)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file was there at the last read.
    pub fn exists(&self) -> bool {
        self.file.is_some()
    }

    /// The lines written since the last read, each whole (a line still
    /// without its newline waits for it), at most [`READ_MAX`] bytes of
    /// them.
    pub fn read(&mut self) -> Got {
        let mut r = Got::default();
        if self.file.is_none() {
            // Not there yet (the attempt has not opened its logs), or
            // never (an agent that writes none): looked for at every poll.
            let Ok(f) = File::open(&self.path) else {
                return r;
            };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if !self.whole && len > BACKLOG {
                self.offset = len - BACKLOG;
                r.skipped = true;
            }
            self.file = Some(f);
        }
        let Some(f) = self.file.as_mut() else {
            return r;
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return r;
        };
        if len < self.offset {
            // Truncated: the attempt's logs were opened again (a resumed
            // run runs the attempt anew).
            r.restarted = true;
            return r;
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return r;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.take(READ_MAX).read_to_end(&mut buf) else {
            return r;
        };
        let first = r.skipped;
        self.offset += n as u64;
        let mut rest = &buf[..];
        if first {
            // The backlog starts inside a line: drop its tail.
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => rest = &rest[i + 1..],
                None => rest = &[],
            }
        }
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.partial.extend_from_slice(&rest[..i]);
            r.lines.push(raw(&self.partial));
            self.partial.clear();
            rest = &rest[i + 1..];
        }
        // Held until its newline: the runner writes whole lines, so this
        // is a read that met a write halfway.
        self.partial.extend_from_slice(rest);
        r
    }
}

/// A line as it was written, a lone `\r` before its newline dropped.
fn raw(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.trim_end_matches('\r').to_string()
}

//! A live run's event log as every surface reads it: the lines written
//! since the last look, decoded in order. The console's replay of a live
//! run and the served page follow a run through it, from the run's own
//! file, so neither needs the run's host to send it anything.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::kernel::Signal;

/// A live run's event log, read as it grows: only whole lines, only the
/// events that come next.
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    next_seq: u64,
    /// Knows what the lines read before introduced.
    lines: crate::kernel::log_line::LineDecoder,
}

impl LogTail {
    /// Follows `path` after its first `offset` bytes, which held `before`.
    pub fn new(path: &Path, offset: u64, before: &[Signal]) -> LogTail {
        LogTail {
            path: path.to_path_buf(),
            offset,
            partial: Vec::new(),
            next_seq: before.last().map_or(0, |s| s.seq) + 1,
            lines: crate::kernel::log_line::LineDecoder::after(before),
        }
    }

    /// The events written since the last call.
    pub fn poll(&mut self) -> Vec<Signal> {
        let mut buf = Vec::new();
        let read = std::fs::File::open(&self.path).and_then(|mut f| {
            f.seek(SeekFrom::Start(self.offset))?;
            f.read_to_end(&mut buf)
        });
        let Ok(n) = read else {
            return Vec::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let mut out = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            if let Ok(s) = self.lines.decode(&line)
                && s.seq == self.next_seq
            {
                self.next_seq += 1;
                out.push(s);
            }
        }
        out
    }
}

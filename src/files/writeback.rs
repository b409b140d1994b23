//! Write-behind for the run directory's large files.
//!
//! The page cache keeps written data until its flusher starts (by default
//! when a tenth of memory is dirty). A run that writes gigabytes — a
//! million operations' event log and checkpoints — then meets the kernel's
//! write throttle all at once, and each checkpoint's fsync waits for the
//! whole file. Starting the disk writes of every few megabytes as a file
//! is written keeps the dirty data small and the fsyncs short; measured on
//! a 1 000 000-spawn run, about as much as lowering the machine's
//! `vm.dirty_background_bytes` to 64 MiB.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two starts of writeback.
pub const CHUNK: u64 = 8 << 20;

/// How far a file is written, and from where its writeback is not started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Behind {
    end: u64,
    started: u64,
}

impl Behind {
    /// A file that ends at `end` (an appended log's length when opened).
    pub fn at(end: u64) -> Behind {
        Behind { end, started: end }
    }

    /// `n` more bytes reached `file`; a full chunk behind is sent to disk.
    /// Returns the range started, if any.
    pub fn wrote(&mut self, file: &File, n: usize) -> Option<(u64, u64)> {
        self.end += n as u64;
        let len = self.end - self.started;
        if len < CHUNK {
            return None;
        }
        start_writeback(file, self.started, len);
        let range = (self.started, len);
        self.started = self.end;
        Some(range)
    }
}

/// Starts writing `len` bytes of `file` from `offset` to disk, without
/// waiting. A hint: if it fails, nothing changes but the timing.
fn start_writeback(file: &File, offset: u64, len: u64) {
    // On Linux POSIX_FADV_DONTNEED starts the writeback of the range's
    // dirty pages (WB_SYNC_NONE) and drops its clean ones: just written,
    // there are none to drop, and nothing here reads them back soon.
    #[cfg(target_os = "linux")]
    let _ = rustix::fs::fadvise(
        file,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::DontNeed,
    );
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// A file writer that writes behind.
pub struct WriteBehind<'a> {
    file: &'a mut File,
    behind: Behind,
}

impl<'a> WriteBehind<'a> {
    /// A new (empty) file.
    pub fn new(file: &'a mut File) -> Self {
        WriteBehind {
            file,
            behind: Behind::default(),
        }
    }
}

impl Write for WriteBehind<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.behind.wrote(self.file, n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writeback_starts_once_per_chunk_from_where_it_last_started() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("f")).unwrap();
        let mut b = Behind::at(100);
        assert_eq!(b.wrote(&f, (CHUNK - 1) as usize), None);
        assert_eq!(b.wrote(&f, 1), Some((100, CHUNK)));
        assert_eq!(b.wrote(&f, 10), None);
        assert_eq!(
            b.wrote(&f, (2 * CHUNK) as usize),
            Some((100 + CHUNK, 2 * CHUNK + 10))
        );
    }

    #[test]
    fn what_is_written_behind_is_the_file_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut f = File::create(&p).unwrap();
        let data: Vec<u8> = (0..(CHUNK as usize * 2 + 12_345))
            .map(|i| i as u8)
            .collect();
        {
            let mut w = io::BufWriter::with_capacity(1 << 16, WriteBehind::new(&mut f));
            w.write_all(&data).unwrap();
            w.flush().unwrap();
        }
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), data);
    }
}

//! The last lines each subprocess printed, kept in memory for the node
//! inspector (the log files in the run directory have everything).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::kernel::OpId;

/// Lines kept per operation.
pub const TAIL_LINES: usize = 40;
/// Characters kept per line.
const LINE_MAX: usize = 400;

#[derive(Debug, Clone, PartialEq)]
pub struct TailLine {
    pub stderr: bool,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tail {
    pub attempt: u32,
    pub argv: Vec<String>,
    /// The stdout log file.
    pub log: Option<PathBuf>,
    pub lines: VecDeque<TailLine>,
}

/// Shared between the runners of a run and whoever shows them.
#[derive(Debug, Default)]
pub struct Tails {
    inner: Mutex<HashMap<OpId, Tail>>,
}

impl Tails {
    pub fn new() -> Arc<Self> {
        Arc::new(Tails::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<OpId, Tail>> {
        // A panicking writer leaves lines, not broken invariants.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new attempt starts with an empty tail.
    pub fn start(&self, op: OpId, attempt: u32, argv: Vec<String>, log: Option<PathBuf>) {
        self.lock().insert(
            op,
            Tail {
                attempt,
                argv,
                log,
                lines: VecDeque::with_capacity(TAIL_LINES),
            },
        );
    }

    /// Keeps `line` for the console, without what could drive the
    /// operator's terminal (escape sequences, controls).
    pub fn push(&self, op: OpId, stderr: bool, line: &str) {
        let line = line.trim_end();
        let clean = crate::printable::printable(line);
        let mut text: String = clean.chars().take(LINE_MAX).collect();
        if text.len() < clean.len() {
            text.push('…');
        }
        let mut m = self.lock();
        if let Some(t) = m.get_mut(&op) {
            if t.lines.len() == TAIL_LINES {
                t.lines.pop_front();
            }
            t.lines.push_back(TailLine { stderr, text });
        }
    }

    pub fn get(&self, op: &OpId) -> Option<Tail> {
        self.lock().get(op).cloned()
    }
}

/// An attempt's tail read back from its log files (a console attached to a
/// run another process hosts has no tails in memory): the last lines of
/// stdout, then of stderr. The files do not say how the two interleaved.
pub fn from_logs(logs: &std::path::Path, name: &str, attempt: u32) -> Option<Tail> {
    let stdout = logs.join(format!("{name}.{attempt}.stdout.log"));
    let stderr = logs.join(format!("{name}.{attempt}.stderr.log"));
    let last = |path: &std::path::Path| -> Option<Vec<String>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(path).ok()?;
        let len = f.metadata().ok()?.len();
        let from = len.saturating_sub(64 * 1024);
        f.seek(SeekFrom::Start(from)).ok()?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf);
        let mut lines: Vec<&str> = text.lines().collect();
        if from > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        let skip = lines.len().saturating_sub(TAIL_LINES);
        Some(lines[skip..].iter().map(|l| l.to_string()).collect())
    };
    let out = last(&stdout)?;
    let err = last(&stderr).unwrap_or_default();
    let t = Tails::default();
    let op = OpId::nil();
    t.start(op, attempt, Vec::new(), Some(stdout));
    for l in &out {
        t.push(op, false, l);
    }
    for l in &err {
        t.push(op, true, l);
    }
    t.get(&op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_of_the_latest_attempt() {
        let t = Tails::default();
        let op = uuid::Uuid::nil();
        t.push(op, false, "before start: dropped");
        assert_eq!(t.get(&op), None);
        t.start(op, 1, vec!["a".into()], None);
        for i in 0..(TAIL_LINES + 5) {
            t.push(op, i % 2 == 1, &format!("line {i}\n"));
        }
        let tail = t.get(&op).unwrap();
        assert_eq!(tail.lines.len(), TAIL_LINES);
        assert_eq!(tail.lines[0].text, "line 5");
        assert!(tail.lines[0].stderr);
        t.start(op, 2, vec![], None);
        assert!(t.get(&op).unwrap().lines.is_empty());
        t.push(op, false, &"x".repeat(1000));
        assert_eq!(t.get(&op).unwrap().lines[0].text.chars().count(), 401);
        t.push(op, true, "\x1b[31merror\x1b[0m\x1b]0;title\x07!");
        assert_eq!(t.get(&op).unwrap().lines[1].text, "error!");
    }
}

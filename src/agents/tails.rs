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

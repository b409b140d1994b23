//! An agent's output as it arrives: lines cut from its pipes (bounded, so
//! one endless line cannot exhaust memory) and the log files they go to
//! (bounded too).

use super::*;

/// What a pipe gave: a whole line, or bytes of one still being written
/// (progress, for stall detection).
pub(super) enum Chunk {
    Line(String),
    Partial,
}

/// The longest line read whole. A result is one line; cutting it would
/// rewrite the answer, so a longer stdout line fails the attempt
/// (`output_too_large`) instead, and memory stays bounded.
pub const LINE_LIMIT: usize = 64 << 20;

/// stderr is only logged and shown: its lines are cut at this length.
pub(super) const STDERR_LINE_LIMIT: usize = 64 << 10;

/// What happens to a line longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Overflow {
    /// Read it in pieces (stderr).
    Cut,
    /// Drop it and say so (stdout).
    Fail,
}

/// Lines of a pipe, lossily decoded; `done` after EOF or an error.
pub(super) struct Chunks<R> {
    pub(super) reader: R,
    pub(super) pending: Vec<u8>,
    pub(super) lines: std::collections::VecDeque<String>,
    pub(super) done: bool,
    pub(super) overflow: Overflow,
    /// A line went past the limit (`Overflow::Fail`).
    pub(super) overflowed: bool,
}

impl<R: AsyncRead + Unpin> Chunks<R> {
    pub(super) fn new(r: R, overflow: Overflow) -> Self {
        Chunks {
            reader: r,
            pending: Vec::new(),
            lines: std::collections::VecDeque::new(),
            done: false,
            overflow,
            overflowed: false,
        }
    }

    /// Cancel-safe: `read` loses nothing when cancelled, and what was read
    /// is kept in `pending`/`lines` between calls. `None` at the end.
    pub(super) async fn next(&mut self) -> Option<Chunk> {
        if let Some(l) = self.lines.pop_front() {
            return Some(Chunk::Line(l));
        }
        let mut buf = [0u8; 64 * 1024];
        let n = match self.reader.read(&mut buf).await {
            Ok(0) | Err(_) => {
                self.done = true;
                return None;
            }
            Ok(n) => n,
        };
        // Only the bytes just read can hold a newline: a long line is not
        // scanned again with every read.
        let mut from = self.pending.len();
        self.pending.extend_from_slice(&buf[..n]);
        let limit = match self.overflow {
            Overflow::Cut => STDERR_LINE_LIMIT,
            Overflow::Fail => LINE_LIMIT,
        };
        while let Some(i) = self.pending[from..].iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=from + i).collect();
            from = 0;
            // The newline may come in the same read as the byte that made
            // the line too long.
            if self.overflow == Overflow::Fail && line.len() - 1 > limit {
                self.overflowed = true;
                continue;
            }
            self.lines.push_back(decode(&line));
        }
        if self.pending.len() > limit {
            match self.overflow {
                Overflow::Cut => {
                    let line: Vec<u8> = std::mem::take(&mut self.pending);
                    self.lines.push_back(decode(&line));
                }
                Overflow::Fail => {
                    self.pending = Vec::new();
                    self.overflowed = true;
                }
            }
        }
        Some(match self.lines.pop_front() {
            Some(l) => Chunk::Line(l),
            None => Chunk::Partial,
        })
    }

    /// What is left once reading stopped: queued lines and a last line
    /// without a newline.
    pub(super) fn rest(&mut self) -> Vec<String> {
        let mut parts: Vec<String> = self.lines.drain(..).collect();
        if !self.pending.is_empty() {
            parts.push(decode(&std::mem::take(&mut self.pending)));
        }
        parts
    }
}

pub(super) fn decode(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}

/// The per-operation log files.
pub(super) struct Logs {
    pub(super) stdout_path: Option<PathBuf>,
    pub(super) out: Option<std::io::LineWriter<std::fs::File>>,
    pub(super) err: Option<std::io::LineWriter<std::fs::File>>,
    /// Bytes written to each (stdout, stderr).
    pub(super) written: [u64; 2],
}

/// What one attempt's stdout or stderr log keeps: an agent printing in a
/// loop must not fill the disk. What comes after is still read (and
/// parsed), not kept.
pub const LOG_LIMIT: u64 = 32 << 20;
/// A line longer than this is kept in the log only by its start.
pub(super) const LONG_LINE: usize = 1 << 20;
pub(super) const LONG_LINE_KEPT: usize = 4096;

impl Logs {
    pub(super) fn open(
        dir: Option<&Path>,
        name: &str,
        attempt: u32,
        built: &BuiltCommand,
        cwd: &Path,
        def: &AgentDef,
        carry: Option<&crate::kernel::CarryOn>,
    ) -> std::io::Result<Logs> {
        let Some(dir) = dir else {
            return Ok(Logs {
                stdout_path: None,
                out: None,
                err: None,
                written: [0; 2],
            });
        };
        crate::files::private_dir(dir)?;
        let base = format!("{name}.{attempt}");
        // What ran, for whoever reads the logs later (no variable values:
        // they may be secrets).
        let mut command = serde_json::json!({
            "agent": def.name,
            // How its stdout reads (the follow view's transcript).
            "format": def.stream_format.as_str(),
            "argv": built.argv,
            "cwd": cwd,
            "prompt_via": def.prompt_via.as_str(),
            "prompt_passed": built.prompt_passed,
            "env_policy": def.env_policy.as_str(),
        });
        if let Some(session) = &built.continues {
            command["continues"] = serde_json::Value::String(session.clone());
        }
        // What the operator said to it, for the follow view to show where
        // the attempt begins.
        if let Some(c) = carry
            && let Some(note) = &c.note
        {
            command["asked"] = serde_json::json!({
                "by": c.by.as_deref().unwrap_or(crate::kernel::command::OPERATOR),
                "text": note.as_ref(),
            });
        }
        if let Some(note) = &built.prompt_note {
            command["prompt_note"] = serde_json::Value::String(note.clone());
        }
        // Owner-only, like everything in a run directory: agent output
        // holds code, prompts and whatever the agent printed.
        let private = crate::files::create_private;
        private(&dir.join(format!("{base}.command.json")))?
            .write_all(format!("{command:#}\n").as_bytes())?;
        let stdout_path = dir.join(format!("{base}.stdout.log"));
        let out = private(&stdout_path)?;
        let err = private(&dir.join(format!("{base}.stderr.log")))?;
        Ok(Logs {
            stdout_path: Some(stdout_path),
            out: Some(std::io::LineWriter::new(out)),
            err: Some(std::io::LineWriter::new(err)),
            written: [0; 2],
        })
    }

    // A full disk must not fail the operation; the tail still shows it.
    pub(super) fn stdout(&mut self, line: &str) {
        Logs::write(&mut self.out, &mut self.written[0], line);
    }

    pub(super) fn stderr(&mut self, line: &str) {
        Logs::write(&mut self.err, &mut self.written[1], line);
    }

    pub(super) fn write(
        w: &mut Option<std::io::LineWriter<std::fs::File>>,
        written: &mut u64,
        line: &str,
    ) {
        let Some(w) = w else {
            return;
        };
        if *written >= LOG_LIMIT {
            return;
        }
        // A huge line (a 50 MB answer) is the attempt's result, which the
        // run's events hold whole: its start here, not a second copy.
        let line = if line.len() > LONG_LINE {
            let mut cut = LONG_LINE_KEPT;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            std::borrow::Cow::Owned(format!(
                "{}… [playdeck: a line of {} bytes, cut here; what the agent said in it is in the run's events]",
                &line[..cut],
                line.len()
            ))
        } else {
            std::borrow::Cow::Borrowed(line)
        };
        *written += line.len() as u64 + 1;
        let _ = writeln!(w, "{line}");
        if *written >= LOG_LIMIT {
            let _ = writeln!(
                w,
                "[playdeck: this log stops at {} MiB; the rest was read, not kept]",
                LOG_LIMIT >> 20
            );
        }
    }

    pub(super) fn flush(&mut self) {
        for w in [&mut self.out, &mut self.err].into_iter().flatten() {
            let _ = w.flush();
        }
    }
}

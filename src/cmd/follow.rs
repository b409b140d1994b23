//! `playdeck ctl RUN follow OP`: an operation's conversation for a script,
//! as the follow view (`F`) shows it — what its agent wrote, each tool call
//! and its result, errors — one entry at a time as each is whole, attempt
//! after attempt, until the operation ends (or, for a run that is not
//! live, what its logs hold). `--raw` prints the lines as the CLI printed
//! them.
//!
//! It reads the run directory (the event log for which attempt is the
//! latest and when the operation ended, the attempt's logs for what it
//! said), so it needs no control socket and asks nothing of the run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CmdError, Outcome};
use playdeck::agents::transcript::{Entry, Transcript};
use playdeck::control;
use playdeck::files::tail::LogTail;

/// How often new lines are looked for.
const POLL: Duration = Duration::from_millis(200);

/// What the event log says of the operation.
#[derive(Default)]
struct Seen {
    known: bool,
    /// The latest attempt started.
    attempt: u32,
    /// How it ended: `succeeded`, `failed: …`.
    ended: Option<String>,
    run_over: bool,
    /// The log's lines are read from its first: compact ones name an
    /// operation the way a line before introduced it.
    lines: playdeck::kernel::log_line::LineDecoder,
}

impl Seen {
    fn see(&mut self, op: &str, line: &str) {
        let Ok(v) = self.lines.whole_value(line.as_bytes()) else {
            return;
        };
        let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or_default();
        if ty == "run_finished" {
            self.run_over = true;
            return;
        }
        if v.get("name").and_then(|n| n.as_str()) != Some(op) {
            return;
        }
        self.known = true;
        let error = || {
            v.get("error")
                .and_then(|e| e.as_str())
                .map(|e| e.lines().next().unwrap_or_default().to_string())
        };
        match ty {
            "started" => {
                self.attempt = v
                    .get("attempt")
                    .and_then(serde_json::Value::as_u64)
                    .map_or(self.attempt + 1, |a| a as u32);
                self.ended = None;
            }
            "completed" => self.ended = Some("succeeded".into()),
            "failed" | "escalated" | "denied" | "skipped" => {
                self.ended = Some(match error() {
                    Some(e) => format!("{ty}: {e}"),
                    None => ty.into(),
                });
            }
            _ => {}
        }
    }
}

/// One attempt's logs and what has been printed of them.
struct Attempt {
    logs: [LogTail; 2],
    transcript: Transcript,
    /// Entries printed, counted from the attempt's first.
    printed: usize,
}

impl Attempt {
    fn open(logs: &Path, op: &str, n: u32) -> Attempt {
        let path = |which: &str| logs.join(format!("{op}.{n}.{which}.log"));
        Attempt {
            logs: [
                LogTail::whole(path("stdout")),
                LogTail::whole(path("stderr")),
            ],
            transcript: Transcript::for_attempt(logs, op, n),
            printed: 0,
        }
    }

    /// Reads what was written; prints the entries now whole (all of them
    /// with `all`), or with `raw` each line.
    fn drain(&mut self, raw: bool, all: bool) {
        for (i, stderr) in [(0, false), (1, true)] {
            loop {
                let got = self.logs[i].read();
                if got.lines.is_empty() {
                    break;
                }
                for line in got.lines {
                    if raw {
                        let shown = playdeck::printable::printable(&line).into_owned();
                        if stderr {
                            sayln!("err│ {shown}");
                        } else {
                            sayln!("{shown}");
                        }
                        continue;
                    }
                    if stderr {
                        self.transcript.feed_stderr(&line);
                    } else {
                        self.transcript.feed(&line);
                    }
                    self.print(false);
                }
            }
        }
        if !raw {
            self.print(all);
        }
    }

    fn print(&mut self, all: bool) {
        let t = &self.transcript;
        let upto = if all {
            t.dropped() + t.entries().len()
        } else {
            t.settled()
        };
        // Entries let go before they were printed (more than the bound in
        // one read) are said, not lost silently.
        if self.printed < t.dropped() {
            sayln!(
                "… {} entries not shown (the attempt's log has them)",
                t.dropped() - self.printed
            );
            self.printed = t.dropped();
        }
        for e in t
            .entries()
            .iter()
            .skip(self.printed - t.dropped())
            .take(upto.saturating_sub(self.printed))
        {
            print_entry(e);
        }
        self.printed = self.printed.max(upto);
    }
}

fn print_entry(e: &Entry) {
    for l in e.lines() {
        sayln!("{}{}", l.lead(), l.text);
    }
}

pub fn follow(run: &str, op: &str, raw: bool) -> Outcome {
    let dir: PathBuf =
        control::resolve_run(run).map_err(|f| CmdError::Input(format!("ctl: {}", f.message)))?;
    let logs = dir.join("logs");
    let mut events = LogTail::whole(dir.join("events.jsonl"));
    let mut seen = Seen::default();
    let read_events = |events: &mut LogTail, seen: &mut Seen| loop {
        let got = events.read();
        if got.lines.is_empty() {
            break;
        }
        for l in &got.lines {
            seen.see(op, l);
        }
    };
    read_events(&mut events, &mut seen);
    if !events.exists() {
        return Err(CmdError::Input(format!(
            "ctl: {} has no event log: not a run directory",
            dir.display()
        )));
    }
    if !seen.known {
        return Err(CmdError::Input(format!(
            "ctl: no operation named {op:?} in the run in {} (operations are named as in the lanes and the report)",
            dir.display()
        )));
    }
    let live = || std::os::unix::net::UnixStream::connect(control::socket_path(&dir)).is_ok();
    let mut current: Option<(u32, Attempt)> = None;
    loop {
        let over = seen.ended.is_some() || seen.run_over || !live();
        // Every attempt in turn, the earlier ones whole: the conversation
        // so far, then what comes.
        while current.as_ref().map_or(0, |(n, _)| *n) < seen.attempt {
            if let Some((_, a)) = current.as_mut() {
                a.drain(raw, true);
            }
            let n = current.as_ref().map_or(1, |(n, _)| n + 1);
            sayln!("── {op} · attempt {n} ──");
            current = Some((n, Attempt::open(&logs, op, n)));
        }
        if let Some((_, a)) = current.as_mut() {
            a.drain(raw, over);
        }
        if over {
            break;
        }
        std::thread::sleep(POLL);
        read_events(&mut events, &mut seen);
    }
    match (&seen.ended, seen.attempt) {
        (Some(how), _) => sayln!("── {op}: {how} ──"),
        (None, 0) => sayln!("── {op} has not started an attempt ──"),
        (None, _) if seen.run_over => sayln!("── the run ended ──"),
        (None, _) => sayln!("── the run is not live: its logs say no more ──"),
    }
    Ok(0)
}

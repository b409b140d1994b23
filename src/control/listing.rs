//! `playdeck runs`: every run under a directory, newest first, each read
//! cheaply — a live run answers `status` on its socket; a stopped one is
//! read from the first and last lines of its log, never the whole of it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::kernel::log_line::LineDecoder;
use crate::kernel::{Signal, SignalKind};
use crate::printable::fit::fit;

/// One run, as the list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub id: String,
    pub dir: PathBuf,
    pub play: String,
    /// `running`, `paused`, `pausing`, `needs approval ×N`,
    /// `finished: succeeded|failed|cancelled`, `crashed: resumable`,
    /// `crashed: no checkpoint`.
    pub state: String,
    pub live: bool,
    /// When its play was copied in (the run's start), seconds since the epoch.
    pub started: u64,
    pub elapsed: f64,
    /// Operations in a final lane (unknown for a crashed run: its
    /// checkpoint is not read for a list), and all of them.
    pub done: Option<usize>,
    pub total: usize,
    /// Names of the operations waiting for approval (live runs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub awaiting_approval: Vec<String>,
    /// What it spent: USD, tokens (unknown for a crashed run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<(f64, f64)>,
    /// A live `[cluster]` run's workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<crate::kernel::WorkerSeen>>,
}

/// The runs under `dir`, newest first. Directories that hold no run are
/// left out; one that cannot be read is listed with why.
pub fn list(dir: &Path) -> std::io::Result<Vec<RunRow>> {
    let mut rows: Vec<RunRow> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("play.toml").is_file())
        // Another user's run is not listed as one of yours.
        .filter(|p| crate::files::not_yours(p).is_none())
        .map(|p| row(&p))
        .collect();
    rows.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| b.id.cmp(&a.id)));
    Ok(rows)
}

/// One run directory, read.
pub fn row(dir: &Path) -> RunRow {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The id says when the run started (`20261129-192505-abcd`); a
    // directory named otherwise, when its play was copied in.
    let started = started_of_id(&id).unwrap_or_else(|| {
        std::fs::metadata(dir.join("play.toml"))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs())
    });
    let mut r = RunRow {
        id,
        dir: dir.to_path_buf(),
        play: String::new(),
        state: String::new(),
        live: false,
        started,
        elapsed: 0.0,
        done: None,
        total: 0,
        awaiting_approval: Vec::new(),
        spent: None,
        workers: None,
    };
    let events = dir.join("events.jsonl");
    let (first, last) = ends(&events);
    if let Some(SignalKind::RunStarted {
        play, operations, ..
    }) = first.as_ref().map(|s| &s.kind)
    {
        r.play = play.to_string();
        r.total = *operations;
    }
    if let Some(s) = &last {
        r.elapsed = s.elapsed;
    }
    // A live run says for itself.
    if let Ok(crate::control::Reply::Status(st)) =
        super::client::send_within(dir, &crate::kernel::Request::Status, Duration::from_secs(2))
    {
        r.live = true;
        r.play = st.play.clone();
        // The run's clock moves between its events too.
        let since = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_sub(started);
        r.elapsed = st.elapsed.max(since as f64);
        r.total = st.lanes.total();
        r.done = Some(st.lanes.settled());
        let pct = st.budget_used.map(|u| format!("{:.0}%", 100.0 * u));
        r.state = if !st.awaiting_approval.is_empty() {
            format!("needs approval ×{}", st.awaiting_approval.len())
        } else if st.state.starts_with("paused — a spend cap") {
            // The list's column is narrow: the share says it in a word.
            format!("paused — budget {}", pct.as_deref().unwrap_or("cap"))
        } else if st.spend_warned
            && st.state == "running"
            && let Some(p) = &pct
        {
            format!("running — budget {p}")
        } else {
            st.state.clone()
        };
        r.state = with_workers(std::mem::take(&mut r.state), st.workers.as_deref());
        r.awaiting_approval = st.awaiting_approval;
        r.spent = Some(st.spent);
        r.workers = st.workers;
        return r;
    }
    // No answer, yet a process holds the run (stopped by SIGSTOP, busy,
    // or its socket removed): it is live, not crashed, and never offered
    // for resume.
    if let Some((pid, _)) = crate::store::lock::owner_of(dir) {
        r.live = true;
        r.state = match crate::store::lock::state_of(pid) {
            Some('T' | 't') => format!("stopped (pid {pid}): `kill -CONT {pid}` goes on"),
            _ => format!("not answering (pid {pid} holds it)"),
        };
        return r;
    }
    match last.as_ref().map(|s| &s.kind) {
        Some(SignalKind::RunFinished {
            outcome,
            counts,
            spent,
        }) => {
            r.spent = Some(spent.unwrap_or_default());
            r.total = counts.total();
            r.done = Some(counts.settled());
            r.state = format!("finished: {}", outcome.as_str());
        }
        _ if dir
            .join(crate::store::checkpoint::CHECKPOINT_FILE)
            .is_file() =>
        {
            r.state = "crashed: resumable".into();
        }
        _ if events.is_file() => r.state = "crashed: no checkpoint".into(),
        _ => r.state = "not started".into(),
    }
    r
}

/// A live run's state with how many workers perform it (a `[cluster]`
/// run), where the column has room: `running · 3 workers`.
pub fn with_workers(state: String, workers: Option<&[crate::kernel::WorkerSeen]>) -> String {
    match workers {
        Some(ws) if matches!(state.as_str(), "running" | "paused" | "pausing") => {
            let n = ws.len();
            format!("{state} · {n} worker{}", if n == 1 { "" } else { "s" })
        }
        _ => state,
    }
}

/// Seconds since the epoch of an id `YYYYMMDD-HHMMSS-xxxx` (UTC).
pub fn started_of_id(id: &str) -> Option<u64> {
    let b = id.as_bytes();
    if b.len() < 15 || b[8] != b'-' || !b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit) {
        return None;
    }
    let text = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &id[0..4],
        &id[4..6],
        &id[6..8],
        &id[9..11],
        &id[11..13],
        &id[13..15]
    );
    humantime::parse_rfc3339(&text)
        .ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// `12-02 03:27` (UTC).
pub fn when(secs: u64) -> String {
    if secs == 0 {
        return "—".into();
    }
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-12-02T03:27:40Z
    format!("{} {}", &s[5..10], &s[11..16])
}

/// The log's first and last whole lines, decoded. Only a regular file
/// is read (opened without blocking: a FIFO in its place kept `runs`
/// waiting for ever), and only its last [`TAIL_MAX`] bytes are searched
/// for the last line (a log of NULs was read 64 MiB at a time, every
/// second with `--watch`): a longer line is a result stored apart.
fn ends(path: &Path) -> (Option<Signal>, Option<Signal>) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
    else {
        return (None, None);
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return (None, None);
    }
    let mut head = vec![0u8; 64 * 1024];
    let n = f.read(&mut head).unwrap_or(0);
    head.truncate(n);
    let first = head
        .split(|b| *b == b'\n')
        .next()
        .and_then(|l| LineDecoder::new().decode(l).ok());
    // The last line: from the end, far enough back to hold it.
    let len = f.metadata().map_or(0, |m| m.len());
    let mut back = 64 * 1024u64;
    loop {
        let from = len.saturating_sub(back);
        let mut tail = Vec::new();
        if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut tail).is_err() {
            return (first, None);
        }
        let mut lines: Vec<&[u8]> = tail
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        // The first piece may be a line's end, not a whole one.
        if from > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        // Read in order, as compact lines are: the last line that reads,
        // once a line has said the time.
        let mut dec = LineDecoder::from_the_middle();
        let last = lines
            .iter()
            .filter_map(|l| dec.decode(l).ok())
            .last()
            .filter(|s| !s.elapsed.is_nan());
        if last.is_some() {
            return (first, last);
        }
        if from == 0 || back >= TAIL_MAX {
            return (first, None);
        }
        back = (back * 8).min(TAIL_MAX);
    }
}

/// How far from its end `runs` looks for a log's last line.
const TAIL_MAX: u64 = 2 << 20;

/// The list as text, one run a line.
pub fn text(rows: &[RunRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if rows.is_empty() {
        return "no runs\n".into();
    }
    let _ = writeln!(s, "{}", header());
    for r in rows {
        let _ = writeln!(s, "{}", line(r));
    }
    s
}

/// The columns' titles.
pub fn header() -> String {
    format!(
        "{:<22} {:<24} {:<20} {:<11} {:>7} {:>9} {:>9}",
        "RUN", "PLAY", "STATE", "START (UTC)", "ELAPSED", "DONE", "SPEND"
    )
}

/// One run's columns.
pub fn line(r: &RunRow) -> String {
    format!(
        "{:<22} {:<24} {:<20} {:<11} {:>7} {:>9} {:>9}",
        crate::printable::printable(&fit(&r.id, 22)),
        crate::printable::printable(&fit(&r.play, 24)),
        // A live run's state comes from its socket: no escape sequence
        // of it reaches the terminal.
        crate::printable::printable(&fit(&r.state, 20)),
        when(r.started),
        short(r.elapsed),
        format!(
            "{}/{}",
            r.done.map_or("—".to_string(), |d| d.to_string()),
            r.total
        ),
        spend_cell(r.spent),
    )
}

/// `3.20 USD`, or the tokens when nothing was priced (`12.4k tok`), `—`
/// when unknown.
fn spend_cell(spent: Option<(f64, f64)>) -> String {
    match spent {
        None => "—".into(),
        Some((usd, _)) if usd > 0.0 => format!("{usd:.2} USD"),
        Some((_, tokens)) if tokens >= 1e6 => format!("{:.1}M tok", tokens / 1e6),
        Some((_, tokens)) if tokens >= 1000.0 => format!("{:.1}k tok", tokens / 1000.0),
        Some((_, tokens)) => format!("{tokens:.0} tok"),
    }
}

/// `42s`, `3m05s`, `2h10m`, `3d4h`.
fn short(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_fits_the_runs_window_of_a_120_column_console() {
        // The window is 116 wide there: borders and padding leave 112,
        // the marks (selection, this run) take 3.
        assert_eq!(3 + header().chars().count(), 111);
        assert_eq!(spend_cell(Some((48.72, 9.1e6))), "48.72 USD");
        assert_eq!(spend_cell(Some((0.0, 1.84e6))), "1.8M tok");
        assert_eq!(spend_cell(Some((0.0, 12_400.0))), "12.4k tok");
        assert_eq!(spend_cell(None), "—");
    }

    #[test]
    fn a_run_id_says_when_it_started() {
        let t = started_of_id("20261129-192505-abcd").unwrap();
        assert_eq!(when(t), "11-29 19:25");
        assert_eq!(started_of_id("mine"), None);
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(42.0), "42s");
        assert_eq!(short(185.0), "3m05s");
        assert_eq!(short(7800.0), "2h10m");
        assert_eq!(short(273600.0), "3d4h");
    }
}

//! Taking up a stopped run: its checkpoint with the event log's later lines
//! folded over it, turned back into a graph and the kernel's restore.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::{CHECKPOINT_FILE, Checkpoint, CheckpointError};
use crate::kernel::log_line::LineDecoder;
use crate::kernel::{
    Graph, GraphBuilder, GraphError, NodeStatus, Outcome, Restore, RestoredNode, Signal, SkipReason,
};

/// Why a stopped run cannot be taken up: each names the file (and line)
/// or the operation at fault and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    ResultFile(#[from] super::results::ResultFileError),
    #[error("{} holds no run: events.jsonl is missing", .dir.display())]
    NoRun { dir: PathBuf },
    #[error(
        "{} has no {CHECKPOINT_FILE}: the run cannot be resumed (start it again with `playdeck run`)",
        .dir.display()
    )]
    NoCheckpoint { dir: PathBuf },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(
        "{}:{line}: the event log ends at event {last} but {} covers up to event {covers}: lines are missing from the log; nothing was changed",
        .events.display(),
        .checkpoint.display()
    )]
    LogBehind {
        events: PathBuf,
        line: usize,
        last: u64,
        checkpoint: PathBuf,
        covers: u64,
    },
    #[error(
        "run {run_id} already finished ({}); there is nothing to resume — to run a failed operation again: playdeck resume {} --retry OP",
        .outcome.as_str(),
        .dir.display()
    )]
    Finished {
        run_id: Arc<str>,
        outcome: Outcome,
        dir: PathBuf,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}:{line}:{}: the event log is damaged ({source}); nothing was changed",
        .path.display(),
        .source.column()
    )]
    Damaged {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{}:{line}: event {seq} {step}; nothing was changed", .path.display())]
    OutOfStep {
        path: PathBuf,
        line: usize,
        seq: u64,
        step: MisStep,
    },
    #[error(
        "{}: the event log holds no event, but {} shows that operations ran: the log was emptied, and work that finished is not run again without its record; nothing was changed — start the play over: playdeck resume {} --new-run",
        .events.display(),
        .evidence.display(),
        .dir.display()
    )]
    EmptyLog {
        events: PathBuf,
        dir: PathBuf,
        evidence: PathBuf,
    },
    #[error(
        "{} does not match {}: {why}; nothing was changed",
        .checkpoint.display(),
        .events.display()
    )]
    Disagree {
        checkpoint: PathBuf,
        events: PathBuf,
        why: String,
    },
    #[error("cannot repair {}: {source}", .path.display())]
    Repair {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the checkpoint's graph does not hold together: {0}")]
    Graph(GraphError),
    #[error("--retry {name}: no operation {name:?} in run {run_id}; operations: {}", .operations.join(", "))]
    RetryUnknown {
        name: String,
        run_id: Arc<str>,
        operations: Vec<String>,
    },
    #[error(
        "--resolve {name}: {name} did not fail on a merge conflict (it failed {category}); --resolve lands work whose conflict was resolved by hand, --retry runs an operation again"
    )]
    ResolveNotConflict { name: String, category: String },
    #[error("--retry {name}: {name} is {status}; only a failed or denied operation can be retried")]
    RetryNotFailed { name: String, status: String },
}

/// How an event's number is out of step with the line before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MisStep {
    Repeat,
    Before(u64),
    Missing { expected: u64 },
}

impl fmt::Display for MisStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MisStep::Repeat => f.write_str("is a repeat of the line before"),
            MisStep::Before(p) => write!(f, "comes after event {p}: lines are out of order"),
            MisStep::Missing { expected } => write!(
                f,
                "should be event {expected}: lines are missing or out of order"
            ),
        }
    }
}

/// Reads a stopped run's durable state. A checkpoint or log that is cut
/// short, corrupt or out of step with the other is an error naming the
/// file, never a fresh start; only the log's very last line may be cut (the
/// process died writing it), and it is left out.
pub fn read_stopped(dir: &Path, retrying: bool) -> Result<Checkpoint, ResumeError> {
    let events = dir.join("events.jsonl");
    if !events.is_file() {
        return Err(ResumeError::NoRun {
            dir: dir.to_path_buf(),
        });
    }
    let cp_path = dir.join(CHECKPOINT_FILE);
    if !cp_path.is_file() {
        return Err(ResumeError::NoCheckpoint {
            dir: dir.to_path_buf(),
        });
    }
    let mut cp = Checkpoint::load(&cp_path)?;
    // What the checkpoint covers is only checked, not decoded: resume
    // costs the snapshot and the log's tail, not the whole log. Its bytes
    // are checked by their CRC-32 when the checkpoint kept one; a log that
    // differs is read line by line, to say where.
    let by_hash = match cp.log {
        Some(mark) => read_log_by_mark(&events, &cp, mark, &cp_path)?,
        None => None,
    };
    let LogRead {
        tail,
        last,
        count: lines,
        first,
    } = match by_hash {
        Some(read) => read,
        None => read_log_after(&events, cp.state.seq, decoder_after(&cp))?,
    };
    if last < cp.state.seq {
        return Err(ResumeError::LogBehind {
            line: lines + 1,
            events,
            last,
            checkpoint: cp_path,
            covers: cp.state.seq,
        });
    }
    // A log with no event and a checkpoint of nothing: a run killed before
    // its first line reached the disk, which starts again as it was — unless
    // its attempts left their logs, which says the log was emptied and
    // finished work would run again.
    if last == 0
        && let Some(evidence) = attempt_logs(dir)
    {
        return Err(ResumeError::EmptyLog {
            events,
            dir: dir.to_path_buf(),
            evidence,
        });
    }
    if last > 0 {
        check_against_log(&cp, first.as_ref(), &cp_path, &events)?;
    }
    for s in &tail {
        cp.apply(s);
    }
    super::results::resolve(&mut cp.state, dir)?;
    match cp.state.run.finished {
        Some(Outcome::Cancelled) | None => Ok(cp),
        // It ended but died before writing its result: resuming finishes
        // the bookkeeping (nothing is left to run).
        Some(_) if !dir.join("result.json").exists() => Ok(cp),
        // A finished run is taken up again to retry what failed.
        Some(_) if retrying => Ok(cp),
        Some(outcome) => Err(ResumeError::Finished {
            run_id: cp.state.run.run_id.clone(),
            outcome,
            dir: dir.to_path_buf(),
        }),
    }
}

/// An attempt's log in the run directory, if any attempt left one.
fn attempt_logs(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("logs"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
}

/// The checkpoint and the log tell of the same run: the run the log's first
/// line started, with at least the operations it started with, and lane
/// counts that add up to the operations it lists. A checkpoint emptied or
/// swapped for another run's is refused, never taken as a run with nothing
/// left to do.
fn check_against_log(
    cp: &Checkpoint,
    first: Option<&Signal>,
    cp_path: &Path,
    events: &Path,
) -> Result<(), ResumeError> {
    let bad = |why: String| {
        Err(ResumeError::Disagree {
            checkpoint: cp_path.to_path_buf(),
            events: events.to_path_buf(),
            why,
        })
    };
    let (run_id, operations) = match first.map(|s| &s.kind) {
        Some(crate::kernel::SignalKind::RunStarted {
            run_id, operations, ..
        }) => (run_id, operations),
        // A run killed before its first line reached the disk, then
        // resumed: its log starts with the resume, which names no count.
        Some(crate::kernel::SignalKind::Resumed { .. }) => return Ok(()),
        _ => return bad("the log's first line is not the run's start".into()),
    };
    let st = &cp.state;
    if st.run.run_id != *run_id {
        return bad(format!(
            "the checkpoint is of run {}, the log of run {run_id}",
            st.run.run_id
        ));
    }
    if st.nodes.len() < *operations {
        return bad(format!(
            "the checkpoint lists {} operations, the run started with {operations}",
            st.nodes.len()
        ));
    }
    // The lanes count every operation placed in one; one the run had not
    // queued yet when it stopped (a large run killed while it queued, and
    // its resume killed in turn) is listed and in no lane. Checkpoints
    // older than the counts have none.
    let placed = st.nodes.iter().filter(|n| n.placed).count();
    if st.counts.total() != 0 && st.counts.total() != placed {
        return bad(format!(
            "the checkpoint's lanes count {} operations and {placed} of the {} it lists are in a lane",
            st.counts.total(),
            st.nodes.len()
        ));
    }
    Ok(())
}

/// Every signal of a log, checked: events are numbered from 1 without a
/// gap, a repeat or a step back. Only a cut last line is tolerated.
pub fn read_log(path: &Path) -> Result<Vec<Signal>, ResumeError> {
    read_log_after(path, 0, LineDecoder::new()).map(|r| r.tail)
}

/// The log read past the part `mark` covers, once those bytes are found to
/// be the ones the checkpoint was folded from (same length, same CRC-32,
/// ending a line). `None`: they are not (the caller reads the log line by
/// line to say where), or the log is shorter.
fn read_log_by_mark(
    path: &Path,
    cp: &Checkpoint,
    mark: super::LogMark,
    cp_path: &Path,
) -> Result<Option<LogRead>, ResumeError> {
    use std::io::{BufRead as _, Read as _, Seek as _, SeekFrom};
    let read_err = |source| ResumeError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(read_err)?;
    let len = f.metadata().map_err(read_err)?.len();
    if mark.bytes == 0 || len < mark.bytes {
        return Ok(None);
    }
    // The covered bytes end a line.
    let mut last_byte = [0u8];
    f.seek(SeekFrom::Start(mark.bytes - 1)).map_err(read_err)?;
    f.read_exact(&mut last_byte).map_err(read_err)?;
    if last_byte != *b"\n" {
        return Ok(None);
    }
    // Hashed as they are read, a chunk at a time: a million-operation log
    // is not held in memory to be checked.
    let mut crc = crc32fast::Hasher::new();
    super::hash_into(&mut crc, path, mark.bytes).map_err(read_err)?;
    if crc.finalize() != mark.crc32 {
        // Where it differs, line by line; a log whose lines all read and
        // number right is still not the one the checkpoint covers.
        read_log_after(path, cp.state.seq, decoder_after(cp))?;
        return Err(ResumeError::Disagree {
            checkpoint: cp_path.to_path_buf(),
            events: path.to_path_buf(),
            why: format!(
                "its first {} bytes are not those the checkpoint was written from (their CRC-32 differs): the log was changed",
                mark.bytes
            ),
        });
    }
    // The covered bytes end with the event the checkpoint says it covers:
    // a checkpoint numbered past them would number the run's next events
    // past a gap.
    let covered = last_line_seq(&mut f, mark.bytes).map_err(read_err)?;
    if covered != Some(cp.state.seq) {
        return Err(ResumeError::Disagree {
            checkpoint: cp_path.to_path_buf(),
            events: path.to_path_buf(),
            why: format!(
                "it covers the log up to event {}, but the {} bytes it was written from end at {}",
                cp.state.seq,
                mark.bytes,
                covered.map_or("a line without an event number".to_string(), |s| format!(
                    "event {s}"
                ))
            ),
        });
    }
    // The first line names the run.
    let mut first_line = Vec::new();
    std::io::BufReader::new(std::fs::File::open(path).map_err(read_err)?)
        .read_until(b'\n', &mut first_line)
        .map_err(read_err)?;
    let first = LineDecoder::new().decode(first_line.trim_ascii_end()).ok();
    f.seek(SeekFrom::Start(mark.bytes)).map_err(read_err)?;
    // What follows: at most about a snapshot's worth of lines.
    let mut text = Vec::new();
    f.read_to_end(&mut text).map_err(read_err)?;
    let read = read_lines(&text, path, cp.state.seq, cp.state.seq, decoder_after(cp))?;
    Ok(Some(LogRead { first, ..read }))
}

/// The event number of the line that ends at byte `end` (its newline at
/// `end - 1`), read backwards a chunk at a time.
fn last_line_seq(f: &mut std::fs::File, end: u64) -> std::io::Result<Option<u64>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    const CHUNK: u64 = 64 * 1024;
    let mut line: Vec<u8> = Vec::new();
    let mut at = end.saturating_sub(1);
    while at > 0 {
        let from = at.saturating_sub(CHUNK);
        let mut buf = vec![0u8; (at - from) as usize];
        f.seek(SeekFrom::Start(from))?;
        f.read_exact(&mut buf)?;
        match buf.iter().rposition(|&b| b == b'\n') {
            Some(nl) => {
                buf.drain(..=nl);
                buf.extend_from_slice(&line);
                line = buf;
                break;
            }
            None => {
                buf.extend_from_slice(&line);
                line = buf;
                at = from;
            }
        }
    }
    // `{"v":1,"seq":N,…`: the number after the first `"seq":`.
    let text = String::from_utf8_lossy(&line[..line.len().min(64)]).into_owned();
    Ok(text.split_once("\"seq\":").and_then(|(_, rest)| {
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
    }))
}

/// Event `seq` on line `n` follows event `seen`, or why not.
fn in_step(path: &Path, n: usize, seen: u64, seq: u64) -> Result<(), ResumeError> {
    let expected = seen + 1;
    if seq == expected {
        return Ok(());
    }
    let step = match seen {
        p if p > 0 && seq == p => MisStep::Repeat,
        p if seq < p => MisStep::Before(p),
        _ => MisStep::Missing { expected },
    };
    Err(ResumeError::OutOfStep {
        path: path.to_path_buf(),
        line: n,
        seq,
        step,
    })
}

/// A decoder for the log after what `cp` covers: it knows every operation
/// the checkpoint holds by its position, and the time of its last event.
fn decoder_after(cp: &Checkpoint) -> LineDecoder {
    let st = &cp.state;
    let known = st.nodes.iter().enumerate().map(|(i, n)| {
        (
            i as u32,
            crate::kernel::NodeHeader {
                op_id: n.op.op_id,
                name: n.op.reference_id.clone(),
                parent_id: n.op.metadata.spawned_from,
                depends_on: n.depends_on.clone(),
                pos: i as u32,
            },
        )
    });
    LineDecoder::knowing(known, st.run.elapsed)
}

/// The number a line written by playdeck starts with (`{"v":1,"seq":N,`),
/// read without decoding the line; `None` for any other line.
fn leading_seq(line: &[u8]) -> Option<u64> {
    let rest = line
        .strip_prefix(br#"{"v":1,"seq":"#)
        .or_else(|| line.strip_prefix(br#"{"v":2,"seq":"#))?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// [`read_log`] from event `after + 1` on: the lines before are checked
/// for their numbering (a line in playdeck's own shape by the number it
/// starts with, any other line decoded), not decoded. Also the last event
/// number seen and how many events the log holds.
pub fn read_log_after(
    path: &Path,
    after: u64,
    lines_before: LineDecoder,
) -> Result<LogRead, ResumeError> {
    let text = std::fs::read(path).map_err(|source| ResumeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    read_lines(&text, path, 0, after, lines_before)
}

/// The lines of `text`, which follow `before` events of the log (one a
/// line): checked in step and decoded from event `after + 1` on, as
/// [`read_log_after`] says. A resume that checked the first `before`
/// events by their hash reads the rest through here too.
fn read_lines(
    text: &[u8],
    path: &Path,
    before: u64,
    after: u64,
    mut lines_before: LineDecoder,
) -> Result<LogRead, ResumeError> {
    let complete = text.last() == Some(&b'\n');
    let mut out: Vec<Signal> = Vec::new();
    let mut seen = before;
    let mut count = usize::try_from(before).unwrap_or(usize::MAX);
    let mut first = None;
    let mut lines = text.split(|&b| b == b'\n').peekable();
    let mut n = count;
    while let Some(line) = lines.next() {
        n += 1;
        let last = lines.peek().is_none_or(|l| l.is_empty() && complete);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        count += 1;
        // A whole line the checkpoint covers, in its place: checked to be
        // whole JSON (damage after a good prefix is damage), not decoded
        // into a signal. The first line is decoded: it names the run.
        if !last
            && let Some(seq) = leading_seq(line)
            && seq == seen + 1
            && seq <= after
            && seq > 1
        {
            if let Err(source) = serde_json::from_slice::<serde::de::IgnoredAny>(line) {
                return Err(ResumeError::Damaged {
                    path: path.to_path_buf(),
                    line: n,
                    source,
                });
            }
            seen = seq;
            continue;
        }
        // The first line, which the checkpoint covers, is read apart: the
        // decoder goes on from the checkpoint's time, not from line 1's.
        let decoded = if after >= 1 && seen == 0 {
            LineDecoder::new().decode(line)
        } else {
            lines_before.decode(line)
        };
        let s = match decoded {
            Ok(s) => s,
            Err(_) if last && !complete => break,
            Err(source) => {
                return Err(ResumeError::Damaged {
                    path: path.to_path_buf(),
                    line: n,
                    source,
                });
            }
        };
        in_step(path, n, seen, s.seq)?;
        seen = s.seq;
        if s.seq == 1 && first.is_none() {
            first = Some(s.clone());
        }
        if s.seq > after {
            out.push(s);
        }
    }
    Ok(LogRead {
        tail: out,
        last: seen,
        count,
        first,
    })
}

/// What [`read_log_after`] read.
#[derive(Debug)]
pub struct LogRead {
    /// The signals after the point asked for.
    pub tail: Vec<Signal>,
    /// The last event number.
    pub last: u64,
    /// Events in the log.
    pub count: usize,
    /// The log's first event (`run_started`), decoded.
    pub first: Option<Signal>,
}

/// Cuts a partly written last line off the log, so appending goes on from
/// a whole line.
pub fn repair_log(path: &Path) -> Result<(), ResumeError> {
    let bytes = std::fs::read(path).map_err(|source| ResumeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.is_empty() || bytes.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let repair = |source| ResumeError::Repair {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(repair)?;
    f.set_len(keep as u64)
        .and_then(|()| f.sync_all())
        .map_err(repair)
}

/// The graph (every operation, same op ids) and the kernel's restore.
/// Why an operation a cancel skipped waits again: the run was resumed.
pub const RESUMED_CANCEL: &str = "resume";

/// A run stopped by cancel reopens what the cancel ended: operations it
/// failed as `cancelled` start a new attempt, ones it skipped wait again.
pub fn rebuild(
    cp: &Checkpoint,
    dropped_reservations: Vec<Arc<str>>,
) -> Result<(Graph, Restore), ResumeError> {
    let st = &cp.state;
    let mut b = GraphBuilder::with_capacity(st.nodes.len());
    for n in &st.nodes {
        b.add_root((*n.op).clone());
    }
    // The i-th node is the builder's i-th operation.
    for (i, n) in st.nodes.iter().enumerate() {
        for d in &n.deps {
            match st.ix(&d.from) {
                Some(from) => b.add_edge_at(from as usize, i, d.edge.clone()),
                None => b.add_edge(d.from, n.op.op_id, d.edge.clone()),
            }
        }
    }
    let graph = b.build().map_err(ResumeError::Graph)?;
    let mut restore = Restore {
        spawn_seq: st.spawn_seq,
        spawn_accepted: st.spawn_accepted,
        operator_added: st.operator_added,
        ledger: st.ledger.clone(),
        flow_context: st.context.clone(),
        round: st.run.round,
        seq: st.seq,
        elapsed: st.run.elapsed,
        resumes: st.run.resumes + 1,
        dropped_reservations,
        spent: (st.spend.usd, st.spend.tokens),
        spent_by_role: st
            .spend
            .roles
            .iter()
            .map(|(r, s)| (r.clone(), *s))
            .collect(),
        budget: st.spend.budget.clone(),
        ..Restore::default()
    };
    for n in &st.nodes {
        let cancelled =
            n.status == NodeStatus::Failed && n.category.as_deref() == Some("cancelled");
        let cancel_skipped =
            n.status == NodeStatus::Skipped && n.skip_reason == Some(SkipReason::Cancelled);
        let status = if cancelled {
            NodeStatus::Running
        } else if cancel_skipped {
            NodeStatus::Pending
        } else {
            n.status
        };
        if cancelled {
            restore.reopened.push((n.op.op_id, None));
        } else if cancel_skipped {
            restore
                .reopened
                .push((n.op.op_id, Some(Arc::from(RESUMED_CANCEL))));
        }
        // A settled emitter's sightings before it settled came from its
        // stream; those after, from its result, which resume reads again.
        // Anything that runs again will repeat all of its sightings. What
        // the stream carried is remembered, less what the result already
        // repeated (those duplicates are recorded), so the rest of the
        // result is judged as it would have been.
        let cut = match (status.is_terminal(), n.settled_seq) {
            (true, Some(s)) => s,
            _ => 0,
        };
        let mut seen: Vec<u64> = n
            .sightings
            .iter()
            .filter(|(q, _, _)| *q <= cut)
            .map(|(_, id, _)| id.0)
            .collect();
        for (_, id, _) in n.sightings.iter().filter(|(q, _, dup)| *q > cut && *dup) {
            if let Some(i) = seen.iter().position(|s| *s == id.0) {
                seen.swap_remove(i);
            }
        }
        let handled = n
            .sightings
            .iter()
            .filter(|(q, _, _)| *q > cut)
            .map(|(_, id, _)| id.0)
            .collect();
        restore.nodes.insert(
            n.op.op_id,
            RestoredNode {
                status,
                attempt: n.attempt,
                result: n.result.clone().filter(|_| status.is_terminal()),
                approved: n.decision().map(|d| d.approved),
                held: n.held,
                seen,
                handled,
                queued_at: n.queued_at,
                finished_at: n.finished_at,
                carry: carry_of(n, status),
                settled_seq: n.settled_seq,
                resolvable: status == NodeStatus::Failed
                    && n.category.as_deref() == Some(crate::kernel::retry::cause::MERGE_CONFLICT),
                land_only: false,
            },
        );
    }
    Ok((graph, restore))
}

/// The conversation a reopened operation's next attempt continues: the
/// last attempt's, when it was cut short by the stop (or had failed and
/// waited for its retry); what ended it, in words for the agent.
fn carry_of(n: &crate::projection::Node, status: NodeStatus) -> Option<(Arc<str>, Arc<str>)> {
    let last = n.attempts.last()?;
    let session = last.session.clone()?;
    let ended: Arc<str> = match status {
        NodeStatus::Running => Arc::from("the run stopped while this attempt ran, and was resumed"),
        NodeStatus::Pending if last.outcome == "failed" => Arc::from(format!(
            "{}: {}",
            last.category.as_deref().unwrap_or("failed"),
            last.error.as_deref().unwrap_or("no message")
        )),
        _ => return None,
    };
    Some((session, ended))
}

/// The failed operations of a stopped or finished run whose name or role
/// contains `filter` (any case; empty: all), by the names `--retry` takes.
pub fn failed_ops(dir: &Path, filter: &str) -> Result<Vec<String>, ResumeError> {
    let cp = read_stopped(dir, true)?;
    let f = filter.to_lowercase();
    Ok(cp
        .state
        .nodes
        .iter()
        .filter(|n| n.status == NodeStatus::Failed)
        .filter(|n| {
            f.is_empty()
                || n.op.reference_id.to_lowercase().contains(&f)
                || n.op
                    .assignee
                    .as_deref()
                    .is_some_and(|r| r.to_lowercase().contains(&f))
        })
        .map(|n| n.op.reference_id.to_string())
        .collect())
}

/// `resume --retry OP`: each named failed (or denied) operation starts a new
/// attempt, and what was skipped because of it waits again.
pub fn retry(restore: &mut Restore, cp: &Checkpoint, names: &[String]) -> Result<(), ResumeError> {
    for name in names {
        let Some(n) = cp.state.by_name(name) else {
            return Err(ResumeError::RetryUnknown {
                name: name.clone(),
                run_id: cp.state.run.run_id.clone(),
                operations: cp
                    .state
                    .nodes
                    .iter()
                    .map(|n| n.op.reference_id.to_string())
                    .collect(),
            });
        };
        if n.status != NodeStatus::Failed {
            return Err(ResumeError::RetryNotFailed {
                name: name.clone(),
                status: serde_json::to_value(n.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            });
        }
        let rn = restore
            .nodes
            .get_mut(&n.op.op_id)
            .expect("every node is restored");
        rn.status = NodeStatus::Running;
        rn.result = None;
        // The operator's retry begins a new conversation.
        rn.carry = None;
        if rn.approved == Some(false) {
            rn.approved = None;
        }
        restore.reopened.push((n.op.op_id, None));
        let because: Arc<str> = n.op.reference_id.clone();
        // Successors skipped because of it, and theirs.
        let mut stack = vec![n.op.op_id];
        while let Some(from) = stack.pop() {
            for m in cp
                .state
                .nodes
                .iter()
                .filter(|m| m.deps.iter().any(|d| d.from == from))
            {
                let r = restore
                    .nodes
                    .get_mut(&m.op.op_id)
                    .expect("every node is restored");
                if r.status == NodeStatus::Skipped {
                    r.status = NodeStatus::Pending;
                    r.result = None;
                    stack.push(m.op.op_id);
                    restore.reopened.push((m.op.op_id, Some(because.clone())));
                }
            }
        }
    }
    Ok(())
}

/// `resume --resolve OP`: each named operation failed on a merge conflict
/// that nobody was there to resolve, and the operator has resolved it by
/// hand in its kept worktree since: it starts a new attempt that only
/// lands that work (its agent is not invoked), and what was skipped
/// because of it waits again.
pub fn resolve(
    restore: &mut Restore,
    cp: &Checkpoint,
    names: &[String],
) -> Result<(), ResumeError> {
    for name in names {
        if let Some(n) = cp.state.by_name(name)
            && n.status == NodeStatus::Failed
            && n.category.as_deref() != Some(crate::kernel::retry::cause::MERGE_CONFLICT)
        {
            return Err(ResumeError::ResolveNotConflict {
                name: name.clone(),
                category: n.category.as_deref().unwrap_or("none").to_string(),
            });
        }
    }
    retry(restore, cp, names)?;
    for name in names {
        if let Some(n) = cp.state.by_name(name)
            && let Some(rn) = restore.nodes.get_mut(&n.op.op_id)
        {
            rn.land_only = true;
        }
    }
    Ok(())
}

/// The play a resume continues with when none is given: where the run's
/// play was when it started, if it is still there, else the copy in the
/// run directory.
pub fn play_path(dir: &Path) -> std::path::PathBuf {
    // Only the path is kept: the rest of a large checkpoint is read past.
    #[derive(serde::Deserialize)]
    struct PlayPath {
        play_path: Option<std::path::PathBuf>,
    }
    super::checkpoint::plain_bytes(&dir.join(super::checkpoint::CHECKPOINT_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<PlayPath>(&b).ok())
        .and_then(|p| p.play_path)
        .filter(|p| p.is_file())
        .unwrap_or_else(|| dir.join("play.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> String {
        format!(
            r#"{{"v":1,"seq":{seq},"elapsed":0.0,"type":"warning","message":"x","op_id":null}}"#
        )
    }

    /// A compact line after the checkpoint that leaves `elapsed` out has
    /// the checkpoint's time, not that of the log's first line (read to
    /// name the run).
    #[test]
    fn the_tail_goes_on_from_the_checkpoints_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let lines = [
            r#"{"v":2,"seq":1,"elapsed":0.0,"type":"warning","message":"x","op_id":null}"#,
            r#"{"v":2,"seq":2,"elapsed":5.5,"type":"warning","message":"x","op_id":null}"#,
            r#"{"v":2,"seq":3,"type":"warning","message":"x","op_id":null}"#,
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let known = LineDecoder::knowing(std::iter::empty(), 5.5);
        let read = read_log_after(&path, 2, known).unwrap();
        assert_eq!(read.tail.len(), 1);
        assert_eq!(read.tail[0].elapsed, 5.5);
    }

    /// Issue 45: the log a checkpoint covers is checked by its length and
    /// CRC-32, not decoded; a changed byte in it is refused, saying so.
    #[test]
    fn the_covered_log_is_checked_by_its_crc_not_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut lines: Vec<String> = (1..=6).map(line).collect();
        lines[1] = r#"{"v":2,"seq":2,"not":"decoded"}"#.into();
        let text = lines.join("\n") + "\n";
        std::fs::write(&path, &text).unwrap();
        let covered: usize = lines[..4].iter().map(|l| l.len() + 1).sum();
        let mut cp = Checkpoint::seed(
            &crate::kernel::GraphBuilder::new().build().unwrap(),
            &crate::kernel::RunConfig::default(),
        );
        cp.state.seq = 4;
        let mark = super::super::LogMark {
            seq: 4,
            bytes: covered as u64,
            crc32: crc32fast::hash(&text.as_bytes()[..covered]),
        };
        let cp_path = dir.path().join("checkpoint.json");
        let read = read_log_by_mark(&path, &cp, mark, &cp_path)
            .unwrap()
            .expect("the covered bytes are the checkpoint's");
        assert_eq!(read.tail.iter().map(|s| s.seq).collect::<Vec<_>>(), [5, 6]);
        assert_eq!((read.last, read.count), (6, 6));
        // A covered line changed but still a signal in its place: only the
        // CRC can tell.
        lines[1] = line(2);
        let text = lines.join("\n") + "\n";
        let covered: usize = lines[..4].iter().map(|l| l.len() + 1).sum();
        let mark = super::super::LogMark {
            seq: 4,
            bytes: covered as u64,
            crc32: crc32fast::hash(&text.as_bytes()[..covered]),
        };
        std::fs::write(
            &path,
            text.replacen(r#""message":"x""#, r#""message":"y""#, 3),
        )
        .unwrap();
        let err = read_log_by_mark(&path, &cp, mark, &cp_path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("its first {covered} bytes are not those the checkpoint was written from (their CRC-32 differs)")),
            "{err}"
        );
        // A checkpoint numbered past the bytes it was written from (its
        // seq moved on, the log as it was): refused, not resumed past a gap.
        std::fs::write(&path, &text).unwrap();
        let mut ahead = cp.clone();
        ahead.state.seq = 54;
        let err = read_log_by_mark(&path, &ahead, mark, &cp_path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("it covers the log up to event 54, but the")
                && err.contains("bytes it was written from end at event 4"),
            "{err}"
        );
        // A log shorter than what is covered is read line by line instead.
        std::fs::write(&path, &text[..covered - 10]).unwrap();
        assert!(
            read_log_by_mark(&path, &cp, mark, &cp_path)
                .unwrap()
                .is_none()
        );
    }

    /// What reading a log of `lines` (each ended by a newline) says.
    fn read(lines: &[String]) -> Result<usize, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        read_log(&path)
            .map(|v| v.len())
            .map_err(|e| e.to_string().replace(&path.display().to_string(), "LOG"))
    }

    #[test]
    fn a_log_out_of_step_is_refused_at_the_line_with_what_is_wrong() {
        assert_eq!(read(&[line(1), line(2)]), Ok(2));
        assert_eq!(
            read(&[line(1), line(1)]),
            Err("LOG:2: event 1 is a repeat of the line before; nothing was changed".into())
        );
        assert_eq!(
            read(&[line(1), line(2), line(1)]),
            Err(
                "LOG:3: event 1 comes after event 2: lines are out of order; nothing was changed"
                    .into()
            )
        );
        assert_eq!(
            read(&[line(1), line(3)]),
            Err("LOG:2: event 3 should be event 2: lines are missing or out of order; nothing was changed".into())
        );
        let damaged = read(&[line(1), "{\"v\":1,".into(), line(2)]).unwrap_err();
        assert!(
            damaged.starts_with("LOG:2:7: the event log is damaged (EOF while parsing")
                && damaged.ends_with("); nothing was changed"),
            "{damaged}"
        );
    }

    #[test]
    fn a_missing_log_is_named() {
        let err = read_log(Path::new("/nonexistent/events.jsonl")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read /nonexistent/events.jsonl: "),
            "{err}"
        );
    }

    /// Resume decodes only the tail: lines the checkpoint covers are
    /// checked by the number they start with (so even a line whose body
    /// would not decode is passed over), and their numbering still is
    /// checked, so a reordered or missing early line is refused by line.
    #[test]
    fn only_the_tail_is_decoded_and_the_numbering_is_checked_throughout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut lines: Vec<String> = (1..=6).map(line).collect();
        lines[1] = r#"{"v":1,"seq":2,"not":"decoded"}"#.into();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let LogRead {
            tail, last, count, ..
        } = read_log_after(&path, 4, LineDecoder::new()).unwrap();
        assert_eq!(tail.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!((last, count), (6, 6));
        // From the start, the odd line is decoded and refused.
        assert!(
            read_log(&path)
                .unwrap_err()
                .to_string()
                .contains("events.jsonl:2:")
        );

        lines[1] = line(2);
        lines.swap(1, 2);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let e = read_log_after(&path, 4, LineDecoder::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("events.jsonl:2: event 3 should be event 2"),
            "{e}"
        );
    }
}

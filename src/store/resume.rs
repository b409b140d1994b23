//! Taking up a stopped run: its checkpoint with the event log's later lines
//! folded over it, turned back into a graph and the kernel's restore.

use std::path::Path;
use std::sync::Arc;

use super::checkpoint::{CHECKPOINT_FILE, Checkpoint};
use crate::kernel::{
    Graph, GraphBuilder, NodeStatus, Outcome, Restore, RestoredNode, Signal, SkipReason,
};

/// Reads a stopped run's durable state. A checkpoint or log that is cut
/// short, corrupt or out of step with the other is an error naming the
/// file, never a fresh start; only the log's very last line may be cut (the
/// process died writing it), and it is left out.
pub fn read_stopped(dir: &Path, retrying: bool) -> Result<Checkpoint, String> {
    let events = dir.join("events.jsonl");
    if !events.is_file() {
        return Err(format!(
            "{} holds no run: events.jsonl is missing",
            dir.display()
        ));
    }
    let cp_path = dir.join(CHECKPOINT_FILE);
    if !cp_path.is_file() {
        return Err(format!(
            "{} has no {CHECKPOINT_FILE}: the run cannot be resumed (start it again with `playdeck run`)",
            dir.display()
        ));
    }
    let mut cp = Checkpoint::load(&cp_path).map_err(|e| e.to_string())?;
    // What the checkpoint covers is only checked, not decoded: resume
    // costs the snapshot and the log's tail, not the whole log.
    let (tail, last, lines) = read_log_after(&events, cp.state.seq)?;
    if last < cp.state.seq {
        return Err(format!(
            "{}:{}: the event log ends at event {last} but {} covers up to event {}: lines are missing from the log; nothing was changed",
            events.display(),
            lines + 1,
            cp_path.display(),
            cp.state.seq
        ));
    }
    for s in &tail {
        cp.apply(s);
    }
    match cp.state.run.finished {
        Some(Outcome::Cancelled) | None => Ok(cp),
        // It ended but died before writing its result: resuming finishes
        // the bookkeeping (nothing is left to run).
        Some(_) if !dir.join("result.json").exists() => Ok(cp),
        // A finished run is taken up again to retry what failed.
        Some(_) if retrying => Ok(cp),
        Some(done) => Err(format!(
            "run {} already finished ({}); there is nothing to resume — to run a failed operation again: playdeck resume {} --retry OP",
            cp.state.run.run_id,
            done.as_str(),
            dir.display()
        )),
    }
}

/// Every signal of a log, checked: events are numbered from 1 without a
/// gap, a repeat or a step back. Only a cut last line is tolerated.
pub fn read_log(path: &Path) -> Result<Vec<Signal>, String> {
    read_log_after(path, 0).map(|(signals, _, _)| signals)
}

/// The number a line written by playdeck starts with (`{"v":1,"seq":N,`),
/// read without decoding the line; `None` for any other line.
fn leading_seq(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(br#"{"v":1,"seq":"#)?;
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
pub fn read_log_after(path: &Path, after: u64) -> Result<(Vec<Signal>, u64, usize), String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let complete = text.last() == Some(&b'\n');
    let mut out: Vec<Signal> = Vec::new();
    let mut seen = 0u64;
    let mut count = 0usize;
    let mut lines = text.split(|&b| b == b'\n').peekable();
    let mut n = 0;
    while let Some(line) = lines.next() {
        n += 1;
        let last = lines.peek().is_none_or(|l| l.is_empty() && complete);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        count += 1;
        // A whole line the checkpoint covers, in its place: passed over.
        if !last
            && let Some(seq) = leading_seq(line)
            && seq == seen + 1
            && seq <= after
        {
            seen = seq;
            continue;
        }
        let s = match serde_json::from_slice::<Signal>(line) {
            Ok(s) => s,
            Err(_) if last && !complete => break,
            Err(e) => {
                return Err(format!(
                    "{}:{n}:{}: the event log is damaged ({e}); nothing was changed",
                    path.display(),
                    e.column()
                ));
            }
        };
        let expected = seen + 1;
        if s.seq != expected {
            let what = match seen {
                p if p > 0 && s.seq == p => "is a repeat of the line before".to_string(),
                p if s.seq < p => {
                    format!("comes after event {p}: lines are out of order")
                }
                _ => format!("should be event {expected}: lines are missing or out of order"),
            };
            return Err(format!(
                "{}:{n}: event {} {what}; nothing was changed",
                path.display(),
                s.seq
            ));
        }
        seen = s.seq;
        if s.seq > after {
            out.push(s);
        }
    }
    Ok((out, seen, count))
}

/// Cuts a partly written last line off the log, so appending goes on from
/// a whole line.
pub fn repair_log(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.is_empty() || bytes.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot repair {}: {e}", path.display()))?;
    f.set_len(keep as u64)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot repair {}: {e}", path.display()))
}

/// The graph (every operation, same op ids) and the kernel's restore.
/// Why an operation a cancel skipped waits again: the run was resumed.
pub const RESUMED_CANCEL: &str = "resume";

/// A run stopped by cancel reopens what the cancel ended: operations it
/// failed as `cancelled` start a new attempt, ones it skipped wait again.
pub fn rebuild(
    cp: &Checkpoint,
    dropped_reservations: Vec<Arc<str>>,
) -> Result<(Graph, Restore), String> {
    let st = &cp.state;
    let mut b = GraphBuilder::with_capacity(st.nodes.len());
    for n in &st.nodes {
        b.add_root((*n.op).clone());
    }
    for n in &st.nodes {
        for d in &n.deps {
            b.add_edge(d.from, n.op.op_id, d.edge.clone());
        }
    }
    let graph = b
        .build()
        .map_err(|e| format!("the checkpoint's graph does not hold together: {e}"))?;
    let mut restore = Restore {
        spawn_seq: st.spawn_seq,
        spawn_accepted: st.spawn_accepted,
        ledger: st.ledger.clone(),
        flow_context: st.context.clone(),
        round: st.run.round,
        seq: st.seq,
        elapsed: st.run.elapsed,
        resumes: st.run.resumes + 1,
        dropped_reservations,
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
            },
        );
    }
    Ok((graph, restore))
}

/// `resume --retry OP`: each named failed (or denied) operation starts a new
/// attempt, and what was skipped because of it waits again.
pub fn retry(restore: &mut Restore, cp: &Checkpoint, names: &[String]) -> Result<(), String> {
    for name in names {
        let Some(n) = cp.state.by_name(name) else {
            let ids: Vec<&str> = cp.state.nodes.iter().map(|n| &*n.op.reference_id).collect();
            return Err(format!(
                "--retry {name}: no operation {name:?} in run {}; operations: {}",
                cp.state.run.run_id,
                ids.join(", ")
            ));
        };
        if n.status != NodeStatus::Failed {
            return Err(format!(
                "--retry {name}: {name} is {}; only a failed or denied operation can be retried",
                serde_json::to_value(n.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ));
        }
        let rn = restore
            .nodes
            .get_mut(&n.op.op_id)
            .expect("every node is restored");
        rn.status = NodeStatus::Running;
        rn.result = None;
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

/// The play a resume continues with when none is given: where the run's
/// play was when it started, if it is still there, else the copy in the
/// run directory.
pub fn play_path(dir: &Path) -> std::path::PathBuf {
    std::fs::read(dir.join(super::checkpoint::CHECKPOINT_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["play_path"].as_str().map(std::path::PathBuf::from))
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
        let (tail, last, count) = read_log_after(&path, 4).unwrap();
        assert_eq!(tail.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!((last, count), (6, 6));
        // From the start, the odd line is decoded and refused.
        assert!(read_log(&path).unwrap_err().contains("events.jsonl:2:"));

        lines[1] = line(2);
        lines.swap(1, 2);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let e = read_log_after(&path, 4).unwrap_err();
        assert!(
            e.contains("events.jsonl:2: event 3 should be event 2"),
            "{e}"
        );
    }
}

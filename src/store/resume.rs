//! Taking up a stopped run: its checkpoint with the event log's later lines
//! folded over it, turned back into a graph and the kernel's restore.

use std::path::Path;
use std::sync::Arc;

use super::checkpoint::{CHECKPOINT_FILE, Checkpoint};
use crate::kernel::{
    Graph, GraphBuilder, NodeStatus, Outcome, Restore, RestoredNode, Signal, SkipReason,
};

/// Reads a stopped run's durable state. A checkpoint or log that is cut
/// short or corrupt is an error naming the file, never a fresh start; only
/// the log's very last line may be cut (the process died writing it), and
/// it is left out.
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
    let mut cp = Checkpoint::load(&cp_path)?;
    for s in read_log(&events)? {
        cp.apply(&s);
    }
    match cp.finished {
        Some(Outcome::Cancelled) | None => Ok(cp),
        // It ended but died before writing its result: resuming finishes
        // the bookkeeping (nothing is left to run).
        Some(_) if !dir.join("result.json").exists() => Ok(cp),
        // A finished run is taken up again to retry what failed.
        Some(_) if retrying => Ok(cp),
        Some(done) => Err(format!(
            "run {} already finished ({}); there is nothing to resume (`playdeck retry` starts a failed operation again in a live run)",
            cp.run_id,
            done.as_str()
        )),
    }
}

/// Every signal of a log. Only a cut last line is tolerated.
pub fn read_log(path: &Path) -> Result<Vec<Signal>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let complete = text.last() == Some(&b'\n');
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Signal>(line) {
            Ok(s) => out.push(s),
            Err(_) if i + 1 == lines.len() && !complete => break,
            Err(e) => {
                return Err(format!(
                    "{}:{}:{}: the event log is damaged ({e}); nothing was changed",
                    path.display(),
                    i + 1,
                    e.column()
                ));
            }
        }
    }
    Ok(out)
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
/// A run stopped by cancel reopens what the cancel ended: operations it
/// failed as `cancelled` start a new attempt, ones it skipped wait again.
pub fn rebuild(
    cp: &Checkpoint,
    dropped_reservations: Vec<Arc<str>>,
) -> Result<(Graph, Restore), String> {
    let mut b = GraphBuilder::with_capacity(cp.nodes.len());
    for n in &cp.nodes {
        b.add_root(n.op.clone());
    }
    for n in &cp.nodes {
        for d in &n.deps {
            b.add_edge(d.from, n.op.op_id, d.edge.clone());
        }
    }
    let graph = b
        .build()
        .map_err(|e| format!("the checkpoint's graph does not hold together: {e}"))?;
    let mut restore = Restore {
        spawn_seq: cp.spawn_seq,
        spawn_accepted: cp.spawn_accepted,
        ledger: cp.ledger.clone(),
        flow_context: cp.context.clone(),
        round: cp.round,
        seq: cp.seq,
        elapsed: cp.elapsed,
        resumes: cp.resumes + 1,
        dropped_reservations,
        ..Restore::default()
    };
    for n in &cp.nodes {
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
        // A settled emitter's sightings before it settled came from its
        // stream; those after, from its result, which resume reads again.
        // Anything that runs again will repeat all of its sightings.
        let cut = match (status.is_terminal(), n.settled_seq) {
            (true, Some(s)) => s,
            _ => 0,
        };
        let seen = n
            .sightings
            .iter()
            .filter(|(q, _)| *q <= cut)
            .map(|(_, id)| id.0)
            .collect();
        let handled = n
            .sightings
            .iter()
            .filter(|(q, _)| *q > cut)
            .map(|(_, id)| id.0)
            .collect();
        restore.nodes.insert(
            n.op.op_id,
            RestoredNode {
                status,
                attempt: n.attempt,
                result: n.result.clone().filter(|_| status.is_terminal()),
                approved: n.decision.as_ref().map(|d| d.approved),
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
        let Some(n) = cp.node_by_name(name) else {
            let ids: Vec<&str> = cp.nodes.iter().map(|n| &*n.op.reference_id).collect();
            return Err(format!(
                "--retry {name}: no operation {name:?} in run {}; operations: {}",
                cp.run_id,
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
        // Successors skipped because of it, and theirs.
        let mut stack = vec![n.op.op_id];
        while let Some(from) = stack.pop() {
            for m in cp
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

//! Large results, stored once. An operation's result over [`SPILL_BYTES`]
//! (a 50 MB answer) goes to `results/<op id>.json`, written and synced
//! before the log line that names it; the event log, the checkpoint and
//! `result.json` each carry a small reference in its place:
//!
//! ```json
//! {"$playdeck_result": "results/4f…e1.json", "bytes": 52428812}
//! ```
//!
//! Without it, such an answer was on disk three times (the log, the
//! checkpoint, `result.json`). The run in memory keeps the value itself;
//! resume reads the files back, and a missing or damaged one is an error
//! naming it.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::kernel::{Envelope, OpId, Signal, SignalKind};
use crate::projection::RunProjection;

/// Results larger than this (serialised) are stored apart.
pub const SPILL_BYTES: usize = 1 << 20;
/// The reference's key: a name no agent's answer is expected to use.
pub const KEY: &str = "$playdeck_result";
pub const DIR: &str = "results";

/// Where an operation's result is stored, relative to the run directory.
pub fn relative(op: &OpId) -> String {
    format!("{DIR}/{op}.json")
}

/// Whether `v` serialises to more than `limit` bytes; stops counting once
/// it is past it, so a small result costs a small walk.
pub fn larger_than(v: &Value, limit: usize) -> bool {
    fn walk(v: &Value, left: &mut isize) {
        if *left < 0 {
            return;
        }
        *left -= match v {
            Value::Null | Value::Bool(_) | Value::Number(_) => 8,
            // Escapes make it longer, never shorter: the length is a floor.
            Value::String(s) => s.len() as isize + 2,
            Value::Array(a) => {
                for x in a {
                    walk(x, left);
                }
                a.len() as isize + 2
            }
            Value::Object(o) => {
                for (k, x) in o {
                    *left -= k.len() as isize + 4;
                    walk(x, left);
                }
                2
            }
        };
    }
    let mut left = limit as isize;
    walk(v, &mut left);
    left < 0
}

/// The reference that stands for `op`'s result of `bytes` bytes.
pub fn reference(op: &OpId, bytes: u64) -> Value {
    let mut m = Map::new();
    m.insert(KEY.into(), Value::String(relative(op)));
    m.insert("bytes".into(), Value::from(bytes));
    Value::Object(m)
}

/// The file a reference names, if `v` is one.
pub fn referenced(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 2 && m.contains_key("bytes") => m.get(KEY)?.as_str(),
        _ => None,
    }
}

/// The operation and result of a signal that settles one with a result.
fn settled_result(s: &Signal) -> Option<(&OpId, &Arc<Value>)> {
    match &s.kind {
        SignalKind::Completed { node, result } | SignalKind::Escalated { node, result, .. } => {
            Some((&node.op_id, result))
        }
        _ => None,
    }
}

/// For the event log: when `s` carries a large result, writes it to its
/// file (synced) and returns the signal to log in its place.
pub fn spill(dir: &Path, s: &Signal) -> io::Result<Option<Signal>> {
    let Some((op, result)) = settled_result(s) else {
        return Ok(None);
    };
    if !larger_than(result, SPILL_BYTES) {
        return Ok(None);
    }
    let bytes = write(dir, op, result)?;
    let mut out = s.clone();
    let r = Arc::new(reference(op, bytes));
    match &mut out.kind {
        SignalKind::Completed { result, .. } | SignalKind::Escalated { result, .. } => *result = r,
        _ => unreachable!("settled_result matched"),
    }
    Ok(Some(out))
}

fn write(dir: &Path, op: &OpId, result: &Value) -> io::Result<u64> {
    let path = dir.join(relative(op));
    std::fs::create_dir_all(dir.join(DIR))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
    crate::files::write_atomic_with(&path, |w| {
        let mut counted = crate::files::Counted { inner: w, n: 0 };
        serde_json::to_writer(&mut counted, result).map_err(io::Error::other)?;
        counted.write_all(b"\n")?;
        Ok(counted.n)
    })
}

/// The reference for `op`'s large result `v`, if the event log stored it:
/// its size is the file's, so the value is not serialised again. A file
/// the log could not write (a full disk) left the value in the log's line,
/// and the value stays here too.
fn stored(dir: &Path, op: &OpId, v: &Value) -> Option<Value> {
    if referenced(v).is_some() || !larger_than(v, SPILL_BYTES) {
        return None;
    }
    let meta = std::fs::metadata(dir.join(relative(op))).ok()?;
    meta.is_file().then(|| reference(op, meta.len()))
}

/// For the checkpoint's own projection, after it folded `s`: the node holds
/// the reference, not the value (the event log wrote the file first).
pub fn keep_reference(state: &mut RunProjection, dir: &Path, s: &Signal) {
    let Some((op, result)) = settled_result(s) else {
        return;
    };
    if let Some(r) = stored(dir, op, result)
        && let Some(ix) = state.ix(op)
    {
        state.nodes[ix as usize].result = Some(Arc::new(r));
    }
}

/// For `result.json`: the envelope with each large result as its
/// reference, or `None` when it has none (the common case costs one look
/// at each result, no copy).
pub fn with_references(dir: &Path, env: &Envelope) -> Option<Envelope> {
    let found: Vec<(OpId, Value)> = env
        .operation_results
        .iter()
        .filter_map(|(op, v)| stored(dir, op, v).map(|r| (*op, r)))
        .collect();
    if found.is_empty() {
        return None;
    }
    let mut out = env.clone();
    for (op, r) in found {
        out.operation_results.insert(op, Arc::new(r));
    }
    Some(out)
}

#[derive(Debug, thiserror::Error)]
#[error("{}: {why} (the result of operation {op} is stored there; nothing was changed)", .path.display())]
pub struct ResultFileError {
    pub path: PathBuf,
    pub op: String,
    pub why: String,
}

/// Replaces every reference in `state` (nodes and their attempts) by the
/// value its file holds. A file that is missing, damaged or outside the run
/// directory is an error naming it.
pub fn resolve(state: &mut RunProjection, dir: &Path) -> Result<(), ResultFileError> {
    for n in &mut state.nodes {
        let name = n.name().to_string();
        let slots =
            std::iter::once(&mut n.result).chain(n.attempts.iter_mut().map(|a| &mut a.result));
        for slot in slots {
            let Some(file) = slot.as_deref().and_then(referenced) else {
                continue;
            };
            let path = dir.join(file);
            let fail = |why: String| ResultFileError {
                path: path.clone(),
                op: name.clone(),
                why,
            };
            // Only `results/<uuid>.json`: a reference cannot point elsewhere.
            let inside = Path::new(file)
                .strip_prefix(DIR)
                .is_ok_and(|rest| rest.components().count() == 1);
            if !inside {
                return Err(fail(format!(
                    "a result reference must name a file in {DIR}/"
                )));
            }
            let bytes = std::fs::read(&path).map_err(|e| fail(format!("cannot read it: {e}")))?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                fail(format!(
                    "it is damaged at line {}, column {} ({e})",
                    e.line(),
                    e.column()
                ))
            })?;
            *slot = Some(Arc::new(v));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn larger_than_counts_strings_keys_and_nesting() {
        assert!(!larger_than(&serde_json::json!({"a": "xy"}), 100));
        assert!(larger_than(&Value::String("x".repeat(101)), 100));
        let nested = serde_json::json!([["x".repeat(60)], {"k": "y".repeat(60)}]);
        assert!(larger_than(&nested, 100));
        assert!(!larger_than(&nested, 200));
    }

    #[test]
    fn a_reference_is_told_from_an_answer_that_looks_like_one() {
        let op = OpId::new_v4();
        let r = reference(&op, 10);
        assert_eq!(referenced(&r), Some(relative(&op).as_str()));
        // An answer with more keys than a reference is an answer.
        let mut m = r.as_object().unwrap().clone();
        m.insert("more".into(), Value::Null);
        assert_eq!(referenced(&Value::Object(m)), None);
    }
}

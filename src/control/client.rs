//! The control socket's client: one request, one typed answer.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde_json::Value;

use super::ErrorCode;
use super::{Failure, Reply, socket_path};
use crate::kernel::Request;

/// Sends one request to a live run's socket and returns its answer.
/// How long `ctl` waits for a live run's answer: longer than any command
/// takes (an `ensure` creating worktrees included), short of forever.
pub const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub fn send(run_dir: &Path, req: &Request) -> Result<Reply, Failure> {
    send_within(run_dir, req, ANSWER_TIMEOUT)
}

/// [`send`] for a paired device (`playdeck web`): the run records the
/// device as who asked (see [`super::via`]).
pub fn send_via(run_dir: &Path, req: &Request, via: &super::via::Via) -> Result<Reply, Failure> {
    let mut v = serde_json::to_value(req).expect("a request serialises");
    if let Value::Object(m) = &mut v {
        m.insert(
            "via".into(),
            serde_json::to_value(via).expect("a device serialises"),
        );
    }
    exchange(run_dir, req, &v.to_string(), ANSWER_TIMEOUT)
}

/// [`send`], waiting at most `timeout` for the answer.
pub fn send_within(
    run_dir: &Path,
    req: &Request,
    timeout: std::time::Duration,
) -> Result<Reply, Failure> {
    let line = serde_json::to_string(req).expect("a request serialises");
    exchange(run_dir, req, &line, timeout)
}

/// One request line out, one answer line back.
fn exchange(
    run_dir: &Path,
    req: &Request,
    line: &str,
    timeout: std::time::Duration,
) -> Result<Reply, Failure> {
    let path = socket_path(run_dir);
    let io = |e: std::io::Error| {
        let m = match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
                "no answer from {} within {}s (waiting for the answer to `{}`); the run may be stuck — `playdeck report {}` reads it without the socket",
                path.display(),
                timeout.as_secs(),
                req.name(),
                run_dir.display()
            ),
            _ => format!("{}: {e}", path.display()),
        };
        Failure::new(ErrorCode::Io, m)
    };
    let mut stream =
        std::os::unix::net::UnixStream::connect(&path).map_err(|e| connect_failure(run_dir, &e))?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    writeln!(stream, "{line}").map_err(io)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).map_err(io)?;
    decode(&answer)
}

/// Why a run's socket could not be reached, as the operator reads it.
pub(super) fn connect_failure(run_dir: &Path, e: &std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        return Failure::new(
            ErrorCode::Io,
            format!(
                "permission denied: {} belongs to another user (a run is driven only by the user who runs it)",
                socket_path(run_dir).display()
            ),
        );
    }
    // A run that has finished says how, and where to read what it did.
    if let Some(how) = finished_words(run_dir) {
        return Failure::new(ErrorCode::NotLive, how);
    }
    Failure::new(
        ErrorCode::NotLive,
        format!(
            "the run in {} is not live (no control socket: {e})",
            run_dir.display()
        ),
    )
}

/// `finished: failed — 1 failed: b; playdeck report 20261204-… says what it
/// did`, from a finished run's `result.json`.
fn finished_words(run_dir: &Path) -> Option<String> {
    let bytes = std::fs::read(run_dir.join("result.json")).ok()?;
    let env: crate::kernel::Envelope = serde_json::from_slice(&bytes).ok()?;
    let name = |ids: &[crate::kernel::OpId]| -> Vec<String> {
        ids.iter()
            .filter_map(|id| env.operation_names.get(id).map(|n| n.to_string()))
            .collect()
    };
    let failed = name(&env.failed_operations);
    let cause = match failed.as_slice() {
        [] => String::new(),
        some => format!(
            " — {} failed: {}",
            some.len(),
            some.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                + if some.len() > 3 { ", …" } else { "" }
        ),
    };
    let id = run_dir.file_name()?.to_string_lossy().into_owned();
    Some(format!(
        "finished: {}{cause}; playdeck report {id} says what it did (a finished run takes no commands)",
        env.outcome.as_str()
    ))
}

/// `{"ok":true,"reply":…,"result":…}` or `{"ok":false,"error":{…}}`.
pub(super) fn decode(answer: &str) -> Result<Reply, Failure> {
    let unreadable = |why: String| {
        Failure::new(
            ErrorCode::Io,
            format!("unreadable answer from the run: {why}"),
        )
    };
    let mut v: Value =
        serde_json::from_str(answer.trim()).map_err(|e| unreadable(e.to_string()))?;
    let ok = v.get("ok").and_then(Value::as_bool);
    let Value::Object(m) = &mut v else {
        return Err(unreadable(answer.trim().to_string()));
    };
    match ok {
        Some(true) => {
            m.remove("ok");
            serde_json::from_value(v).map_err(|e| unreadable(e.to_string()))
        }
        _ => Err(m
            .remove("error")
            .and_then(|e| serde_json::from_value(e).ok())
            .unwrap_or_else(|| unreadable(answer.trim().to_string()))),
    }
}

/// The line a server writes for an answer.
pub(super) fn encode(answer: &Result<Reply, Failure>) -> String {
    let v = match answer {
        Ok(reply) => {
            let mut v = serde_json::to_value(reply).expect("a reply serialises");
            if let Value::Object(m) = &mut v {
                m.shift_insert(0, "ok".into(), Value::Bool(true));
            }
            v
        }
        Err(f) => serde_json::json!({"ok": false, "error": f}),
    };
    format!("{v}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Answer;

    #[test]
    fn answers_round_trip() {
        for a in [
            Ok(Reply::Done(Answer::Stepped {
                op: Some("build".into()),
            })),
            Ok(Reply::Done(Answer::Done)),
            Err(Failure::new(ErrorCode::NotPaused, "the run is not paused")),
        ] {
            assert_eq!(decode(&encode(&a)), a);
        }
        let e = decode("{\"ok\":false}").unwrap_err();
        assert_eq!(e.code, ErrorCode::Io);
        assert!(decode("nope").is_err());
    }
}

//! The control socket: every live run listens on a Unix socket in its run
//! directory, so scripts drive it (`playdeck ctl`, `playdeck capacity`).
//! One JSON request per connection, one JSON answer.
//!
//! The socket lives in `<run>/ctl/`, a directory only the owner may enter,
//! and is itself mode 0600.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt};
use tokio::net::UnixListener;

use crate::capacity::{CapacityError, Lifetime, Reconciler};
use crate::kernel::{Lane, NodeStatus, RunHandle};

pub const SOCKET_DIR: &str = "ctl";
pub const SOCKET_NAME: &str = "control.sock";
/// Longest request line accepted.
const MAX_REQUEST: usize = 64 * 1024;

pub fn socket_path(run_dir: &Path) -> PathBuf {
    run_dir.join(SOCKET_DIR).join(SOCKET_NAME)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    Pause,
    Resume,
    Step,
    Cancel,
    Status,
    Approve {
        op: String,
    },
    Deny {
        op: String,
        reason: Option<String>,
    },
    Hold {
        op: String,
    },
    Unhold {
        op: String,
    },
    /// A new attempt of a failed or denied operation.
    Retry {
        op: String,
    },
    /// Release idle capacity (idle-only is the only mode).
    Release,
    CapacityEnsure {
        profiles: Vec<(String, u32)>,
        lifetime: Option<Lifetime>,
    },
    CapacityStatus,
}

/// An error answer: `code` for scripts, `message` for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ControlFailure {
    pub code: String,
    pub message: String,
}

impl ControlFailure {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ControlFailure {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<CapacityError> for ControlFailure {
    fn from(e: CapacityError) -> Self {
        ControlFailure::new(&e.code, e.message)
    }
}

/// Listens for control requests while the run lives; removes the socket
/// when dropped.
pub struct ControlServer {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ControlServer {
    pub fn start(
        run_dir: &Path,
        handle: RunHandle,
        capacity: Option<Arc<Reconciler>>,
    ) -> std::io::Result<Self> {
        let dir = run_dir.join(SOCKET_DIR);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let path = dir.join(SOCKET_NAME);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (handle, capacity) = (handle.clone(), capacity.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut line = String::new();
                    let mut reader = tokio::io::BufReader::new(read).take(MAX_REQUEST as u64);
                    if reader.read_line(&mut line).await.is_err() {
                        return;
                    }
                    let answer = match serde_json::from_str::<Request>(line.trim()) {
                        Ok(req) => serve(&handle, capacity.as_deref(), req).await,
                        Err(e) => Err(ControlFailure::new(
                            "bad_request",
                            format!("not a control request: {e}"),
                        )),
                    };
                    let body = match answer {
                        Ok(result) => json!({"ok": true, "result": result}),
                        Err(f) => json!({"ok": false, "error": f}),
                    };
                    let _ = write.write_all(format!("{body}\n").as_bytes()).await;
                });
            }
        });
        Ok(ControlServer { path, task })
    }
}

/// Answers one request.
pub async fn serve(
    h: &RunHandle,
    capacity: Option<&Reconciler>,
    req: Request,
) -> Result<Value, ControlFailure> {
    let done = |r: Result<(), crate::kernel::ControlError>| {
        r.map(|()| json!({"done": true}))
            .map_err(|e| ControlFailure::new("refused", e.to_string()))
    };
    let need_capacity =
        || capacity.ok_or_else(|| ControlFailure::new("no_capacity", "this run has no [capacity]"));
    match req {
        Request::Pause => done(h.pause().await),
        Request::Resume => done(h.resume().await),
        Request::Step => done(h.step().await),
        Request::Cancel => done(h.cancel().await),
        Request::Approve { op } => done(h.approve(&op, "ctl").await),
        Request::Deny { op, reason } => {
            let reason = reason.unwrap_or_else(|| "denied through the control socket".into());
            done(h.deny(&op, "ctl", &reason).await)
        }
        Request::Hold { op } => done(h.hold(&op).await),
        Request::Unhold { op } => done(h.unhold(&op).await),
        Request::Retry { op } => done(h.retry(&op).await),
        Request::Status => Ok(status(h, capacity).await),
        Request::Release => {
            Ok(serde_json::to_value(need_capacity()?.release_idle()).expect("serialisable"))
        }
        Request::CapacityEnsure { profiles, lifetime } => {
            let r = need_capacity()?.ensure(&profiles, lifetime)?;
            Ok(serde_json::to_value(r).expect("serialisable"))
        }
        Request::CapacityStatus => {
            Ok(serde_json::to_value(need_capacity()?.status()).expect("serialisable"))
        }
    }
}

/// The run at a glance.
pub async fn status(h: &RunHandle, capacity: Option<&Reconciler>) -> Value {
    let Some(snap) = h.snapshot().await else {
        return json!({"run_id": h.run_id, "state": "unknown"});
    };
    let mut lanes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut awaiting = Vec::new();
    for n in &snap.nodes {
        let lane = if n.status == NodeStatus::Skipped {
            "skipped"
        } else {
            n.lane.as_str()
        };
        *lanes.entry(lane).or_default() += 1;
        if n.lane == Lane::AwaitingApproval {
            awaiting.push(n.name.to_string());
        }
    }
    let state = match (&snap.run.finished, snap.run.paused) {
        (Some(o), _) => format!("finished: {}", o.as_str()),
        (None, true) if snap.run.running > 0 => "pausing".into(),
        (None, true) => "paused".into(),
        (None, false) => "running".into(),
    };
    json!({
        "run_id": snap.run.run_id,
        "play": snap.run.play,
        "state": state,
        "elapsed": snap.elapsed,
        "round": snap.run.round,
        "running": snap.run.running,
        "lanes": lanes,
        "awaiting_approval": awaiting,
        "spawns": {"accepted": snap.run.spawn_accepted, "max_spawn": snap.run.max_spawn},
        "capacity": capacity.map(|c| serde_json::to_value(c.status()).expect("serialisable")),
    })
}

/// Sends one request to a live run's socket and returns its answer.
pub fn send(run_dir: &Path, req: &Request) -> Result<Value, ControlFailure> {
    let path = socket_path(run_dir);
    let mut stream = std::os::unix::net::UnixStream::connect(&path).map_err(|e| {
        ControlFailure::new(
            "not_live",
            format!(
                "the run in {} is not live (no control socket: {e})",
                run_dir.display()
            ),
        )
    })?;
    let line = serde_json::to_string(req).expect("serialisable");
    writeln!(stream, "{line}").map_err(|e| ControlFailure::new("io", e.to_string()))?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .map_err(|e| ControlFailure::new("io", e.to_string()))?;
    let v: Value = serde_json::from_str(answer.trim())
        .map_err(|e| ControlFailure::new("io", format!("unreadable answer from the run: {e}")))?;
    if v["ok"] == true {
        Ok(v["result"].clone())
    } else {
        Err(serde_json::from_value(v["error"].clone())
            .unwrap_or_else(|_| ControlFailure::new("io", format!("unexpected answer: {v}"))))
    }
}

/// Finds a run directory: a path, a run id under `.playdeck/runs`, or
/// `latest` (the most recently started run there).
pub fn resolve_run(arg: &str) -> Result<PathBuf, ControlFailure> {
    let runs = Path::new(crate::store::RUNS_DIR);
    if arg == "latest" {
        let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(runs)
            .map_err(|e| {
                ControlFailure::new("no_run", format!("no runs in {} ({e})", runs.display()))
            })?
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let t = e
                    .path()
                    .join("play.toml")
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()?;
                Some((t, e.path()))
            })
            .collect();
        dirs.sort();
        return dirs.pop().map(|(_, p)| p).ok_or_else(|| {
            ControlFailure::new("no_run", format!("no runs in {}", runs.display()))
        });
    }
    let direct = Path::new(arg);
    if direct.join("play.toml").is_file() {
        return Ok(direct.to_path_buf());
    }
    let by_id = runs.join(arg);
    if by_id.join("play.toml").is_file() {
        return Ok(by_id);
    }
    let mut known: Vec<String> = std::fs::read_dir(runs)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    known.sort();
    let recent: Vec<&str> = known.iter().rev().take(5).map(String::as_str).collect();
    Err(ControlFailure::new(
        "no_run",
        format!(
            "no run {arg:?}: give a run directory, a run id or `latest` (recent runs: {})",
            if recent.is_empty() {
                "none".to_string()
            } else {
                recent.join(", ")
            }
        ),
    ))
}

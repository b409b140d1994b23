//! Operator commands carried out for every surface: [`apply`] takes one
//! [`Request`] (from a key, a stdin line, `playdeck ctl` or the control
//! socket) and answers with a typed [`Reply`] or a [`Failure`] with a
//! machine-readable code. Kernel commands go to the run's owner; capacity
//! and status requests are answered here.

mod client;
mod codes;
pub mod link;
pub mod listing;
mod peer;
mod runs;
mod server;
mod stream;
pub mod via;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::capacity::{
    CapacityError, EnsureResult, Outcome, Reconciler, ReleaseResult, StatusResult,
};
use crate::kernel::{
    Answer, CommandError, Lane, NodeStatus, Request, RunHandle, signal::LaneCounts,
};

pub use client::{send, send_via};
pub use codes::ErrorCode;
pub use runs::resolve_run;
pub use server::{ControlServer, MAX_REQUEST, SOCKET_DIR, SOCKET_NAME, socket_path};
pub use stream::{WelcomeParts, bridge, seq_of};

/// What a command answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", content = "result", rename_all = "snake_case")]
pub enum Reply {
    /// A kernel command was carried out.
    Done(Answer),
    /// Boxed: the run at a glance is much larger than the other answers.
    Status(Box<RunStatus>),
    Release(ReleaseResult),
    /// What a release would do (`release --dry-run`); nothing was done.
    Preview(ReleaseResult),
    Ensure(EnsureResult),
    Capacity(StatusResult),
}

impl Reply {
    /// A release that kept something it was asked to let go, or an ensure
    /// that could not create everything: the command did not fully succeed
    /// (exit 1), though it did what it could.
    pub fn partial(&self) -> bool {
        match self {
            Reply::Release(r) => r.status == Outcome::Partial,
            Reply::Ensure(e) => e.status == Outcome::Partial,
            _ => false,
        }
    }

    /// One line for the operator (the console's status line).
    pub fn one_line(&self, req: &Request) -> String {
        match self {
            Reply::Done(a) => req.done_message(a),
            Reply::Status(s) => format!("run {}: {}", s.run_id, s.state),
            // A release of named instances says what became of each name;
            // the default release, how many went and what stayed first.
            Reply::Release(r) if !r.names.is_empty() => {
                let mut parts: Vec<String> =
                    r.released.iter().map(|n| format!("released {n}")).collect();
                parts.extend(r.retained.iter().map(|k| {
                    // Kept while idle: its worktree holds work, never deleted.
                    let why = if k.runtime_state == "idle" {
                        "; nothing of it is deleted"
                    } else {
                        "; only idle instances are released"
                    };
                    format!("kept {} — {}{why}", k.name, k.words())
                }));
                if parts.is_empty() {
                    // Named, but released or failed before: nothing to do.
                    parts.push(format!(
                        "nothing released: {} holds no node (released or failed already)",
                        r.names.join(", ")
                    ));
                }
                parts.join("; ")
            }
            Reply::Release(r) => {
                let mut s = format!(
                    "released {}, retained {}",
                    r.released_count, r.retained_count
                );
                if let Some(first) = r.retained.first() {
                    s.push_str(&format!(" ({} — {})", first.name, first.words()));
                }
                s
            }
            Reply::Preview(r) => format!(
                "a release now would release {} and retain {}",
                r.released_count, r.retained_count
            ),
            Reply::Ensure(e) => {
                let mut s = format!("ensured: {} instance(s)", e.agents.len());
                for r in &e.rejected {
                    s.push_str(&format!(
                        "; {} rejected ({}): {} of {}",
                        r.profile,
                        r.reason.as_str(),
                        r.granted,
                        r.requested
                    ));
                }
                s
            }
            Reply::Capacity(c) => format!(
                "capacity: {} active of max_nodes {}",
                c.active_nodes, c.max_nodes
            ),
        }
    }
}

/// Why a command was refused: `code` for scripts, `message` for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: ErrorCode,
    pub message: String,
}

impl Failure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Mistakes in what was typed exit 2, refusals 1.
    pub fn exit_code(&self) -> i32 {
        self.code.exit_code()
    }
}

impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Self {
        Failure::new(ErrorCode::from(&e), e.to_string())
    }
}

impl From<CapacityError> for Failure {
    fn from(e: CapacityError) -> Self {
        let code = serde_json::from_value(serde_json::Value::String(e.code.clone()))
            .unwrap_or(ErrorCode::Other);
        Failure::new(code, e.message)
    }
}

/// The run at a glance (`ctl status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub run_id: String,
    pub play: String,
    /// `running`, `paused`, `pausing`, or `finished: <outcome>`.
    pub state: String,
    /// Why a finished run failed: `1 escalated: security-review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    pub elapsed: f64,
    pub round: u32,
    pub running: usize,
    /// Operations per lane; skipped ones apart from failed.
    pub lanes: LaneCounts,
    /// Operations the operator holds (counted in their lanes too).
    #[serde(default)]
    pub held: usize,
    pub awaiting_approval: Vec<String>,
    /// Each decision waiting for the operator, with what it is about and
    /// the basis to decide it on (`--on`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Waiting>,
    pub spawns: Spawns,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<StatusResult>,
    /// What the run spent, against its caps: `3.20/10.00 USD (32%) ·
    /// 12 400 tok`; a cap that holds work back is in `state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<String>,
    /// The run's spend: USD, tokens.
    #[serde(default)]
    pub spent: (f64, f64),
    /// The share of the run's caps spent (the larger of USD and tokens),
    /// and whether it passed the first warning level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_used: Option<f64>,
    #[serde(default)]
    pub spend_warned: bool,
    /// Seconds until the operations known now are done, at the pace of
    /// those done so far (none before the first is done, or once all are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_secs: Option<f64>,
    /// With nothing running: what the run waits for instead of an ETA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<String>,
    /// A `[cluster]` run's workers. `beat_age` is seconds since the last
    /// heartbeat: a silent worker's as of now, a beating one's (under
    /// 6 s) as of the last time the run heard of a change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<crate::kernel::WorkerSeen>>,
}

/// The workers of a snapshot, their silence counted to now.
fn workers_now(snap: &crate::kernel::Snapshot) -> Option<Vec<crate::kernel::WorkerSeen>> {
    let (ws, at) = snap.run.workers.as_ref()?;
    Some(
        ws.iter()
            .map(|w| {
                let mut w = w.clone();
                if w.silent() {
                    w.beat_age += (snap.elapsed - at).max(0.0);
                }
                w
            })
            .collect(),
    )
}

/// `3 · busy 5/48 · 1 silent`
pub fn workers_summary(ws: &[crate::kernel::WorkerSeen]) -> String {
    let silent = ws.iter().filter(|w| w.silent()).count();
    let mut s = crate::cluster::roster::load_words(ws);
    if silent > 0 {
        s.push_str(&format!(" · {silent} silent"));
    }
    s
}

/// A decision waiting for the operator, as `ctl status` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub op: String,
    /// `gate`, `call`, `review` or `conflict`.
    pub kind: String,
    /// What it is about, in a line: a gate's dependencies' outcomes, the
    /// call (`Bash(rm -rf build)`), what a review would land.
    pub what: String,
    /// What answering allows, whole (a call's command or content, a
    /// review's commits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The basis to decide it on: `playdeck ctl RUN approve OP --on BASIS`.
    pub on: crate::kernel::Basis,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spawns {
    pub accepted: usize,
    pub max_spawn: usize,
}

/// How long `ensure` waits for the instances it made to be ready before
/// it answers `partial` with those still starting (`ctl` waits 60 s).
const ENSURE_READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Carries out one request on a live run.
///
/// `by` names who asks (see [`crate::paths::actor`]): the run records it
/// with every command that changes something.
pub async fn apply(
    h: &RunHandle,
    capacity: Option<&Reconciler>,
    req: Request,
    by: Arc<str>,
) -> Result<Reply, Failure> {
    let need_capacity = || capacity.ok_or_else(|| Failure::from(CommandError::NoCapacity));
    let summary = req.summary();
    match req {
        Request::Status => status(h, capacity)
            .await
            .map(|s| Reply::Status(Box::new(s))),
        Request::Release(sel) if sel.dry_run => Ok(Reply::Preview(
            need_capacity()?.release_preview_of(&sel.lifetime, &sel.name),
        )),
        Request::Release(sel) => {
            let released = need_capacity()?
                .release_request(sel.lifetime, sel.name)
                .await?;
            // Every console says what went, by name: `release: released
            // keeper-1`, not a bare `release`.
            let what = if released.released.is_empty() {
                "nothing released".to_string()
            } else {
                format!("released {}", released.released.join(", "))
            };
            h.record(by, Arc::from(format!("{summary}: {what}")));
            Ok(Reply::Release(released))
        }
        Request::Ensure { profiles, lifetime } => {
            let profiles: Vec<(String, u32)> = profiles.into_iter().map(|p| (p.0, p.1)).collect();
            let ensured = need_capacity()?
                .ensure_ready(&profiles, lifetime, ENSURE_READY_WITHIN)
                .await?;
            h.record(by, Arc::from(summary));
            Ok(Reply::Ensure(ensured))
        }
        Request::Capacity => Ok(Reply::Capacity(need_capacity()?.status())),
        req => Ok(Reply::Done(h.request_by(req, by).await?)),
    }
}

/// The run at a glance, from one consistent snapshot.
pub async fn status(h: &RunHandle, capacity: Option<&Reconciler>) -> Result<RunStatus, Failure> {
    let snap = h
        .snapshot()
        .await
        .ok_or_else(|| Failure::from(CommandError::RunFinished))?;
    let mut lanes = LaneCounts::default();
    let mut awaiting = Vec::new();
    let mut decisions = Vec::new();
    let mut held = 0;
    for n in &snap.nodes {
        lanes.add(n.lane, n.status == NodeStatus::Skipped);
        held += usize::from(n.held && !n.status.is_terminal() && n.lane != Lane::Running);
        if n.lane == Lane::AwaitingApproval {
            awaiting.push(n.name.to_string());
            if let Some(d) = &n.deciding {
                decisions.push(waiting(n, d));
            }
        }
    }
    let cause = crate::projection::snapshot_cause(&snap);
    let capped = snap.run.held_by_cap > 0;
    let state = match (&snap.run.finished, snap.run.paused) {
        (Some(o), _) => format!("finished: {}", o.as_str()),
        (None, _) if capped => format!(
            "paused — a spend cap holds {} operation{}",
            snap.run.held_by_cap,
            if snap.run.held_by_cap == 1 { "" } else { "s" }
        ),
        (None, true) if snap.run.running > 0 => "pausing".into(),
        (None, true) => "paused".into(),
        (None, false) => "running".into(),
    };
    // A review or a conflict waits on the operator, not on its agent.
    let running = snap.run.running.saturating_sub(snap.run.awaiting_operator);
    let waits = waits_for(running, awaiting.len(), capped, snap.run.paused);
    let eta_secs = eta(snap.elapsed, lanes.total(), lanes.settled()).filter(|_| waits.is_none());
    Ok(RunStatus {
        run_id: snap.run.run_id.to_string(),
        play: snap.run.play.to_string(),
        state,
        cause,
        elapsed: snap.elapsed,
        round: snap.run.round,
        running,
        lanes,
        held,
        awaiting_approval: awaiting,
        decisions,
        spawns: Spawns {
            accepted: snap.run.spawn_accepted,
            max_spawn: snap.run.max_spawn,
        },
        capacity: capacity.map(|c| c.status()),
        spend: crate::kernel::spend::spend_words(snap.run.spent, snap.run.budget.as_ref()),
        spent: snap.run.spent,
        budget_used: snap
            .run
            .budget
            .as_ref()
            .and_then(|b| b.used(snap.run.spent.0, snap.run.spent.1)),
        spend_warned: snap
            .run
            .budget
            .as_ref()
            .is_some_and(|b| b.warned(snap.run.spent.0, snap.run.spent.1)),
        eta_secs,
        waits_for: waits,
        workers: workers_now(&snap),
    })
}

/// A waiting decision as `ctl status` lists it.
fn waiting(n: &crate::kernel::NodeSnapshot, d: &crate::kernel::Deciding) -> Waiting {
    let (what, detail) = match &d.question {
        Some(q) => (q.kind.say(&q.what), q.detail.as_deref().map(str::to_string)),
        None => (
            format!(
                "approval gate: {}",
                d.gate.as_deref().unwrap_or("no dependencies")
            ),
            None,
        ),
    };
    Waiting {
        op: n.name.to_string(),
        kind: d.basis.kind.as_str().to_string(),
        what,
        detail,
        on: d.basis.clone(),
    }
}

/// What a run that has nothing running waits for before anything moves
/// (an ETA would count that wait as work): `a raise of the spend cap`,
/// `resume`, `5 approvals`. None while work runs.
pub fn waits_for(running: usize, approvals: usize, capped: bool, paused: bool) -> Option<String> {
    if running > 0 {
        return None;
    }
    if capped {
        Some("a raise of the spend cap".into())
    } else if paused {
        Some("resume".into())
    } else if approvals > 0 {
        Some(format!(
            "{approvals} approval{}",
            if approvals == 1 { "" } else { "s" }
        ))
    } else {
        None
    }
}

/// At the pace of the operations done so far, how long the rest of those
/// known now will take.
pub fn eta(elapsed: f64, total: usize, done: usize) -> Option<f64> {
    (done > 0 && done < total && elapsed > 0.0)
        .then(|| elapsed / done as f64 * (total - done) as f64)
}

//! `[notify]`: when the run needs its operator — an operation starts
//! waiting for approval, one escalates, the run ends — the command runs
//! with the event as one JSON object on its stdin. Commands run beside
//! the run, never in its way: at most [`MAX_RUNNING`] at once (more are
//! dropped and counted), each ended after its timeout, and a failure is a
//! `warning` in the run, not an error of it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::kernel::{RunHandle, Signal, SignalKind, SignalSink};
use crate::play::notify_section::NotifyConfig;

/// Commands running at once; an event past them is dropped with a warning.
pub const MAX_RUNNING: usize = 4;

/// The event a signal is, if it is one the operator is told of.
pub fn event_of(s: &Signal, run_id: &str, run_dir: &str) -> Option<Value> {
    let (event, op, detail, message) = match &s.kind {
        SignalKind::AwaitingApproval { node } => (
            "approval_needed",
            Some(node.name.to_string()),
            Value::Null,
            format!("{} waits for approval in run {run_id}", node.name),
        ),
        SignalKind::Escalated { node, reason, .. } => (
            "escalated",
            Some(node.name.to_string()),
            json!(reason.to_string()),
            format!("{} escalated in run {run_id}: {reason}", node.name),
        ),
        SignalKind::SpendCapReached {
            role,
            measure,
            spent,
            cap,
        } => {
            let held = crate::kernel::spend::held_words(role.as_deref(), *measure, *spent, *cap);
            (
                "budget_paused",
                None,
                json!({"role": role, "measure": measure, "spent": spent, "cap": cap}),
                format!("run {run_id} paused — {held}"),
            )
        }
        SignalKind::SpendWarning {
            role,
            measure,
            spent,
            cap,
            level,
        } => (
            "budget_warning",
            None,
            json!({"role": role, "measure": measure, "spent": spent, "cap": cap, "level": level}),
            format!(
                "run {run_id} spent {:.0}% of its {}cap: {}",
                level * 100.0,
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                measure.show(*spent, *cap)
            ),
        ),
        SignalKind::RunFinished {
            outcome, counts, ..
        } => (
            "run_finished",
            None,
            json!({"outcome": outcome.as_str(), "counts": counts}),
            format!("run {run_id} {}", outcome.as_str()),
        ),
        _ => return None,
    };
    Some(json!({
        "event": event,
        "run_id": run_id,
        "run_dir": run_dir,
        "op": op,
        "detail": detail,
        "elapsed": s.elapsed,
        "seq": s.seq,
        "message": message,
    }))
}

/// Picks the events out of the signal stream (cheaply: the kernel waits for
/// sinks) and hands them to the notifier task.
pub struct NotifySink {
    tx: mpsc::UnboundedSender<Value>,
    run_id: String,
    run_dir: String,
}

impl SignalSink for NotifySink {
    fn write(&mut self, s: &Arc<Signal>) {
        if let Some(ev) = event_of(s, &self.run_id, &self.run_dir) {
            let _ = self.tx.send(ev);
        }
    }
}

/// The sink for a run, and the task that runs its commands (started on
/// the current runtime; it ends when the sink is dropped).
pub fn start(cfg: NotifyConfig, handle: RunHandle, run_id: &str, run_dir: &str) -> NotifySink {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    let cfg = Arc::new(cfg);
    tokio::spawn(async move {
        let mut dropped = 0usize;
        while let Some(ev) = rx.recv().await {
            let Ok(place) = places.clone().try_acquire_owned() else {
                dropped += 1;
                let message = format!(
                    "notify: {MAX_RUNNING} commands still running; {dropped} event(s) not sent ({})",
                    ev["message"].as_str().unwrap_or_default()
                );
                tracing::warn!("{message}");
                handle.warn(Arc::from(message));
                continue;
            };
            let (cfg, handle) = (cfg.clone(), handle.clone());
            tokio::spawn(async move {
                if let Err(why) = run_one(&cfg, &ev).await {
                    let message = format!("notify: `{}` {why}", cfg.command.join(" "));
                    tracing::warn!("{message}");
                    handle.warn(Arc::from(message));
                }
                drop(place);
            });
        }
    });
    NotifySink {
        tx,
        run_id: run_id.to_string(),
        run_dir: run_dir.to_string(),
    }
}

/// Runs the command once with `ev` on stdin, within its timeout.
async fn run_one(cfg: &NotifyConfig, ev: &Value) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(&cfg.command[0]);
    cmd.args(&cfg.command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("could not start: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let line = format!("{ev}\n");
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let done = async {
        // A command that does not read its stdin is fine.
        let _ = stdin.write_all(line.as_bytes()).await;
        drop(stdin);
        child.wait_with_output().await
    };
    match tokio::time::timeout(timeout, done).await {
        Err(_) => Err(format!("took longer than {timeout:?} and was ended")),
        Ok(Err(e)) => Err(format!("failed: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = crate::printable::printable(err.lines().next().unwrap_or_default());
            Err(format!("exited with {} {first}", out.status)
                .trim_end()
                .to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_slow_command_is_ended_at_its_timeout() {
        let cfg = NotifyConfig {
            command: vec!["sleep".into(), "30".into()],
            timeout_ms: 200,
        };
        let why = run_one(&cfg, &json!({})).await.unwrap_err();
        assert!(why.contains("longer than 200ms"), "{why}");
    }

    #[tokio::test]
    async fn a_failing_command_says_its_status_and_first_stderr_line() {
        let cfg = NotifyConfig {
            command: vec!["sh".into(), "-c".into(), "echo nope >&2; exit 3".into()],
            timeout_ms: 5000,
        };
        let why = run_one(&cfg, &json!({})).await.unwrap_err();
        assert!(
            why.contains("exit status: 3") && why.contains("nope"),
            "{why}"
        );
    }
}

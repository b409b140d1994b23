//! `[notify]`: when the run needs its operator — an operation starts
//! waiting for approval, one escalates, the run ends — the command runs
//! with the event as one JSON object on its stdin. Commands run beside
//! the run, never in its way: at most [`MAX_RUNNING`] at once, each ended
//! (its process group with it) after its timeout, and a failure is a
//! `warning` in the run, not an error of it. No event is dropped: what
//! comes while every place is taken waits, and waiting events of one kind
//! about operations (approvals, escalations) go out as one, naming every
//! operation in `ops`. At the run's end what is queued or running is
//! given a bounded time to be delivered ([`Delivery::finish`]).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::kernel::{RunHandle, Signal, SignalKind, SignalSink};
use crate::play::diag::FileError;
use crate::play::notify_section::NotifyConfig;

/// Commands running at once; more events wait for a place.
pub const MAX_RUNNING: usize = 4;

/// The most a run's process waits at its end for its commands.
pub const FINISH_BOUND: Duration = Duration::from_secs(5);

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

/// Events about operations that wait together go out as one.
fn mergeable(ev: &Value) -> bool {
    matches!(ev["event"].as_str(), Some("approval_needed" | "escalated"))
}

/// Adds `ev` to what waits for a place: into a waiting event of its kind
/// about operations (its operation added to `ops`), else at the back. The
/// merged event's message is written once, as it leaves ([`take`]), not at
/// every merge: a wave of two thousand gates stays linear.
fn enqueue(pending: &mut VecDeque<Value>, mut ev: Value) {
    if mergeable(&ev)
        && let Some(into) = pending.iter_mut().find(|p| p["event"] == ev["event"])
        && let Some(ops) = into["ops"].as_array_mut()
    {
        ops.push(ev["op"].take());
        into["elapsed"] = ev["elapsed"].take();
        into["seq"] = ev["seq"].take();
        return;
    }
    if mergeable(&ev) {
        ev["ops"] = json!([ev["op"].clone()]);
    }
    pending.push_back(ev);
}

/// The next event to send: one that merged several operations says them
/// all (`3 operations wait for approval in run r: a, b, c`).
fn take(pending: &mut VecDeque<Value>) -> Option<Value> {
    let mut ev = pending.pop_front()?;
    let names: Vec<&str> = ev["ops"]
        .as_array()
        .map(|ops| ops.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.len() > 1 {
        let verb = if ev["event"] == "approval_needed" {
            "wait for approval"
        } else {
            "escalated"
        };
        let message = format!(
            "{} operations {verb} in run {}: {}",
            names.len(),
            ev["run_id"].as_str().unwrap_or_default(),
            names.join(", ")
        );
        ev["message"] = json!(message);
    }
    Some(ev)
}

/// The commands a run's events started, for its end: they are given a
/// bounded time to finish, then ended with their process groups.
#[derive(Clone)]
pub struct Delivery {
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
    groups: Arc<Mutex<HashSet<i32>>>,
    bound: Duration,
}

impl Delivery {
    /// Waits until every event the run sent is delivered (the sink is
    /// dropped with the run), at most twice a command's timeout and a
    /// second (the last event may wait for a place, then run) and never
    /// more than [`FINISH_BOUND`]; what still runs then is ended, process
    /// group and all.
    pub async fn finish(&self) {
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task
            && tokio::time::timeout(self.bound, task).await.is_err()
        {
            tracing::warn!("notify: commands still running at the run's end were ended");
        }
        kill_groups(&self.groups);
    }
}

fn kill_groups(groups: &Mutex<HashSet<i32>>) {
    let Ok(mut g) = groups.lock() else { return };
    for pgid in g.drain() {
        if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// The sink for a run, and the task that runs its commands (started on
/// the current runtime; it ends once the sink is dropped and every event
/// is delivered).
pub fn start(
    cfg: NotifyConfig,
    handle: RunHandle,
    run_id: &str,
    run_dir: &str,
) -> (NotifySink, Delivery) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    let groups: Arc<Mutex<HashSet<i32>>> = Arc::default();
    let bound = (Duration::from_millis(cfg.timeout_ms.saturating_mul(2)) + Duration::from_secs(1))
        .min(FINISH_BOUND);
    let cfg = Arc::new(cfg);
    let running = groups.clone();
    let task = tokio::spawn(async move {
        let mut pending: VecDeque<Value> = VecDeque::new();
        let mut commands = tokio::task::JoinSet::new();
        loop {
            if pending.is_empty() {
                match rx.recv().await {
                    Some(ev) => enqueue(&mut pending, ev),
                    None => break,
                }
            }
            let Ok(place) = places.clone().acquire_owned().await else {
                break;
            };
            // What came while it waited joins the queue (and merges).
            while let Ok(ev) = rx.try_recv() {
                enqueue(&mut pending, ev);
            }
            let Some(ev) = take(&mut pending) else {
                continue;
            };
            let (cfg, handle, running) = (cfg.clone(), handle.clone(), running.clone());
            commands.spawn(async move {
                if let Err(why) = run_one(&cfg, &ev, &running).await {
                    let message = format!("notify: `{}` {why}", cfg.command.join(" "));
                    tracing::warn!("{message}");
                    handle.warn(Arc::from(message));
                }
                drop(place);
            });
            while commands.try_join_next().is_some() {}
        }
        while commands.join_next().await.is_some() {}
    });
    (
        NotifySink {
            tx,
            run_id: run_id.to_string(),
            run_dir: run_dir.to_string(),
        },
        Delivery {
            task: Arc::new(Mutex::new(Some(task))),
            groups,
            bound,
        },
    )
}

/// Runs the command once with `ev` on stdin, within its timeout.
/// The command runs in a process group of its own (in `groups` while it
/// runs), so what it starts ends with it.
async fn run_one(
    cfg: &NotifyConfig,
    ev: &Value,
    groups: &Mutex<HashSet<i32>>,
) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(&cfg.command[0]);
    cmd.args(&cfg.command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("could not start: {e}"))?;
    let pgid = child.id().map(|p| p as i32);
    if let (Some(p), Ok(mut g)) = (pgid, groups.lock()) {
        g.insert(p);
    }
    let (out, timed_out) = deliver(cfg, ev, &mut child).await;
    if let Some(p) = pgid {
        let mine = groups.lock().map(|mut g| g.remove(&p)).unwrap_or(false);
        // Ended at its timeout: what it started (a `sleep` under `sh`)
        // ends with it, not only the shell.
        if mine
            && timed_out
            && let Some(pid) = rustix::process::Pid::from_raw(p)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
    out
}

/// The command's answer, and whether it was ended at its timeout.
async fn deliver(
    cfg: &NotifyConfig,
    ev: &Value,
    child: &mut tokio::process::Child,
) -> (Result<(), String>, bool) {
    let mut stdin = child.stdin.take().expect("piped");
    let line = format!("{ev}\n");
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let mut stderr = child.stderr.take().expect("piped");
    let done = async {
        // A command that does not read its stdin is fine.
        let _ = stdin.write_all(line.as_bytes()).await;
        drop(stdin);
        let mut err = Vec::new();
        // Only the first line is kept; a command that floods stderr is
        // read to its end (or its timeout) without growing memory.
        let mut buf = [0u8; 4096];
        loop {
            use tokio::io::AsyncReadExt;
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) if err.len() < 4096 => err.extend_from_slice(&buf[..n]),
                Ok(_) => {}
            }
        }
        child.wait().await.map(|status| (status, err))
    };
    let Ok(answer) = tokio::time::timeout(timeout, done).await else {
        return (
            Err(format!("took longer than {timeout:?} and was ended")),
            true,
        );
    };
    let out = match answer {
        Err(e) => Err(format!("failed: {e}")),
        Ok((status, _)) if status.success() => Ok(()),
        Ok((status, stderr)) => {
            let err = String::from_utf8_lossy(&stderr);
            let first = crate::printable::printable(err.lines().next().unwrap_or_default());
            Err(format!("exited with {status} {first}")
                .trim_end()
                .to_string())
        }
    };
    (out, false)
}

/// The user's `[notify]` (in `config.toml` of the config directory), if
/// any: used by runs whose play has none. An unreadable file, a syntax
/// error or a bad `[notify]` is an error naming the file, line and column;
/// the rest of the file is the console's to judge.
pub fn user_notify() -> Result<Option<NotifyConfig>, FileError> {
    user_notify_in(crate::paths::config_dir().as_deref())
}

/// [`user_notify`] from the config directory `dir`.
fn user_notify_in(dir: Option<&std::path::Path>) -> Result<Option<NotifyConfig>, FileError> {
    use crate::play::notify_section::{UserNotifyError, from_user_config};
    let Some(path) = dir.map(|d| d.join("config.toml")) else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    let file = path.display().to_string();
    let text = FileError::read(&path)?;
    let doc =
        toml::de::DeTable::parse(&text).map_err(|e| FileError::from_toml(&file, &text, &e))?;
    let Some((_, value)) = doc.get_ref().iter().find(|(k, _)| k.get_ref() == "notify") else {
        return Ok(None);
    };
    from_user_config(value).map(Some).map_err(|e| match e {
        UserNotifyError::Empty { at } => FileError::Toml {
            file,
            at: Some(crate::play::diag::line_col(&text, at.start)),
            message: UserNotifyError::EMPTY.into(),
        },
        UserNotifyError::Toml(e) => FileError::from_toml(&file, &text, &e),
    })
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
        let why = run_one(&cfg, &json!({}), &Mutex::default())
            .await
            .unwrap_err();
        assert!(why.contains("longer than 200ms"), "{why}");
    }

    #[tokio::test]
    async fn a_failing_command_says_its_status_and_first_stderr_line() {
        let cfg = NotifyConfig {
            command: vec!["sh".into(), "-c".into(), "echo nope >&2; exit 3".into()],
            timeout_ms: 5000,
        };
        let why = run_one(&cfg, &json!({}), &Mutex::default())
            .await
            .unwrap_err();
        assert!(
            why.contains("exit status: 3") && why.contains("nope"),
            "{why}"
        );
    }

    #[test]
    fn waiting_approvals_go_out_as_one_naming_every_operation() {
        let ev = |event: &str, op: &str| json!({"event": event, "run_id": "r", "op": op, "message": "m", "seq": 1, "elapsed": 0.0});
        let mut q = VecDeque::new();
        enqueue(&mut q, ev("approval_needed", "a"));
        enqueue(&mut q, ev("budget_warning", ""));
        enqueue(&mut q, ev("approval_needed", "b"));
        enqueue(&mut q, ev("approval_needed", "c"));
        assert_eq!(q.len(), 2);
        let first = take(&mut q).unwrap();
        assert_eq!(first["ops"], json!(["a", "b", "c"]));
        assert_eq!(first["op"], "a", "the first stays where consumers read it");
        assert_eq!(
            first["message"],
            "3 operations wait for approval in run r: a, b, c"
        );
        assert_eq!(take(&mut q).unwrap()["event"], "budget_warning");
    }

    #[test]
    fn the_users_notify_is_read_and_a_bad_one_is_placed() {
        let dir = tempfile::tempdir().unwrap();
        let d = Some(dir.path());
        assert!(matches!(user_notify_in(d), Ok(None)), "no config file");
        let write = |text: &str| std::fs::write(dir.path().join("config.toml"), text).unwrap();
        write("theme = \"light\"\n");
        assert!(matches!(user_notify_in(d), Ok(None)), "no [notify]");
        write("bell = true\n[notify]\ncommand = [\"notify-send\", \"pd\"]\n");
        let n = user_notify_in(d).unwrap().unwrap();
        assert_eq!(n.command, ["notify-send", "pd"]);
        assert_eq!(
            n.timeout_ms,
            crate::play::notify_section::DEFAULT_TIMEOUT_MS
        );
        write("[notify]\ncommand = []\n");
        let e = user_notify_in(d).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "config.toml:2:11: [notify] command is empty; give the program and its arguments"
            ),
            "{e}"
        );
        write("[notify]\ncommand = [\"x\"]\nwhen = 1\n");
        let e = user_notify_in(d).unwrap_err().to_string();
        assert!(e.contains("config.toml:3:1: unknown field `when`"), "{e}");
        write("[notify\n");
        let e = user_notify_in(d).unwrap_err().to_string();
        assert!(e.contains("config.toml:1:"), "{e}");
    }
}

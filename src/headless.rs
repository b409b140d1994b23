//! Headless runs: every signal as one JSON object per line, then the result
//! envelope; control lines on stdin drive the run, so scripts and CI can do
//! everything the keyboard can.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::kernel::{
    ApprovalPolicy, DropReason, Envelope, LedgerOutcome, Outcome, Request, RunHandle, Signal,
    SignalKind,
};
use crate::play::Play;
use crate::session::{Session, SessionOptions};
use crate::store::{ChannelSink, RunDir};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// NDJSON: one signal per line, then `{"type":"result", ...}`.
    Json,
    /// A line per lifecycle event for people, then a summary.
    Human,
}

#[derive(Debug, Clone)]
pub struct HeadlessOptions {
    pub session: SessionOptions,
    /// No `--approve` was given: an operator decides approvals on stdin,
    /// and when stdin closes nobody is left to, so they are denied.
    pub asks_operator: bool,
    pub format: Format,
    /// A run host for consoles (`run --host`): nothing on stdout, stderr
    /// goes to `<run>/host.log` once the run directory is there, and
    /// approvals wait for an operator on the socket.
    pub host: bool,
}

impl Default for HeadlessOptions {
    fn default() -> Self {
        HeadlessOptions {
            session: SessionOptions::default(),
            asks_operator: true,
            format: Format::Json,
            host: false,
        }
    }
}

/// Exit codes: 0 every operation succeeded, 1 something failed, was denied,
/// escalated or the run was cancelled, 2 invalid input.
pub fn exit_code(outcome: Outcome) -> i32 {
    match outcome {
        Outcome::Succeeded => 0,
        Outcome::Failed | Outcome::Cancelled => 1,
    }
}

pub type Out = Box<dyn Write + Send>;

/// What a finished headless run leaves behind.
pub struct Finished {
    pub envelope: Envelope,
    pub run_dir: RunDir,
    pub exit_code: i32,
}

/// Runs `play` headless. `control` yields stdin lines and closes at EOF;
/// `shutdown` yields once per stop request (SIGINT, SIGTERM, SIGHUP): the
/// first cancels the run cleanly, a second one exits at once.
pub async fn run(
    mut play: Play,
    opts: &HeadlessOptions,
    mut control: mpsc::UnboundedReceiver<String>,
    mut shutdown: mpsc::UnboundedReceiver<crate::session::StopSignal>,
    out: Out,
    mut err: Out,
) -> Result<Finished, crate::session::RunError> {
    let t = std::time::Instant::now();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<Arc<Signal>>>();
    let mut session = Session::open_releasing(
        &mut play,
        &opts.session,
        vec![Box::new(ChannelSink::new(tx))],
    )
    .await
    .map_err(crate::session::RunError::Open)?;
    if opts.host {
        host_log(&session.run_dir.path)?;
    }
    if let Some(e) = &session.control_error {
        let _ = writeln!(err, "playdeck: warning: {e}");
    }
    let run = session.take_run().expect("a fresh session");
    let handle = session.handle.clone();
    let run_dir = session.run_dir.clone();

    let format = opts.format;
    let host = opts.host;
    // Writing to stdout may block on a slow reader: a thread of its own keeps
    // that away from the runtime (and, unlike spawn_blocking, does not hold
    // a paused test clock still).
    let (printer_tx, printer) = tokio::sync::oneshot::channel();
    // Told once when stdout cannot be written any more (the reader is gone:
    // `| head -1`): the run is cancelled as on the first SIGINT, ADR-0033
    // D1's "closing the consumer early cancels and awaits its driver".
    let (gone_tx, gone) = tokio::sync::oneshot::channel::<std::io::Error>();
    std::thread::spawn(move || {
        let mut human = HumanPrinter::default();
        // One write per burst of lines (stdout is line-buffered otherwise).
        let mut buf = std::io::BufWriter::with_capacity(64 * 1024, out);
        let mut gone_tx = Some(gone_tx);
        let mut failed = |e: std::io::Error| {
            if let Some(tx) = gone_tx.take() {
                let _ = tx.send(e);
            }
        };
        let mut open = !host;
        while let Some(batch) = rx.blocking_recv() {
            for sig in batch {
                // Storage trouble is said on stderr too, whatever the format.
                match &sig.kind {
                    SignalKind::StorageFailed { error } => eprintln_to(&format!(
                        "storage: {error}; nothing new starts until the event log can be written (free space and it goes on)"
                    )),
                    SignalKind::StorageRecovered => {
                        eprintln_to("storage: the event log is written again; the run goes on");
                    }
                    _ => {}
                }
                // Once stdout is gone the signals are still taken (the sink
                // must not back up), just not printed.
                if !open {
                    continue;
                }
                let written = match format {
                    // Straight into the buffer: no string per signal.
                    Format::Json => serde_json::to_writer(&mut buf, &*sig)
                        .map_err(std::io::Error::other)
                        .and_then(|()| buf.write_all(b"\n")),
                    // Agent text (stderr lines in failures, warnings, reasons)
                    // is in these lines: nothing in them may drive the terminal.
                    Format::Human => match human.line(&sig) {
                        Some(l) => writeln!(buf, "{}", crate::printable::printable(&l)),
                        None => Ok(()),
                    },
                };
                if let Err(e) = written {
                    open = false;
                    failed(e);
                }
            }
            if open
                && rx.is_empty()
                && let Err(e) = buf.flush()
            {
                open = false;
                failed(e);
            }
        }
        if open && let Err(e) = buf.flush() {
            open = false;
            failed(e);
        }
        let out = buf
            .into_inner()
            .unwrap_or_else(|e| e.into_inner().into_parts().0);
        let _ = printer_tx.send((out, open));
    });

    let h = handle.clone();
    let capacity = session.reconciler.clone();
    let asks_operator = opts.asks_operator;
    let stdin_task = tokio::spawn(async move {
        while let Some(line) = control.recv().await {
            match apply_control_line(&h, capacity.as_deref(), &line).await {
                Ok(Some(answer)) => eprintln_to(&answer),
                Ok(None) => {}
                Err(e) => eprintln_to(&e.to_string()),
            }
        }
        // No operator is left to decide: approvals must not hang the run.
        if asks_operator {
            let _ = h
                .set_approval_policy(ApprovalPolicy::DenyAll {
                    reason: Arc::from("no operator"),
                })
                .await;
        }
    });
    let h = handle.clone();
    let shutdown_task = tokio::spawn(async move {
        let stdout_gone = async move {
            match gone.await {
                Ok(e) => e,
                // The printer ended without a write error: never.
                Err(_) => std::future::pending().await,
            }
        };
        let first_request = async {
            if shutdown.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        };
        // The first stop request, or stdout gone, cancels the run cleanly.
        tokio::select! {
            () = first_request => {}
            e = stdout_gone => eprintln_to(&format!(
                "stdout cannot be written ({e}): cancelling the run; result.json is still written"
            )),
        }
        let _ = h.request(Request::Cancel).await;
        if shutdown.recv().await.is_some() {
            eprintln_to("stopped at once on a second signal");
            std::process::exit(130);
        }
    });

    tracing::debug!(ms = t.elapsed().as_millis(), "session open");
    let envelope = run.run().await;
    tracing::debug!(ms = t.elapsed().as_millis(), "run finished");
    stdin_task.abort();
    shutdown_task.abort();
    session.close().await;
    tracing::debug!(ms = t.elapsed().as_millis(), "session closed");
    let (mut out, stdout_open) = printer.await.map_err(std::io::Error::other)?;
    run_dir.write_result(&envelope)?;
    tracing::debug!(ms = t.elapsed().as_millis(), "result written");

    let mut code = exit_code(envelope.outcome);
    // The last checkpoint is what a resume starts from: a failure to write
    // it is said, not only logged.
    if let Some(why) = session.checkpoint.failure() {
        code = 1;
        let _ = writeln!(
            err,
            "playdeck: the last checkpoint was not written ({why}); the event log has the whole run, and a resume starts from the checkpoint before"
        );
    }
    // Nobody read the run to its end: not a success, whatever it did.
    if !stdout_open && !host {
        code = 1;
    }
    // A run whose log could not be written to its end is not a success,
    // whatever its operations did.
    if let Some(error) = handle.overview().await.and_then(|s| s.run.storage) {
        code = 1;
        let _ = writeln!(
            err,
            "playdeck: the event log could not be written to its end ({error}); the run directory does not hold all of this run"
        );
    }
    match opts.format {
        // A host's summary goes to its log.
        _ if host => {
            let summary = summary(&play, &run_dir, &envelope, &handle).await;
            write!(err, "{}", printable_lines(&summary))?;
        }
        Format::Json => {
            // Serialised straight to stdout, not through a JSON tree of the
            // whole envelope.
            let line = |out: &mut Out| -> std::io::Result<()> {
                let mut w = std::io::BufWriter::with_capacity(64 * 1024, out);
                serde_json::to_writer(&mut w, &ResultLine::new(&envelope))
                    .map_err(std::io::Error::other)?;
                writeln!(w)?;
                w.flush()
            };
            if stdout_open && gone_now(line(&mut out))? {
                code = 1;
            }
            let summary = summary(&play, &run_dir, &envelope, &handle).await;
            write!(err, "{}", printable_lines(&summary))?;
        }
        Format::Human => {
            let summary = summary(&play, &run_dir, &envelope, &handle).await;
            let text = printable_lines(&summary);
            if stdout_open && gone_now(write!(out, "{text}").and_then(|()| out.flush()))? {
                code = 1;
            }
        }
    }
    err.flush()?;
    // Everything is said; a host stays while its consoles are attached.
    session.linger(opts.host).await;
    Ok(Finished {
        envelope,
        run_dir,
        exit_code: code,
    })
}

/// Whether a write to stdout found the reader gone (a closed pipe); any
/// other error is one.
fn gone_now(written: std::io::Result<()>) -> std::io::Result<bool> {
    match written {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(true),
        Err(e) => Err(e),
    }
}

/// The summary quotes agents (drop details, names): each line printable.
fn printable_lines(text: &str) -> String {
    text.lines()
        .map(|l| format!("{}\n", crate::printable::printable(l)))
        .collect()
}

fn eprintln_to(msg: &str) {
    // A closed standard error loses the message, not the run.
    let _ = writeln!(std::io::stderr(), "playdeck: {msg}");
}

/// Longest control line read from stdin; longer ones are dropped whole
/// (with a message), so what a pipe sends cannot grow memory.
pub const MAX_CONTROL_LINE: usize = crate::control::MAX_REQUEST;

/// The next control line of `input`, without its newline; `None` at the
/// end. A line over [`MAX_CONTROL_LINE`] is skipped to its end and an
/// empty line given in its place.
pub fn read_control_line(input: &mut impl std::io::BufRead) -> Option<String> {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    match input
        .by_ref()
        .take(MAX_CONTROL_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
    {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if line.len() > MAX_CONTROL_LINE && line.last() != Some(&b'\n') {
        eprintln_to(&format!(
            "a control line longer than {} KiB was ignored",
            MAX_CONTROL_LINE / 1024
        ));
        // Skip the rest of it, a bounded piece at a time.
        loop {
            let buf = match input.fill_buf() {
                Ok([]) | Err(_) => return None,
                Ok(b) => b,
            };
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    input.consume(i + 1);
                    return Some(String::new());
                }
                None => {
                    let n = buf.len();
                    input.consume(n);
                }
            }
        }
    }
    Some(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// A control line that was not carried out: it did not parse, or the run
/// refused the command it named.
#[derive(Debug, thiserror::Error)]
pub enum ControlLineError {
    #[error(transparent)]
    Parse(#[from] crate::kernel::CommandError),
    #[error("{command}: {}", .failure.message)]
    Refused {
        command: &'static str,
        failure: crate::control::Failure,
    },
}

/// Applies one control line (the `playdeck ctl` grammar). Errors say what
/// was wrong and what is allowed; answers that carry information (status,
/// release) are returned as one line.
pub async fn apply_control_line(
    h: &RunHandle,
    capacity: Option<&crate::capacity::Reconciler>,
    line: &str,
) -> Result<Option<String>, ControlLineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let req: Request = line.parse()?;
    let command = req.name();
    let by = Arc::from(crate::paths::me("stdin"));
    match crate::control::apply(h, capacity, req.clone(), by).await {
        Ok(crate::control::Reply::Done(_)) => Ok(None),
        Ok(reply) => Ok(Some(reply.one_line(&req))),
        Err(failure) => Err(ControlLineError::Refused { command, failure }),
    }
}

/// Formats lifecycle signals for people.
#[derive(Default)]
pub struct HumanPrinter {
    /// The workers last printed, and which were silent or draining: a
    /// line when one joins, leaves, goes silent or drains, not each time
    /// their load moves.
    workers: Option<Vec<(Arc<str>, bool, bool)>>,
}

impl HumanPrinter {
    pub fn line(&mut self, s: &Signal) -> Option<String> {
        let t = format!("{:>7.2}s", s.elapsed);
        let node = |verb: &str, name: &str, extra: &str| format!("{t}  {verb:<18} {name}{extra}");
        Some(match &s.kind {
            SignalKind::RunStarted {
                play,
                run_id,
                operations,
                ..
            } => {
                format!("{t}  run {run_id} started: \"{play}\", {operations} operations")
            }
            SignalKind::Queued { .. } | SignalKind::Unpaused { .. } => return None,
            SignalKind::Started { node: n, role, .. } => {
                node("▶ started", &n.name, &role_suffix(role))
            }
            SignalKind::Completed { node: n, .. } => node("✓ succeeded", &n.name, ""),
            SignalKind::Failed { node: n, error, .. } => {
                node("✗ failed", &n.name, &format!(" — {error}"))
            }
            SignalKind::ProviderHeld {
                agent,
                category,
                until,
                message,
            } => format!(
                "{t}  {:<18} {agent}: {}{} — {message}",
                "‖ provider held",
                crate::kernel::retry::cause::words(category),
                match until {
                    Some(u) if **category == *crate::kernel::retry::cause::AUTH => format!(
                        " until resumed (fix it, then `resume`), at most until {}",
                        crate::kernel::retry::clock(*u)
                    ),
                    Some(u) => format!(" until {}", crate::kernel::retry::clock(*u)),
                    None => " until resumed (fix it, then `resume`)".into(),
                }
            ),
            SignalKind::ProviderReleased { agent } => {
                format!("{t}  {:<18} {agent}: work starts again", "▶ provider")
            }
            SignalKind::SpendWarning {
                role,
                measure,
                spent,
                cap,
                level,
            } => format!(
                "{t}  {:<18} {}past {:.0}% of the cap: {}",
                "! spend",
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                level * 100.0,
                measure.show(*spent, *cap)
            ),
            SignalKind::SpendCapReached {
                role,
                measure,
                spent,
                cap,
            } => format!(
                "{t}  {:<18} paused — {}; raise it: playdeck ctl <run> budget --raise {}{}=+N",
                "‖ spend cap",
                crate::kernel::spend::held_words(role.as_deref(), *measure, *spent, *cap),
                role.as_deref().map(|r| format!("{r}.")).unwrap_or_default(),
                measure.as_str()
            ),
            SignalKind::SpendCapRaised {
                role,
                measure,
                cap,
                by,
            } => format!(
                "{t}  {:<18} {}{} cap now {} — by {by}",
                "▲ spend cap",
                role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                measure.as_str(),
                match measure {
                    crate::kernel::spend::Measure::Usd => format!("{cap:.2} USD"),
                    crate::kernel::spend::Measure::Tokens => format!("{}", cap.round() as u64),
                }
            ),
            SignalKind::RetryScheduled {
                node: n,
                category,
                error,
                wait_ms,
                until,
                next,
                of,
                ..
            } => node(
                "↻ will retry",
                &n.name,
                &format!(
                    " — {} (in {}): {error}",
                    crate::kernel::retry::waiting_words(category, *until, *next, *of),
                    humantime::format_duration(std::time::Duration::from_secs(
                        wait_ms.div_ceil(1000)
                    ))
                ),
            ),
            SignalKind::Skipped {
                node: n,
                reason,
                because,
            } => node(
                "↷ skipped",
                &n.name,
                &format!(" — {}", because.as_deref().unwrap_or(reason.describe())),
            ),
            SignalKind::Paused { node: n, .. } => node("‖ paused", &n.name, ""),
            SignalKind::AwaitingApproval { node: n } => node(
                "? awaiting approval",
                &n.name,
                &format!(" — type `approve {0}` or `deny {0}`", n.name),
            ),
            SignalKind::Approved { node: n, by } => {
                node("✓ approved", &n.name, &format!(" by {by}"))
            }
            SignalKind::Denied {
                node: n,
                by,
                reason,
            } => node("✗ denied", &n.name, &format!(" by {by}: {reason}")),
            SignalKind::Escalated {
                node: n, reason, ..
            } => node("! escalated", &n.name, &format!(" — {reason}")),
            SignalKind::Retried {
                node: n,
                attempt,
                because: None,
            } => node("↻ retried", &n.name, &format!(" — attempt {attempt}")),
            SignalKind::Retried {
                node: n,
                because: Some(b),
                ..
            } if &**b == crate::store::resume::RESUMED_CANCEL => {
                node("↻ reopened", &n.name, " — the cancelled run is resumed")
            }
            SignalKind::Retried {
                node: n,
                because: Some(b),
                ..
            } => node("↻ reopened", &n.name, &format!(" — {b} is retried")),
            SignalKind::Held { node: n } => node("‖ held", &n.name, ""),
            SignalKind::OperatorAction { by, action, .. } => {
                format!("{t}  {:<18} {action} — by {by}", "· operator")
            }
            SignalKind::DependenciesAdded { node: n, edges, .. } => node(
                "+ waits also for",
                &n.name,
                &format!(" {} more", edges.len()),
            ),
            SignalKind::Unheld { node: n } => node("▷ unheld", &n.name, ""),
            SignalKind::Spawned { name, assignee, .. } => {
                node("+ spawned", name, &role_suffix(assignee))
            }
            SignalKind::SpawnDropped {
                reason, assignee, ..
            } => node(
                "- spawn dropped",
                reason.as_str(),
                &assignee
                    .as_ref()
                    .map(|a| format!(" (assignee {a})"))
                    .unwrap_or_default(),
            ),
            SignalKind::RoleProvisioned {
                role, origin, by, ..
            } => match origin {
                crate::kernel::RoleOrigin::Initial => return None,
                crate::kernel::RoleOrigin::Expanded => node(
                    "+ role expanded",
                    role,
                    &by.as_ref()
                        .map(|b| format!(" (recruited by {b})"))
                        .unwrap_or_default(),
                ),
            },
            SignalKind::RoleReserved { role, .. } => node("… role reserved", role, ""),
            SignalKind::ExpansionRejected { role, reason, .. } => {
                node("- role refused", role, &format!(" ({})", reason.as_str()))
            }
            SignalKind::Budget { .. } => return None,
            SignalKind::CapacityWait { node: n, reason } => {
                node("… waits", &n.name, &format!(" — {reason}"))
            }
            SignalKind::Instance {
                name, state, op, ..
            } => node(
                "◆ instance",
                name,
                &format!(
                    " {}{}",
                    state.as_str(),
                    op.as_ref().map(|o| format!(" ({o})")).unwrap_or_default()
                ),
            ),
            SignalKind::CapacityReleased {
                trigger,
                released,
                retained,
            } => format!(
                "{t}  capacity released ({trigger}): {} released, {} retained",
                released.len(),
                retained.len()
            ),
            // Tool use is what a reader follows; the rest is in the log.
            SignalKind::AgentActivity {
                name,
                state: crate::kernel::ActivityState::Tool,
                tool,
                ..
            } => node(
                "· tool",
                name,
                &format!(" {}", tool.as_deref().unwrap_or("?")),
            ),
            SignalKind::AgentActivity { .. }
            | SignalKind::AgentUsage { .. }
            | SignalKind::AgentProcess { .. } => return None,
            SignalKind::Workers { workers } => {
                let now: Vec<(Arc<str>, bool, bool)> = workers
                    .iter()
                    .map(|w| (w.id.clone(), w.silent(), w.draining))
                    .collect();
                if self.workers.as_ref() == Some(&now) {
                    return None;
                }
                self.workers = Some(now);
                let each: Vec<String> = workers
                    .iter()
                    .map(|w| {
                        let mut x = format!("{} {}/{}", w.id, w.busy, w.slots);
                        if w.silent() || w.draining {
                            x.push_str(&format!(
                                " ({})",
                                crate::cluster::roster::beat_words(w, 0.0)
                            ));
                        }
                        x
                    })
                    .collect();
                format!(
                    "{t}  {:<18} {}{}{}",
                    "workers",
                    crate::cluster::roster::load_words(workers),
                    if each.is_empty() { "" } else { ": " },
                    each.join(", ")
                )
            }
            SignalKind::Resumed {
                from_seq,
                reattempted,
                ..
            } => {
                let again = if reattempted.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = reattempted.iter().map(|s| &**s).collect();
                    format!("; new attempt of {}", names.join(", "))
                };
                format!("{t}  run resumed after event {from_seq}{again}")
            }
            SignalKind::StorageFailed { error } => format!(
                "{t}  storage: {error} — nothing new starts until the event log can be written"
            ),
            SignalKind::StorageRecovered => {
                format!("{t}  storage: the event log is written again; the run goes on")
            }
            SignalKind::RunPaused => format!("{t}  run paused"),
            SignalKind::RunResumed => format!("{t}  run resumed"),
            SignalKind::Stepped { .. } => format!("{t}  step"),
            SignalKind::RoundEnded { round } => format!("{t}  round {round} drained"),
            SignalKind::Warning { message, .. } => format!("{t}  warning: {message}"),
            SignalKind::RunFinished { outcome, .. } => {
                format!("{t}  run finished: {}", outcome.as_str())
            }
        })
    }
}

fn role_suffix(role: &Option<Arc<str>>) -> String {
    role.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
}

/// The readable end-of-run summary: lanes, spawns and where the files are.
pub async fn summary(play: &Play, dir: &RunDir, env: &Envelope, h: &RunHandle) -> String {
    let mut s = String::new();
    let snap = h.overview().await;
    let _ = writeln!(s, "\nplaydeck · \"{}\" · run {}", play.name, dir.run_id);
    let elapsed = snap.as_ref().map_or(0.0, |s| s.elapsed);
    let cause = snap
        .as_ref()
        .and_then(crate::projection::snapshot_cause)
        .map(|c| format!(" — {c}"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "outcome: {}{cause} after {elapsed:.1}s",
        env.outcome.as_str()
    );
    if let Some(snap) = &snap {
        let _ = writeln!(s, "lanes: {}", snap.counts.describe());
        let accepted = snap.run.spawn_accepted;
        let dropped: Vec<_> = snap
            .ledger
            .iter()
            .filter_map(|e| match &e.outcome {
                LedgerOutcome::Dropped { reason, detail, .. } => Some((e, *reason, detail)),
                _ => None,
            })
            .collect();
        // A row stands for itself and the identical drops folded into it.
        let total: usize = dropped.iter().map(|(e, ..)| 1 + e.repeats as usize).sum();
        let _ = writeln!(s, "spawns: {accepted} accepted, {total} dropped");
        let mut by_reason: BTreeMap<DropReason, usize> = BTreeMap::new();
        for (e, r, _) in &dropped {
            *by_reason.entry(*r).or_default() += 1 + e.repeats as usize;
        }
        if !by_reason.is_empty() {
            let parts: Vec<String> = by_reason
                .iter()
                .map(|(r, n)| format!("{} {n}", r.as_str()))
                .collect();
            let _ = writeln!(s, "  by reason: {}", parts.join(", "));
        }
        for (e, reason, detail) in &dropped {
            let _ = writeln!(
                s,
                "  dropped  {:<24} {} → {}: {}{}",
                reason.as_str(),
                e.emitter_name.as_deref().unwrap_or("-"),
                e.assignee.as_deref().unwrap_or("(emitter's role)"),
                detail,
                if e.repeats > 0 {
                    format!(" (×{})", e.repeats + 1)
                } else {
                    String::new()
                }
            );
        }
    }
    if let Some(esc) = &env.escalated_operations {
        for id in esc {
            let _ = writeln!(s, "  escalated {}", env.name_of(id).unwrap_or("?"));
        }
    }
    let _ = writeln!(s, "run directory: {}", dir.path.display());
    s
}

/// The last line of the JSON output: the envelope with `"type": "result"`
/// first.
#[derive(serde::Serialize)]
struct ResultLine<'a> {
    r#type: &'static str,
    #[serde(flatten)]
    envelope: &'a Envelope,
}

impl<'a> ResultLine<'a> {
    fn new(envelope: &'a Envelope) -> Self {
        ResultLine {
            r#type: "result",
            envelope,
        }
    }
}

/// A run host's stderr from here on: `<run>/host.log` (0600, appended), so
/// what it says after its console has gone is kept. Errors before this
/// point (a play or directory refused) reach the console that started it.
fn host_log(dir: &std::path::Path) -> Result<(), crate::session::RunError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join("host.log");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| {
            crate::session::RunError::Open(std::io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            ))
        })?;
    rustix::stdio::dup2_stderr(&f).map_err(|e| crate::session::RunError::Open(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::WorkerSeen;

    fn workers(list: &[(&str, usize, f64, bool)]) -> Signal {
        Signal {
            v: 1,
            seq: 1,
            elapsed: 2.0,
            kind: SignalKind::Workers {
                workers: list
                    .iter()
                    .map(|&(id, busy, beat_age, draining)| WorkerSeen {
                        id: id.into(),
                        host: "h".into(),
                        slots: 2,
                        busy,
                        tags: Vec::new(),
                        beat_age,
                        draining,
                    })
                    .collect(),
            },
        }
    }

    #[test]
    fn a_workers_line_when_one_joins_leaves_goes_silent_or_drains_only() {
        let mut p = HumanPrinter::default();
        let line = p.line(&workers(&[("a-1", 1, 0.1, false)])).unwrap();
        assert!(
            line.ends_with("workers            1 · busy 1/2: a-1 1/2"),
            "{line:?}"
        );
        // Its load moved: nothing to say.
        assert_eq!(p.line(&workers(&[("a-1", 2, 0.1, false)])), None);
        let line = p.line(&workers(&[("a-1", 2, 0.1, true)])).unwrap();
        assert!(line.ends_with("a-1 2/2 (draining)"), "{line:?}");
        let line = p.line(&workers(&[("a-1", 2, 7.0, true)])).unwrap();
        assert!(line.ends_with("a-1 2/2 (silent 7s)"), "{line:?}");
        let line = p.line(&workers(&[])).unwrap();
        assert!(
            line.ends_with("workers            0 · busy 0/0"),
            "{line:?}"
        );
    }
}

//! Headless runs: every signal as one JSON object per line, then the result
//! envelope; control lines on stdin drive the run, so scripts and CI can do
//! everything the keyboard can.

mod control_lines;
mod printer;
pub use control_lines::*;
pub use printer::*;

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
    let path = dir.join("host.log");
    let f = crate::files::append_private(&path).map_err(|e| {
        crate::session::RunError::Open(std::io::Error::new(
            e.kind(),
            format!("cannot write {}: {e}", path.display()),
        ))
    })?;
    rustix::stdio::dup2_stderr(&f).map_err(|e| crate::session::RunError::Open(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests;

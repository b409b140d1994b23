//! Supervising a started agent: reading its pipes, stall and runtime
//! limits, killing its group, and what its end means (the outcome and
//! the failure's cause).

use super::*;

/// Why the runner killed the group.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Killed {
    Stall,
    Runtime,
    /// A stdout line grew past `LINE_LIMIT`.
    OutputTooLarge,
    /// Its stream would add too much to the run's record (see `outflow`).
    OutputFlood(crate::agents::outflow::Flood),
}

/// What the supervisor shares with the attempt's other tasks: the live
/// input's turns, and the event count its questions add to.
pub(super) struct Side {
    pub(super) turns: Option<tokio::sync::mpsc::UnboundedSender<super::live::Turn>>,
    pub(super) rows: crate::agents::outflow::Rows,
}

/// How a supervised process ended.
pub(super) struct Ended {
    pub(super) status: std::io::Result<std::process::ExitStatus>,
    pub(super) killed: Option<Killed>,
    pub(super) parsed: Parsed,
    pub(super) last_stderr: Option<String>,
}

/// After the child exits, how long output may still drain: a process that
/// left the group (setsid, a daemon) may hold the pipes open forever.
pub(super) const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Streams the child's output through the logs, the tail and the parser
/// until it exits (killing it on a stall or at `max_runtime`).
/// Tells a live input what its CLI took and when a turn ended (it closes
/// at the end of a turn once every message was taken); these updates are
/// the runner's, not the kernel's.
fn turn_ends(
    updates: &mut Vec<crate::agents::stream::Update>,
    turns: Option<&tokio::sync::mpsc::UnboundedSender<super::live::Turn>>,
) {
    use crate::agents::stream::Update;
    updates.retain(|u| {
        let turn = match u {
            Update::TurnEnd => super::live::Turn::Ended,
            Update::Took => super::live::Turn::Took,
            _ => return true,
        };
        if let Some(t) = turns {
            let _ = t.send(turn);
        }
        false
    });
}

pub(super) async fn supervise(
    def: &AgentDef,
    ctx: &RunContext,
    inv: &Invocation,
    model: Option<&str>,
    group: &mut Group,
    mut logs: Logs,
    side: Side,
) -> Ended {
    let Side { turns, rows } = side;
    let mut stdout = Chunks::new(
        group.child.stdout.take().expect("stdout is piped"),
        Overflow::Fail,
    );
    let mut stderr = Chunks::new(
        group.child.stderr.take().expect("stderr is piped"),
        Overflow::Cut,
    );
    let mut parser = StreamParser::new(def.stream_format);
    let mut updates = Vec::new();
    let mut outflow = crate::agents::outflow::Outflow::counting(rows.clone());
    let sink = crate::agents::outflow::Sink {
        events: &inv.events,
        name: &inv.name,
        price: model.and_then(|m| ctx.prices.get(m)),
    };
    let mut last_stderr: Option<String> = None;
    let started = Instant::now();
    let deadline = def.max_runtime.map(|d| started + d);
    let mut last_output = started;
    let mut stall_warned = false;
    let mut killed: Option<Killed> = None;
    let mut status = None;
    let mut drain_until: Option<Instant> = None;

    while status.is_none() || !stdout.done || !stderr.done {
        // Back-pressure: while the kernel has not taken what was sent, the
        // agent's output waits in its pipe, not in memory. The wait is not
        // the agent's silence.
        if inv.events.backed_up() {
            inv.events.ready().await;
            last_output = Instant::now();
        }
        let stall_at = last_output + def.stall_timeout;
        let live = status.is_none() && killed.is_none();
        tokio::select! {
            chunk = stdout.next(), if !stdout.done => {
                last_output = Instant::now();
                stall_warned = false;
                if let Some(Chunk::Line(line)) = chunk {
                    logs.stdout(&line);
                    ctx.tails.push(inv.op_id, false, &line);
                    parser.feed(&line, &mut updates);
                    turn_ends(&mut updates, turns.as_ref());
                    outflow.take(&sink, &mut updates, Instant::now());
                }
                if stdout.overflowed && killed.is_none() {
                    // Cutting the line would rewrite the answer; reading
                    // on would hold it all in memory.
                    killed = Some(Killed::OutputTooLarge);
                    group.kill();
                }
                if let Some(flood) = outflow.flood()
                    && killed.is_none()
                {
                    killed = Some(Killed::OutputFlood(flood.clone()));
                    group.kill();
                }
            }
            chunk = stderr.next(), if !stderr.done => {
                last_output = Instant::now();
                stall_warned = false;
                if let Some(Chunk::Line(line)) = chunk {
                    logs.stderr(&line);
                    ctx.tails.push(inv.op_id, true, &line);
                    if !line.trim().is_empty() {
                        last_stderr = Some(line);
                    }
                }
            }
            st = group.child.wait(), if status.is_none() => {
                status = Some(st);
                // Whatever it left running in its group dies with it; that
                // also closes the pipes those processes held.
                group.kill_after_exit();
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            _ = tokio::time::sleep_until(stall_at), if live && !stall_warned => {
                if def.kill_on_stall {
                    killed = Some(Killed::Stall);
                    group.kill();
                } else {
                    stall_warned = true;
                    let w = format!(
                        "{}: no output for {}; still waiting (kill_on_stall = false)",
                        inv.name,
                        secs(def.stall_timeout)
                    );
                    inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
                }
            }
            _ = sleep_until_opt(outflow.next_due()) => {
                outflow.send_due(&sink, Instant::now());
            }
            // Its permission questions went past the attempt's bound.
            _ = rows.over(), if live => {
                killed = Some(Killed::OutputFlood(crate::agents::outflow::Rows::flood()));
                group.kill();
            }
            _ = sleep_until_opt(deadline), if live => {
                killed = Some(Killed::Runtime);
                group.kill();
            }
            _ = sleep_until_opt(drain_until) => {
                let w = format!(
                    "{}: a process outside its group still holds its output; stopped reading after {}",
                    inv.name,
                    secs(DRAIN_GRACE)
                );
                inv.events.emit(AgentEvent::Warning(Arc::from(w.as_str())));
                stdout.done = true;
                stderr.done = true;
            }
        }
    }
    // A last line without a newline still counts.
    for line in stderr.rest() {
        logs.stderr(&line);
        last_stderr = Some(line);
    }
    // A last line without a newline is a line like any other.
    for line in stdout.rest() {
        logs.stdout(&line);
        ctx.tails.push(inv.op_id, false, &line);
        parser.feed(&line, &mut updates);
        turn_ends(&mut updates, turns.as_ref());
        outflow.take(&sink, &mut updates, Instant::now());
    }
    // What was held back goes out before the attempt's result.
    outflow.finish(&sink);
    if let Some(flood) = outflow.flood()
        && killed.is_none()
    {
        killed = Some(Killed::OutputFlood(flood.clone()));
    }
    logs.flush();
    Ended {
        status: status.expect("the loop ends after the child exits"),
        killed,
        parsed: parser.finish(),
        last_stderr,
    }
}

/// The operation's outcome from how its process ended.
pub(super) fn outcome(def: &AgentDef, ended: Ended) -> AgentOutcome {
    use std::os::unix::process::ExitStatusExt;
    match ended.killed {
        Some(Killed::Stall) => {
            return Err(AgentFailure::new(
                "stall_timeout",
                format!(
                    "no output for {}; killed its process group",
                    secs(def.stall_timeout)
                ),
            ));
        }
        Some(Killed::Runtime) => {
            return Err(AgentFailure::new(
                "timeout",
                format!(
                    "ran longer than max_runtime {}; killed its process group",
                    secs(def.max_runtime.unwrap_or_default())
                ),
            ));
        }
        Some(Killed::OutputFlood(crate::agents::outflow::Flood(why))) => {
            return Err(AgentFailure::new(
                "output_flood",
                format!(
                    "{why}; killed its process group (its log has what it printed, up to its limit)"
                ),
            ));
        }
        Some(Killed::OutputTooLarge) => {
            return Err(AgentFailure::new(
                "output_too_large",
                format!(
                    "a line of its output is longer than the {} MiB limit; killed its process group (the log has what was read)",
                    LINE_LIMIT >> 20
                ),
            ));
        }
        None => {}
    }
    let status = ended
        .status
        .map_err(|e| AgentFailure::new("os_error", format!("waiting for the agent: {e}")))?;
    let parsed = ended.parsed;
    if !status.success() {
        // What the stream said fails first: it names the cause; the last
        // stderr line is what a CLI without a JSON error prints.
        let said = parsed.error.clone().or(ended.last_stderr.clone());
        let why = said
            .as_deref()
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default();
        use rustix::process::Signal;
        let stopped = [Signal::TERM, Signal::INT, Signal::HUP].map(Signal::as_raw);
        return Err(match (status.code(), status.signal()) {
            (Some(code), _) => {
                let message = format!("exited with code {code}{why}");
                let stderr = ended.last_stderr.as_deref().and_then(cause::classify);
                caused(&parsed, &message, stderr, cause::AGENT_CRASH)
            }
            // An operator or a supervisor stopped it.
            (None, Some(sig)) if stopped.contains(&sig) => AgentFailure::new(
                "cancelled",
                format!("stopped by signal {sig} from outside playdeck"),
            ),
            (None, Some(sig)) if sig == Signal::KILL.as_raw() => AgentFailure::new(
                cause::AGENT_CRASH,
                format!("killed by signal 9 from outside playdeck (out of memory?){why}"),
            ),
            (_, sig) => AgentFailure::new(
                cause::AGENT_CRASH,
                format!("killed by signal {}{why}", sig.unwrap_or(0)),
            ),
        });
    }
    if let Some(e) = parsed.error.clone() {
        return Err(caused(&parsed, &e, None, "stream_error"));
    }
    if let Some(r) = parsed.result {
        return Ok(r);
    }
    if let Some(t) = parsed.text {
        return Ok(result_from_text(&t));
    }
    if parsed.any_output {
        // Events, but no answer: not a result to pass on as one.
        return Err(AgentFailure::new(
            "stream_error",
            format!(
                "the {} stream ended without a result or a message",
                def.stream_format.as_str()
            ),
        ));
    }
    Err(AgentFailure::new(
        "empty_output",
        "exited 0 without printing anything",
    ))
}

/// The failure an error the agent reported makes: its cause as the CLI
/// stated it (a field), else as its text tells, else as stderr tells, else
/// `otherwise`.
pub(super) fn caused(
    parsed: &Parsed,
    message: &str,
    stderr: Option<cause::Cause>,
    otherwise: &'static str,
) -> AgentFailure {
    let read = parsed.error.as_deref().and_then(cause::classify);
    let stated = parsed
        .cause
        .or_else(|| parsed.status.and_then(cause::from_status));
    let category = stated
        .or(read.map(|c| c.category))
        .or(stderr.map(|c| c.category))
        .unwrap_or(otherwise);
    // A reset time is taken from whichever said it.
    let wait = read.and_then(|c| c.wait).or(stderr.and_then(|c| c.wait));
    let mut f = AgentFailure::new(category, message);
    if category == cause::RATE_LIMIT {
        f.wait = wait;
    }
    f
}

pub(super) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

pub(super) fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

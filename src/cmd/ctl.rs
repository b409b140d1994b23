//! `playdeck ctl` and `playdeck capacity`: requests to a live run's control
//! socket, or (capacity status and release) updates of a finished run's
//! `capacity.json`; answers as text or, with `--json`, as JSON (errors too,
//! on stdout, with their code).

use std::fmt::Write as _;

use serde::Serialize;

use super::{CmdError, Outcome};
use crate::cli::CapacityAction;
use playdeck::capacity::{self, EnsureResult, ReleaseResult, StatusResult};
use playdeck::control::ErrorCode;
use playdeck::control::{self, Failure, Reply, RunStatus};
use playdeck::kernel::Request;

/// `playdeck ctl RUN <request>`.
pub fn ctl(run: &str, req: Request, json: bool) -> Outcome {
    let dir = control::resolve_run(run);
    answer(dir.and_then(|d| control::send(&d, &req)), &req, json)
}

/// `playdeck capacity ensure|status|release --run RUN`: the same requests;
/// on a finished run, status and release work on its file.
pub fn capacity(action: CapacityAction) -> Outcome {
    let (run, req, json) = match action {
        CapacityAction::Ensure {
            run,
            profiles,
            lifetime,
            json,
        } => (run, Request::Ensure { profiles, lifetime }, json),
        CapacityAction::Status { run, json } => (run, Request::Capacity, json),
        CapacityAction::Release { run, select, json } => (run, Request::Release(select), json),
    };
    let result = control::resolve_run(&run).and_then(|dir| match control::send(&dir, &req) {
        Err(f) if f.code == ErrorCode::NotLive => match &req {
            Request::Capacity => Ok(Reply::Capacity(capacity::offline::status(&dir)?)),
            Request::Release(sel) => {
                let r = capacity::offline::release(&dir, &sel.lifetime, &sel.name, sel.dry_run)?;
                Ok(if sel.dry_run {
                    Reply::Preview(r)
                } else {
                    Reply::Release(r)
                })
            }
            // Instances of a finished run have no process to run on: a
            // clear refusal, as JSON with --json.
            _ => Err(Failure::new(
                f.code,
                format!(
                    "{}; ensure needs a live run (a finished run's capacity can be inspected and released, not ensured)",
                    f.message
                ),
            )),
        },
        other => other,
    });
    answer(result, &req, json)
}

/// Prints an answer; refusals print their message (or JSON error) and exit
/// by their code. A `partial` release or ensure prints its answer and
/// exits 1.
fn answer(result: Result<Reply, Failure>, req: &Request, json: bool) -> Outcome {
    let code = |reply: &Reply| i32::from(reply.partial());
    match (result, json) {
        (Ok(reply), true) => {
            sayln!("{}", to_json(&reply));
            Ok(code(&reply))
        }
        (Ok(reply), false) => {
            say!("{}", text(&reply, req));
            Ok(code(&reply))
        }
        (Err(f), true) => {
            sayln!("{}", serde_json::json!({"status": "error", "error": f}));
            Ok(f.exit_code())
        }
        (Err(f), false) => Err(CmdError::Refused(f)),
    }
}

/// The answer's result as JSON, for scripts.
fn to_json(reply: &Reply) -> String {
    fn pretty<T: Serialize>(v: &T) -> String {
        serde_json::to_string_pretty(v).expect("an answer serialises")
    }
    match reply {
        Reply::Done(a) => pretty(a),
        Reply::Status(s) => pretty(s),
        Reply::Release(r) | Reply::Preview(r) => pretty(r),
        Reply::Ensure(e) => pretty(e),
        Reply::Capacity(c) => pretty(c),
    }
}

fn text(reply: &Reply, req: &Request) -> String {
    match reply {
        Reply::Done(a) => format!("ok: {}\n", req.done_message(a)),
        Reply::Status(s) => status_text(s),
        Reply::Release(r) => release_text(r),
        Reply::Preview(r) => format!("dry run (nothing released):\n{}", release_text(r)),
        Reply::Ensure(e) => ensure_text(e),
        Reply::Capacity(c) => capacity_text(c),
    }
}

fn instances_text(s: &mut String, agents: &[capacity::InstanceRecord]) {
    for a in agents {
        let _ = writeln!(
            s,
            "  {:<44} {:<9} {:<14} {:<8}{}{}",
            a.name,
            a.state.as_str(),
            a.lifetime.as_str(),
            match a.source {
                capacity::state::Source::Created => "created",
                capacity::state::Source::Reused => "reused",
            },
            a.op.as_ref()
                .map(|o| format!(" running {o}"))
                .unwrap_or_default(),
            a.retained
                .as_ref()
                .map(|r| format!(" (kept: {})", capacity::reason_words(&r.reason)))
                .unwrap_or_default(),
        );
    }
}

fn ensure_text(e: &EnsureResult) -> String {
    let mut s = format!("capacity of {}: {}\n", e.loop_id, e.status.as_str());
    instances_text(&mut s, &e.agents);
    for r in &e.rejected {
        let _ = writeln!(
            s,
            "rejected: {} ({}): {} of {} — {}",
            r.profile,
            r.reason.as_str(),
            r.granted,
            r.requested,
            r.detail
        );
    }
    s
}

fn capacity_text(c: &StatusResult) -> String {
    let mut s = format!(
        "capacity of {} ({}{}), max_nodes {}, {} active\n",
        c.loop_id,
        serde_json::to_value(c.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        if c.live { "" } else { ", run finished" },
        c.max_nodes,
        c.active_nodes
    );
    instances_text(&mut s, &c.agents);
    if !c.waiting.is_empty() {
        let parts: Vec<String> = c.waiting.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(s, "waiting: {}", parts.join(", "));
    }
    // The reconciler's `blocked` lines are kept for --json; a retained
    // instance's line carries the machine reason, so it is worded here.
    for b in &c.blocked {
        let kept = c.agents.iter().find_map(|a| {
            let r = a.retained.as_ref()?;
            (*b == format!("{} retained: {}", a.name, r.reason)).then(|| {
                format!(
                    "{} kept by a release — {}",
                    a.name,
                    capacity::reason_words(&r.reason)
                )
            })
        });
        let _ = writeln!(s, "blocked: {}", kept.as_deref().unwrap_or(b));
    }
    s
}

fn release_text(r: &ReleaseResult) -> String {
    let lifetimes: Vec<&str> = r.lifetimes.iter().map(|l| l.as_str()).collect();
    let mut s = format!(
        "release of {}: {} (lifetimes: {}{})\nreleased {}: {}\nretained {}{}\n",
        r.loop_id,
        r.status.as_str(),
        if lifetimes.is_empty() {
            "none".to_string()
        } else {
            lifetimes.join(", ")
        },
        if r.names.is_empty() {
            String::new()
        } else {
            format!("; named: {}", r.names.join(", "))
        },
        r.released_count,
        r.released.join(", "),
        r.retained_count,
        if r.retained.is_empty() {
            ""
        } else {
            " (only idle instances are released; a worktree holding work stays):"
        },
    );
    for x in &r.retained {
        let _ = writeln!(
            s,
            "  {} — {}{}",
            x.name,
            x.words(),
            x.detail
                .as_ref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
    s
}

fn status_text(v: &RunStatus) -> String {
    let mut s = format!(
        "run {} \"{}\": {}{} — round {}, {:.1}s, {} running\n",
        v.run_id,
        v.play,
        v.state,
        v.cause
            .as_ref()
            .map(|c| format!(" — {c}"))
            .unwrap_or_default(),
        v.round,
        v.elapsed,
        v.running,
    );
    let held = if v.held > 0 {
        format!(" · held {}", v.held)
    } else {
        String::new()
    };
    let _ = writeln!(s, "lanes: {}{held}", v.lanes.describe());
    if !v.awaiting_approval.is_empty() {
        let _ = writeln!(s, "awaiting approval: {}", v.awaiting_approval.join(", "));
    }
    // Each decision with what it is about, whole, and the basis that
    // binds an answer to it.
    for d in &v.decisions {
        let _ = writeln!(s, "  {} — {} (--on {})", d.op, d.what, d.on);
        if let Some(detail) = &d.detail {
            for line in detail.lines() {
                let _ = writeln!(s, "    │ {line}");
            }
        }
    }
    if let Some(spend) = &v.spend {
        let _ = writeln!(s, "spend: {spend}");
    }
    if let Some(w) = &v.waits_for {
        let _ = writeln!(s, "eta: none — nothing runs; it waits for {w}");
    }
    if let Some(eta) = v.eta_secs {
        let _ = writeln!(
            s,
            "eta: ~{} at the pace so far",
            humantime::format_duration(std::time::Duration::from_secs(eta.round() as u64))
        );
    }
    if let Some(ws) = &v.workers {
        let _ = writeln!(s, "workers: {}", control::workers_summary(ws));
        for w in ws {
            let tags = if w.tags.is_empty() {
                String::new()
            } else {
                let t: Vec<&str> = w.tags.iter().map(|t| &**t).collect();
                format!(" [{}]", t.join(","))
            };
            let _ = writeln!(
                s,
                "  {}  {}  busy {}/{}{tags}  {}",
                w.id,
                w.host,
                w.busy,
                w.slots,
                playdeck::cluster::roster::beat_words(w, 0.0)
            );
        }
    }
    if let Some(c) = &v.capacity {
        s.push_str(&capacity_text(c));
    }
    s
}

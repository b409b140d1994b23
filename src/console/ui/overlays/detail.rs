//! Detail windows: a spawn ledger row in full (reason, request, emitter,
//! the operation it became), a palette entry in full, every warning.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Window, field, heading};
use crate::console::app::App;
use crate::console::app::find;
use crate::console::text::{group, width};
use crate::console::ui::duration;
use crate::kernel::LedgerOutcome;

pub fn ledger_row(app: &App, row: usize) -> Window {
    let t = app.theme();
    let vm = &app.vm;
    let Some(r) = vm.ledger.get(row) else {
        return Window {
            title: "Spawn request".into(),
            lines: vec![Line::from("this row is no longer in the ledger")],
            min_w: 40,
            max_w: 100,
            hang: 12,
            note: None,
        };
    };
    let mut lines = Vec::new();
    let (title, outcome) = match &r.outcome {
        LedgerOutcome::Accepted { name, .. } => (
            format!("Spawn request · accepted as {name}"),
            Span::styled(format!("✓ accepted as {name}"), Style::default().fg(t.ok)),
        ),
        LedgerOutcome::Dropped { reason, .. } => (
            format!("Spawn request · dropped ({})", reason.as_str()),
            Span::styled(
                format!("✗ dropped: {}", reason.as_str()),
                Style::default().fg(t.error),
            ),
        ),
    };
    lines.push(Line::from(vec![
        Span::styled(format!("{:<12}", "outcome"), super::bold(t)),
        outcome,
    ]));
    if let LedgerOutcome::Dropped { detail, .. } = &r.outcome {
        lines.push(field(t, "reason", detail.to_string()));
    }
    if r.repeats > 0 {
        lines.push(field(
            t,
            "repeated",
            format!(
                "×{} — this drop and {} more right after it, from the same emitter for the same assignee and reason (the first is shown)",
                group(r.repeats as usize + 1),
                group(r.repeats as usize)
            ),
        ));
    }
    lines.push(field(
        t,
        "when",
        format!("{} (event #{})", duration(r.elapsed), group(r.seq as usize)),
    ));
    let emitter = match (&r.emitter_name, r.emitter_id) {
        (Some(n), Some(id)) => {
            let role = vm
                .find(&id)
                .and_then(|e| e.role().cloned())
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!("{n}{role} · {id}")
        }
        (None, Some(id)) => id.to_string(),
        _ => "the operator".to_string(),
    };
    lines.push(field(t, "emitter", emitter));
    lines.push(field(
        t,
        "assignee",
        r.assignee
            .as_deref()
            .unwrap_or("(the emitter's own role)")
            .to_string(),
    ));
    let go_to = || {
        Span::styled(
            format!(
                "{} goes to it",
                app.keymap.label_in(
                    crate::console::keymap::Mode::Detail,
                    crate::console::keymap::Action::GoTo
                )
            ),
            Style::default().fg(t.accent),
        )
    };
    let op = app.ledger_op(row).map(|ix| vm.node(ix));
    let state = |n: &crate::projection::Node| n.place().to_string();
    match (&r.outcome, op) {
        (LedgerOutcome::Accepted { .. }, Some(n)) => {
            lines.push(Line::from(""));
            lines.push(heading(t, "request"));
            let meta = &n.op.metadata;
            lines.push(field(t, "operation", n.op.operation.as_str()));
            if let Some(reason) = &meta.spawn_reason {
                lines.push(field(t, "why", reason.to_string()));
            }
            if let Some(by) = &meta.requester_role {
                lines.push(field(t, "as role", by.to_string()));
            }
            lines.push(field(t, "agent", meta.agent.to_string()));
            if let Some(p) = &meta.profile {
                lines.push(field(t, "profile", p.to_string()));
            }
            if !meta.params.is_null() {
                lines.push(field(t, "params", meta.params.to_string()));
            }
            lines.push(heading(t, "instruction"));
            for l in n.op.instruction.lines() {
                lines.push(Line::from(format!("  {l}")));
            }
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled(format!("{:<12}", "became"), super::bold(t)),
                Span::raw(format!("{} — {} now · ", n.name(), state(n))),
                go_to(),
            ]));
        }
        (LedgerOutcome::Dropped { request, .. }, op) => {
            lines.push(Line::from(""));
            lines.push(heading(t, "request"));
            match request {
                Some(p) => {
                    if let Some(o) = &p.operation {
                        lines.push(field(t, "operation", o.to_string()));
                    }
                    if let Some(why) = &p.reason {
                        lines.push(field(t, "why", why.to_string()));
                    }
                    if p.independent {
                        lines.push(field(t, "independent", "yes (no dependency on its emitter)"));
                    }
                    lines.push(heading(t, "instruction"));
                    match &p.instruction {
                        Some(i) => {
                            for l in i.lines() {
                                lines.push(Line::from(format!("  {l}")));
                            }
                        }
                        None => lines.push(Line::from(Span::styled(
                            "  (none that could be read)",
                            Style::default().fg(t.dim),
                        ))),
                    }
                }
                None => lines.push(Line::from(Span::styled(
                    "The request's text is not in the log: an injection, or a log written before playdeck kept it.",
                    Style::default().fg(t.dim),
                ))),
            }
            lines.push(Line::from(""));
            match op {
                Some(n) => lines.push(Line::from(vec![
                    Span::styled(format!("{:<12}", "concerned"), super::bold(t)),
                    Span::raw(format!("{} — {} now · ", n.name(), state(n))),
                    go_to(),
                ])),
                None => lines.push(field(t, "became", "nothing: no operation was made of it")),
            }
        }
        (LedgerOutcome::Accepted { .. }, None) => {
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                "The operation it became is not in this view.",
                Style::default().fg(t.dim),
            )));
        }
    }
    Window {
        title,
        lines,
        min_w: 50,
        max_w: 110,
        hang: 12,
        note: None,
    }
}

pub fn palette_entry(app: &App, id: &str) -> Window {
    let t = app.theme();
    let p = &app.vm.palette;
    let (kind, rest) = id.split_once(':').unwrap_or(("", id));
    let mut lines = Vec::new();
    let role_row = match kind {
        "i" => p.initial.iter().find(|r| &*r.role == rest),
        "e" => p.expanded.iter().find(|r| &*r.role == rest),
        _ => None,
    };
    let title = if let Some(r) = role_row {
        lines.push(field(t, "role", r.role.to_string()));
        lines.push(field(t, "disposition", r.disposition.to_string()));
        let modes: Vec<&str> = r.modes.iter().map(|m| &**m).collect();
        lines.push(field(
            t,
            "modes",
            if modes.is_empty() {
                "—".into()
            } else {
                modes.join(", ")
            },
        ));
        lines.push(field(
            t,
            "model",
            r.model.as_deref().unwrap_or("—").to_string(),
        ));
        lines.push(field(
            t,
            "effort",
            r.effort.as_deref().unwrap_or("—").to_string(),
        ));
        lines.push(field(
            t,
            "provisioned",
            format!(
                "at {}{}",
                duration(r.at),
                r.by.as_deref()
                    .map(|b| format!(", recruited by {b}"))
                    .unwrap_or_default()
            ),
        ));
        format!("Role {}", r.role)
    } else if kind == "x" {
        let (reason, n) = rest.rsplit_once(':').unwrap_or((rest, "0"));
        let n: usize = n.parse().unwrap_or(0);
        match p
            .rejections
            .iter()
            .filter(|r| r.reason.as_str() == reason)
            .nth(n)
        {
            Some(r) => {
                lines.push(field(t, "role", r.role.to_string()));
                lines.push(field(t, "reason", reason.to_string()));
                lines.push(field(
                    t,
                    "asked by",
                    r.by.as_deref().unwrap_or("?").to_string(),
                ));
                lines.push(field(t, "when", duration(r.at)));
                lines.push(field(t, "detail", r.detail.to_string()));
                format!("Refused: {}", r.role)
            }
            None => "Refusal".into(),
        }
    } else {
        let entries = app.palette_entries();
        let text = find(&entries, id).map_or_else(String::new, |e| e.text.clone());
        lines.push(Line::from(text));
        if kind == "o" {
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                "A catalog role the orchestrator may still recruit (it costs one new-role unit).",
                Style::default().fg(t.dim),
            )));
        }
        match kind {
            "r" => format!("Reservation {rest}"),
            "o" => format!("Recruitable {rest}"),
            _ => "Palette".into(),
        }
    };
    Window {
        title,
        lines,
        min_w: 40,
        max_w: 100,
        hang: 12,
        note: None,
    }
}

/// Every warning, repeats folded into one row (`×300`, first … last
/// time), the one seen most recently first.
pub fn warnings(app: &App) -> Window {
    let t = app.theme();
    let fold = app.warnings();
    let when = |r: &crate::console::warnings::Folded| {
        let (first, last) = (duration(r.first), duration(r.last));
        if r.count > 1 && first != last {
            format!("{first} … {last}")
        } else {
            first
        }
    };
    // Columns as wide as their widest row, so messages line up and wrap
    // under themselves; eight for the time, as before anything repeated.
    let time_w = fold
        .newest_first()
        .map(|r| width(&when(r)))
        .max()
        .unwrap_or(0)
        .max(8);
    let count_w = fold
        .newest_first()
        .filter(|r| r.count > 1)
        .map(|r| width(&format!("×{}", group(r.count))) + 2)
        .max()
        .unwrap_or(0);
    let lines = fold
        .newest_first()
        .map(|r| {
            let count = if r.count > 1 {
                format!("×{}", group(r.count))
            } else {
                String::new()
            };
            Line::from(vec![
                // Left-aligned, so a wrapped message hangs under itself.
                Span::styled(format!("{:<time_w$} ", when(r)), Style::default().fg(t.dim)),
                Span::styled(format!("{count:<count_w$}"), Style::default().fg(t.warning)),
                Span::styled(r.message.to_string(), Style::default().fg(t.warning)),
            ])
        })
        .collect();
    let (distinct, total) = (fold.distinct(), fold.total());
    let title = if distinct == total {
        format!("Warnings ({}), newest first", group(total))
    } else {
        format!(
            "Warnings ({}, {} in all), newest first",
            group(distinct),
            group(total)
        )
    };
    Window {
        title,
        lines,
        min_w: 40,
        max_w: 120,
        hang: time_w + 1 + count_w,
        note: None,
    }
}

/// The runs screen: one row a run, the selected one marked, this run's
/// state as the console sees it.
pub fn runs(
    app: &App,
    rows: &[crate::control::listing::RunRow],
    selected: Option<usize>,
) -> Window {
    use crate::control::listing::{header, line};
    let t = app.theme();
    let mut lines = vec![Line::from(Span::styled(
        format!("   {}", header()),
        Style::default().fg(t.dim),
    ))];
    if rows.is_empty() {
        lines.push(Line::from("   no runs here"));
    }
    for (i, r) in rows.iter().enumerate() {
        let color = if r.state.starts_with("needs approval") {
            t.warning
        } else if r.state.contains("failed") || r.state.starts_with("crashed") {
            t.error
        } else if r.live {
            t.accent
        } else {
            t.foreground
        };
        // Row 0 of the list is the titles.
        let chosen = selected == Some(i + 1);
        // The run this console shows is marked, wherever the cursor is.
        let here = app
            .hooks
            .run_dir
            .as_ref()
            .is_some_and(|d| crate::console::app::same_dir(d, &r.dir));
        let mark = match (chosen, here) {
            (true, true) => "›● ",
            (true, false) => "›  ",
            (false, true) => " ● ",
            (false, false) => "   ",
        };
        let mut style = Style::default().fg(color);
        if chosen {
            style = style.add_modifier(ratatui::style::Modifier::REVERSED);
        }
        lines.push(Line::from(vec![
            Span::raw(mark),
            Span::styled(line(r), style),
        ]));
    }
    Window {
        title: format!(
            "Runs ({}) · ● this one · enter attaches to a live one, replays a finished one · esc back",
            group(rows.len())
        ),
        lines,
        min_w: 60,
        max_w: 118,
        hang: 2,
        note: None,
    }
}

/// The problems list: each failure, escalation and waiting gate on one
/// row, oldest first, with how long it has been so and the first line of
/// why: what an operator triages from.
pub fn problems(app: &App, rows: &[u32], selected: Option<usize>) -> Window {
    use crate::console::app::first_line;
    use crate::console::text::{fit, fit_middle, pad};
    use crate::kernel::Lane;
    const NAME_W: usize = 28;
    const WHY_W: usize = 64;
    let t = app.theme();
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "    {}  {:<9} {:>7}  why",
            pad("operation", NAME_W),
            "state",
            "for"
        ),
        Style::default().fg(t.dim),
    ))];
    if rows.is_empty() {
        lines.push(Line::from(Span::styled(
            "  no failures, escalations or waiting gates",
            Style::default().fg(t.dim),
        )));
    }
    let gates = app.keymap.label(crate::console::keymap::Action::Approve);
    for (i, &ix) in rows.iter().enumerate() {
        let n = app.vm.node(ix);
        let (mark, state, color, why) = match n.lane {
            // A question: what it asks, not "approval".
            Lane::AwaitingApproval if n.asking.is_some() => {
                (n.asked.mark(), "asks", t.warning, app.asked_words(ix))
            }
            Lane::AwaitingApproval => match app.vm.failed_deps(ix) {
                Some(f) => (
                    "✗",
                    "waiting",
                    t.error,
                    format!("{} ({gates} approves anyway)", f.words()),
                ),
                None => (
                    "⚑",
                    "waiting",
                    t.warning,
                    format!("approval by an operator ({gates} approves)"),
                ),
            },
            Lane::Escalated => (
                "!",
                "escalated",
                t.col(6),
                first_line(n.escalation.as_deref().unwrap_or("no reason given")).to_string(),
            ),
            _ => (
                "✗",
                "failed",
                t.error,
                first_line(n.error.as_deref().unwrap_or("no error given")).to_string(),
            ),
        };
        // Row 0 of the list is the titles.
        let chosen = selected == Some(i + 1);
        let mut style = Style::default();
        if chosen {
            style = style.add_modifier(ratatui::style::Modifier::REVERSED);
        }
        lines.push(Line::from(vec![
            Span::raw(if chosen { "› " } else { "  " }),
            Span::styled(format!("{mark} "), style.fg(color)),
            Span::styled(pad(&fit_middle(&app.vm.label(ix), NAME_W), NAME_W), style),
            Span::styled(format!("  {state:<9}"), style.fg(color)),
            Span::styled(
                format!(" {:>7}  ", duration(app.in_lane_for(ix))),
                style.fg(t.dim),
            ),
            Span::styled(fit(&why, WHY_W), style),
        ]));
    }
    let keys = |a| app.keymap.label(a);
    use crate::console::keymap::Action::{Acknowledge, Deny, GoTo, Retry};
    Window {
        title: format!(
            "Problems ({}), oldest first{} · {} goes to one · {}/{}/{}/{} act on it",
            group(rows.len()),
            match app.acknowledged_count() {
                0 => String::new(),
                n => format!(" · {} acknowledged, not listed", group(n)),
            },
            keys(GoTo),
            gates,
            keys(Deny),
            keys(Retry),
            keys(Acknowledge)
        ),
        lines,
        min_w: 60,
        max_w: 120,
        hang: 4,
        note: None,
    }
}

/// The message log: what the status line said, newest first, kept after
/// the status line let it go.
pub fn messages(app: &App) -> Window {
    use crate::console::app::Level;
    let t = app.theme();
    let m = &app.messages;
    let mut lines: Vec<Line> = m
        .iter()
        .rev()
        .map(|msg| {
            let color = match msg.level {
                Level::Info => t.foreground,
                Level::Warning => t.warning,
                Level::Error => t.error,
            };
            Line::from(vec![
                Span::styled(
                    format!("{:<8} ", duration(msg.at)),
                    Style::default().fg(t.dim),
                ),
                Span::styled(msg.words(), Style::default().fg(color)),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "nothing said yet",
            Style::default().fg(t.dim),
        )));
    }
    Window {
        title: format!(
            "Messages ({}), newest first{}",
            group(m.len()),
            if m.len() >= crate::console::app::MESSAGES_KEPT {
                " · the oldest are gone"
            } else {
                ""
            }
        ),
        lines,
        min_w: 40,
        max_w: 120,
        hang: 9,
        note: None,
    }
}

/// The run's breakpoints, one a row; the selected one is cleared by `x`.
pub fn breakpoints(app: &App, selected: Option<usize>) -> Window {
    let t = app.theme();
    let set = &app.vm.run.breakpoints;
    let mut lines: Vec<Line> = set
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let chosen = selected == Some(i);
            let mut style = Style::default();
            if chosen {
                style = style.add_modifier(ratatui::style::Modifier::REVERSED);
            }
            Line::from(vec![
                Span::raw(if chosen { "› " } else { "  " }),
                Span::styled(b.to_string(), style),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "none: b on an operation sets one; U runs to it",
            Style::default().fg(t.dim),
        )));
    }
    let why = app
        .vm
        .run
        .paused_by
        .as_ref()
        .map(|c| format!("paused: {c}"));
    Window {
        title: format!(
            "Breakpoints ({}) · x clears the selected one · esc back",
            set.len()
        ),
        lines,
        min_w: 50,
        max_w: 100,
        hang: 2,
        note: why,
    }
}

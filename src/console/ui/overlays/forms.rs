//! Questions and forms: quit, release, deny (with a reason), add work. The
//! keys they name come from the key table.

use crate::console::scroll::ScrollList;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{bold, frame, popup};
use crate::capacity::ReleaseResult;
use crate::console::app::App;
use crate::console::keymap::{Action, Mode};
use crate::console::overlay::{ADD_FIELDS, AddForm};
use crate::console::text::{fit, width};
use crate::console::ui::short_instance;
use crate::kernel::agent::QuestionKind;
use crate::vocab::{InstanceState, Lifetime};

/// `y/⏎ quit   n/esc keep watching`.
fn answers(app: &App, yes: &str, no: &str) -> Line<'static> {
    let t = app.theme();
    Line::from(vec![
        Span::styled(app.keymap.label_in(Mode::Confirm, Action::Yes), bold(t)),
        Span::raw(format!(" {yes}   ")),
        Span::styled(app.keymap.label_in(Mode::Confirm, Action::No), bold(t)),
        Span::raw(format!(" {no}")),
    ])
}

/// `⏎ deny   esc cancel`, the typing scope's keys.
fn typing_keys(app: &App, submit: &str, extra: Option<&str>) -> Line<'static> {
    let t = app.theme();
    let mut spans = vec![
        Span::styled(app.keymap.label_in(Mode::Text, Action::Submit), bold(t)),
        Span::raw(format!(" {submit}   ")),
        Span::styled(app.keymap.label_in(Mode::Text, Action::Cancel), bold(t)),
        Span::raw(" cancel"),
    ];
    if let Some(e) = extra {
        spans.push(Span::raw("   "));
        spans.push(Span::styled(
            app.keymap.label_in(Mode::Text, Action::NextField),
            bold(t),
        ));
        spans.push(Span::raw(format!(" {e}")));
    }
    Line::from(spans)
}

fn dialog(f: &mut Frame, area: Rect, app: &App, title: &str, lines: Vec<Line>) {
    let w = lines.iter().map(|l| l.width() as u16).max().unwrap_or(20) + 4;
    let w = w.max(width(title) as u16 + 6).max(44);
    // No wider than the screen leaves room for; what is longer wraps (a
    // command to copy must be whole, not cut).
    let w = w.min(area.width.saturating_sub(4).max(24));
    // (The frame's borders and padding take four columns.)
    let lines = crate::console::text::wrap_all(&lines, w.saturating_sub(4) as usize);
    let r = popup(area, w, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(frame(title, app.theme())), r);
}

pub fn confirm_quit(f: &mut Frame, area: Rect, app: &App) {
    if app.hooks.attached {
        return confirm_detach(f, area, app);
    }
    let ctrl_c = app.keymap.label_in(Mode::Confirm, Action::Quit);
    let mut lines = vec![
        Line::from("The run is still going. Quitting cancels it:"),
        Line::from("running operations are stopped and reported as cancelled,"),
        Line::from("the rest is skipped, and every agent process is ended."),
        Line::from(""),
        answers(app, "quit", "keep watching"),
    ];
    if !ctrl_c.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("({ctrl_c} again quits too)"),
            Style::default().fg(app.theme().dim),
        )));
    }
    dialog(f, area, app, "Quit playdeck?", lines);
}

/// An attached console's quit: detach (the default) or cancel the run,
/// saying what a cancel ends.
fn confirm_detach(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let vm = &app.vm;
    let running = vm.count(crate::kernel::Lane::Running);
    let left = vm.counts.total().saturating_sub(vm.counts.settled());
    let key = |a: Action| Span::styled(app.keymap.label_in(Mode::Confirm, a), bold(t));
    let lines = vec![
        Line::from("The run is still going. Leave the console and let it go on?"),
        Line::from(format!(
            "`playdeck attach {}` comes back to it; `playdeck runs` lists it.",
            app.resume_name()
        )),
        Line::from(""),
        Line::from(vec![
            key(Action::Yes),
            Span::raw(" detach (the run goes on)"),
        ]),
        Line::from(vec![
            key(Action::CancelRun),
            Span::raw(format!(
                " cancel the run: stops {running} running operations and their agents, skips {} waiting",
                left.saturating_sub(running)
            )),
        ]),
        Line::from(vec![key(Action::No), Span::raw(" keep watching")]),
    ];
    dialog(f, area, app, "Detach from the run?", lines);
}

/// `$`: raise the cap that holds work back, said with its numbers.
/// An operation as the lanes name it, with the name commands take when
/// they differ: `benchmark the refund path #3 (spawn-3)`.
fn labelled(app: &App, op: &str) -> String {
    match app.vm.by_name(op).and_then(|n| app.vm.ix(&n.op.op_id)) {
        Some(ix) if *app.vm.label(ix) != *op => format!("{} ({op})", app.vm.label(ix)),
        _ => op.to_string(),
    }
}

/// Approving gates by name: the marked ones, or the oldest when `a` was
/// pressed away from any gate. Each says how long it has waited.
pub fn confirm_approve(
    f: &mut Frame,
    area: Rect,
    app: &App,
    ops: &[String],
    oldest: bool,
    scroll: &ScrollList,
) {
    let t = app.theme();
    let mut lines = vec![Line::from(match ops {
        [one] => format!("Approve {one}?"),
        many => format!("Approve these {} operations?", many.len()),
    })];
    // Gates some of whose dependencies failed come first, marked, so a
    // bulk approval never passes one unseen.
    let rows = approve_rows(app, ops);
    let warned = rows.iter().filter(|(_, f)| f.is_some()).count();
    if warned > 0 && ops.len() > 1 {
        lines.push(Line::from(Span::styled(
            format!("{warned} of them with failed dependencies, listed first:"),
            Style::default().fg(t.error),
        )));
    }
    // Every name, scrolled when they do not all fit: nobody approves a
    // gate they could not have read.
    let window = scroll.visible();
    let window = if window.is_empty() {
        0..rows.len().min(APPROVE_SHOWN)
    } else {
        window
    };
    if window.start > 0 {
        lines.push(Line::from(Span::styled(
            format!("  ↑ {} more (k, pgup)", window.start),
            Style::default().fg(t.dim),
        )));
    }
    for (op, failed) in &rows[window.clone()] {
        let ix = app.vm.by_name(op).and_then(|n| app.vm.ix(&n.op.op_id));
        let waited = ix
            .map(|ix| {
                format!(
                    "  (waiting {})",
                    crate::console::ui::duration(app.in_lane_for(ix))
                )
            })
            .unwrap_or_default();
        let mut row = vec![
            Span::styled(format!("  ⚑ {}", labelled(app, op)), bold(t)),
            Span::styled(waited, Style::default().fg(t.dim)),
        ];
        if let Some(words) = failed {
            row.push(Span::styled(
                format!("  {words}"),
                Style::default().fg(t.error),
            ));
        }
        // A running agent's question: the call it asks to make.
        if let Some(n) = app.vm.by_name(op)
            && let Some(call) = &n.asking
        {
            row.push(Span::styled(
                format!("  {} {call}", n.asked.mark()),
                Style::default().fg(t.warning),
            ));
        }
        lines.push(Line::from(row));
    }
    if window.end < rows.len() {
        lines.push(Line::from(Span::styled(
            format!("  ↓ {} more (j, pgdn)", rows.len() - window.end),
            Style::default().fg(t.dim),
        )));
    }
    if let ([one], true) = (ops, oldest) {
        lines.push(Line::from(Span::styled(
            format!("The cursor is on no gate: this is the one that has waited longest. From a script: playdeck ctl {} approve {one}", app.vm.run.run_id),
            Style::default().fg(t.dim),
        )));
    }
    lines.push(Line::from(""));
    lines.push(answers(app, "approve", "cancel"));
    dialog(f, area, app, "Approve", lines);
}

/// Gates listed at once in an approval question before it scrolls, on a
/// screen tall enough.
const APPROVE_SHOWN: usize = 12;

/// The gates of an approval question in the order listed, each with its
/// failed dependencies in words: those with any first.
fn approve_rows<'a>(app: &App, ops: &'a [String]) -> Vec<(&'a String, Option<String>)> {
    let mut rows: Vec<(&String, Option<String>)> = ops
        .iter()
        .map(|op| {
            let failed = app
                .vm
                .by_name(op)
                .and_then(|n| app.vm.ix(&n.op.op_id))
                .and_then(|ix| app.vm.failed_deps(ix))
                .map(|f| f.words());
            (op, failed)
        })
        .collect();
    rows.sort_by_key(|(_, failed)| failed.is_none());
    rows
}

/// How many gates an approval question lists, and how many show at once
/// on `area`: the screen less the question's other lines.
pub fn approve_list_size(area: Rect, ops: &[String]) -> (usize, usize) {
    // Frame (2), question, warning, two "more" lines, blank, answers,
    // and a margin of two.
    let room = (area.height as usize).saturating_sub(10).max(3);
    (ops.len(), room.min(40))
}

pub fn confirm_raise(
    f: &mut Frame,
    area: Rect,
    app: &App,
    change: &crate::kernel::spend::CapChange,
    words: &str,
) {
    let run_id = &app.vm.run.run_id;
    // The key of the cap offered: a role's own, not the run's.
    let key = format!(
        "{}{}",
        change
            .role
            .as_deref()
            .map(|r| format!("{r}."))
            .unwrap_or_default(),
        change.measure.as_str()
    );
    let lines = vec![
        Line::from(words.to_string()),
        Line::from("Work the cap held back starts again; running work was never stopped."),
        Line::from(format!(
            "Any other amount: playdeck ctl {run_id} budget --raise {key}=+N"
        )),
        Line::from(""),
        answers(app, "raise", "cancel"),
    ];
    dialog(f, area, app, "Raise the spend cap", lines);
}

pub fn confirm_release(f: &mut Frame, area: Rect, app: &App, preview: &ReleaseResult) {
    let t = app.theme();
    let run_id = &app.vm.run.run_id;
    let mut lines = vec![Line::from(
        "Release idle capacity now? Busy instances are never unloaded.",
    )];
    lines.push(Line::from(""));
    // Idle instances the default release does not take (manual_release,
    // pinned, current_loop before the run ends): said, with how to take one.
    let listed = |n: &str| {
        preview.released.iter().any(|r| r == n) || preview.retained.iter().any(|r| r.name == n)
    };
    let not_due: Vec<_> = app
        .vm
        .capacity
        .instances
        .values()
        .filter(|i| i.state == InstanceState::Ready && !listed(&i.name))
        .collect();
    if preview.released.is_empty() {
        let what = if not_due.is_empty() {
            "Nothing is idle: nothing would be released."
        } else {
            "Nothing idle is due: nothing would be released."
        };
        lines.push(Line::from(Span::styled(what, Style::default().fg(t.dim))));
    } else {
        lines.push(Line::from(Span::styled(
            format!("Released ({}):", preview.released_count),
            bold(t).fg(t.ok),
        )));
        for n in &preview.released {
            // How long it has been idle, as the pane says it.
            let idle = app
                .vm
                .capacity
                .instances
                .get(n.as_str())
                .filter(|i| i.state == InstanceState::Ready)
                .map(|i| format!(" — idle {}, {}", app.state_age(i), i.lifetime))
                .unwrap_or_default();
            lines.push(Line::from(format!("  {}{idle}", short_instance(n, run_id))));
        }
    }
    if !preview.retained.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("Retained ({}):", preview.retained_count),
            bold(t).fg(t.warning),
        )));
        for r in &preview.retained {
            lines.push(Line::from(format!(
                "  {} — {}",
                short_instance(&r.name, run_id),
                r.words()
            )));
        }
    }
    if !not_due.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("Idle, not due ({}):", not_due.len()),
            bold(t),
        )));
        for i in &not_due {
            lines.push(Line::from(format!(
                "  {} — kept: {}: playdeck ctl {run_id} release --name {}",
                short_instance(&i.name, run_id),
                app.kept_by(i).unwrap_or(i.lifetime.as_str()),
                i.name
            )));
        }
    }
    lines.push(Line::from(""));
    lines.push(answers(app, "release", "cancel"));
    dialog(f, area, app, "Release idle capacity", lines);
}

/// `X`: release one instance — what it is, what the release does to it
/// and to the run, and the command that does the same from a script.
pub fn confirm_release_instance(f: &mut Frame, area: Rect, app: &App, name: &str) {
    let t = app.theme();
    let run_id = &app.vm.run.run_id;
    let short = short_instance(name, run_id);
    let mut lines = vec![Line::from(format!("Release {short} now?"))];
    let c = &app.vm.capacity;
    match c.instances.get(name) {
        Some(i) => {
            let profile = app.vm.facts.profiles.iter().find(|p| p.name == i.profile);
            lines.push(Line::from(Span::styled(
                format!(
                    "  {} · profile {} ({}) · lifetime {}",
                    // X opens this for an idle instance; the words say so
                    // if it changed since.
                    if i.state == InstanceState::Ready {
                        format!("idle {}", app.state_age(i))
                    } else {
                        app.state_words(i)
                    },
                    i.profile,
                    i.role,
                    i.lifetime
                ),
                Style::default().fg(t.dim),
            )));
            lines.push(Line::from(""));
            let active = c.active();
            lines.push(Line::from(format!(
                "It gives its node back: {} of {} nodes in use after.",
                active.saturating_sub(1),
                app.vm.facts.max_nodes
            )));
            let pinned = profile.is_some_and(|p| p.pinned);
            lines.push(Line::from(if pinned {
                "It is pinned: rounds and the run's end leave it; named, it goes.".to_string()
            } else {
                match i.lifetime {
                    Lifetime::CurrentRound => {
                        "The round's end would release it anyway; this does it now.".into()
                    }
                    Lifetime::CurrentLoop => {
                        "It would stay until the run ends; this releases it now.".into()
                    }
                    Lifetime::ManualRelease => {
                        "manual_release: only an operator releases it, and this is that release."
                            .into()
                    }
                }
            }));
            let others = c
                .instances
                .values()
                .filter(|o| o.profile == i.profile && o.name != i.name && o.state.is_active())
                .count();
            if pinned && others == 0 {
                lines.push(Line::from(Span::styled(
                    format!(
                        "It is {}'s last pinned instance: its operations fail (capacity_unavailable) until capacity ensure makes one.",
                        i.profile
                    ),
                    Style::default().fg(t.warning),
                )));
            } else if let Some(p) = profile {
                lines.push(Line::from(format!(
                    "Later work for {} gets an instance again (max_instances {}).",
                    p.name, p.max_instances
                )));
            }
            if profile.is_some_and(|p| p.worktree) {
                lines.push(Line::from(
                    "Its worktree goes only if it holds no uncommitted work; else it stays, with the reason.",
                ));
            }
        }
        // Gone meanwhile (the view lost it): the run answers for the name.
        None => lines.push(Line::from("The console no longer shows it.")),
    }
    lines.push(Line::from(Span::styled(
        format!("From a script: playdeck ctl {run_id} release --name {name}"),
        Style::default().fg(t.dim),
    )));
    lines.push(Line::from(""));
    lines.push(answers(app, &format!("release {short}"), "cancel"));
    dialog(f, area, app, &format!("Release {short}"), lines);
}

/// A text field: its label, what was typed and, when it has the keys, a
/// cursor.
fn input(app: &App, label: &str, text: &str, focused: bool, w: usize) -> Line<'static> {
    let t = app.theme();
    let label_style = if focused {
        bold(t)
    } else {
        Style::default().fg(t.dim)
    };
    let room = w.saturating_sub(width(label) + 3);
    // The end of a long text is where the typing is.
    let shown = if width(text) > room {
        let cut = fit(&text.chars().rev().collect::<String>(), room);
        cut.chars().rev().collect()
    } else {
        text.to_string()
    };
    let mut spans = vec![
        Span::styled(format!("{label} "), label_style),
        Span::styled(
            shown,
            Style::default()
                .fg(t.foreground)
                .add_modifier(Modifier::UNDERLINED),
        ),
    ];
    if focused {
        spans.push(Span::styled("▏", bold(t)));
    }
    Line::from(spans)
}

pub fn deny(f: &mut Frame, area: Rect, app: &App, op: &str, reason: &str) {
    let t = app.theme();
    // A running agent's question, or a gate.
    let asking = app
        .vm
        .by_name(op)
        .and_then(|n| n.asking.clone().map(|a| (a, n.asked)));
    let first = match &asking {
        Some((call, QuestionKind::Permission)) => Line::from(vec![
            Span::raw("Deny "),
            Span::styled(labelled(app, op), bold(t)),
            Span::raw(format!(
                "'s call {call}? It is refused; the agent is told why and runs on."
            )),
        ]),
        Some((_, QuestionKind::Review)) => Line::from(vec![
            Span::raw("Reject "),
            Span::styled(labelled(app, op), bold(t)),
            Span::raw("'s work? Nothing of it lands; it fails, and what waits on it is skipped."),
        ]),
        Some((_, QuestionKind::Conflict)) => Line::from(vec![
            Span::raw("Leave "),
            Span::styled(labelled(app, op), bold(t)),
            Span::raw(
                "'s work unlanded? It fails (merge_conflict), its worktree is kept, and what waits on it is skipped.",
            ),
        ]),
        None => Line::from(vec![
            Span::raw("Deny "),
            Span::styled(labelled(app, op), bold(t)),
            Span::raw("? It fails, and what waits on it is skipped."),
        ]),
    };
    // Work waiting for review or clashing: rejected with the reason on
    // the record, or sent back with it to its agent now.
    let sends_back = app.sends_back(op);
    let mut lines = vec![
        first,
        Line::from(Span::styled(
            if sends_back {
                "The reason is recorded, and told to its agent if it is retried later."
            } else {
                "A reason is recorded with the denial (optional)."
            },
            Style::default().fg(t.dim),
        )),
        Line::from(""),
        input(app, "reason", reason, true, 60),
        Line::from(""),
        typing_keys(app, if sends_back { "reject" } else { "deny" }, None),
    ];
    if sends_back {
        lines.push(Line::from(vec![
            Span::styled(app.keymap.label_in(Mode::Text, Action::SendBack), bold(t)),
            Span::raw(
                " send it back instead: the reason goes to its agent now, in its conversation",
            ),
        ]));
    }
    dialog(f, area, app, &format!("Deny {op}"), lines);
}

pub fn say(f: &mut Frame, area: Rect, app: &App, op: &str, text: &str, running: bool) {
    let t = app.theme();
    let (title, what, how) = if running {
        (
            format!("Talk to {op}'s agent"),
            "Say to ",
            "It stops as soon as it is out of a tool call, and its next attempt continues the conversation, told this.",
        )
    } else {
        (
            format!("Send {op} back"),
            "Send back ",
            "A new attempt continues its conversation, told this (what waits on it waits again).",
        )
    };
    let lines = vec![
        Line::from(vec![
            Span::raw(what),
            Span::styled(labelled(app, op), bold(t)),
            Span::raw(if running {
                "'s agent:"
            } else {
                ", with a note:"
            }),
        ]),
        Line::from(Span::styled(how, Style::default().fg(t.dim))),
        Line::from(""),
        input(app, "message", text, true, 60),
        Line::from(""),
        typing_keys(app, "say", None),
    ];
    dialog(f, area, app, &title, lines);
}

/// A note on the diff view's line (`c`): sent back with the work (`T`).
pub fn diff_note(f: &mut Frame, area: Rect, app: &App, text: &str) {
    let t = app.theme();
    let lines = vec![
        Line::from("A note on this line of the diff, for the agent:"),
        Line::from(Span::styled(
            "T (talk) on the diff sends the work back with every note, each naming its file and line; an empty note removes it.",
            Style::default().fg(t.dim),
        )),
        Line::from(""),
        input(app, "note", text, true, 60),
        Line::from(""),
        typing_keys(app, "note", None),
    ];
    dialog(f, area, app, "Note on the diff", lines);
}

pub fn add(f: &mut Frame, area: Rect, app: &App, form: &AddForm) {
    let t = app.theme();
    let help = [
        "operations it waits for, by name (commas between)",
        "the role that does it",
        "what to do",
        "optional; an existing operation's name adds dependencies to it",
    ];
    let mut lines = vec![
        Line::from("Add work to the live run: a new operation after others."),
        Line::from(""),
    ];
    for (i, label) in ADD_FIELDS.iter().enumerate() {
        lines.push(input(
            app,
            &format!("{label:<12}"),
            &form.fields[i],
            form.focus == i,
            76,
        ));
        lines.push(Line::from(Span::styled(
            format!("{:<13}{}", "", help[i]),
            Style::default().fg(t.dim),
        )));
    }
    if let Some(e) = &form.error {
        lines.push(Line::from(""));
        lines.push(Line::from(Span::styled(
            fit(e, 76),
            Style::default().fg(t.error),
        )));
    }
    // The roles it can name now: the palette's, recruited ones included.
    let roles = app.addable_roles();
    if !roles.is_empty() {
        lines.push(Line::from(""));
        lines.push(Line::from(vec![
            Span::styled("roles  ", Style::default().fg(t.dim)),
            Span::raw(fit(&roles.join(", "), 70)),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(typing_keys(app, "add", Some("next field")));
    dialog(f, area, app, "Add work", lines);
}

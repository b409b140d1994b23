//! The footer: the keys that work now, written from the key table (what
//! the mode reads, what `available` allows), with help and quit always at
//! the right; a replay's timeline; the status line.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::{App, Follow, Level};
use crate::console::keymap::{Action, info};
use crate::console::overlay::Overlay;
use crate::console::text::{fit, group, width};

/// The actions the footer offers now: those that act on the selected
/// operation first (they are what the selection is for, and they are
/// named with it), then the rest in the table's order, help and quit last.
pub fn context_actions(app: &App) -> Vec<Action> {
    let mode = app.mode();
    let (mut main, mut end): (Vec<Action>, Vec<Action>) = app
        .keymap
        .actions_in(mode)
        .into_iter()
        .filter(|a| info(*a).footer && app.available(*a).is_ok())
        .partition(|a| !matches!(a, Action::Help | Action::Quit));
    // Two keys for one thing read as one hint.
    main.dedup_by_key(|a| info(*a).label);
    // A stable sort: the table's order within each group. The selection's
    // keys first, then those that act on another operation (a gate asked
    // about from anywhere), each group after its name.
    let selected = app
        .named_target(Action::Hold)
        .or_else(|| app.named_target(Action::Retry));
    // What the operator marked comes before the oldest gate offered from
    // anywhere: they chose it.
    main.sort_by_key(|a| match app.named_target(*a) {
        Some(n) if Some(&n) == selected.as_ref() => 0,
        Some(n) if n.ends_with(" marked") => 1,
        Some(_) => 2,
        None => 3,
    });
    main.append(&mut end);
    main
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let key = Style::default().fg(t.accent).add_modifier(Modifier::BOLD);
    let text = Style::default().fg(t.dim);
    let mode = app.mode();
    let hint = |a: Action| -> Vec<Span<'static>> {
        vec![
            Span::styled(app.keymap.label_in(mode, a), key),
            Span::styled(format!(" {}  ", app.action_label(a)), text),
        ]
    };
    let actions = context_actions(app);
    let (main, end): (Vec<Action>, Vec<Action>) = actions
        .into_iter()
        .partition(|a| !matches!(a, Action::Help | Action::Quit));
    // Help and quit are never pushed off: they take their room first, and
    // the other hints fill what is left, whole or not at all.
    let end: Vec<Span> = end.into_iter().flat_map(hint).collect();
    let end_w: usize = end.iter().map(|s| width(&s.content)).sum();
    let room = (area.width as usize).saturating_sub(end_w + 1);
    let mut keys: Vec<Span> = vec![Span::raw(" ")];
    let mut used = 0;
    let mut named: Option<String> = None;
    for a in main {
        let mut h = hint(a);
        if let Some(name) = app.named_target(a)
            && named.as_ref() != Some(&name)
        {
            // The target once, before the keys that act on it.
            named = Some(name.clone());
            h.insert(
                0,
                Span::styled(format!("{name}: "), Style::default().fg(t.foreground)),
            );
        }
        let w: usize = h.iter().map(|s| width(&s.content)).sum();
        if used + w > room {
            break;
        }
        used += w;
        keys.extend(h);
    }
    keys.push(Span::raw(" ".repeat(room - used)));
    keys.extend(end);

    let status = match app.overlay() {
        Some(Overlay::Jump { text: input }) => Line::from(vec![
            Span::styled(" jump to (12.5, 1:05, #120): ", key),
            Span::raw(input.clone()),
            Span::styled("▏", key),
        ]),
        Some(Overlay::Filter) => Line::from(vec![
            Span::styled(" filter: ", key),
            Span::raw(app.filter.clone()),
            Span::styled("▏", key),
            Span::styled(matches(app), text),
        ]),
        _ => match (app.shown_status(), &app.replay) {
            (Some(s), _) => {
                let color = match s.level {
                    Level::Info => t.foreground,
                    Level::Warning => t.warning,
                    Level::Error => t.error,
                };
                Line::from(Span::styled(
                    fit(&format!(" {}", s.text), area.width as usize),
                    Style::default().fg(color),
                ))
            }
            (None, Some(bar)) => Line::from(Span::styled(
                fit(
                    &format!(
                        " {}",
                        bar.event.as_deref().unwrap_or("the start of the run")
                    ),
                    area.width as usize,
                ),
                Style::default().fg(t.foreground),
            )),
            (None, None) if !app.filter.is_empty() => Line::from(Span::styled(
                format!(" filter: {}{} (esc clears)", app.filter, matches(app)),
                text,
            )),
            (None, None) => Line::from(""),
        },
    };
    let mut lines = vec![Line::from(keys)];
    if let Some(bar) = &app.replay {
        lines.push(timeline(bar, area.width, app));
    }
    lines.push(status);
    f.render_widget(
        Paragraph::new(lines).style(Style::default().bg(t.header_bg).fg(t.header_fg)),
        area,
    );
}

/// `▶ ×4  12.3s / 40.1s  #120 / 1 623  ████████░░░░  following the live run`
fn timeline(bar: &crate::console::app::ReplayBar, w: u16, app: &App) -> Line<'static> {
    let t = app.theme();
    let speed = if bar.speed < 1.0 {
        format!("×{}", bar.speed)
    } else {
        format!("×{:.0}", bar.speed)
    };
    let label = format!(
        " {} {speed}  {} / {}  event {} / {}  ",
        if bar.playing { "▶" } else { "‖" },
        super::duration(bar.at),
        super::duration(bar.end),
        group(bar.pos),
        group(bar.total)
    );
    let follow = match bar.follow {
        Follow::Complete => String::new(),
        Follow::Following => "  ● following the live run".into(),
        Follow::Snapshot => "  snapshot: the run stopped here".into(),
    };
    let room = (w as usize).saturating_sub(width(&label) + width(&follow) + 1);
    let filled = if bar.total == 0 {
        0
    } else {
        (room * bar.pos).div_ceil(bar.total).min(room)
    };
    Line::from(vec![
        Span::styled(
            label,
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        ),
        Span::styled("█".repeat(filled), Style::default().fg(t.lanes[1])),
        Span::styled("░".repeat(room - filled), Style::default().fg(t.dim)),
        Span::styled(follow, Style::default().fg(t.warning)),
    ])
}

/// How many operations the filter lets through: ` — 12 shown`, or
/// ` — no match` (nothing typed yet: nothing).
fn matches(app: &App) -> String {
    if app.filter.is_empty() {
        return String::new();
    }
    match app.shown_count() {
        0 => " — no match".into(),
        n => format!(" — {} shown", crate::console::text::group(n)),
    }
}

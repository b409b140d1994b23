//! The footer: the keys valid now (from the key table) and the status line.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::{App, Level, Overlay, Pane};
use crate::console::keymap::{Action, info};
use crate::kernel::Lane;

/// The actions worth showing now, in order.
pub fn context_actions(app: &App) -> Vec<Action> {
    if app.replay.is_some() {
        return vec![
            Action::PlayPause,
            Action::EventForward,
            Action::Forward10,
            Action::Faster,
            Action::Slower,
            Action::Jump,
            Action::NodeInspector,
            Action::Help,
            Action::Quit,
        ];
    }
    let vm = &app.vm;
    let mut v = Vec::new();
    let live = vm.run.finished.is_none();
    if live {
        if vm.run.paused {
            v.extend([Action::Resume, Action::Step]);
        } else {
            v.push(Action::Pause);
        }
    }
    if app.focus == Pane::Lanes
        && let Some(ix) = app.selected_node()
    {
        let n = vm.node(ix);
        if live && n.lane == Lane::AwaitingApproval {
            v.extend([Action::Approve, Action::Deny]);
        }
        if live && (matches!(n.lane, Lane::Queued | Lane::Paused) || n.held) {
            v.push(Action::Hold);
        }
        v.push(Action::NodeInspector);
    }
    if app.focus == Pane::Ledger {
        v.push(Action::LedgerFilter);
    }
    if live && vm.facts.capacity {
        v.push(Action::Release);
    }
    v.extend([
        Action::PaletteInspector,
        Action::FocusNext,
        Action::Filter,
        Action::CycleTheme,
        Action::Help,
        Action::Quit,
    ]);
    v
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let key = Style::default().fg(t.accent).add_modifier(Modifier::BOLD);
    let text = Style::default().fg(t.dim);
    let mut keys: Vec<Span> = vec![Span::raw(" ")];
    let overlay_keys: Option<&[(&str, &str)]> = match &app.overlay {
        Overlay::None => None,
        Overlay::Help { .. } => Some(&[("↑/↓", "scroll"), ("esc", "close")]),
        Overlay::Palette { .. } => Some(&[
            ("↑/↓", "move"),
            ("←/→", "close/open"),
            ("⏎", "toggle"),
            ("esc", "close"),
        ]),
        Overlay::Inspector { .. } => Some(&[("↑/↓", "scroll"), ("esc", "close")]),
        Overlay::ConfirmQuit | Overlay::ConfirmRelease { .. } => {
            Some(&[("y", "yes"), ("n/esc", "no")])
        }
    };
    if app.editing_filter {
        keys.extend([
            Span::styled("⏎", key),
            Span::styled(" apply  ", text),
            Span::styled("esc", key),
            Span::styled(" clear", text),
        ]);
    } else if let Some(list) = overlay_keys {
        for (k, what) in list {
            keys.push(Span::styled(*k, key));
            keys.push(Span::styled(format!(" {what}  "), text));
        }
    } else {
        for a in context_actions(app) {
            keys.push(Span::styled(app.keymap.label(a), key));
            keys.push(Span::styled(format!(" {}  ", short(a)), text));
        }
    }
    let status = if let Some(input) = &app.jump_input {
        Line::from(vec![
            Span::styled(" jump to (12.5, 1:05, #120): ", key),
            Span::raw(input.clone()),
            Span::styled("▏", key),
        ])
    } else if app.editing_filter {
        Line::from(vec![
            Span::styled(" filter: ", key),
            Span::raw(app.filter.clone()),
            Span::styled("▏", key),
        ])
    } else {
        match &app.status {
            Some(s) => {
                let color = match s.level {
                    Level::Info => t.foreground,
                    Level::Warning => t.warning,
                    Level::Error => t.error,
                };
                Line::from(Span::styled(
                    format!(" {}", s.text),
                    Style::default().fg(color),
                ))
            }
            None if !app.filter.is_empty() => Line::from(Span::styled(
                format!(" filter: {} (esc clears)", app.filter),
                text,
            )),
            None => Line::from(""),
        }
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

/// `▶ ×4  12.3s / 40.1s  event 120 / 1623  ████████░░░░░░`
fn timeline(bar: &crate::console::app::ReplayBar, width: u16, app: &App) -> Line<'static> {
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
        bar.pos,
        bar.total
    );
    let room = (width as usize).saturating_sub(label.chars().count() + 1);
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
    ])
}

fn short(a: Action) -> &'static str {
    match a {
        Action::Pause => "pause",
        Action::Resume => "resume",
        Action::Step => "step",
        Action::Release => "release",
        Action::PaletteInspector => "palette",
        Action::Approve => "approve",
        Action::Deny => "deny",
        Action::Hold => "hold",
        Action::NodeInspector => "inspect",
        Action::FocusNext => "pane",
        Action::Filter => "filter",
        Action::LedgerFilter => "outcome",
        Action::CycleTheme => "theme",
        Action::Help => "help",
        Action::Quit => "quit",
        Action::PlayPause => "play/pause",
        Action::EventForward => "event (← back)",
        Action::Forward10 => "10 s (] [)",
        Action::Faster => "faster",
        Action::Slower => "slower",
        Action::Jump => "jump",
        other => info(other).name,
    }
}

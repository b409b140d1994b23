//! The lanes: one column per lifecycle state, members in the order they
//! entered, only the visible rows built.

use ratatui::Frame;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{duration, fit, pane_block, selected_style};
use crate::console::app::{App, Geometry, Pane};
use crate::kernel::{ActivityState, Lane};

pub fn draw(f: &mut Frame, g: &Geometry, app: &App) {
    let t = app.theme();
    for (col, lane) in Lane::ALL.iter().enumerate() {
        let area = g.lane_cols[col];
        if area.width < 3 || area.height < 3 {
            continue;
        }
        let focused = app.focus == Pane::Lanes && app.lane_col == col;
        let len = app.lane_len(col);
        let color = t.lanes[col];
        let title_text = if area.width < 9 {
            format!("{len}")
        } else if (area.width as usize) < lane.title().len() + 7 {
            format!("{} {len}", short_title(*lane))
        } else {
            format!("{} {len}", lane.title())
        };
        let title = Line::from(Span::styled(
            format!(
                " {} ",
                fit(&title_text, area.width.saturating_sub(4) as usize)
            ),
            Style::default().fg(color).add_modifier(Modifier::BOLD),
        ));
        let block = pane_block(title, focused, t);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let h = inner.height as usize;
        let w = inner.width as usize;
        let offset = app.lane_offset[col];
        let rows = app.lane_window(col, offset, h);
        let mut lines = Vec::with_capacity(rows.len());
        for (i, &ix) in rows.iter().enumerate() {
            let n = app.vm.node(ix);
            let marker = if n.skipped() {
                "↷"
            } else if n.held {
                "‖"
            } else if n.escalation.is_some() {
                "!"
            } else if n.parent().is_some() {
                "↳"
            } else {
                " "
            };
            // Narrow columns keep the name and drop the time.
            let time = if w < 16 {
                String::new()
            } else {
                duration(app.node_time(ix))
            };
            // A running agent CLI shows what it does instead of its role.
            let activity = match (&n.activity, n.lane) {
                (Some((state, tool)), Lane::Running) => activity_label(*state, tool.as_deref()),
                _ => None,
            };
            let role = activity
                .as_deref()
                .unwrap_or_else(|| n.role().map_or("", |r| &**r));
            let name_w = w.saturating_sub(time.chars().count() + 2);
            let left = if role.is_empty() || name_w < 14 {
                fit(n.name(), name_w)
            } else {
                let name = fit(
                    n.name(),
                    name_w.saturating_sub(2).min(n.name().chars().count()),
                );
                let rest = name_w.saturating_sub(name.chars().count() + 1);
                format!("{name} {}", fit(role, rest))
            };
            let pad = w.saturating_sub(left.chars().count() + time.chars().count() + 1);
            let name_len = n.name().chars().count().min(left.chars().count());
            let (nm, rl) = left.split_at(
                left.char_indices()
                    .nth(name_len)
                    .map_or(left.len(), |(b, _)| b),
            );
            let row_style = if n.skipped() {
                Style::default().fg(t.skipped)
            } else {
                Style::default().fg(t.foreground)
            };
            let mut spans = vec![
                Span::styled(marker, Style::default().fg(color)),
                Span::styled(nm.to_string(), row_style),
                Span::styled(rl.to_string(), Style::default().fg(t.dim)),
                Span::raw(" ".repeat(pad)),
                Span::styled(time, Style::default().fg(t.dim)),
            ];
            let selected = focused && offset + i == app.lane_row[col];
            if selected {
                let s = selected_style(t);
                spans = spans.into_iter().map(|sp| sp.patch_style(s)).collect();
            }
            lines.push(Line::from(spans));
        }
        if rows.is_empty() && h > 0 && w > 6 {
            lines.push(Line::from(Span::styled(
                fit("—", w),
                Style::default().fg(t.dim),
            )));
        }
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// How a running agent's state reads in a lane row.
pub fn activity_label(state: ActivityState, tool: Option<&str>) -> Option<String> {
    match state {
        ActivityState::Thinking => Some("thinking…".into()),
        ActivityState::Writing => Some("writing…".into()),
        ActivityState::Tool => Some(format!("⚙ {}", tool.unwrap_or("tool"))),
        ActivityState::Waiting => None,
    }
}

fn short_title(l: Lane) -> &'static str {
    match l {
        Lane::Queued => "queued",
        Lane::Running => "running",
        Lane::AwaitingApproval => "approval",
        Lane::Paused => "paused",
        Lane::Succeeded => "done",
        Lane::Failed => "failed",
        Lane::Escalated => "escal.",
    }
}

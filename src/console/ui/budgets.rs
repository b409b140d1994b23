//! Palette budgets: spawns accepted of max_spawn, new roles consumed and
//! reserved of max_new_roles, and the role lists.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{more_below, pane_block};
use crate::console::app::{App, Pane};
use crate::console::text::wrap_hanging;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let p = &app.vm.palette;
    let block = more_below(
        pane_block(
            Line::from(" Palette & budgets "),
            app.focus == Pane::Budgets,
            t,
        ),
        app.budgets.more_below(),
        t,
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height < 3 {
        return;
    }
    let [g1, g2, rest] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(inner);
    let gauge = |label: String, num: u64, den: u64| {
        let ratio = if den == 0 {
            if num > 0 { 1.0 } else { 0.0 }
        } else {
            (num as f64 / den as f64).min(1.0)
        };
        let full = den > 0 && num >= den;
        Gauge::default()
            .ratio(ratio)
            .label(label)
            .use_unicode(true)
            .gauge_style(
                Style::default()
                    .fg(if full { t.warning } else { t.gauge })
                    .bg(t.gauge_bg),
            )
    };
    match &p.budgets {
        Some(b) => {
            f.render_widget(
                gauge(
                    format!("spawns {}/{}", b.spawns_accepted, b.max_spawn),
                    b.spawns_accepted as u64,
                    b.max_spawn as u64,
                ),
                g1,
            );
            let used = b.consumed_new_roles as u64 + b.reserved as u64;
            f.render_widget(
                gauge(
                    if b.reserved > 0 {
                        format!(
                            "new roles {}/{} ({} reserved)",
                            b.consumed_new_roles + b.reserved as u32,
                            b.max_new_roles,
                            b.reserved
                        )
                    } else {
                        format!("new roles {}/{}", b.consumed_new_roles, b.max_new_roles)
                    },
                    used,
                    b.max_new_roles as u64,
                ),
                g2,
            );
        }
        None => {
            f.render_widget(
                Paragraph::new(Span::styled(
                    "no palette budgets yet",
                    Style::default().fg(t.dim),
                )),
                g1,
            );
        }
    }
    let lines = app.budgets.window_of(lines(app, rest.width as usize));
    f.render_widget(Paragraph::new(lines), rest);
}

/// The role lists and refusals, wrapped to `w` columns: every name shows,
/// however many there are.
pub fn lines(app: &App, w: usize) -> Vec<Line<'static>> {
    let t = app.theme();
    let p = &app.vm.palette;
    let label = |s: &'static str| {
        Span::styled(
            s,
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        )
    };
    let names = |v: &mut dyn Iterator<Item = String>| {
        let s: Vec<String> = v.collect();
        if s.is_empty() {
            "—".to_string()
        } else {
            s.join(", ")
        }
    };
    let mut lines = vec![
        Line::from(vec![
            label("initial  "),
            Span::raw(names(&mut p.initial.iter().map(|r| r.role.to_string()))),
        ]),
        Line::from(vec![
            label("expanded "),
            Span::raw(names(&mut p.expanded.iter().map(|r| match &r.by {
                Some(by) => format!("{} (by {by})", r.role),
                None => r.role.to_string(),
            }))),
        ]),
        Line::from(vec![
            label("reserved "),
            Span::raw(names(&mut p.reserved.iter().map(|(r, _, _)| r.to_string()))),
        ]),
    ];
    if !p.rejections.is_empty() {
        let mut by_reason: Vec<(&str, usize)> = Vec::new();
        for r in &p.rejections {
            match by_reason.iter_mut().find(|(k, _)| *k == r.reason.as_str()) {
                Some((_, n)) => *n += 1,
                None => by_reason.push((r.reason.as_str(), 1)),
            }
        }
        let text: Vec<String> = by_reason.iter().map(|(k, n)| format!("{k} {n}")).collect();
        lines.push(Line::from(vec![
            label("refused  "),
            Span::styled(text.join(", "), Style::default().fg(t.warning)),
        ]));
    }
    // Values wrap under themselves, past the label.
    lines.iter().flat_map(|l| wrap_hanging(l, w, 9)).collect()
}

//! Capacity: the max_nodes gauge, each profile's instances (state, current
//! operation, lifetime), operations waiting for capacity, the last release.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{more_below, pane_block, short_instance};
use crate::console::app::{App, Pane};
use crate::console::text::{fit, group, width};
use crate::vocab::InstanceState;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let c = &app.vm.capacity;
    let facts = &app.vm.facts;
    let block = more_below(
        pane_block(Line::from(" Capacity "), app.focus == Pane::Capacity, t),
        app.capacity.more_below(),
        t,
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    if !facts.capacity {
        f.render_widget(
            Paragraph::new(Span::styled(
                "no [capacity]: operations run without instance limits",
                Style::default().fg(t.dim),
            )),
            inner,
        );
        return;
    }
    let [g, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    let active = c.active();
    let ratio = if facts.max_nodes == 0 {
        0.0
    } else {
        (active as f64 / facts.max_nodes as f64).min(1.0)
    };
    f.render_widget(
        Gauge::default()
            .ratio(ratio)
            .use_unicode(true)
            .label(format!("nodes {active}/{}", facts.max_nodes))
            .gauge_style(
                Style::default()
                    .fg(if active >= facts.max_nodes as usize {
                        t.warning
                    } else {
                        t.gauge
                    })
                    .bg(t.gauge_bg),
            ),
        g,
    );
    let lines = app.capacity.window_of(lines(app, rest.width as usize));
    f.render_widget(Paragraph::new(lines), rest);
}

/// The profiles with their instances, what waits and the last release,
/// each line fitted to `w` columns.
pub fn lines(app: &App, w: usize) -> Vec<Line<'static>> {
    let t = app.theme();
    let c = &app.vm.capacity;
    let facts = &app.vm.facts;
    if !facts.capacity {
        return Vec::new();
    }
    let run_id = &app.vm.run.run_id;
    let bold = Style::default().fg(t.accent).add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = Vec::new();
    for p in &facts.profiles {
        let insts: Vec<_> = c
            .instances
            .values()
            .filter(|i| i.profile == p.name && i.state != InstanceState::Released)
            .collect();
        lines.push(Line::from(vec![
            Span::styled(format!("{} ", p.name), bold),
            Span::styled(
                format!(
                    "{} · {}/{}",
                    p.role,
                    insts
                        .iter()
                        .filter(|i| i.state != InstanceState::Failed)
                        .count(),
                    p.max_instances
                ),
                Style::default().fg(t.dim),
            ),
        ]));
        for i in insts {
            let color = match i.state {
                InstanceState::Busy | InstanceState::Retained => t.lanes[1],
                InstanceState::Ready => t.ok,
                InstanceState::Starting | InstanceState::Planned => t.warning,
                InstanceState::Released | InstanceState::Failed => t.error,
            };
            let op = i.op.as_deref().map(|o| format!(" {o}")).unwrap_or_default();
            let text = format!("  {} ", short_instance(&i.name, run_id));
            let tail = format!("{}{op} · {}", i.state.as_str(), i.lifetime);
            lines.push(Line::from(vec![
                Span::raw(text.clone()),
                Span::styled(
                    fit(&tail, w.saturating_sub(width(&text))),
                    Style::default().fg(color),
                ),
            ]));
        }
    }
    if !c.waiting.is_empty() {
        lines.push(Line::from(Span::styled(
            format!("waiting for capacity ({})", c.waiting.len()),
            bold.fg(t.warning),
        )));
        // The pane scrolls, but a flood of waiting work is summed up.
        const SHOWN: usize = 20;
        for &ix in c.waiting.iter().take(SHOWN) {
            let n = app.vm.node(ix);
            let why = n
                .capacity_wait
                .as_deref()
                .unwrap_or("")
                .trim_start_matches("capacity: ");
            lines.push(Line::from(Span::raw(fit(
                &format!("  {} — {why}", n.name()),
                w,
            ))));
        }
        if c.waiting.len() > SHOWN {
            lines.push(Line::from(Span::styled(
                format!("  +{} more", group(c.waiting.len() - SHOWN)),
                Style::default().fg(t.dim),
            )));
        }
    }
    if let Some(r) = &c.last_release {
        lines.push(Line::from(Span::styled(
            format!("last release ({}, {:.1}s)", r.trigger, r.at),
            bold,
        )));
        let released: Vec<&str> = r
            .released
            .iter()
            .map(|n| short_instance(n, run_id))
            .collect();
        lines.push(Line::from(Span::raw(fit(
            &format!(
                "  released {}",
                if released.is_empty() {
                    "—".into()
                } else {
                    released.join(", ")
                }
            ),
            w,
        ))));
        for (name, why) in &r.retained {
            lines.push(Line::from(Span::styled(
                fit(
                    &format!("  retained {} ({why})", short_instance(name, run_id)),
                    w,
                ),
                Style::default().fg(t.warning),
            )));
        }
    }
    lines
}

//! Palette budgets: spawns accepted of max_spawn, new roles consumed and
//! reserved of max_new_roles, and the role lists; beside them the run's
//! spend against its caps (`[budget]`), each role's own cap under them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{more_below, pane_block};
use crate::console::app::{App, Pane};
use crate::console::text::{group, wrap_hanging};

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
    let spend = spend_gauges(&app.vm.spend);
    let rows = Layout::vertical(
        std::iter::repeat_n(Constraint::Length(1), 2 + spend.len()).chain([Constraint::Min(0)]),
    )
    .split(inner);
    let (g1, g2, rest) = (rows[0], rows[1], rows[rows.len() - 1]);
    let gauge = |label: String, num: f64, den: f64| {
        let ratio = if den == 0.0 {
            if num > 0.0 { 1.0 } else { 0.0 }
        } else {
            (num / den).min(1.0)
        };
        let full = den > 0.0 && num >= den;
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
                    b.spawns_accepted as f64,
                    b.max_spawn as f64,
                ),
                g1,
            );
            let used = b.consumed_new_roles as f64 + b.reserved as f64;
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
                    b.max_new_roles as f64,
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
    for ((label, spent, cap), row) in spend.into_iter().zip(&rows[2..]) {
        f.render_widget(gauge(label, spent, cap), *row);
    }
    let lines = app.budgets.window_of(lines(app, rest.width as usize));
    f.render_widget(Paragraph::new(lines), rest);
}

/// The run's capped measures, as gauges: `USD 3.20/10.00 (32%)`, `tokens
/// 12 400/2 000 000 (1%)`.
fn spend_gauges(s: &crate::projection::SpendState) -> Vec<(String, f64, f64)> {
    let Some(b) = &s.budget else {
        return Vec::new();
    };
    let pct = |spent: f64, cap: f64| 100.0 * spent / cap;
    let mut out = Vec::new();
    if let Some(cap) = b.usd {
        out.push((
            format!("USD {:.2}/{cap:.2} ({:.0}%)", s.usd, pct(s.usd, cap)),
            s.usd,
            cap,
        ));
    }
    if let Some(cap) = b.tokens {
        out.push((
            format!(
                "tokens {}/{} ({:.0}%)",
                group(s.tokens as usize),
                group(cap as usize),
                pct(s.tokens, cap)
            ),
            s.tokens,
            cap,
        ));
    }
    out
}

/// Each role's spend against its own caps (`tester 0.90/0.80 USD ·
/// 1 200/5 000 tok`), or what the run spent when nothing caps it.
fn spend_lines(s: &crate::projection::SpendState) -> Vec<(Option<String>, String)> {
    let Some(b) = &s.budget else {
        return crate::kernel::spend::spend_words((s.usd, s.tokens), None)
            .map(|w| (None, w))
            .into_iter()
            .collect();
    };
    b.roles
        .iter()
        .map(|(role, caps)| {
            let (usd, tokens) = s.roles.get(role.as_str()).copied().unwrap_or_default();
            let mut parts = Vec::new();
            if let Some(cap) = caps.usd {
                parts.push(format!("{usd:.2}/{cap:.2} USD"));
            }
            if let Some(cap) = caps.tokens {
                parts.push(format!(
                    "{}/{} tok",
                    group(tokens as usize),
                    group(cap as usize)
                ));
            }
            (Some(role.clone()), format!("{role} {}", parts.join(" · ")))
        })
        .collect()
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
    let spend = spend_lines(&app.vm.spend);
    if !spend.is_empty() {
        // A role whose cap holds its work is marked as the header marks
        // the run's (`tester budget 1.00/0.80 USD`).
        let held = app.vm.spend.held.as_deref().unwrap_or("");
        let mut spans = vec![label(if app.vm.spend.budget.is_some() {
            "caps     "
        } else {
            "spent    "
        })];
        for (i, (role, words)) in spend.into_iter().enumerate() {
            if i > 0 {
                spans.push(Span::raw(", "));
            }
            let hit = role
                .as_ref()
                .is_some_and(|r| held.starts_with(&format!("{r} budget")));
            spans.push(Span::styled(
                words,
                if hit {
                    Style::default().fg(t.warning)
                } else {
                    Style::default()
                },
            ));
        }
        lines.push(Line::from(spans));
    }
    // Values wrap under themselves, past the label.
    lines.iter().flat_map(|l| wrap_hanging(l, w, 9)).collect()
}

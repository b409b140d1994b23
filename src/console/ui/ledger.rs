//! The spawn ledger, newest first: time, emitter → assignee, outcome,
//! detail. Filterable by outcome.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, selected_style};
use crate::console::app::{App, Pane};
use crate::console::text::{fit, group, pad, width};
use crate::kernel::LedgerOutcome;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let focused = app.focus == Pane::Ledger;
    let total = app.ledger.len();
    let title = Line::from(vec![
        Span::raw(" Spawn ledger "),
        Span::styled(
            format!("({}, {total}) ", app.ledger_filter.label()),
            Style::default().fg(t.dim),
        ),
    ]);
    let mut block = pane_block(title, focused, t);
    if let Some(row) = app
        .ledger
        .selected()
        .filter(|_| total > app.ledger.height())
        && focused
    {
        block = block.title_bottom(
            Line::from(Span::styled(
                format!(" [{}/{}] ", group(row + 1), group(total)),
                Style::default().fg(t.dim),
            ))
            .alignment(ratatui::layout::Alignment::Right),
        );
    }
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    let w = inner.width as usize;
    let mut lines = vec![Line::from(Span::styled(
        fit("   time  emitter → assignee          outcome", w),
        Style::default().fg(t.dim).add_modifier(Modifier::BOLD),
    ))];
    let window = app.ledger.visible();
    let rows = app.ledger_window(window.start, window.len());
    for (k, &ri) in rows.iter().enumerate() {
        let i = window.start + k;
        let r = &app.vm.ledger[ri];
        let who = format!(
            "{} → {}",
            r.emitter_name.as_deref().unwrap_or("(operator)"),
            r.assignee.as_deref().unwrap_or("(its role)")
        );
        let (outcome, color) = match &r.outcome {
            LedgerOutcome::Accepted { name, .. } => (format!("✓ {name}"), t.ok),
            // Repeats folded into the row show how many it stands for.
            LedgerOutcome::Dropped { reason, detail, .. } if r.repeats > 0 => (
                format!(
                    "✗ ×{} {}: {detail}",
                    group(r.repeats as usize + 1),
                    reason.as_str()
                ),
                t.error,
            ),
            LedgerOutcome::Dropped { reason, detail, .. } => {
                (format!("✗ {}: {detail}", reason.as_str()), t.error)
            }
        };
        let time = format!("{:>6.1}s ", r.elapsed);
        let who = format!("{} ", pad(&who, 25));
        let rest = w.saturating_sub(width(&time) + width(&who));
        let mut spans = vec![
            Span::styled(time, Style::default().fg(t.dim)),
            Span::raw(who),
            Span::styled(fit(&outcome, rest), Style::default().fg(color)),
        ];
        if focused && app.ledger.selected() == Some(i) {
            let s = selected_style(t);
            spans = spans.into_iter().map(|sp| sp.patch_style(s)).collect();
        }
        lines.push(Line::from(spans));
    }
    if total == 0 {
        lines.push(Line::from(Span::styled(
            "no spawn requests yet",
            Style::default().fg(t.dim),
        )));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

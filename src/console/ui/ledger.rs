//! The spawn ledger, newest first: time, emitter → assignee, outcome,
//! detail. Filterable by outcome.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{fit, pane_block, selected_style};
use crate::console::app::{App, Pane};
use crate::kernel::LedgerOutcome;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let focused = app.focus == Pane::Ledger;
    let total = app.ledger_len();
    let title = Line::from(vec![
        Span::raw(" Spawn ledger "),
        Span::styled(
            format!("({}, {total}) ", app.ledger_filter.label()),
            Style::default().fg(t.dim),
        ),
    ]);
    let block = pane_block(title, focused, t);
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
    let h = inner.height as usize - 1;
    let rows = app.ledger_window(app.ledger_offset, h);
    for (k, &ri) in rows.iter().enumerate() {
        let i = app.ledger_offset + k;
        let r = &app.vm.ledger[ri];
        let who = format!(
            "{} → {}",
            r.emitter_name.as_deref().unwrap_or("(operator)"),
            r.assignee.as_deref().unwrap_or("(its role)")
        );
        let (outcome, color) = match &r.outcome {
            LedgerOutcome::Accepted { name, .. } => (format!("✓ {name}"), t.ok),
            LedgerOutcome::Dropped { reason, detail, .. } => {
                (format!("✗ {}: {detail}", reason.as_str()), t.error)
            }
        };
        let time = format!("{:>6.1}s ", r.elapsed);
        let who = format!("{:<25} ", fit(&who, 25));
        let rest = w.saturating_sub(time.chars().count() + who.chars().count());
        let mut spans = vec![
            Span::styled(time, Style::default().fg(t.dim)),
            Span::raw(who),
            Span::styled(fit(&outcome, rest), Style::default().fg(color)),
        ];
        if focused && i == app.ledger_row {
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

//! The header: play, run, state, time, round, lane counts, approvals.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::duration;
use crate::console::app::App;
use crate::kernel::Lane;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let vm = &app.vm;
    let base = Style::default().bg(t.header_bg).fg(t.header_fg);
    let bold = base.add_modifier(Modifier::BOLD);
    let state = app.run_state();
    let state_color = match state.as_str() {
        "running" => t.lanes[1],
        "paused" | "draining" | "stepping" => t.lanes[3],
        s if s.ends_with("succeeded") => t.ok,
        s if s.starts_with("finished") => t.error,
        _ => t.warning,
    };
    let mut top = vec![
        Span::styled(
            if app.replay.is_some() {
                " playdeck replay "
            } else {
                " playdeck "
            },
            bold.fg(t.accent),
        ),
        Span::styled(format!("{} ", vm.run.play), bold),
        Span::styled(format!("· run {} · ", vm.run.run_id), base.fg(t.dim)),
        Span::styled(format!("● {state}"), bold.fg(state_color)),
        Span::styled(
            format!(" · {} · round {}", duration(app.clock), vm.run.round.max(1)),
            base,
        ),
    ];
    let waiting = vm.approvals_waiting();
    if waiting > 0 {
        top.push(Span::styled(
            format!("  ⚑ {waiting} awaiting approval"),
            bold.fg(t.warning).add_modifier(Modifier::REVERSED),
        ));
    }
    let mut counts = vec![Span::styled(" ", base)];
    for (i, lane) in Lane::ALL.iter().enumerate() {
        let n = vm.count(*lane);
        let mut label = format!("{} {n}", lane.title());
        if *lane == Lane::Failed && vm.counts.skipped > 0 {
            label.push_str(&format!(" ({} skipped)", vm.counts.skipped));
        }
        let style = if n > 0 {
            base.fg(t.lanes[i])
        } else {
            base.fg(t.dim)
        };
        counts.push(Span::styled(label, style));
        counts.push(Span::styled("  ", base));
    }
    if let Some(b) = &vm.palette.budgets {
        counts.push(Span::styled(
            format!(
                "spawns {}/{}  roles {}/{}",
                b.spawns_accepted,
                b.max_spawn,
                b.consumed_new_roles + b.reserved as u32,
                b.max_new_roles
            ),
            base.fg(t.dim),
        ));
    }
    f.render_widget(
        Paragraph::new(vec![Line::from(top), Line::from(counts)]).style(base),
        area,
    );
}

//! Capacity: the max_nodes gauge, each profile's instances (state in
//! words, current operation, how long idle and whether a release would
//! take it), operations waiting for capacity, the last release.
//!
//! The pane is a list the operator moves through: [`rows`] says what each
//! row is (cheap, no text built), so keys can act on the instance under the
//! cursor, and only the rows in the window are drawn.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{more_below, pane_block, selected_style, short_instance};
use crate::console::app::{App, CapRow, Pane, WAITING_SHOWN};
use crate::console::text::{fit, group, width};
use crate::vocab::InstanceState;

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let c = &app.vm.capacity;
    let facts = &app.vm.facts;
    let focused = app.focus == Pane::Capacity;
    let block = more_below(
        pane_block(Line::from(" Capacity "), focused, t),
        app.capacity.more_below(),
        t,
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    if !facts.capacity && c.workers.is_none() {
        f.render_widget(
            Paragraph::new(Span::styled(NO_LIMITS, Style::default().fg(t.dim))),
            inner,
        );
        return;
    }
    let [g, rest] = Layout::vertical([
        Constraint::Length(app.capacity_gauge_rows()),
        Constraint::Min(0),
    ])
    .areas(inner);
    // The gauge counts instances: a run without [capacity] has none.
    if facts.capacity {
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
    }
    let w = rest.width as usize;
    let window = app.capacity.visible();
    let selected = app.capacity.selected().filter(|_| focused);
    let lines: Vec<Line> = app
        .capacity_rows()
        .into_iter()
        .enumerate()
        .skip(window.start)
        .take(window.len())
        .map(|(k, row)| {
            let l = line(app, row, w);
            if selected == Some(k) {
                // Padded, so the whole row shows the cursor, as in the lanes.
                let pad = w.saturating_sub(l.width());
                let mut spans = l.spans;
                spans.push(Span::raw(" ".repeat(pad)));
                let s = selected_style(t);
                Line::from(
                    spans
                        .into_iter()
                        .map(|sp| sp.patch_style(s))
                        .collect::<Vec<_>>(),
                )
            } else {
                l
            }
        })
        .collect();
    f.render_widget(Paragraph::new(lines), rest);
}

const NO_LIMITS: &str = "no [capacity]: operations run without instance limits";

/// The workers' title: `workers 3 · busy 5/48`, and when the list was
/// said if the run has ended since.
fn workers_title(app: &App, workers: &[crate::kernel::WorkerSeen]) -> String {
    let mut s = format!("workers {}", crate::cluster::roster::load_words(workers));
    if app.vm.run.finished.is_some() {
        s.push_str(" · when the run ended");
    }
    s
}

/// A worker: `host-123  3/16 · gpu · beating`, or how long it is silent.
fn worker_line(
    app: &App,
    w: &crate::kernel::WorkerSeen,
    said_at: f64,
    width_: usize,
) -> Line<'static> {
    let t = app.theme();
    let head = format!("  {} ", w.id);
    let mut tail = format!("{}/{}", w.busy, w.slots);
    if !w.tags.is_empty() {
        let tags: Vec<&str> = w.tags.iter().map(|t| &**t).collect();
        tail.push_str(&format!(" · {}", tags.join(",")));
    }
    // A finished run does not know who beats now.
    let finished = app.vm.run.finished.is_some();
    if !finished || w.silent() {
        tail.push_str(&format!(
            " · {}",
            crate::cluster::roster::beat_words(w, app.clock - said_at)
        ));
    }
    let color = if w.silent() {
        t.warning
    } else if w.busy > 0 {
        t.lanes[1]
    } else {
        t.ok
    };
    Line::from(vec![
        Span::raw(fit(&head, width_)),
        Span::styled(
            fit(&tail, width_.saturating_sub(width(&head))),
            Style::default().fg(color),
        ),
    ])
}

/// One row's text, fitted to `w` columns.
fn line(app: &App, row: CapRow, w: usize) -> Line<'static> {
    let t = app.theme();
    let c = &app.vm.capacity;
    let run_id = &app.vm.run.run_id;
    let bold = Style::default().fg(t.accent).add_modifier(Modifier::BOLD);
    match row {
        CapRow::WorkersTitle => Line::from(Span::styled(
            fit(
                &c.workers
                    .as_ref()
                    .map(|(ws, _)| workers_title(app, ws))
                    .unwrap_or_default(),
                w,
            ),
            bold,
        )),
        CapRow::Worker(k) => match c
            .workers
            .as_ref()
            .and_then(|(ws, at)| Some((ws.get(k)?, *at)))
        {
            Some((x, at)) => worker_line(app, x, at, w),
            None => Line::default(),
        },
        CapRow::NoLimits => Line::from(Span::styled(fit(NO_LIMITS, w), Style::default().fg(t.dim))),
        CapRow::Profile(k) => {
            let p = &app.vm.facts.profiles[k];
            let counted = c
                .instances
                .values()
                .filter(|i| i.profile == p.name && i.state.is_active())
                .count();
            let head = format!("{} ", p.name);
            let tail = format!("{} · {counted}/{}", p.role, p.max_instances);
            Line::from(vec![
                Span::styled(fit(&head, w), bold),
                Span::styled(
                    fit(&tail, w.saturating_sub(width(&head))),
                    Style::default().fg(t.dim),
                ),
            ])
        }
        CapRow::Instance(ix) => {
            let Some((_, i)) = c.instances.get_index(ix) else {
                return Line::default();
            };
            let color = match i.state {
                InstanceState::Busy | InstanceState::Retained => t.lanes[1],
                InstanceState::Ready => t.ok,
                InstanceState::Starting | InstanceState::Planned => t.warning,
                InstanceState::Released | InstanceState::Failed => t.error,
            };
            let head = format!("  {} ", short_instance(&i.name, run_id));
            let mut tail = app.state_words(i);
            // An idle one says its lifetime in why it is kept or due.
            if i.state != InstanceState::Ready {
                tail.push_str(&format!(" · {}", i.lifetime));
            }
            Line::from(vec![
                Span::raw(fit(&head, w)),
                Span::styled(
                    fit(&tail, w.saturating_sub(width(&head))),
                    Style::default().fg(color),
                ),
            ])
        }
        CapRow::WaitingTitle => Line::from(Span::styled(
            fit(&format!("waiting for capacity ({})", c.waiting.len()), w),
            bold.fg(t.warning),
        )),
        CapRow::Waiting(ix) => {
            let n = app.vm.node(ix);
            let why = n
                .capacity_wait
                .as_deref()
                .unwrap_or("")
                .trim_start_matches("capacity: ");
            Line::from(Span::raw(fit(&format!("  {} — {why}", n.name()), w)))
        }
        CapRow::WaitingMore => Line::from(Span::styled(
            fit(
                &format!(
                    "  +{} more",
                    group(c.waiting.len().saturating_sub(WAITING_SHOWN))
                ),
                w,
            ),
            Style::default().fg(t.dim),
        )),
        CapRow::ReleaseTitle => match &c.last_release {
            Some(r) => Line::from(Span::styled(
                fit(&format!("last release ({}, {:.1}s)", r.trigger, r.at), w),
                bold,
            )),
            None => Line::default(),
        },
        CapRow::Released => {
            let released: Vec<&str> = c
                .last_release
                .iter()
                .flat_map(|r| r.released.iter())
                .map(|n| short_instance(n, run_id))
                .collect();
            Line::from(Span::raw(fit(
                &format!(
                    "  released {}",
                    if released.is_empty() {
                        "—".into()
                    } else {
                        released.join(", ")
                    }
                ),
                w,
            )))
        }
        CapRow::Retained(k) => {
            let Some((name, why)) = c.last_release.as_ref().and_then(|r| r.retained.get(k)) else {
                return Line::default();
            };
            Line::from(Span::styled(
                fit(
                    &format!(
                        "  kept {} — {}",
                        short_instance(name, run_id),
                        crate::capacity::reason_words(why)
                    ),
                    w,
                ),
                Style::default().fg(t.warning),
            ))
        }
    }
}

//! Capacity: the max_nodes gauge, each profile's instances (state in
//! words, current operation, how long idle and whether a release would
//! take it), operations waiting for capacity, the last release.
//!
//! The pane is a list the operator moves through: [`rows`] says what each
//! row is (cheap, no text built), so keys can act on the instance under the
//! cursor, and only the rows in the window are drawn.

use std::collections::HashMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::lanes::short_time;
use super::{more_below, pane_block, selected_style, short_instance};
use crate::console::app::{App, Pane};
use crate::console::text::{fit, group, width};
use crate::projection::Instance;
use crate::vocab::{InstanceState, Lifetime};

/// What one row of the pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapRow {
    /// A profile's title: its name, role and instances of `max_instances`.
    Profile(usize),
    /// An instance: its index in the view's instances.
    Instance(usize),
    WaitingTitle,
    /// An operation waiting for capacity (its node index).
    Waiting(u32),
    /// How many more wait than are listed.
    WaitingMore,
    ReleaseTitle,
    Released,
    /// An instance the last release kept: its index in `retained`.
    Retained(usize),
    /// A `[cluster]` run's workers: how many, their load.
    WorkersTitle,
    /// A worker: its index in the list last said.
    Worker(usize),
    /// Under the workers of a run without `[capacity]`.
    NoLimits,
}

/// The waiting operations listed one by one; a flood is summed up.
const WAITING_SHOWN: usize = 20;

/// The pane's rows in order: each profile with its instances (released
/// ones are gone), what waits, the last release.
pub fn rows(app: &App) -> Vec<CapRow> {
    let c = &app.vm.capacity;
    let facts = &app.vm.facts;
    let mut rows = Vec::new();
    if let Some((workers, _)) = &c.workers {
        rows.push(CapRow::WorkersTitle);
        rows.extend((0..workers.len()).map(CapRow::Worker));
        if !facts.capacity {
            rows.push(CapRow::NoLimits);
        }
    }
    if !facts.capacity {
        return rows;
    }
    // One pass over the instances, grouped by profile.
    let at: HashMap<&str, usize> = facts
        .profiles
        .iter()
        .enumerate()
        .map(|(k, p)| (&*p.name, k))
        .collect();
    let mut by_profile: Vec<Vec<usize>> = vec![Vec::new(); facts.profiles.len()];
    for (i, inst) in c.instances.values().enumerate() {
        if inst.state == InstanceState::Released {
            continue;
        }
        if let Some(&k) = at.get(&*inst.profile) {
            by_profile[k].push(i);
        }
    }
    for (k, insts) in by_profile.into_iter().enumerate() {
        rows.push(CapRow::Profile(k));
        rows.extend(insts.into_iter().map(CapRow::Instance));
    }
    if !c.waiting.is_empty() {
        rows.push(CapRow::WaitingTitle);
        rows.extend(
            c.waiting
                .iter()
                .take(WAITING_SHOWN)
                .map(|&ix| CapRow::Waiting(ix)),
        );
        if c.waiting.len() > WAITING_SHOWN {
            rows.push(CapRow::WaitingMore);
        }
    }
    if let Some(r) = &c.last_release {
        rows.push(CapRow::ReleaseTitle);
        rows.push(CapRow::Released);
        rows.extend((0..r.retained.len()).map(CapRow::Retained));
    }
    rows
}

/// Whether instances of `profile` are pinned (long-lived).
fn pinned(app: &App, profile: &str) -> bool {
    app.vm
        .facts
        .profiles
        .iter()
        .any(|p| &*p.name == profile && p.pinned)
}

/// Why the release that is due (`x`, a round's end) leaves this instance
/// when idle: it is pinned, or its lifetime is not due yet. `None`: such
/// a release takes it.
pub fn kept_by(app: &App, i: &Instance) -> Option<&'static str> {
    if pinned(app, &i.profile) {
        return Some("pinned");
    }
    match i.lifetime {
        Lifetime::CurrentRound => None,
        Lifetime::CurrentLoop if app.vm.run.finished.is_some() => None,
        other => Some(other.as_str()),
    }
}

/// How long it has been in its state, as the lanes say times.
pub fn state_age(app: &App, i: &Instance) -> String {
    short_time(app.clock - i.since)
}

/// An instance's state in words: `busy: plan-api`, `idle 2m05 —
/// releasable`, `idle 12s — kept: manual_release`.
pub fn state_words(app: &App, i: &Instance) -> String {
    let op = i.op.as_deref();
    match i.state {
        InstanceState::Busy => match op {
            Some(o) => format!("busy: {o}"),
            None => "busy".into(),
        },
        // A release found it working: it stays until it is idle.
        InstanceState::Retained => match op {
            Some(o) => format!("busy: {o} · retained"),
            None => "busy · retained".into(),
        },
        InstanceState::Ready => {
            let why = match kept_by(app, i) {
                None => "releasable".to_string(),
                Some(k) => format!("kept: {k}"),
            };
            format!("idle {} — {why}", state_age(app, i))
        }
        InstanceState::Starting => "starting: its worktree is being added".into(),
        InstanceState::Planned => "planned, not started".into(),
        InstanceState::Failed => "failed to start".into(),
        InstanceState::Released => "released".into(),
    }
}

/// Lines above the rows: the nodes gauge, with `[capacity]`.
pub fn gauge_rows(app: &App) -> u16 {
    u16::from(app.vm.facts.capacity)
}

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
    let [g, rest] =
        Layout::vertical([Constraint::Length(gauge_rows(app)), Constraint::Min(0)]).areas(inner);
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
    let lines: Vec<Line> = rows(app)
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
            let mut tail = state_words(app, i);
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

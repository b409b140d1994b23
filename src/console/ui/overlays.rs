//! Overlays: help (from the key table), the palette inspector (a tree), the
//! node inspector, and confirmations.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};
use tui_tree_widget::{Tree, TreeItem};

use super::{duration, selected_style, short_instance};
use crate::console::app::{App, Overlay};
use crate::console::keymap::{ACTIONS, Scope};
use crate::console::theme::Theme;
use crate::kernel::{ActivityState, Lane, SpawnBudget, Usage};

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    match &app.overlay {
        Overlay::None => {}
        Overlay::Help { scroll } => help(f, area, app, *scroll),
        Overlay::Palette { state } => {
            let mut state = state.borrow_mut();
            palette(f, area, app, &mut state);
        }
        Overlay::Inspector { node, scroll } => inspector(f, area, app, *node, *scroll),
        Overlay::ConfirmQuit => confirm(
            f,
            area,
            app,
            " Quit playdeck? ",
            vec![
                Line::from("The run is still going. Quitting cancels it:"),
                Line::from("running operations are stopped and reported as cancelled,"),
                Line::from("the rest is skipped, and every agent process is ended."),
                Line::from(""),
                Line::from(vec![
                    Span::styled("y", bold(app.theme())),
                    Span::raw(" quit   "),
                    Span::styled("n", bold(app.theme())),
                    Span::raw(" keep watching"),
                ]),
            ],
        ),
        Overlay::ConfirmRelease { preview } => {
            let t = app.theme();
            let run_id = &app.vm.run.run_id;
            let mut lines = vec![Line::from(
                "Release idle capacity now? Busy instances are never unloaded.",
            )];
            lines.push(Line::from(""));
            if preview.released.is_empty() {
                lines.push(Line::from(Span::styled(
                    "Nothing is idle: nothing would be released.",
                    Style::default().fg(t.dim),
                )));
            } else {
                lines.push(Line::from(Span::styled(
                    format!("Released ({}):", preview.released_count),
                    bold(t).fg(t.ok),
                )));
                for n in &preview.released {
                    lines.push(Line::from(format!("  {}", short_instance(n, run_id))));
                }
            }
            if !preview.retained.is_empty() {
                lines.push(Line::from(Span::styled(
                    format!("Retained ({}):", preview.retained_count),
                    bold(t).fg(t.warning),
                )));
                for r in &preview.retained {
                    lines.push(Line::from(format!(
                        "  {} — {}",
                        short_instance(&r.name, run_id),
                        r.reason
                    )));
                }
            }
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled("y", bold(t)),
                Span::raw(" release   "),
                Span::styled("n", bold(t)),
                Span::raw(" cancel"),
            ]));
            confirm(f, area, app, " Release idle capacity ", lines);
        }
    }
}

fn bold(t: &Theme) -> Style {
    Style::default().fg(t.accent).add_modifier(Modifier::BOLD)
}

fn popup(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}

fn frame<'a>(title: &'a str, t: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(Style::default().fg(t.border_focused))
        .title(Span::styled(title, bold(t)))
        .style(Style::default().bg(t.background).fg(t.foreground))
}

fn confirm(f: &mut Frame, area: Rect, app: &App, title: &str, lines: Vec<Line>) {
    let w = lines.iter().map(|l| l.width() as u16).max().unwrap_or(20) + 4;
    let r = popup(area, w.max(40), lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .block(frame(title, app.theme()))
            .wrap(Wrap { trim: false }),
        r,
    );
}

fn help(f: &mut Frame, area: Rect, app: &App, scroll: u16) {
    let t = app.theme();
    let mut lines = Vec::new();
    // A replay lists its own keys first; a live run leaves them out.
    let scopes: &[Scope] = if app.replay.is_some() {
        &[
            Scope::Replay,
            Scope::Navigation,
            Scope::View,
            Scope::Selection,
        ]
    } else {
        &[Scope::Run, Scope::Selection, Scope::Navigation, Scope::View]
    };
    for &scope in scopes {
        lines.push(Line::from(Span::styled(scope.title(), bold(t))));
        for a in ACTIONS.iter().filter(|a| a.scope == scope) {
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {:<14}", app.keymap.label(a.action)),
                    Style::default().fg(t.accent),
                ),
                Span::raw(a.help),
            ]));
        }
        lines.push(Line::from(""));
    }
    lines.push(Line::from(Span::styled(
        "mouse: click selects, the wheel scrolls",
        Style::default().fg(t.dim),
    )));
    lines.push(Line::from(Span::styled(
        "keys can be changed in config.toml [keys]; see the README",
        Style::default().fg(t.dim),
    )));
    let r = popup(area, 64, area.height.saturating_sub(4));
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((scroll, 0))
            .block(frame(" Keys ", t)),
        r,
    );
}

/// The palette as a tree: initial roles, expansions, reservations,
/// recruitable roles, both budgets, rejections by reason.
pub fn palette_items(app: &App) -> Vec<TreeItem<'static, String>> {
    let p = &app.vm.palette;
    let leaf = |id: String, text: String| TreeItem::new_leaf(id, text);
    let node = |id: &str, text: String, children: Vec<TreeItem<'static, String>>| {
        TreeItem::new(id.to_string(), text, children).expect("unique identifiers")
    };
    let role_text = |r: &crate::projection::RoleRow| {
        let modes: Vec<&str> = r.modes.iter().map(|m| &**m).collect();
        format!(
            "{} · {} · modes {} · {} {} · routed",
            r.role,
            r.disposition,
            if modes.is_empty() {
                "—".to_string()
            } else {
                modes.join(", ")
            },
            r.model.as_deref().unwrap_or("-"),
            r.effort.as_deref().unwrap_or(""),
        )
    };
    let initial: Vec<_> = p
        .initial
        .iter()
        .map(|r| leaf(format!("i:{}", r.role), role_text(r)))
        .collect();
    let expanded: Vec<_> = p
        .expanded
        .iter()
        .map(|r| {
            leaf(
                format!("e:{}", r.role),
                format!(
                    "{} · at {} by {} · {}",
                    r.role,
                    duration(r.at),
                    r.by.as_deref().unwrap_or("?"),
                    r.model.as_deref().unwrap_or("-")
                ),
            )
        })
        .collect();
    let reserved: Vec<_> = p
        .reserved
        .iter()
        .map(|(r, at, by)| {
            leaf(
                format!("r:{r}"),
                format!(
                    "{r} · provisioning since {} for {}",
                    duration(*at),
                    by.as_deref().unwrap_or("?")
                ),
            )
        })
        .collect();
    let only: Vec<_> = app
        .vm
        .expansion_only()
        .map(|r| leaf(format!("o:{r}"), r.to_string()))
        .collect();
    let mut budgets = Vec::new();
    if let Some(b) = &p.budgets {
        budgets.push(leaf(
            "b:roles".into(),
            format!(
                "new roles: {} consumed + {} reserved of max_new_roles {}",
                b.consumed_new_roles, b.reserved, b.max_new_roles
            ),
        ));
        budgets.push(leaf(
            "b:spawns".into(),
            format!(
                "spawns: {} accepted of max_spawn {}",
                b.spawns_accepted, b.max_spawn
            ),
        ));
    }
    budgets.push(leaf(
        "b:expand".into(),
        format!(
            "orchestrator may expand: {}",
            if app.vm.facts.orchestrator_may_expand {
                "yes"
            } else {
                "no"
            }
        ),
    ));
    let mut by_reason: BTreeMap<&str, Vec<&crate::projection::Rejection>> = BTreeMap::new();
    for r in &p.rejections {
        by_reason.entry(r.reason.as_str()).or_default().push(r);
    }
    let rejections: Vec<_> = by_reason
        .iter()
        .map(|(reason, list)| {
            let kids = list
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    leaf(
                        format!("x:{reason}:{i}"),
                        format!(
                            "{} from {} at {}: {}",
                            r.role,
                            r.by.as_deref().unwrap_or("?"),
                            duration(r.at),
                            r.detail
                        ),
                    )
                })
                .collect();
            node(
                &format!("x:{reason}"),
                format!("{reason} ({})", list.len()),
                kids,
            )
        })
        .collect();
    vec![
        node(
            "initial",
            format!("Initial roles ({})", initial.len()),
            initial,
        ),
        node(
            "expanded",
            format!("Expanded roles ({})", expanded.len()),
            expanded,
        ),
        node(
            "reserved",
            format!("Reservations in flight ({})", reserved.len()),
            reserved,
        ),
        node(
            "only",
            format!("Expansion-only catalog roles ({})", only.len()),
            only,
        ),
        node("budgets", "Budgets".to_string(), budgets),
        node(
            "rejections",
            format!("Rejections ({})", p.rejections.len()),
            rejections,
        ),
    ]
}

fn palette(f: &mut Frame, area: Rect, app: &App, state: &mut tui_tree_widget::TreeState<String>) {
    let t = app.theme();
    let items = palette_items(app);
    let r = popup(
        area,
        area.width.saturating_sub(8).min(110),
        area.height.saturating_sub(4),
    );
    f.render_widget(Clear, r);
    let tree = Tree::new(&items)
        .expect("unique identifiers")
        .block(frame(" Palette inspector ", t))
        .highlight_style(selected_style(t).add_modifier(Modifier::BOLD))
        .highlight_symbol("▶ ");
    f.render_stateful_widget(tree, r, state);
}

fn inspector(f: &mut Frame, area: Rect, app: &App, ix: u32, scroll: u16) {
    let t = app.theme();
    let n = app.vm.node(ix);
    let key = |k: &str| Span::styled(format!("{k:<12}"), bold(t));
    let mut lines = vec![
        Line::from(vec![key("op id"), Span::raw(n.op.op_id.to_string())]),
        Line::from(vec![key("name"), Span::raw(n.name().to_string())]),
        Line::from(vec![
            key("role"),
            Span::raw(n.role().map_or("—", |r| &**r).to_string()),
        ]),
        Line::from(vec![
            key("lane"),
            Span::raw(format!(
                "{}{}",
                n.lane.title(),
                if n.skipped() { " (skipped)" } else { "" }
            )),
        ]),
    ];
    if n.attempt > 1 {
        lines.push(Line::from(vec![
            key("attempt"),
            Span::raw(n.attempt.to_string()),
        ]));
        for e in n.earlier() {
            let how = e.error.as_deref().unwrap_or(&e.outcome);
            lines.push(Line::from(vec![
                key(""),
                Span::styled(
                    format!("attempt {}: {how}", e.attempt),
                    Style::default().fg(t.dim),
                ),
            ]));
        }
    }
    if let Some(w) = app.waiting_for(ix) {
        lines.push(Line::from(vec![
            key("waiting for"),
            Span::styled(w, Style::default().fg(t.warning)),
        ]));
    }
    if let Some(i) = n.current().and_then(|a| a.instance.as_ref()) {
        lines.push(Line::from(vec![
            key("instance"),
            Span::raw(short_instance(i, &app.vm.run.run_id).to_string()),
        ]));
    }
    if let Some((state, tool)) = &n.activity
        && n.lane == Lane::Running
    {
        let what = match state {
            ActivityState::Tool => format!("running tool {}", tool.as_deref().unwrap_or("?")),
            other => other.as_str().to_string(),
        };
        lines.push(Line::from(vec![key("agent"), Span::raw(what)]));
    }
    if let Some(u) = &n.usage() {
        lines.push(Line::from(vec![key("usage"), Span::raw(usage_text(u))]));
    }
    let deps: Vec<String> = n
        .depends_on
        .iter()
        .map(|d| app.vm.name_of(d).map_or(d.to_string(), |s| s.to_string()))
        .collect();
    lines.push(Line::from(vec![
        key("depends on"),
        Span::raw(if deps.is_empty() {
            "—".into()
        } else {
            deps.join(", ")
        }),
    ]));
    if let Some(p) = n.parent() {
        lines.push(Line::from(vec![
            key("spawned by"),
            Span::raw(app.vm.name_of(&p).map_or(p.to_string(), |s| s.to_string())),
        ]));
    }
    let history = app.vm.history(ix);
    let timings: Vec<String> = history
        .iter()
        .enumerate()
        .map(|(i, (lane, at))| {
            let until = history.get(i + 1).map_or(app.clock, |(_, t)| *t);
            let spent = if lane.is_terminal() {
                String::new()
            } else {
                format!(" for {}", duration(until - at))
            };
            format!("{} at {}{spent}", lane.title(), duration(*at))
        })
        .collect();
    lines.push(Line::from(vec![
        key("timings"),
        Span::raw(timings.join(" → ")),
    ]));
    if let Some(e) = &n.escalation {
        lines.push(Line::from(vec![
            key("escalated"),
            Span::styled(e.to_string(), Style::default().fg(t.lanes[6])),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled("instruction", bold(t))));
    let instruction = match &app.hooks.decorate {
        Some(d) => d.decorate(
            n.role().map(|r| &**r),
            &n.op.instruction,
            SpawnBudget {
                accepted: app
                    .vm
                    .palette
                    .budgets
                    .as_ref()
                    .map_or(0, |b| b.spawns_accepted),
                max: app.vm.run.max_spawn,
            },
        ),
        None => n.op.instruction.clone(),
    };
    for l in instruction.lines() {
        lines.push(Line::from(format!("  {l}")));
    }
    lines.push(Line::from(""));
    if let Some(e) = &n.error {
        lines.push(Line::from(Span::styled("error", bold(t).fg(t.error))));
        lines.push(Line::from(Span::styled(
            format!("  {e}"),
            Style::default().fg(t.error),
        )));
    } else if let Some(r) = &n.result {
        lines.push(Line::from(Span::styled("result", bold(t))));
        let text = serde_json::to_string_pretty(&**r).unwrap_or_default();
        for l in text.lines().take(200) {
            lines.push(Line::from(format!("  {l}")));
        }
    }
    if let Some(tail) = app.hooks.tails.as_ref().and_then(|t| t.get(&n.op.op_id)) {
        lines.push(Line::from(""));
        let mut head = vec![Span::styled("output", bold(t))];
        if let Some(log) = &tail.log {
            head.push(Span::styled(
                format!(
                    "  (attempt {}, last {} lines; all in {})",
                    tail.attempt,
                    tail.lines.len(),
                    log.display()
                ),
                Style::default().fg(t.dim),
            ));
        }
        lines.push(Line::from(head));
        for l in &tail.lines {
            let style = if l.stderr {
                Style::default().fg(t.warning)
            } else {
                Style::default()
            };
            lines.push(Line::from(Span::styled(format!("  {}", l.text), style)));
        }
    }
    let r = popup(
        area,
        area.width.saturating_sub(6).min(120),
        area.height.saturating_sub(4),
    );
    f.render_widget(Clear, r);
    let title = format!(" {} ", n.name());
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0))
            .block(frame(&title, t)),
        r,
    );
}

/// `$0.0123 · 12.3k tokens in · 2.1k out`, with what the stream reported.
pub fn usage_text(u: &Usage) -> String {
    let mut parts = Vec::new();
    if let Some(c) = u.cost_usd {
        parts.push(format!("${c:.4}"));
    }
    if let Some(i) = u.input_tokens {
        parts.push(format!("{} tokens in", tokens(i)));
    }
    if let Some(o) = u.output_tokens {
        parts.push(format!("{} out", tokens(o)));
    }
    parts.join(" · ")
}

fn tokens(n: u64) -> String {
    if n >= 10_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

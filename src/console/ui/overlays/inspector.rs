//! The node inspector. What went wrong comes first (the error of a failed
//! operation, the reason of an escalation or a skip); long sections (the
//! dependencies of a 5 000-way join, a long result) are collapsed to their
//! first lines and a count until asked for in full.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Window, bold, field, heading};
use crate::console::app::{App, LIST_MAX, TEXT_MAX};
use crate::console::keymap::{Action, Mode};
use crate::console::text::group;
use crate::console::ui::{duration, short_instance};
use crate::kernel::agent::QuestionKind;
use crate::kernel::{ActivityState, Lane, SpawnBudget, Usage};

pub fn window(
    app: &App,
    ix: u32,
    all: bool,
    turns: &std::cell::RefCell<crate::console::follow::LastTurns>,
) -> Window {
    let t = app.theme();
    let vm = &app.vm;
    let n = vm.node(ix);
    let show_all = app.keymap.label_in(Mode::Inspector, Action::ShowAll);
    let more = |hidden: usize, what: &str| {
        Line::from(Span::styled(
            format!("  … {} more {what} ({show_all} shows all)", group(hidden)),
            Style::default().fg(t.dim),
        ))
    };
    let mut lines = Vec::new();

    // What went wrong, first.
    if let Some(e) = &n.error {
        let mut h = vec![Span::styled("error", bold(t).fg(t.error))];
        if let Some(c) = &n.category {
            h.push(Span::styled(format!("  ({c})"), Style::default().fg(t.dim)));
        }
        lines.push(Line::from(h));
        for l in e.lines() {
            lines.push(Line::from(Span::styled(
                format!("  {l}"),
                Style::default().fg(t.error),
            )));
        }
        lines.push(Line::from(""));
    } else if let Some(e) = &n.escalation {
        lines.push(Line::from(Span::styled(
            "escalated",
            bold(t).fg(t.lanes[6]),
        )));
        lines.push(Line::from(Span::styled(
            format!("  {e}"),
            Style::default().fg(t.lanes[6]),
        )));
        lines.push(Line::from(""));
    } else if let Some(why) = vm.skip_cause(ix) {
        lines.push(Line::from(Span::styled("skipped", bold(t).fg(t.skipped))));
        lines.push(Line::from(format!("  {why}")));
        lines.push(Line::from(""));
    } else if let Some(call) = &n.asking {
        // What waits for the operator, first.
        let (a, d) = (
            app.keymap.label_in(Mode::Inspector, Action::Approve),
            app.keymap.label_in(Mode::Inspector, Action::Deny),
        );
        let keys = match n.asked {
            QuestionKind::Permission => format!("  ({a} allows it, {d} denies it)"),
            QuestionKind::Review => {
                format!("  ({a} lands it, {d} rejects it, T sends it back with a note)")
            }
            QuestionKind::Conflict => format!(
                "  (S opens a shell in its worktree; {a} lands it once resolved, {d} leaves it unlanded, T sends it back)"
            ),
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{} {}", n.asked.mark(), n.asked.words()),
                bold(t).fg(t.warning),
            ),
            Span::styled(keys, Style::default().fg(t.dim)),
        ]));
        lines.push(Line::from(format!("  {call}")));
        // What answering it allows, whole: the command as it would run,
        // the content or diff it would write, the commits that would land.
        if let Some(detail) = vm.asked.get(&ix).and_then(|a| a.detail.as_deref()) {
            for l in detail.lines() {
                lines.push(Line::from(Span::styled(
                    format!("  │ {l}"),
                    Style::default().fg(t.warning),
                )));
            }
        }
        lines.push(Line::from(""));
    }

    lines.push(field(t, "op id", n.op.op_id.to_string()));
    lines.push(field(t, "role", n.role().map_or("—", |r| &**r).to_string()));
    let mut lane = n.place().to_string();
    if n.held {
        lane.push_str(&format!(" · {}", app.held_words(ix)));
    }
    lines.push(field(t, "lane", lane));
    if n.attempt > 1 {
        lines.push(field(t, "attempt", n.attempt.to_string()));
        for e in n.earlier() {
            let how = e.error.as_deref().unwrap_or(&e.outcome);
            lines.push(Line::from(vec![
                Span::raw(format!("{:<12}", "")),
                Span::styled(
                    format!("attempt {}: {how}", e.attempt),
                    Style::default().fg(t.dim),
                ),
            ]));
        }
    }
    if let Some(w) = app.waiting_for(ix) {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<12}", "waiting for"), bold(t)),
            Span::styled(w, Style::default().fg(t.warning)),
        ]));
    }
    if let Some(i) = n.current().and_then(|a| a.instance.as_ref()) {
        lines.push(field(
            t,
            "instance",
            short_instance(i, &vm.run.run_id).to_string(),
        ));
    }
    if let Some(id) = n.current().and_then(|a| a.session.as_ref()) {
        lines.push(field(t, "session", id.to_string()));
    }
    if let Some((state, tool)) = &n.activity
        && n.lane == Lane::Running
    {
        let what = match state {
            ActivityState::Tool => format!("running tool {}", tool.as_deref().unwrap_or("?")),
            other => other.as_str().to_string(),
        };
        lines.push(field(t, "agent", what));
    }
    if let Some(u) = &n.usage() {
        lines.push(field(t, "usage", usage_text(u)));
    }
    let deps = n.depends_on.len();
    let shown = if all { deps } else { deps.min(LIST_MAX) };
    let names: Vec<String> = n
        .depends_on
        .iter()
        .take(shown)
        .map(|d| vm.name_of(d).map_or(d.to_string(), |s| s.to_string()))
        .collect();
    let label = if deps > LIST_MAX {
        format!("{} operations: ", group(deps))
    } else {
        String::new()
    };
    lines.push(field(
        t,
        "depends on",
        if deps == 0 {
            "—".into()
        } else {
            format!("{label}{}", names.join(", "))
        },
    ));
    if shown < deps {
        lines.push(more(deps - shown, "dependencies"));
    }
    if let Some(how) = vm.facts.placed.get(n.name()) {
        lines.push(field(t, "placed", how.words().to_string()));
    }
    if let Some(p) = n.parent() {
        lines.push(field(
            t,
            "spawned by",
            vm.name_of(&p).map_or(p.to_string(), |s| s.to_string()),
        ));
    }
    let history = vm.history(ix);
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
            // A skip lands in the failed lane; it is not a failure.
            let last = i + 1 == history.len();
            let title = if last && n.skipped() {
                "skipped"
            } else {
                lane.title()
            };
            format!("{title} at {}{spent}", duration(*at))
        })
        .collect();
    lines.push(field(t, "timings", timings.join(" → ")));
    // Every decision on it — its gate, each call its agent asked about
    // (a denied one too), its reviews, retries and send-backs — with what
    // it was made on.
    for d in &n.decisions {
        let what = d.kind.words(d.approved);
        let on =
            d.on.as_deref()
                .map(|o| format!(" — on {o}"))
                .unwrap_or_default();
        let why = d
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        let line = field(
            t,
            "decision",
            format!("{what} by {} at {}{on}{why}", d.by, duration(d.at)),
        );
        // A call it was refused stands out: the agent went on without it.
        if d.kind == crate::projection::DecisionKind::Call && !d.approved {
            lines.push(line.style(Style::default().fg(t.error)));
        } else {
            lines.push(line);
        }
    }

    lines.push(Line::from(""));
    lines.push(heading(t, "instruction"));
    let instruction = match &app.hooks.decorate {
        Some(d) => d.decorate(
            n.role().map(|r| &**r),
            &n.op.instruction,
            SpawnBudget {
                accepted: vm.palette.budgets.as_ref().map_or(0, |b| b.spawns_accepted),
                max: vm.run.max_spawn,
            },
        ),
        None => n.op.instruction.clone(),
    };
    section(&mut lines, instruction.lines(), all, &more, "lines");

    if n.error.is_none()
        && let Some(r) = &n.result
    {
        lines.push(Line::from(""));
        lines.push(heading(t, "result"));
        let text = serde_json::to_string_pretty(&**r).unwrap_or_default();
        section(&mut lines, text.lines(), all, &more, "lines");
    }

    if n.attempt > 0
        && let Some(dir) = &app.hooks.run_dir
    {
        let mut turns = turns.borrow_mut();
        turns.refresh(&dir.join("logs"), n.name(), n.attempt);
        if !turns.entries.is_empty() {
            lines.push(Line::from(""));
            lines.push(Line::from(vec![
                Span::styled("last turns", bold(t)),
                Span::styled(
                    format!(
                        "  (attempt {}; {} follows all of it)",
                        n.attempt,
                        app.keymap.label_in(Mode::Inspector, Action::FollowAgent)
                    ),
                    Style::default().fg(t.dim),
                ),
            ]));
            for e in &turns.entries {
                for l in e.lines().into_iter().take(if all { usize::MAX } else { 4 }) {
                    lines.push(Line::from(Span::styled(
                        format!("  {}{}", l.lead(), l.text),
                        super::follow::kind_style(l.kind, t),
                    )));
                }
            }
        }
    }

    let tail = match &app.hooks.tails {
        Some(t) => t.get(&n.op.op_id),
        // Attached to a run on this machine: its logs say it.
        None if app.hooks.attached && n.attempt > 0 => app
            .hooks
            .run_dir
            .as_ref()
            .and_then(|d| crate::agents::tails::from_logs(&d.join("logs"), n.name(), n.attempt)),
        None => None,
    };
    if let Some(tail) = tail {
        lines.push(Line::from(""));
        lines.push(Line::from(vec![
            Span::styled("output", bold(t)),
            Span::styled(
                format!(
                    "  (attempt {}, the last {} lines; {} marks stderr)",
                    tail.attempt,
                    tail.lines.len(),
                    STDERR_MARK.trim()
                ),
                Style::default().fg(t.dim),
            ),
        ]));
        if let Some(log) = &tail.log {
            // Both logs, in full, beside each other in the run directory.
            let stdout = log.display().to_string();
            let stderr = stdout
                .strip_suffix(".stdout.log")
                .map_or_else(|| stdout.clone(), |b| format!("{b}.stderr.log"));
            lines.push(field(t, "stdout log", stdout));
            lines.push(field(t, "stderr log", stderr));
        }
        for l in &tail.lines {
            if l.stderr {
                lines.push(Line::from(vec![
                    Span::styled(STDERR_MARK, Style::default().fg(t.warning)),
                    Span::styled(l.text.clone(), Style::default().fg(t.warning)),
                ]));
            } else {
                lines.push(Line::from(format!("       {}", l.text)));
            }
        }
    }
    Window {
        // A spawned one: its words and its name, which commands take.
        title: match app.vm.label(ix) {
            l if *l == **n.name() => l.into_owned(),
            l => format!("{l} · {}", n.name()),
        },
        lines,
        min_w: 60,
        max_w: 120,
        hang: 12,
        note: None,
    }
}

/// Marks a line the agent printed on stderr (here and when following it).
pub(super) const STDERR_MARK: &str = "  err│ ";

/// Lines of a text, the first `TEXT_MAX` unless `all`.
fn section<'a>(
    lines: &mut Vec<Line<'static>>,
    text: impl Iterator<Item = &'a str>,
    all: bool,
    more: &dyn Fn(usize, &str) -> Line<'static>,
    what: &str,
) {
    let text: Vec<&str> = text.collect();
    let shown = if all {
        text.len()
    } else {
        text.len().min(TEXT_MAX)
    };
    for l in &text[..shown] {
        lines.push(Line::from(format!("  {l}")));
    }
    if shown < text.len() {
        lines.push(more(text.len() - shown, what));
    }
}

/// `$0.0123 · 12.3k tokens in (10.1k cached) · 2.1k out`, with what the
/// stream reported (the input count includes the cached part, the same for
/// every format).
pub fn usage_text(u: &Usage) -> String {
    let mut parts = Vec::new();
    if let Some(c) = u.cost_usd {
        parts.push(format!("${c:.4}"));
    }
    if let Some(i) = u.input_tokens {
        match u.cached_input_tokens.filter(|&c| c > 0) {
            Some(c) => parts.push(format!("{} tokens in ({} cached)", tokens(i), tokens(c))),
            None => parts.push(format!("{} tokens in", tokens(i))),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_names_the_cached_part_of_the_input() {
        let u = Usage {
            cost_usd: Some(0.0123),
            input_tokens: Some(12_345),
            cached_input_tokens: Some(10_100),
            output_tokens: Some(2_100),
        };
        assert_eq!(
            usage_text(&u),
            "$0.0123 · 12.3k tokens in (10.1k cached) · 2100 out"
        );
        let plain = Usage {
            cached_input_tokens: Some(0),
            ..u
        };
        assert_eq!(usage_text(&plain), "$0.0123 · 12.3k tokens in · 2100 out");
    }
}

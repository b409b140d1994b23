//! The header: what matters most first, so a narrow screen cuts the least
//! important: the run state, approvals waiting, warnings, time and round,
//! then the play and run; below, the lane counts from the projection's one
//! set of counts (skipped apart from failed) and both budgets.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{duration, lane_name};
use crate::console::app::App;
use crate::console::text::{fit, group, width};
use crate::kernel::Lane;

/// `spend 3.20/10.00 USD (32%) · 12 400 tok`; nothing before anything was
/// spent or capped.
pub fn spend_words(s: &crate::projection::SpendState) -> Option<String> {
    crate::kernel::spend::spend_words((s.usd, s.tokens), s.budget.as_ref())
        .map(|w| format!("spend {w}"))
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    let vm = &app.vm;
    let base = Style::default().bg(t.header_bg).fg(t.header_fg);
    let bold = base.add_modifier(Modifier::BOLD);
    let state = app.run_state();
    let state_color = match state.as_str() {
        s if s.starts_with("running") => t.lanes[1],
        "paused" | "draining" | "stepping" => t.lanes[3],
        s if s.ends_with("succeeded") => t.ok,
        s if s.starts_with("finished") => t.error,
        _ => t.warning,
    };
    let w = area.width as usize;
    let mut top: Vec<Span> = vec![Span::styled(
        if app.replay.is_some() {
            " playdeck replay "
        } else {
            " playdeck "
        },
        bold.fg(t.accent),
    )];
    // A long state (a failure's cause) leaves room for what follows.
    let room = w.saturating_sub(width(&top[0].content));
    top.push(Span::styled(
        fit(
            &format!("● {state}"),
            room.min((w * 3 / 5).max(w.saturating_sub(40))),
        ),
        bold.fg(state_color),
    ));
    // An attached console still folding what the run said before it came:
    // the picture is not the present yet.
    if let Some((at, of)) = app.catching_up() {
        top.push(Span::styled("  ", base));
        top.push(Span::styled(
            format!(
                "⟳ catching up ({} of {} events)",
                group(at as usize),
                group(of as usize)
            ),
            bold.fg(t.warning),
        ));
    }
    // Watching only (`attach --read-only`, or a host that admits no
    // commands): said first, so no key is pressed in vain.
    if app.hooks.read_only {
        top.push(Span::styled("  ", base));
        top.push(Span::styled(
            "read-only",
            bold.fg(t.dim).add_modifier(Modifier::REVERSED),
        ));
    }
    let waiting = vm.approvals_waiting();
    if waiting > 0 {
        top.push(Span::styled("  ", base));
        top.push(Span::styled(
            format!("⚑ {waiting} awaiting approval"),
            bold.fg(t.warning).add_modifier(Modifier::REVERSED),
        ));
    }
    if !vm.warnings.is_empty() {
        // Distinct warnings, as the window lists them; the total only
        // when repeats were folded.
        let fold = app.warnings();
        let (n, total) = (fold.distinct(), fold.total());
        let all = if total == n {
            String::new()
        } else {
            format!(", {} in all", group(total))
        };
        top.push(Span::styled(
            format!(
                "  ⚠ {} warning{}{all} (w)",
                group(n),
                if n == 1 { "" } else { "s" }
            ),
            bold.fg(t.warning),
        ));
    }
    // A provider that refused work holds its agent's operations: said
    // beside the state, as an approval waiting is.
    for (agent, words) in &vm.provider_holds {
        top.push(Span::styled(
            format!("  ‖ {agent}: {words}"),
            bold.fg(t.warning),
        ));
    }
    // Edits the operator had not committed when the run began are not in
    // what its agents start from: said while the run is on screen.
    if let Some(w) = vm.run.workspace.as_ref().and_then(|w| w.left_out()) {
        top.push(Span::styled(format!("  ⚠ {w}"), bold.fg(t.warning)));
    }
    // The run's id is what every command takes: it stays, and the play's
    // name and the round give way before the rest is cut.
    let run = Span::styled(
        format!(
            " · run {}{}",
            vm.run.run_id,
            if vm.run.resumes > 0 { " (resumed)" } else { "" }
        ),
        base.fg(t.dim),
    );
    let time = duration(app.clock);
    let round = vm.run.round.max(1);
    let forms = [
        format!(" · {time} · round {round} · {}", vm.run.play),
        format!(" · {time} · round {round}"),
        format!(" · {time}"),
    ];
    let used = top.iter().map(|s| width(&s.content)).sum::<usize>() + width(&run.content);
    let tail = forms
        .iter()
        .find(|f| used + width(f) <= w)
        .unwrap_or(&forms[2]);
    top.push(Span::styled(tail.clone(), base));
    let keep = width(&run.content);
    let top = if keep + 30 <= w {
        let mut top = cut(top, w - keep);
        top.push(run);
        top
    } else {
        top.push(run);
        cut(top, w)
    };

    let c = &vm.counts;
    // Lane order, with skipped beside failed: the same counts as `ctl
    // status` and the report.
    let parts: [(&str, usize, Option<usize>); 8] = [
        (lane_name(Lane::Queued, 99), c.queued, Some(0)),
        (lane_name(Lane::Running, 99), c.running, Some(1)),
        ("awaiting approval", c.awaiting_approval, Some(2)),
        (lane_name(Lane::Paused, 99), c.paused, Some(3)),
        (lane_name(Lane::Succeeded, 99), c.succeeded, Some(4)),
        (lane_name(Lane::Failed, 99), c.failed, Some(5)),
        ("skipped", c.skipped, None),
        (lane_name(Lane::Escalated, 99), c.escalated, Some(6)),
    ];
    // The same words as the lanes' titles. Narrower, zero counts go
    // first (they say least), then the long names shorten: a count is
    // never cut off the end while words could make room for it.
    let held = vm.held();
    let form = |short: bool, zeros: bool| -> Vec<Span<'static>> {
        let mut counts = vec![Span::styled(" ", base)];
        for (name, n, lane) in parts {
            if n == 0 && !zeros {
                continue;
            }
            let name = match (short, name) {
                (true, "awaiting approval") => "approval",
                (true, "escalated") => "escal.",
                (_, n) => n,
            };
            let color = match lane {
                Some(i) => t.lanes[i],
                None => t.skipped,
            };
            let style = if n > 0 {
                base.fg(color)
            } else {
                base.fg(t.dim)
            };
            counts.push(Span::styled(format!("{name} {}", group(n)), style));
            counts.push(Span::styled("  ", base));
            // Held operations sit in the lanes before running; said after
            // paused, and only when there are any.
            if name == lane_name(Lane::Paused, 99) && held > 0 {
                counts.push(Span::styled(
                    format!("held {}", group(held)),
                    base.fg(t.warning),
                ));
                counts.push(Span::styled("  ", base));
            }
        }
        counts
    };
    // Spend before the palette's budgets: a cap that holds work matters
    // more, and a narrow header cuts from the end.
    let mut rest: Vec<Span<'static>> = Vec::new();
    let spend = spend_words(&vm.spend);
    if let Some(words) = &spend {
        // Past a warning level the spend is marked, at the cap it holds work.
        let warned = vm
            .spend
            .budget
            .as_ref()
            .is_some_and(|b| b.warned(vm.spend.usd, vm.spend.tokens));
        let color = if vm.spend.held.is_some() || warned {
            t.warning
        } else {
            t.dim
        };
        let words = if warned && vm.spend.held.is_none() {
            format!("⚠ {words}")
        } else {
            words.clone()
        };
        rest.push(Span::styled(words, base.fg(color)));
        rest.push(Span::styled("  ", base));
    }
    // The pace that matters beside the spend: how long the rest takes —
    // or, with nothing running, what it waits for (a wait is not work).
    if vm.run.finished.is_none() && spend.is_some() {
        let waits = crate::control::waits_for(
            vm.running(),
            vm.approvals_waiting(),
            vm.spend.held.is_some(),
            vm.run.paused,
        );
        let words = match waits {
            Some(w) => Some(format!("eta — waits for {w}")),
            None => crate::control::eta(app.clock, c.total(), c.settled())
                .map(|eta| format!("eta ~{}", duration(eta))),
        };
        if let Some(words) = words {
            rest.push(Span::styled(words, base.fg(t.dim)));
            rest.push(Span::styled("  ", base));
        }
    }
    let budgets = vm.palette.budgets.as_ref().map(|b| {
        Span::styled(
            format!(
                "spawns {}/{}  roles {}/{}",
                b.spawns_accepted,
                b.max_spawn,
                b.consumed_new_roles + b.reserved as u32,
                b.max_new_roles
            ),
            base.fg(t.dim),
        )
    });
    let width_of = |s: &[Span]| s.iter().map(|s| width(&s.content)).sum::<usize>();
    // The fullest words with which everything fits. Short of room, zero
    // counts go first, then the long names shorten, then the palette's
    // budgets: the spend, when there is one, stays. Built in order and
    // only as far as needed: a wide header builds one.
    const FORMS: [(bool, bool, bool); 4] = [
        (false, true, true),
        (false, false, true),
        (true, false, true),
        (true, false, false),
    ];
    let line = |(short, zeros, with_budgets): (bool, bool, bool)| {
        let mut line = form(short, zeros);
        line.extend(rest.iter().cloned());
        if with_budgets && let Some(b) = &budgets {
            line.push(b.clone());
        }
        line
    };
    let counts = FORMS
        .iter()
        .map(|&f| line(f))
        .find(|l| width_of(l) <= w)
        .unwrap_or_else(|| line(FORMS[3]));
    let counts = cut(counts, w);
    f.render_widget(
        Paragraph::new(vec![Line::from(top), Line::from(counts)]).style(base),
        area,
    );
}

/// Spans up to `w` columns, the last one that does not fit cut with `…`.
fn cut(spans: Vec<Span<'static>>, w: usize) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let mut used = 0;
    for s in spans {
        let sw = width(&s.content);
        if used + sw <= w {
            used += sw;
            out.push(s);
            continue;
        }
        let room = w - used;
        if room > 1 {
            out.push(Span::styled(fit(&s.content, room), s.style));
        }
        break;
    }
    out
}

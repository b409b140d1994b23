//! The lanes: one column per lifecycle state, members in the order they
//! entered, only the visible rows built. A row keeps what tells it apart
//! first: the name (cut in the middle, keeping its end), then the role,
//! then the time.

use crate::operator::words::short_time;
use ratatui::Frame;
use ratatui::layout::Alignment;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{lane_name, pane_block, selected_style};
use crate::console::app::{App, Geometry, Pane};
use crate::console::text::{fit, fit_distinct, group, shared_ends, width};
use crate::kernel::{ActivityState, Lane};
use crate::operator::model::{COLS, SKIPPED_COL, col_lane};

/// A lane folded to its title at a narrow screen: `┌ fail 0 ┐`.
pub const FOLDED_WIDTH: u16 = 10;
/// A name is cut no shorter than this before the role gives way.
const NAME_MIN: usize = 8;
const ROLE_MIN: usize = 5;

pub fn draw(f: &mut Frame, g: &Geometry, app: &App) {
    let t = app.theme();
    for col in 0..COLS {
        let area = g.lane_cols[col];
        if area.width < 3 || area.height < 3 {
            continue;
        }
        let focused = app.focus == Pane::Lanes && app.lane_col == col;
        let list = &app.lanes[col];
        let len = list.len();
        let color = t.col(col);
        let room = area.width.saturating_sub(4) as usize;
        let filtered = !app.filter.is_empty();
        // A filter hides rows: every lane says so, with what it matches
        // where that fits beside a title that names the lane, else with a
        // `/` before its title (`/fail 0`).
        let plain = title_text(col, len, room);
        let tag = filtered && plain != group(len) && room > width(&plain) + 3;
        let (title_main, bare) = if tag {
            (plain, false)
        } else {
            let room = room.saturating_sub(usize::from(filtered));
            // Where only the count would fit, the spaces around the title
            // give way to the lane's name.
            let short = title_text(col, len, room);
            let wide = title_text(col, len, room + 2);
            if short == group(len) && wide != short {
                (wide, true)
            } else {
                (short, false)
            }
        };
        let mut title = vec![Span::styled(
            title_main,
            Style::default().fg(color).add_modifier(Modifier::BOLD),
        )];
        if tag {
            let used = width(&title[0].content);
            title.push(Span::styled(
                fit(&format!(" /{}", app.filter), room - used),
                Style::default().fg(t.warning),
            ));
        } else if filtered {
            title.insert(0, Span::styled("/", Style::default().fg(t.warning)));
        }
        // Zoomed: the way back, said where the other lanes were.
        let used = title.iter().map(|s| width(&s.content)).sum::<usize>();
        if app.zoomed && room > used + 16 {
            title.push(Span::styled("  z: every lane", Style::default().fg(t.dim)));
        }
        let mut title = Line::from(title);
        if !bare {
            title.spans.insert(0, Span::raw(" "));
            title.spans.push(Span::raw(" "));
        }
        let mut block = pane_block(title, focused, t);
        // Where the cursor is in a long lane, or how much is below.
        let below = list.more_below();
        let marker = match list.selected() {
            Some(row) if focused && len > list.height() => {
                Some(format!("[{}/{}]", group(row + 1), group(len)))
            }
            // A folded lane says at least how many more.
            _ if below > 0 && area.width as usize >= width(&group(below)) + 10 => {
                Some(format!("+{} more", group(below)))
            }
            _ if below > 0 => Some(format!("+{}", group(below))),
            _ => None,
        };
        if let Some(m) = marker.filter(|m| width(m) + 4 <= area.width as usize) {
            block = block.title_bottom(
                Line::from(Span::styled(format!(" {m} "), Style::default().fg(t.dim)))
                    .alignment(Alignment::Right),
            );
        }
        let inner = block.inner(area);
        f.render_widget(block, area);
        let w = inner.width as usize;
        let window = list.visible();
        let rows = app.lane_window(col, window.start, window.len());
        let mut lines = Vec::with_capacity(rows.len());
        let labels: Vec<_> = rows.iter().map(|&ix| app.vm.label(ix)).collect();
        let shared = shared_ends(labels.iter().map(|l| &**l));
        for (i, &ix) in rows.iter().enumerate() {
            let n = app.vm.node(ix);
            let start_hold = app.vm.start_hold(ix);
            // A gate some of whose dependencies failed: said on its row,
            // where it is decided.
            let failed_deps = (n.lane == Lane::AwaitingApproval)
                .then(|| app.vm.failed_deps(ix))
                .flatten();
            let marker = if app.is_marked(ix) {
                "◆"
            } else if n.asking.is_some() {
                // A running agent's permission question, or its work
                // waiting for review or clashing as it lands.
                n.asked.mark()
            } else if failed_deps.is_some() {
                "✗"
            } else if n.skipped() {
                "↷"
            } else if n.retry_wait.is_some() && n.lane == Lane::Queued {
                "↻"
            } else if start_hold.is_some() {
                "◷"
            } else if n.held {
                "‖"
            } else if n.escalation.is_some() {
                "!"
            } else if n.parent().is_some() {
                "↳"
            } else {
                " "
            };
            // A running agent CLI shows what it does instead of its role.
            let activity = match (&n.activity, n.lane) {
                (Some((state, tool)), Lane::Running) => activity_label(*state, tool.as_deref()),
                // Waiting to be retried: the cause instead of the role,
                // where it fits beside the countdown (which matters more).
                (_, Lane::Queued) => n
                    .retry_wait
                    .as_ref()
                    .map(|r| {
                        let room = w.saturating_sub(1);
                        let need = width(&labels[i]) + width(r.cause) + 2 + RETRY_TIME_W;
                        if need <= room {
                            r.cause.to_string()
                        } else {
                            String::new()
                        }
                    })
                    // Held at the start: what holds it, instead of the role.
                    .or_else(|| start_hold.map(|h| h.words().to_string())),
                // The call it asks about, in place of the role.
                (_, Lane::AwaitingApproval) if n.asking.is_some() => {
                    n.asking.as_deref().map(String::from)
                }
                (_, Lane::AwaitingApproval) => failed_deps.as_ref().map(|f| f.short()),
                _ => None,
            };
            let role = activity
                .as_deref()
                .unwrap_or_else(|| n.role().map_or("", |r| &**r));
            // How soon it comes back, where the time in the lane would be.
            let time = match (&n.retry_wait, n.lane) {
                (Some(r), Lane::Queued) => {
                    format!("in {}", short_time((r.due_at - app.clock).max(0.0)))
                }
                _ => short_time(app.node_time(ix)),
            };
            // A spawned one's label keeps its number (`#3`) and its first
            // words; a name, what differs from the lane's other rows.
            let cut = |s: &str, room: usize| match s.rfind(" #") {
                Some(at) if *labels[i] != **n.name() && room > width(&s[at..]) + 2 => {
                    let tail = &s[at..];
                    format!("{}{tail}", fit(&s[..at], room - width(tail)))
                }
                _ => fit_distinct(s, room, shared),
            };
            let cells = row_cells(&labels[i], role, &time, w, &cut);
            // Acknowledged: still there, read as seen to.
            let name_style = if n.skipped() || app.is_acknowledged(ix) {
                Style::default().fg(t.skipped)
            } else {
                Style::default().fg(t.foreground)
            };
            let (marker_color, role_color) = if failed_deps.is_some() {
                (t.error, t.error)
            } else {
                (color, t.dim)
            };
            let mut spans = vec![
                Span::styled(marker, Style::default().fg(marker_color)),
                Span::styled(cells.name, name_style),
                Span::styled(cells.role, Style::default().fg(role_color)),
                Span::raw(" ".repeat(cells.pad)),
                Span::styled(cells.time, Style::default().fg(t.dim)),
            ];
            if focused && list.selected() == Some(window.start + i) {
                let s = selected_style(t);
                spans = spans.into_iter().map(|sp| sp.patch_style(s)).collect();
            } else if app.changed == Some(ix) {
                // What the last replay step changed.
                let s = Style::default()
                    .fg(t.accent)
                    .add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
                spans = spans.into_iter().map(|sp| sp.patch_style(s)).collect();
            }
            lines.push(Line::from(spans));
        }
        if rows.is_empty() && inner.height > 0 && w > 2 {
            // Rows the filter hides: said, so an empty lane is not taken
            // for an empty run.
            let hidden = !app.filter.is_empty() && !app.vm.lanes[col].is_empty();
            lines.push(Line::from(Span::styled(
                fit(if hidden { "no match" } else { "—" }, w),
                Style::default().fg(t.dim),
            )));
        }
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// The widest countdown a retry row shows (`in 12m05`).
const RETRY_TIME_W: usize = 8;

/// `queued 4 944`, `approval 2`, or `appr 0` as room shrinks; the count
/// always shows, and `extra` (the skipped beside the failed) as long as a
/// shorter name makes room for it.
fn title_text(col: usize, len: usize, room: usize) -> String {
    let count = group(len);
    let lane = col_lane(col);
    let names = if col == SKIPPED_COL {
        ["skipped", "skipped", "skip"]
    } else {
        let tiny = match lane {
            Lane::Queued => "que",
            Lane::Running => "run",
            Lane::AwaitingApproval => "appr",
            Lane::Paused => "paus",
            Lane::Succeeded => "succ",
            Lane::Failed => "fail",
            Lane::Escalated => "esc",
        };
        [lane.title(), lane_name(lane, 0), tiny]
    };
    names
        .iter()
        .map(|n| format!("{n} {count}"))
        .find(|t| width(t) <= room)
        .unwrap_or(count)
}

/// The width of a lane's shortest title that still names it (`run 0`).
pub fn shortest_title(col: usize, len: usize) -> usize {
    let count = width(&group(len));
    (1..=count + 8)
        .map(|room| title_text(col, len, room))
        .find(|t| width(t) > count)
        .map_or(count, |t| width(&t))
}

/// A row's parts, fitted to `w` columns (the marker's column included).
#[derive(Debug, PartialEq)]
pub struct RowCells {
    pub name: String,
    /// With its leading space.
    pub role: String,
    pub pad: usize,
    pub time: String,
}

/// `cut` shortens a name longer than its room to that room.
pub fn row_cells(
    name: &str,
    role: &str,
    time: &str,
    w: usize,
    cut: &dyn Fn(&str, usize) -> String,
) -> RowCells {
    let rest = w.saturating_sub(1);
    let (nw, rw, tw) = (width(name), width(role), width(time));
    // The least of the role worth showing.
    let role_min = rw.min(ROLE_MIN);
    let cells = |name: String, role_w: usize, time: &str| {
        let role = if role_w == 0 {
            String::new()
        } else {
            format!(" {}", fit(role, role_w))
        };
        let pad = rest.saturating_sub(width(&name) + width(&role) + width(time));
        RowCells {
            name,
            role,
            pad,
            time: time.to_string(),
        }
    };
    let gap = |r: usize| usize::from(r > 0);
    // Everything, or the whole name with as much role as fits beside the
    // time.
    let with_time = rest.saturating_sub(tw + 1);
    if tw > 0 && nw + gap(role_min) + role_min <= with_time {
        let role_w = rw.min(with_time - nw - gap(rw)).max(role_min);
        return cells(name.to_string(), role_w, time);
    }
    // The whole name and the time: how long it has been (a gate, how long
    // it has waited) says more than the role.
    if tw > 0 && nw <= with_time {
        return cells(name.to_string(), 0, time);
    }
    // The whole name alone: it is what the operator acts on.
    if nw <= rest {
        return cells(name.to_string(), 0, "");
    }
    // Longer than the lane: cut where it repeats its lane's other rows,
    // beside the time when the lane is wide enough for both to say
    // something.
    if tw > 0 && rest >= 2 * NAME_MIN + 1 + tw {
        return cells(cut(name, rest - 1 - tw), 0, time);
    }
    cells(cut(name, rest), 0, "")
}

/// How a running agent's state reads in a lane row.
pub fn activity_label(state: ActivityState, tool: Option<&str>) -> Option<String> {
    match state {
        ActivityState::Thinking => Some("thinking…".into()),
        ActivityState::Writing => Some("writing…".into()),
        ActivityState::Tool => Some(format!("⚙ {}", tool.unwrap_or("tool"))),
        ActivityState::Waiting => None,
        ActivityState::WaitingForWorker => Some("◷ waiting for a worker".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::text::Shared;

    fn row(name: &str, role: &str, time: &str, w: usize) -> String {
        let c = row_cells(name, role, time, w, &|s, r| {
            fit_distinct(s, r, Shared::default())
        });
        let s = format!(" {}{}{}{}", c.name, c.role, " ".repeat(c.pad), c.time);
        assert_eq!(width(&s), w, "{s:?} fills the row exactly");
        s
    }

    #[test]
    fn rows_keep_the_name_then_the_time_then_the_role() {
        assert_eq!(
            row("scope", "planner", "2.0s", 22),
            " scope planner    2.0s"
        );
        // Short of room: the role goes, then the time; the name is cut
        // only when it is longer than the lane.
        assert_eq!(
            row("integration-tests", "tester", "12s", 22),
            " integration-tests 12s"
        );
        assert_eq!(
            row("integration-tests", "tester", "12s", 20),
            " integration-tests  "
        );
        assert_eq!(
            row(
                "shard-migration-region-eu-west-07",
                "implementer",
                "1.0s",
                24
            ),
            " shard-mi…u-west-07 1.0s"
        );
        // The role goes before the time: a gate's wait outlasts it.
        assert_eq!(
            row("smoke-prod", "tester", "30s", 21),
            " smoke-prod test… 30s"
        );
        assert_eq!(
            row("impl-schema", "implementer", "1.0s", 21),
            " impl-schema     1.0s"
        );
        assert_eq!(
            row("research-api", "researcher", "3.5s", 16),
            " research-api   "
        );
        assert_eq!(
            row("deploy-prod", "release_manager", "30s", 17),
            " deploy-prod  30s"
        );
        // A name alone keeps its end.
        assert_eq!(row("research-deps", "", "3.0s", 10), " rese…deps");
        // CJK names take two columns a char.
        let r = row("部署生产环境-第二阶段", "实施者", "1.0s", 20);
        assert!(r.contains('…'), "{r}");
    }

    #[test]
    fn a_cut_name_keeps_what_differs_from_its_lanes_other_rows() {
        let names = [
            "verify-svc-alpha-region-south-07",
            "verify-svc-beta-region-south-07",
        ];
        let shared = shared_ends(names);
        let rows: Vec<String> = names
            .iter()
            .map(|n| {
                let c = row_cells(n, "tester", "2m05", 24, &|s, r| fit_distinct(s, r, shared));
                format!("{}{}{}", c.name, " ".repeat(c.pad), c.time)
            })
            .collect();
        assert_eq!(rows, ["verif…alpha…uth-07 2m05", "verify…beta…uth-07 2m05"]);
    }

    #[test]
    fn titles_stay_recognisable_as_lanes_narrow() {
        let t = |l, n, room| title_text(crate::operator::model::lane_index(l), n, room);
        assert_eq!(t(Lane::AwaitingApproval, 2, 30), "awaiting approval 2");
        assert_eq!(t(Lane::AwaitingApproval, 2, 12), "approval 2");
        assert_eq!(t(Lane::Failed, 0, 6), "fail 0");
        assert_eq!(t(Lane::Queued, 4944, 30), "queued 4 944");
        assert_eq!(t(Lane::Succeeded, 12, 12), "succeeded 12");
        assert_eq!(t(Lane::Succeeded, 12, 8), "succ. 12");
        assert_eq!(title_text(SKIPPED_COL, 2, 12), "skipped 2");
        assert_eq!(title_text(SKIPPED_COL, 2, 6), "skip 2");
        assert_eq!(shortest_title(1, 0), "run 0".len());
        assert_eq!(shortest_title(SKIPPED_COL, 12), "skip 12".len());
        assert_eq!(short_time(2.46), "2.5s");
        assert_eq!(short_time(42.0), "42s");
        assert_eq!(short_time(245.0), "4m05");
    }
}

//! The follow view: an operation's latest attempt over the whole screen
//! but the footer — its conversation (what the agent wrote, wrapped; each
//! tool call and its result; usage as it grows), or with `r` the lines as
//! printed, stderr marked as in the node inspector, one log line a row
//! (cut at the window's edge; `O` pages them whole). Only the rows in the
//! window are styled.

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::inspector::STDERR_MARK;
use super::{bold, frame};
use crate::agents::transcript::Kind;
use crate::console::app::App;
use crate::console::follow::FollowView;
use crate::console::keymap::{Action, Mode};
use crate::kernel::Lane;

/// Where stdout lines start: under the text of stderr lines, after the mark.
const STDOUT_INDENT: &str = "       ";
/// A line that tells of a refused or failed tool call, said in words.
const REFUSED_MARK: &str = "     ✗ ";

pub fn draw(f: &mut Frame, area: Rect, app: &App, v: &FollowView) {
    let t = app.theme();
    let r = crate::console::ui::follow_area(area, app);
    let n = app.vm.node(v.node);
    let name = n.name();
    let key = |a: Action| app.keymap.label_in(Mode::Follow, a);
    let title = if v.attempt > 0 {
        format!("Following {name} · attempt {}", v.attempt)
    } else {
        format!("Following {name}")
    };
    let hint = if v.raw {
        format!(
            " as printed; {} marks stderr · {} the conversation · {} all of it in $PAGER · {} worktree diff ",
            STDERR_MARK.trim(),
            key(Action::RawLines),
            key(Action::PageOutput),
            key(Action::WorktreeDiff)
        )
    } else {
        format!(
            " {} as printed · {} all of it in $PAGER · {} worktree diff ",
            key(Action::RawLines),
            key(Action::PageOutput),
            key(Action::WorktreeDiff)
        )
    };
    let mut block = frame(&title, t).title(
        Line::from(Span::styled(hint, Style::default().fg(t.dim))).alignment(Alignment::Right),
    );
    let mut state = if v.stick && n.lane.is_terminal() && v.attempt > 0 {
        // Nothing more comes from an attempt that has ended (a retry is a
        // new attempt, and the view moves to it).
        format!("● the end of attempt {} ({})", v.attempt, n.place())
    } else if v.stick {
        "● following: new lines show as they are written".to_string()
    } else {
        format!(
            "‖ scrolled back: {} follows the newest line again",
            key(Action::Bottom)
        )
    };
    if !v.raw && !v.transcript.usage.is_empty() {
        state.push_str(&format!(
            " · {}",
            super::inspector::usage_text(&v.transcript.usage)
        ));
    }
    if v.cut || v.dropped > 0 || (!v.raw && v.transcript.dropped() > 0) {
        state.push_str(&format!(
            " · earlier lines are not here ({} shows them)",
            key(Action::PageOutput)
        ));
    }
    if app.replay.is_some() {
        // Logs carry no times: the replay's moment cannot cut them.
        state.push_str(" · the log as written, not as of the replay's moment");
    }
    block = block.title_bottom(
        Line::from(Span::styled(
            format!(" {state} "),
            Style::default().fg(if v.stick { t.accent } else { t.warning }),
        ))
        .alignment(Alignment::Left),
    );
    block = crate::console::ui::more_below(block, v.scroll.more_below(), t);
    let lines: Vec<Line> = if v.is_empty() {
        nothing_yet(app, v)
    } else if !v.raw {
        v.rows()[v.scroll.visible()]
            .iter()
            .map(|r| Line::from(Span::styled(r.text.as_str(), kind_style(r.kind, t))))
            .collect()
    } else {
        v.lines
            .range(v.scroll.visible())
            .map(|l| {
                if l.stderr {
                    let s = Style::default().fg(t.warning);
                    Line::from(vec![
                        Span::styled(STDERR_MARK, s),
                        Span::styled(l.text.as_str(), s),
                    ])
                } else if let Some(said) = crate::agents::stream::tools::refused_line(&l.text) {
                    // The CLI's own line is wire protocol; the refusal in
                    // it is what the operator needs (`O` shows the line).
                    let s = Style::default().fg(t.error);
                    Line::from(vec![Span::styled(REFUSED_MARK, s), Span::styled(said, s)])
                } else {
                    Line::from(vec![Span::raw(STDOUT_INDENT), Span::raw(l.text.as_str())])
                }
            })
            .collect()
    };
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(block), r);
}

/// How a line of the conversation looks (here and in the inspector).
pub(super) fn kind_style(kind: Kind, t: &crate::console::theme::Theme) -> Style {
    match kind {
        Kind::Said | Kind::Plain => Style::default(),
        Kind::Thought => Style::default()
            .fg(t.dim)
            .add_modifier(ratatui::style::Modifier::ITALIC),
        Kind::Asked => Style::default().fg(t.accent),
        Kind::Call => bold(t),
        Kind::Done => Style::default().fg(t.dim),
        Kind::Failed | Kind::Error => Style::default().fg(t.error),
        Kind::Stderr => Style::default().fg(t.warning),
    }
}

/// No line yet, said in words: why, and whether any will come.
fn nothing_yet(app: &App, v: &FollowView) -> Vec<Line<'static>> {
    let t = app.theme();
    let n = app.vm.node(v.node);
    let name = n.name();
    let going = !n.lane.is_terminal();
    let mut lines = vec![Line::from("")];
    let mut say = |s: String, style: Style| lines.push(Line::from(Span::styled(s, style)));
    let dim = Style::default().fg(t.dim);
    if v.attempt == 0 {
        say(format!("{name} has not started an attempt yet."), bold(t));
        match app.waiting_for(v.node) {
            Some(w) => say(format!("It waits for {w}."), dim),
            None if n.skipped() => say(
                format!(
                    "It was skipped ({}).",
                    app.vm.skip_cause(v.node).unwrap_or_default()
                ),
                dim,
            ),
            None => say(format!("It is {}.", n.place()), dim),
        }
        if going {
            say("Its output shows here as soon as it starts.".into(), dim);
        }
    } else if !v.has_log() {
        say(
            format!("{name}'s attempt {} has written no output log.", v.attempt),
            bold(t),
        );
        if let Some(p) = v.log_path() {
            say(format!("{} does not exist.", p.display()), dim);
        }
        say(
            "Operations on the built-in sim agent print nothing; an agent CLI's lines show here as it prints them."
                .into(),
            dim,
        );
    } else if !v.lines.is_empty() {
        // Lines came, but none says anything yet (a CLI's start-up lines).
        say(format!("{name}'s agent has said nothing yet."), bold(t));
        say(
            format!(
                "{} lines of the CLI's own so far: {} shows them as printed.",
                v.lines.len(),
                app.keymap.label_in(Mode::Follow, Action::RawLines)
            ),
            dim,
        );
    } else {
        say(
            format!("{name}'s attempt {} has printed nothing yet.", v.attempt),
            bold(t),
        );
        say(
            match n.lane {
                Lane::Running => "Its lines show here as it prints them.".to_string(),
                _ if going => format!("It is {}.", n.place()),
                _ => format!("It ended ({}) without printing anything.", n.place()),
            },
            dim,
        );
    }
    lines
}

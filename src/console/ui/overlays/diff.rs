//! The diff view over the whole screen but the footer: git's unified diff
//! coloured by what each line is, the cursor's line highlighted, lines
//! with a note marked `✎` (the cursor's note said at the bottom). Only the
//! rows in the window are styled.

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{bold, frame};
use crate::console::app::App;
use crate::console::diffview::{DiffKind, DiffView};
use crate::console::keymap::{Action, Mode};

const NOTE_MARK: &str = "✎ ";
const NO_MARK: &str = "  ";

pub fn draw(f: &mut Frame, area: Rect, app: &App, v: &DiffView) {
    let t = app.theme();
    let r = crate::console::ui::follow_area(area, app);
    let key = |a: Action| app.keymap.label_in(Mode::Diff, a);
    let (file, files, hunk, hunks) = v.position();
    let title = format!(
        "Diff · {} · file {file}/{files} · hunk {hunk}/{hunks}",
        v.op
    );
    let hint = format!(
        " {}/{} hunk · {}/{} file · {} note · {} send back with the notes · {} close ",
        key(Action::NextHunk),
        key(Action::PrevHunk),
        key(Action::NextFile),
        key(Action::PrevFile),
        key(Action::NoteLine),
        key(Action::Talk),
        key(Action::Close)
    );
    let cursor = v.cursor();
    let bottom = match v.notes.get(&cursor) {
        Some(note) => format!(" ✎ {note} "),
        None if v.notes.is_empty() => format!(" {} ", v.title),
        None => format!(" {} · {} note(s) ", v.title, v.notes.len()),
    };
    let mut block = frame(&title, t)
        .title(
            Line::from(Span::styled(hint, Style::default().fg(t.dim))).alignment(Alignment::Right),
        )
        .title_bottom(
            Line::from(Span::styled(bottom, Style::default().fg(t.accent)))
                .alignment(Alignment::Left),
        );
    block = crate::console::ui::more_below(block, v.scroll.more_below(), t);
    let window = v.scroll.visible();
    let lines: Vec<Line> = if v.lines.is_empty() {
        vec![Line::from(Span::styled(
            "nothing changed",
            Style::default().fg(t.dim),
        ))]
    } else {
        v.lines[window.clone()]
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let at = window.start + i;
                let mut style = match l.kind {
                    DiffKind::Comment => Style::default().fg(t.dim),
                    DiffKind::File => bold(t).fg(t.accent),
                    DiffKind::Meta => bold(t),
                    DiffKind::Hunk => Style::default().fg(t.accent),
                    DiffKind::Added => Style::default().fg(t.ok),
                    DiffKind::Removed => Style::default().fg(t.error),
                    DiffKind::Context => Style::default(),
                };
                if at == cursor {
                    style = style.bg(t.selection_bg).add_modifier(Modifier::BOLD);
                }
                let mark = if v.notes.contains_key(&at) {
                    NOTE_MARK
                } else {
                    NO_MARK
                };
                Line::from(vec![
                    Span::styled(mark, Style::default().fg(t.warning)),
                    Span::styled(l.text.as_str(), style),
                ])
            })
            .collect()
    };
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(block), r);
}

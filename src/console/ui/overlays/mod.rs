//! Overlays: windows to read (help from the key table, the node inspector,
//! details, warnings), the palette tree, questions and forms. A window is
//! sized to its content (up to the screen), wraps its lines itself so it
//! knows how long it is, and draws only the rows that show.

mod detail;
mod diff;
mod follow;
mod forms;
mod help;
mod inspector;
mod palette;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Padding, Paragraph};

use crate::console::app::App;
use crate::console::overlay::Overlay;
use crate::console::scroll::ScrollList;
use crate::console::text::{width, wrap_hanging};
use crate::console::theme::Theme;

/// A window of text: what it says, and how wide it may be.
pub struct Window {
    pub title: String,
    pub lines: Vec<Line<'static>>,
    pub min_w: u16,
    pub max_w: u16,
    /// Where wrapped lines continue when the line does not start with
    /// spaces (a `label  value` line wraps under its value).
    pub hang: usize,
    /// A dim line in the bottom border (where the window's last line would
    /// cost a row of a full screen).
    pub note: Option<String>,
}

impl Window {
    /// Where it goes on `area` and its lines wrapped to fit.
    fn place(&self, area: Rect) -> (Rect, Vec<Line<'static>>) {
        // Borders and a column of padding on each side.
        let chrome = 4;
        let natural = self
            .lines
            .iter()
            .map(|l| l.width())
            .max()
            .unwrap_or(0)
            .max(width(&self.title)) as u16
            + chrome;
        let max_w = self.max_w.min(area.width.saturating_sub(4)).max(chrome + 1);
        let w = natural.clamp(self.min_w.min(max_w), max_w);
        let inner = (w - chrome) as usize;
        let lines: Vec<Line<'static>> = self
            .lines
            .iter()
            .flat_map(|l| {
                let lead = l
                    .spans
                    .iter()
                    .flat_map(|s| s.content.chars())
                    .take_while(|c| *c == ' ')
                    .count();
                wrap_hanging(l, inner, if lead > 0 { lead } else { self.hang })
            })
            .collect();
        // The header and the footer (its keys) stay in sight.
        let h = (lines.len() as u16 + 2).min(area.height.saturating_sub(4));
        (popup(area, w, h), lines)
    }
}

/// The window an overlay shows, for those that are text.
fn window(app: &App, o: &Overlay) -> Option<Window> {
    match o {
        Overlay::Help { of, .. } => Some(help::window(app, *of)),
        Overlay::Inspector {
            node, all, turns, ..
        } => Some(inspector::window(app, *node, *all, turns)),
        Overlay::LedgerRow { row, .. } => Some(detail::ledger_row(app, *row)),
        Overlay::PaletteEntry { id, .. } => Some(detail::palette_entry(app, id)),
        Overlay::Warnings { .. } => Some(detail::warnings(app)),
        Overlay::Messages { .. } => Some(detail::messages(app)),
        Overlay::Breakpoints { scroll } => Some(detail::breakpoints(app, scroll.selected())),
        Overlay::Runs { rows, scroll } => Some(detail::runs(app, rows, scroll.selected())),
        Overlay::Problems { rows, scroll } => Some(detail::problems(app, rows, scroll.selected())),
        _ => None,
    }
}

/// The top overlay's content length and visible rows, for its scrolling.
pub fn overlay_size(app: &App, area: Rect) -> Option<(usize, usize)> {
    let o = app.overlay()?;
    if let Overlay::ConfirmApprove { ops, .. } = o {
        return Some(forms::approve_list_size(area, ops));
    }
    o.scroll()?;
    let win = window(app, o)?;
    let (r, lines) = win.place(area);
    Some((lines.len(), r.height.saturating_sub(2).max(1) as usize))
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    // Stacked: a question over the inspector shows the inspector beneath.
    for o in &app.overlays {
        match o {
            Overlay::Palette { state } => {
                let mut state = state.borrow_mut();
                palette::draw(f, area, app, &mut state);
            }
            Overlay::ConfirmQuit => forms::confirm_quit(f, area, app),
            Overlay::ConfirmApprove {
                ops,
                oldest,
                scroll,
            } => {
                forms::confirm_approve(f, area, app, ops, *oldest, scroll);
            }
            Overlay::ConfirmRelease { preview } => forms::confirm_release(f, area, app, preview),
            Overlay::ConfirmReleaseInstance { name } => {
                forms::confirm_release_instance(f, area, app, name);
            }
            Overlay::ConfirmRaise { change, words } => {
                forms::confirm_raise(f, area, app, change, words);
            }
            Overlay::Deny { op, reason } => forms::deny(f, area, app, op, reason),
            Overlay::Say { op, text, running } => forms::say(f, area, app, op, text, *running),
            Overlay::Add(form) => forms::add(f, area, app, form),
            Overlay::Follow(view) => follow::draw(f, area, app, view),
            Overlay::Diff(view) => diff::draw(f, area, app, view),
            Overlay::DiffNote { text } => forms::diff_note(f, area, app, text),
            // Typed in the footer.
            Overlay::Filter | Overlay::Jump { .. } => {}
            o => {
                if let (Some(win), Some(scroll)) = (window(app, o), o.scroll()) {
                    draw_window(f, area, app, &win, scroll);
                }
            }
        }
    }
}

fn draw_window(f: &mut Frame, area: Rect, app: &App, win: &Window, scroll: &ScrollList) {
    let t = app.theme();
    let (r, lines) = win.place(area);
    let mut block = frame(&win.title, t);
    block = crate::console::ui::more_below(block, scroll.more_below(), t);
    if let Some(note) = &win.note {
        block = block.title_bottom(
            Line::from(Span::styled(
                format!(" {note} "),
                Style::default().fg(t.dim),
            ))
            .alignment(Alignment::Left),
        );
    }
    let shown = scroll.window_of(lines);
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(shown).block(block), r);
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

fn frame<'a>(title: &str, t: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(Style::default().fg(t.border_focused))
        .title(Span::styled(format!(" {title} "), bold(t)))
        .padding(Padding::horizontal(1))
        .style(Style::default().bg(t.background).fg(t.foreground))
}

/// `label       value`: a key column for detail windows.
fn field(t: &Theme, k: &str, v: impl Into<String>) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{k:<12}"), bold(t)),
        Span::raw(v.into()),
    ])
}

/// A heading line.
fn heading(t: &Theme, s: &str) -> Line<'static> {
    Line::from(Span::styled(s.to_string(), bold(t)))
}

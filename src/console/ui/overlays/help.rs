//! Help: the keys of the mode it was opened from, scope by scope, from the
//! key table; keys another scope of the mode takes first are left out, so
//! no line contradicts another.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Window, heading};
use crate::console::app::App;
use crate::console::keymap::{ACTIONS, Mode};
use crate::console::text::pad;

pub fn window(app: &App, of: Mode) -> Window {
    let t = app.theme();
    let mut lines = Vec::new();
    for scope in of.layers() {
        let rows: Vec<Line> = ACTIONS
            .iter()
            .filter(|a| a.scope == *scope)
            .filter_map(|a| {
                let keys = app.keymap.label_in(of, a.action);
                (!keys.is_empty()).then(|| {
                    Line::from(vec![
                        Span::styled(
                            format!("  {} ", pad(&keys, 13)),
                            Style::default().fg(t.accent),
                        ),
                        Span::raw(a.help),
                    ])
                })
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        lines.push(heading(t, scope.title()));
        lines.extend(rows);
        lines.push(Line::from(""));
    }
    // The notes take the place of the last section's blank line.
    lines.pop();
    let mouse = if matches!(of, Mode::Live | Mode::Replay) {
        "mouse: click selects, the wheel scrolls · "
    } else {
        ""
    };
    lines.push(Line::from(Span::styled(
        format!("{mouse}keys can be changed in config.toml [keys] (see the README)"),
        Style::default().fg(t.dim),
    )));
    Window {
        title: format!("Keys · {}", of.title()),
        lines,
        min_w: 40,
        max_w: 90,
        hang: 0,
    }
}

//! Help: the keys of the mode it was opened from, scope by scope, from the
//! key table; keys another scope of the mode takes first are left out, so
//! no line contradicts another, and what `available` refuses now is
//! dimmed.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::{Window, heading};
use crate::console::app::App;
use crate::console::keymap::{ACTIONS, Mode};
use crate::console::overlay::Overlay;
use crate::console::text::pad;

pub fn window(app: &App, of: Mode) -> Window {
    let t = app.theme();
    // What cannot be used on the screen beneath right now is dimmed, for
    // the same reason the key would give.
    let beneath = app
        .overlays
        .iter()
        .rposition(|o| matches!(o, Overlay::Help { .. }))
        .unwrap_or(app.overlays.len());
    let mut lines = Vec::new();
    for scope in of.layers() {
        let rows: Vec<Line> = ACTIONS
            .iter()
            .filter(|a| a.scope == *scope)
            .filter_map(|a| {
                let keys = app.keymap.label_in(of, a.action);
                (!keys.is_empty()).then(|| {
                    let now = app.available_under(a.action, beneath).is_ok();
                    let (k, h) = if now {
                        (Style::default().fg(t.accent), Style::default())
                    } else {
                        (Style::default().fg(t.dim), Style::default().fg(t.dim))
                    };
                    Line::from(vec![
                        Span::styled(format!("  {} ", pad(&keys, 13)), k),
                        Span::styled(a.help, h),
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
    // The notes go in the bottom border: a full screen of keys keeps its rows.
    lines.pop();
    let mouse = if matches!(of, Mode::Live | Mode::Replay) {
        "mouse: click selects, the wheel scrolls · "
    } else {
        ""
    };
    let note = format!("{mouse}keys can be changed in config.toml [keys] (see docs/console.md)");
    Window {
        title: format!("Keys · {}", of.title()),
        lines,
        min_w: 40,
        max_w: 90,
        hang: 0,
        note: Some(note),
    }
}

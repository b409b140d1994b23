//! The palette inspector: a tree of initial roles, expansions,
//! reservations, recruitable roles, budgets and rejections by reason. The
//! cursor (`»`) and the branch markers (`▸` closed, `▾` open) differ, and a
//! leaf opens into its detail, so a line cut to the window is never all
//! there is.

use std::collections::HashMap;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::{Clear, Padding};
use tui_tree_widget::{Tree, TreeState};

use super::{frame, popup};
use crate::console::app::{App, Entry, palette_items};
use crate::console::text::width;
use crate::console::ui::selected_style;

pub fn draw(f: &mut Frame, area: Rect, app: &App, state: &mut TreeState<String>) {
    let t = app.theme();
    let entries = app.palette_entries();
    let texts: HashMap<&str, &str> = {
        fn walk<'a>(es: &'a [Entry], out: &mut HashMap<&'a str, &'a str>) {
            for e in es {
                out.insert(&e.id, &e.text);
                walk(&e.children, out);
            }
        }
        let mut m = HashMap::new();
        walk(&entries, &mut m);
        m
    };
    let items = palette_items(&entries);
    // Sized to what is open: its rows and the widest of them (cursor,
    // indent and marker included).
    let rows = state.flatten(&items);
    let widest = rows
        .iter()
        .map(|r| {
            let id = r.identifier.last().map_or("", String::as_str);
            4 + r.depth() * 2 + width(texts.get(id).copied().unwrap_or(""))
        })
        .max()
        .unwrap_or(20);
    let w = (widest as u16 + 2).clamp(40, area.width.saturating_sub(8).clamp(40, 110));
    let h = (rows.len() as u16 + 2).min(area.height.saturating_sub(4));
    let r = popup(area, w, h);
    f.render_widget(Clear, r);
    let tree = Tree::new(&items)
        .expect("unique identifiers")
        .block(frame("Palette inspector", t).padding(Padding::ZERO))
        .highlight_style(selected_style(t).add_modifier(Modifier::BOLD))
        .highlight_symbol("» ")
        .node_closed_symbol("▸ ")
        .node_open_symbol("▾ ")
        .node_no_children_symbol("  ");
    f.render_stateful_widget(tree, r, state);
}

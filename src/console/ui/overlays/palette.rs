//! The palette inspector: a tree of initial roles, expansions,
//! reservations, recruitable roles, budgets and rejections by reason. The
//! cursor (`»`) and the branch markers (`▸` closed, `▾` open) differ, and a
//! leaf opens into its detail, so a line cut to the window is never all
//! there is.

use std::collections::{BTreeMap, HashMap};

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::{Clear, Padding};
use tui_tree_widget::{Tree, TreeItem, TreeState};

use super::{frame, popup};
use crate::console::app::App;
use crate::console::text::width;
use crate::console::ui::{duration, selected_style};

/// One line of the tree: its identifier, its text, what is under it.
pub struct Entry {
    pub id: String,
    pub text: String,
    pub children: Vec<Entry>,
}

fn leaf(id: String, text: String) -> Entry {
    Entry {
        id,
        text,
        children: Vec::new(),
    }
}

/// The tree's entries. Leaf identifiers are `kind:name[:n]` (a colon marks
/// a leaf); branches have none.
pub fn entries(app: &App) -> Vec<Entry> {
    let p = &app.vm.palette;
    let node = |id: &str, text: String, children: Vec<Entry>| Entry {
        id: id.to_string(),
        text,
        children,
    };
    let initial: Vec<Entry> = p
        .initial
        .iter()
        .map(|r| leaf(format!("i:{}", r.role), role_text(r)))
        .collect();
    let expanded: Vec<Entry> = p
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
    let reserved: Vec<Entry> = p
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
    let only: Vec<Entry> = app
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
    let rejections: Vec<Entry> = by_reason
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
                &format!("why-{reason}"),
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

fn role_text(r: &crate::projection::RoleRow) -> String {
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
}

/// The entry with identifier `id`, anywhere in the tree.
pub fn find<'a>(entries: &'a [Entry], id: &str) -> Option<&'a Entry> {
    entries.iter().find_map(|e| {
        if e.id == id {
            Some(e)
        } else {
            find(&e.children, id)
        }
    })
}

fn items(entries: &[Entry]) -> Vec<TreeItem<'static, String>> {
    entries
        .iter()
        .map(|e| {
            if e.children.is_empty() && e.id.contains(':') {
                TreeItem::new_leaf(e.id.clone(), e.text.clone())
            } else {
                TreeItem::new(e.id.clone(), e.text.clone(), items(&e.children))
                    .expect("unique identifiers")
            }
        })
        .collect()
}

/// The palette as tree items.
pub fn palette_items(app: &App) -> Vec<TreeItem<'static, String>> {
    items(&entries(app))
}

pub fn draw(f: &mut Frame, area: Rect, app: &App, state: &mut TreeState<String>) {
    let t = app.theme();
    let entries = entries(app);
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
    let items = items(&entries);
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

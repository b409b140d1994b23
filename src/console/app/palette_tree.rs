//! The palette inspector's tree as data: its entries from the view
//! model, and the tree items the selection walks and the overlay draws.

use std::collections::BTreeMap;

use tui_tree_widget::TreeItem;

use super::App;
use crate::operator::words::duration;

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

impl App {
    /// The tree's entries. Leaf identifiers are `kind:name[:n]` (a colon marks
    /// a leaf); branches have none.
    pub fn palette_entries(&self) -> Vec<Entry> {
        let p = &self.vm.palette;
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
        let only: Vec<Entry> = self
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
                if self.vm.facts.orchestrator_may_expand {
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
}

/// The tree items of `entries`.
pub fn palette_items(entries: &[Entry]) -> Vec<TreeItem<'static, String>> {
    entries
        .iter()
        .map(|e| {
            if e.children.is_empty() && e.id.contains(':') {
                TreeItem::new_leaf(e.id.clone(), e.text.clone())
            } else {
                TreeItem::new(e.id.clone(), e.text.clone(), palette_items(&e.children))
                    .expect("unique identifiers")
            }
        })
        .collect()
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

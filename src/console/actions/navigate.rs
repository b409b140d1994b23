//! Moving around: panes, lanes, rows and problems
//!  the view's settings
//! (zoom, theme, the ledger's filter)
//!  and the keys of the overlay on top.

use super::*;

impl App {
    /// Moving around: panes, lanes, rows, problems, and the view's settings.
    pub(super) fn navigate(&mut self, a: Action) -> Vec<Effect> {
        match a {
            Action::NextProblem => {
                self.to_problem(true);
                Vec::new()
            }
            Action::PrevProblem => {
                self.to_problem(false);
                Vec::new()
            }
            Action::OldestGate => {
                self.to_oldest_gate();
                Vec::new()
            }
            Action::LedgerFilter => {
                self.ledger_filter = match self.ledger_filter {
                    LedgerFilter::All => LedgerFilter::Accepted,
                    LedgerFilter::Accepted => LedgerFilter::Dropped,
                    LedgerFilter::Dropped => LedgerFilter::All,
                };
                self.clamp();
                self.ledger.select(0);
                let label = self.ledger_filter.label();
                self.info(format!("ledger: {label}"));
                Vec::new()
            }
            Action::Back => {
                if !self.filter.is_empty() {
                    self.set_filter(String::clear);
                    self.info("filter cleared");
                } else {
                    self.focus = Pane::Lanes;
                }
                Vec::new()
            }
            Action::CycleTheme => {
                self.theme = (self.theme + 1) % self.themes.len();
                let name = self.theme().name.clone();
                self.info(format!("theme: {name}"));
                Vec::new()
            }
            Action::FocusNext | Action::FocusPrev => {
                let i = PANES.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = PANES.len();
                let j = if a == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = PANES[j];
                if self.focus != Pane::Lanes {
                    self.bottom = self.focus;
                }
                if self.focus == Pane::Capacity {
                    self.capacity_to_instance();
                    self.say_instance();
                }
                Vec::new()
            }
            Action::Zoom => {
                self.zoomed = !self.zoomed;
                self.focus = Pane::Lanes;
                Vec::new()
            }
            Action::Left | Action::Right => {
                use crate::operator::model::{COLS, SKIPPED_COL};
                let step = |c: usize| {
                    if a == Action::Left {
                        (c + COLS - 1) % COLS
                    } else {
                        (c + 1) % COLS
                    }
                };
                let mut col = step(self.lane_col);
                // The skipped column is there only when something was.
                if col == SKIPPED_COL && self.lane_len(SKIPPED_COL) == 0 {
                    col = step(col);
                }
                self.lane_col = col;
                Vec::new()
            }
            Action::Up => self.motion(Motion::Up),
            Action::Down => self.motion(Motion::Down),
            Action::PageUp => self.motion(Motion::PageUp),
            Action::PageDown => self.motion(Motion::PageDown),
            Action::Top => self.motion(Motion::Top),
            Action::Bottom => self.motion(Motion::Bottom),
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }

    /// Keys of the overlay on top: close, tree keys, go to, fields.
    pub(super) fn overlay_key(&mut self, a: Action) -> Vec<Effect> {
        match a {
            Action::Close | Action::No => {
                self.overlays.pop();
                Vec::new()
            }
            Action::Collapse | Action::Expand | Action::Toggle => {
                self.tree_key(a);
                Vec::new()
            }
            Action::ShowAll => {
                if let Some(Overlay::Inspector { all, .. }) = self.overlays.last_mut() {
                    *all = !*all;
                }
                Vec::new()
            }
            Action::RawLines => {
                if let Some(Overlay::Follow(f)) = self.overlays.last_mut() {
                    f.toggle_raw();
                }
                Vec::new()
            }
            Action::NextHunk | Action::PrevHunk | Action::NextFile | Action::PrevFile => {
                if let Some(Overlay::Diff(v)) = self.overlays.last_mut() {
                    let forward = matches!(a, Action::NextHunk | Action::NextFile);
                    let moved = if matches!(a, Action::NextHunk | Action::PrevHunk) {
                        v.hunk(forward)
                    } else {
                        v.file(forward)
                    };
                    if !moved {
                        let what = match a {
                            Action::NextHunk => "the last hunk",
                            Action::PrevHunk => "the first hunk",
                            Action::NextFile => "the last file",
                            _ => "the first file",
                        };
                        self.info(format!("this is {what}"));
                    }
                }
                Vec::new()
            }
            Action::NoteLine => {
                if let Some(Overlay::Diff(v)) = self.overlays.last() {
                    if !v.can_note() {
                        self.warn("a note goes on a line of a file: move to an added, removed or unchanged line");
                        return Vec::new();
                    }
                    let text = v.notes.get(&v.cursor()).cloned().unwrap_or_default();
                    self.overlays.push(Overlay::DiffNote { text });
                }
                Vec::new()
            }
            Action::GoTo => {
                if matches!(self.overlays.last(), Some(Overlay::Runs { .. })) {
                    self.pick_run();
                    return Vec::new();
                }
                if let Some(ix) = self
                    .target()
                    .filter(|_| matches!(self.overlays.last(), Some(Overlay::Problems { .. })))
                {
                    self.overlays.clear();
                    self.go_to(ix);
                    return Vec::new();
                }
                let Some(Overlay::LedgerRow { row, .. }) = self.overlays.last() else {
                    return Vec::new();
                };
                if let Some(ix) = self.ledger_op(*row) {
                    self.overlays.clear();
                    self.go_to(ix);
                    self.inspect(ix);
                }
                Vec::new()
            }
            Action::Cancel => {
                if matches!(self.overlays.last(), Some(Overlay::Filter)) {
                    self.set_filter(String::clear);
                }
                self.overlays.pop();
                Vec::new()
            }
            Action::NextField | Action::PrevField => {
                if let Some(Overlay::Add(form)) = self.overlays.last_mut() {
                    form.next(a == Action::NextField);
                }
                Vec::new()
            }
            // Dispatched to another seam by act_now.
            _ => Vec::new(),
        }
    }

    pub(super) fn target_name(&self) -> String {
        self.target()
            .map(|ix| self.vm.node(ix).name().to_string())
            .unwrap_or_default()
    }

    pub(super) fn palette_leaf_selected(&self) -> bool {
        match self.overlays.last() {
            Some(Overlay::Palette { state }) => state
                .borrow()
                .selected()
                .last()
                .is_some_and(|id| id.contains(':')),
            _ => false,
        }
    }

    pub(super) fn tree_key(&mut self, a: Action) {
        let leaf = self.palette_leaf_selected();
        let Some(Overlay::Palette { state }) = self.overlays.last_mut() else {
            return;
        };
        let state = state.get_mut();
        match a {
            Action::Collapse => {
                state.key_left();
            }
            Action::Expand => {
                state.key_right();
            }
            _ if leaf => {
                // A leaf's line is cut to the window; its detail has it all.
                let id = state.selected().last().cloned().unwrap_or_default();
                self.overlays.push(Overlay::PaletteEntry {
                    id,
                    scroll: ScrollList::text(),
                });
            }
            _ => {
                state.toggle_selected();
            }
        }
    }

    /// Moves whatever list has the keys: the open window's, else the
    /// focused pane's.
    pub(super) fn motion(&mut self, m: Motion) -> Vec<Effect> {
        match self.overlays.last_mut() {
            Some(Overlay::Follow(f)) => f.apply(m),
            Some(Overlay::Diff(v)) => v.apply(m),
            Some(Overlay::Palette { .. }) => {
                // Moved over the rows the tree shows now, not the ones its
                // widget saw at the last frame: keys can come faster than
                // frames.
                let items = crate::console::app::palette_items(&self.palette_entries());
                let Some(Overlay::Palette { state }) = self.overlays.last_mut() else {
                    return Vec::new();
                };
                let state = state.get_mut();
                let rows: Vec<Vec<String>> = state
                    .flatten(&items)
                    .into_iter()
                    .map(|f| f.identifier)
                    .collect();
                let last = rows.len().saturating_sub(1);
                let at = rows.iter().position(|r| r.as_slice() == state.selected());
                let to = match (m, at) {
                    (Motion::Top, _) | (_, None) => 0,
                    (Motion::Bottom, _) => last,
                    (Motion::Up, Some(i)) => i.saturating_sub(1),
                    (Motion::Down, Some(i)) => (i + 1).min(last),
                    (Motion::PageUp, Some(i)) => i.saturating_sub(10),
                    (Motion::PageDown, Some(i)) => (i + 10).min(last),
                };
                if let Some(id) = rows.get(to) {
                    state.select(id.clone());
                }
            }
            Some(o) => {
                let runs = matches!(o, Overlay::Runs { .. } | Overlay::Problems { .. });
                if let Some(s) = o.scroll_mut() {
                    s.apply(m);
                    // The runs screen's first row is its columns' titles.
                    if runs && s.selected() == Some(0) {
                        s.select(1);
                    }
                }
            }
            None => match self.focus {
                Pane::Lanes => self.lanes[self.lane_col].apply(m),
                Pane::Ledger => self.ledger.apply(m),
                Pane::Capacity => {
                    self.capacity.apply(m);
                    self.say_instance();
                }
                Pane::Budgets => self.budgets.apply(m),
            },
        }
        Vec::new()
    }

    /// The instance the capacity cursor came to, in full on the status
    /// line (the pane cuts its row to its width), with what the keys do.
    pub fn say_instance(&mut self) {
        let Some(i) = self.selected_instance() else {
            return;
        };
        let mut words = format!(
            "{} · {} ({}) · {}",
            short_instance(&i.name, &self.vm.run.run_id),
            i.profile,
            i.role,
            self.state_words(i)
        );
        if i.state != InstanceState::Ready {
            words.push_str(&format!(" · {}", i.lifetime));
        }
        if self.available(Action::ReleaseInstance).is_ok() {
            words.push_str(&format!(
                "; {} releases it",
                self.keymap.label(Action::ReleaseInstance)
            ));
        } else if self.available(Action::Open).is_ok()
            && let Some(op) = &i.op
        {
            words.push_str(&format!(
                "; {} selects {op}",
                self.keymap.label(Action::Open)
            ));
        }
        self.info(words);
    }
}

//! The mouse: a click selects a pane's row, a scroll moves it.

use super::*;

impl App {
    pub fn on_mouse(&mut self, m: MouseEvent) {
        self.click(m);
        self.pick();
    }

    pub(super) fn click(&mut self, m: MouseEvent) {
        if self.too_small {
            return;
        }
        let at = Position::new(m.column, m.row);
        let g = self.geometry;
        let wheel = match m.kind {
            MouseEventKind::ScrollUp => Some(Motion::Up),
            MouseEventKind::ScrollDown => Some(Motion::Down),
            _ => None,
        };
        if !self.overlays.is_empty() {
            if let Some(w) = wheel {
                self.motion(w);
            }
            return;
        }
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                    self.focus = Pane::Lanes;
                    self.lane_col = col;
                    let row = m.row.saturating_sub(g.lane_cols[col].y + 1) as usize;
                    let off = self.lanes[col].offset();
                    self.lanes[col].select(off + row);
                } else if g.ledger.contains(at) {
                    self.focus = Pane::Ledger;
                    self.bottom = Pane::Ledger;
                    let row = m.row.saturating_sub(g.ledger.y + 2) as usize;
                    let off = self.ledger.offset();
                    self.ledger.select(off + row);
                } else if g.capacity.contains(at) {
                    self.focus = Pane::Capacity;
                    self.bottom = Pane::Capacity;
                    // Below the border and the gauge line.
                    let top = g.capacity.y + 1 + self.capacity_gauge_rows();
                    if let Some(row) = m.row.checked_sub(top) {
                        let off = self.capacity.offset();
                        self.capacity.select(off + row as usize);
                    }
                } else if g.budgets.contains(at) {
                    self.focus = Pane::Budgets;
                    self.bottom = Pane::Budgets;
                }
            }
            _ => {
                if let Some(w) = wheel {
                    if let Some(col) = g.lane_cols.iter().position(|r| r.contains(at)) {
                        self.focus = Pane::Lanes;
                        self.lane_col = col;
                    }
                    self.motion(w);
                }
            }
        }
    }
}

//! One scroll state for every list and every scrolling text: lanes, the
//! ledger, the capacity and budgets panes, help, the inspector, details.
//! It always knows how long its content is and how many rows show, so no
//! key can move it past either end (an `End` that left the offset at
//! `usize::MAX - 1` scrolled panes to an empty screen), and a pane renders
//! exactly `visible()`.

use std::ops::Range;

/// A movement asked of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Motion {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScrollList {
    /// Rows in the content.
    len: usize,
    /// Rows that show at once (at least one once measured).
    height: usize,
    /// The first row shown.
    offset: usize,
    /// The selected row, for lists with a cursor; text has none and moves
    /// its offset instead.
    cursor: Option<usize>,
}

impl ScrollList {
    /// A list with a cursor on its first row.
    pub fn list() -> ScrollList {
        ScrollList {
            cursor: Some(0),
            ..ScrollList::default()
        }
    }

    /// Scrolling text: no cursor.
    pub fn text() -> ScrollList {
        ScrollList::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn height(&self) -> usize {
        self.height
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The selected row (lists), kept inside the content.
    pub fn selected(&self) -> Option<usize> {
        self.cursor.filter(|_| self.len > 0)
    }

    /// The rows that show: `offset..offset + height`, inside the content.
    pub fn visible(&self) -> Range<usize> {
        self.offset..(self.offset + self.height).min(self.len)
    }

    /// The rows of `all` inside the window (panes that build every line and
    /// show some).
    pub fn window_of<T>(&self, all: Vec<T>) -> Vec<T> {
        let window = self.visible();
        all.into_iter()
            .skip(window.start)
            .take(window.len())
            .collect()
    }

    /// Whether rows are hidden below the window.
    pub fn more_below(&self) -> usize {
        self.len.saturating_sub(self.offset + self.height)
    }

    /// Tells it the content's length and the window's height (each frame,
    /// from the layout) and pulls cursor and offset back inside.
    pub fn resize(&mut self, len: usize, height: usize) {
        self.len = len;
        self.height = height.max(1);
        self.clamp();
    }

    /// The content's length changed (rows came or went).
    pub fn set_len(&mut self, len: usize) {
        self.len = len;
        self.clamp();
    }

    /// Selects row `i` (clamped) and scrolls it into view.
    pub fn select(&mut self, i: usize) {
        if self.cursor.is_some() {
            self.cursor = Some(i);
        } else {
            self.offset = i;
        }
        self.clamp();
    }

    /// Moves the cursor (a list) or the window (text).
    pub fn apply(&mut self, m: Motion) {
        let page = self.height.max(1);
        let last = self.len.saturating_sub(1);
        match self.cursor {
            Some(c) => {
                let c = match m {
                    Motion::Up => c.saturating_sub(1),
                    Motion::Down => c.saturating_add(1).min(last),
                    Motion::PageUp => c.saturating_sub(page),
                    Motion::PageDown => c.saturating_add(page).min(last),
                    Motion::Top => 0,
                    Motion::Bottom => last,
                };
                self.cursor = Some(c);
            }
            None => {
                let max = self.max_offset();
                self.offset = match m {
                    Motion::Up => self.offset.saturating_sub(1),
                    Motion::Down => self.offset.saturating_add(1).min(max),
                    Motion::PageUp => self.offset.saturating_sub(page),
                    Motion::PageDown => self.offset.saturating_add(page).min(max),
                    Motion::Top => 0,
                    Motion::Bottom => max,
                };
            }
        }
        self.clamp();
    }

    /// The furthest the window can go: the last row at its bottom.
    fn max_offset(&self) -> usize {
        self.len.saturating_sub(self.height.max(1))
    }

    fn clamp(&mut self) {
        if let Some(c) = &mut self.cursor {
            *c = (*c).min(self.len.saturating_sub(1));
            let c = *c;
            let h = self.height.max(1);
            if c < self.offset {
                self.offset = c;
            } else if c >= self.offset + h {
                self.offset = c + 1 - h;
            }
        }
        self.offset = self.offset.min(self.max_offset());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_never_scrolls_past_its_end() {
        let mut s = ScrollList::text();
        s.resize(30, 10);
        s.apply(Motion::Bottom);
        assert_eq!(s.visible(), 20..30, "End shows the last page, not nothing");
        s.apply(Motion::Up);
        assert_eq!(s.visible(), 19..29, "and the next key moves at once");
        s.apply(Motion::PageDown);
        s.apply(Motion::PageDown);
        assert_eq!(s.offset(), 20);
        s.apply(Motion::Top);
        assert_eq!(s.visible(), 0..10);
        // Content shorter than the window never scrolls.
        s.resize(4, 10);
        s.apply(Motion::Bottom);
        assert_eq!(s.visible(), 0..4);
        // Content that shrinks pulls the window back.
        s.resize(100, 10);
        s.apply(Motion::Bottom);
        s.set_len(12);
        assert_eq!(s.visible(), 2..12);
    }

    #[test]
    fn a_cursor_stays_in_the_list_and_in_view() {
        let mut s = ScrollList::list();
        s.resize(100, 10);
        s.apply(Motion::Bottom);
        assert_eq!((s.selected(), s.visible()), (Some(99), 90..100));
        s.apply(Motion::PageUp);
        assert_eq!((s.selected(), s.visible()), (Some(89), 89..99));
        s.apply(Motion::Top);
        assert_eq!((s.selected(), s.visible()), (Some(0), 0..10));
        s.select(55);
        assert!(s.visible().contains(&55));
        s.set_len(3);
        assert_eq!((s.selected(), s.visible()), (Some(2), 0..3));
        s.set_len(0);
        assert_eq!((s.selected(), s.visible()), (None, 0..0));
        assert_eq!(s.more_below(), 0);
        s.resize(50, 10);
        assert_eq!(s.more_below(), 40);
    }
}

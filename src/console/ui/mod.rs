//! Drawing: a pure function of the app state. `layout` decides where panes
//! go (stored for mouse hits and page sizes); `draw` renders them, building
//! only the rows each pane shows.

mod budgets;
mod capacity;
mod footer;
mod header;
mod lane_widths;
mod lanes;
mod ledger;
mod overlays;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};

use super::app::{App, Geometry, Measured, Pane};
use super::theme::Theme;
use crate::kernel::Lane;
use crate::operator::model::COLS;

pub use super::text::fit;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
/// From here on all three bottom panes fit side by side.
const WIDE: (u16, u16) = (110, 30);

pub use budgets::draw as draw_budgets;
pub use capacity::draw as draw_capacity;
pub use footer::draw as draw_footer;
pub use header::draw as draw_header;
pub use lanes::draw as draw_lanes;
pub use ledger::draw as draw_ledger;
pub use overlays::overlay_size;

/// Where the parts of the screen go.
#[derive(Debug, Clone, Copy)]
pub struct Areas {
    pub header: Rect,
    pub footer: Rect,
    pub geometry: Geometry,
    /// Whether all three bottom panes fit side by side.
    pub wide: bool,
}

/// Measures the screen `area` for `app` as it is now: what
/// [`App::arrange`](crate::console::app::App::arrange) sizes its lists by.
pub fn measure(app: &App, area: Rect) -> Measured {
    if too_small(area) {
        return Measured {
            too_small: true,
            ..Measured::default()
        };
    }
    let geometry = layout(area, app).geometry;
    Measured {
        too_small: false,
        geometry,
        capacity: capacity_size(app, geometry.capacity),
        budgets: budgets_size(app, geometry.budgets),
        overlay: overlay_size(app, area),
        follow_size: (
            follow_area(area, app).width as usize,
            follow_rows(area, app),
        ),
    }
}

/// Measures `area` and hands the app its sizes: what the event loop does
/// before each frame.
pub fn arrange(app: &mut App, area: Rect) {
    app.open_on_problems(area.width < WIDE.0 || area.height < WIDE.1);
    let m = measure(app, area);
    app.arrange(m);
}

pub fn too_small(area: Rect) -> bool {
    area.width < MIN_WIDTH || area.height < MIN_HEIGHT
}

/// What is left of the lanes' row once each reads, in shares: the lanes
/// most runs crowd get the most.
const LANE_SHARES: [u16; COLS] = [5, 5, 3, 3, 5, 3, 3, 3];

/// The footer's rows: keys and the status line, and a replay's timeline.
fn footer_height(app: &App) -> u16 {
    if app.replay.is_some() { 3 } else { 2 }
}

/// Where the follow view goes: the whole screen but the footer, which
/// keeps its keys and the status line (where `O` and `D` answer).
pub fn follow_area(area: Rect, app: &App) -> Rect {
    Rect {
        height: area.height.saturating_sub(footer_height(app)),
        ..area
    }
}

/// The output lines the follow view shows at once on `area`.
pub fn follow_rows(area: Rect, app: &App) -> usize {
    follow_area(area, app).height.saturating_sub(2) as usize
}

pub fn layout(area: Rect, app: &App) -> Areas {
    let footer_h = footer_height(app);
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(0),
        Constraint::Length(footer_h),
    ])
    .areas(area);
    let wide = area.width >= WIDE.0 && area.height >= WIDE.1;
    let lanes_h = if wide {
        (body.height * 11 / 20).max(10)
    } else {
        (body.height * 3 / 5).max(8)
    };
    let [lanes, bottom] =
        Layout::vertical([Constraint::Length(lanes_h), Constraint::Min(0)]).areas(body);
    let mut g = Geometry {
        lanes,
        ..Geometry::default()
    };
    let rows = lanes.height.saturating_sub(2) as usize;
    // What the visible rows' names ask, read once: the folding below
    // changes only the titles' widths.
    let names: Vec<(u16, u16)> = (0..COLS).map(|c| name_wants(app, c, rows)).collect();
    let want = |tight| -> Vec<lane_widths::Want> {
        (0..COLS)
            .map(|c| lane_want(app, c, rows, wide, tight, names[c]))
            .collect()
    };
    let mut wants = want(false);
    // Short of room for every name: empty lanes fold to their short titles.
    if wants.iter().map(|w| w.full).sum::<u16>() > lanes.width {
        wants = want(true);
    }
    let constraints: Vec<Constraint> = lane_widths::widths(lanes.width, &wants)
        .into_iter()
        .map(Constraint::Length)
        .collect();
    let cols = Layout::horizontal(constraints).split(lanes);
    for (i, r) in cols.iter().enumerate() {
        g.lane_cols[i] = *r;
    }
    if wide {
        let [b, l, c] = Layout::horizontal([
            Constraint::Percentage(30),
            Constraint::Percentage(40),
            Constraint::Percentage(30),
        ])
        .areas(bottom);
        g.budgets = b;
        g.ledger = l;
        g.capacity = c;
    } else {
        match app.bottom {
            Pane::Budgets => g.budgets = bottom,
            Pane::Capacity => g.capacity = bottom,
            _ => g.ledger = bottom,
        }
    }
    Areas {
        header,
        footer,
        geometry: g,
        wide,
    }
}

/// What lane `col` asks for: its title at least; room for the names
/// and times of the rows it shows; a share of the rest.
/// (legible, full) for the rows lane `col` shows: see
/// [`lane_widths::wants_for_names`].
fn name_wants(app: &App, col: usize, rows: usize) -> (u16, u16) {
    let len = app.lane_len(col);
    if len == 0 || app.zoomed {
        return (0, 0);
    }
    let list = &app.lanes[col];
    let shown = app.lane_window(col, list.offset().min(len - 1), rows);
    let labels: Vec<_> = shown.iter().map(|&ix| app.vm.label(ix)).collect();
    lane_widths::wants_for_names(labels.iter().map(|l| &**l))
}

fn lane_want(
    app: &App,
    col: usize,
    rows: usize,
    wide: bool,
    tight: bool,
    (legible, full): (u16, u16),
) -> lane_widths::Want {
    let len = app.lane_len(col);
    let focused = col == app.lane_col;
    let rank = lane_widths::rank(col, focused);
    if app.zoomed {
        // One lane at full width: the others give way entirely.
        let share = u16::from(focused);
        return lane_widths::Want {
            share,
            rank,
            ..Default::default()
        };
    }
    if len == 0 {
        // Under the cursor, the skipped column still shows.
        let least = if focused && col == crate::operator::model::SKIPPED_COL {
            lanes::FOLDED_WIDTH
        } else if col == crate::operator::model::SKIPPED_COL {
            0
        } else {
            // (With a filter, a column more for its `/`.)
            lane_widths::short(
                tight,
                lanes::shortest_title(col, len) + usize::from(!app.filter.is_empty()),
            )
        };
        return lane_widths::Want {
            least,
            legible: least,
            full: least,
            share: 0,
            rank,
        };
    }
    // Wide: the shares; narrow: each lane alike. A lane with more rows
    // than it shows gets twice its share.
    let share = if wide { LANE_SHARES[col] } else { 1 };
    let share = if len > rows { share * 2 } else { share };
    // Short of room, lanes nobody acts on keep their short titles only.
    let least = if lane_widths::acted_on(rank) {
        lanes::FOLDED_WIDTH
    } else {
        let slash = usize::from(!app.filter.is_empty());
        lane_widths::short(tight, lanes::shortest_title(col, len) + slash)
    };
    lane_widths::Want {
        least,
        legible: legible.max(lanes::FOLDED_WIDTH),
        full: full.max(lanes::FOLDED_WIDTH),
        share,
        rank,
    }
}

/// Draws the whole console.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    let t = app.theme();
    f.render_widget(
        Block::default().style(Style::default().bg(t.background).fg(t.foreground)),
        area,
    );
    if too_small(area) {
        let msg = vec![
            Line::from(Span::styled(
                "The terminal is too small for playdeck.",
                Style::default().add_modifier(Modifier::BOLD),
            )),
            Line::from(format!(
                "It is {}×{}; playdeck needs at least {MIN_WIDTH}×{MIN_HEIGHT} (120×36 shows every pane).",
                area.width, area.height
            )),
            Line::from(format!(
                "Enlarge the window, or press {} to quit; no other key does anything here.",
                app.keymap
                    .label_in(super::keymap::Mode::TooSmall, super::keymap::Action::Quit)
            )),
        ];
        let y = area.height / 2;
        let r = Rect::new(
            area.x,
            area.y + y.saturating_sub(2),
            area.width,
            5.min(area.height),
        );
        f.render_widget(
            Paragraph::new(msg)
                .centered()
                .wrap(ratatui::widgets::Wrap { trim: true }),
            r,
        );
        return;
    }
    let areas = layout(area, app);
    header::draw(f, areas.header, app);
    lanes::draw(f, &areas.geometry, app);
    let g = areas.geometry;
    if g.budgets.area() > 0 {
        budgets::draw(f, g.budgets, app);
    }
    if g.ledger.area() > 0 {
        ledger::draw(f, g.ledger, app);
    }
    if g.capacity.area() > 0 {
        capacity::draw(f, g.capacity, app);
    }
    footer::draw(f, areas.footer, app);
    overlays::draw(f, area, app);
}

/// The capacity pane's content length and window height at `area`.
pub fn capacity_size(app: &App, area: Rect) -> (usize, usize) {
    if area.area() == 0 {
        return (0, 1);
    }
    let inner = pane_block(Line::default(), false, app.theme()).inner(area);
    (
        app.capacity_rows().len(),
        inner.height.saturating_sub(app.capacity_gauge_rows()) as usize,
    )
}

/// The budgets pane's content length and window height at `area`.
pub fn budgets_size(app: &App, area: Rect) -> (usize, usize) {
    if area.area() == 0 {
        return (0, 1);
    }
    let inner = pane_block(Line::default(), false, app.theme()).inner(area);
    (
        budgets::lines(app, inner.width as usize).len(),
        inner.height.saturating_sub(2) as usize,
    )
}

/// `↓ 12 more` on a pane's bottom border when its text goes on below.
pub fn more_below<'a>(block: Block<'a>, below: usize, t: &Theme) -> Block<'a> {
    if below == 0 {
        return block;
    }
    block.title_bottom(
        Line::from(Span::styled(
            format!(" ↓ {} more ", super::text::group(below)),
            Style::default().fg(t.dim),
        ))
        .alignment(ratatui::layout::Alignment::Right),
    )
}

/// A pane's frame, highlighted when it has the focus.
pub fn pane_block<'a>(title: Line<'a>, focused: bool, t: &Theme) -> Block<'a> {
    let border = if focused { t.border_focused } else { t.border };
    let mut b = Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(Style::default().fg(border))
        .title(title);
    if focused && t.is_mono() {
        b = b.title_style(Style::default().add_modifier(Modifier::REVERSED));
    }
    b
}

pub use crate::operator::words::{duration, short_instance, short_time};

pub fn selected_style(t: &Theme) -> Style {
    let s = Style::default().bg(t.selection_bg).fg(t.selection_fg);
    if t.is_mono() {
        s.add_modifier(Modifier::REVERSED)
    } else {
        s
    }
}

/// A lane's name for a header or a column of `room` columns: the full
/// title, else a recognisable short one.
pub fn lane_name(l: Lane, room: usize) -> &'static str {
    if room >= l.title().len() {
        return l.title();
    }
    match l {
        Lane::Queued => "queued",
        Lane::Running => "running",
        Lane::AwaitingApproval => "approval",
        Lane::Paused => "paused",
        Lane::Succeeded => "succ.",
        Lane::Failed => "failed",
        Lane::Escalated => "escal.",
    }
}

//! Renders a ratatui buffer to SVG, deterministically: the same buffer and
//! theme give the same bytes.

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use super::theme::Theme;

const CELL_W: f64 = 8.4;
const CELL_H: f64 = 18.0;
const FONT: f64 = 14.0;

fn hex(c: Color, fallback: &str) -> String {
    match c {
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Reset => fallback.to_string(),
        Color::Black => "#000000".into(),
        Color::Red => "#cd3131".into(),
        Color::Green => "#0dbc79".into(),
        Color::Yellow => "#e5e510".into(),
        Color::Blue => "#2472c8".into(),
        Color::Magenta => "#bc3fbc".into(),
        Color::Cyan => "#11a8cd".into(),
        Color::Gray => "#cccccc".into(),
        Color::DarkGray => "#666666".into(),
        Color::LightRed => "#f14c4c".into(),
        Color::LightGreen => "#23d18b".into(),
        Color::LightYellow => "#f5f543".into(),
        Color::LightBlue => "#3b8eea".into(),
        Color::LightMagenta => "#d670d6".into(),
        Color::LightCyan => "#29b8db".into(),
        Color::White => "#ffffff".into(),
        Color::Indexed(i) => format!("#{0:02x}{0:02x}{0:02x}", i),
    }
}

fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// The buffer as an SVG image; `theme` supplies the colours for "default".
pub fn render(buf: &Buffer, theme: &Theme) -> String {
    let (w, h) = (buf.area.width, buf.area.height);
    // A theme without colours (mono) is drawn light on dark.
    let (default_bg, default_fg) = if theme.background == Color::Reset {
        ("#111111".to_string(), "#e0e0e0".to_string())
    } else {
        (
            hex(theme.background, "#000000"),
            hex(theme.foreground, "#ffffff"),
        )
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" viewBox="0 0 {:.0} {:.0}" font-family="'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace" font-size="{FONT}">"#,
        w as f64 * CELL_W,
        h as f64 * CELL_H,
        w as f64 * CELL_W,
        h as f64 * CELL_H
    );
    s.push('\n');
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="{default_bg}"/>"#
    );
    for y in 0..h {
        // Backgrounds: runs of one colour.
        let mut x = 0;
        while x < w {
            let cell = &buf[(x, y)];
            let (fg, bg) = colours(cell, &default_fg, &default_bg);
            let _ = fg;
            let start = x;
            while x < w {
                let c = &buf[(x, y)];
                if colours(c, &default_fg, &default_bg).1 != bg {
                    break;
                }
                x += 1;
            }
            if bg != default_bg {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{CELL_H}" fill="{bg}"/>"#,
                    start as f64 * CELL_W,
                    y as f64 * CELL_H,
                    (x - start) as f64 * CELL_W
                );
            }
        }
        // Text: runs of one style; spaces are left to the background.
        let mut x = 0;
        let baseline = y as f64 * CELL_H + CELL_H * 0.75;
        while x < w {
            let cell = &buf[(x, y)];
            if cell.symbol() == " " || cell.symbol().is_empty() {
                x += 1;
                continue;
            }
            let (fg, _) = colours(cell, &default_fg, &default_bg);
            let bold = cell.modifier.contains(Modifier::BOLD);
            let underline = cell.modifier.contains(Modifier::UNDERLINED);
            let start = x;
            let mut text = String::new();
            while x < w {
                let c = &buf[(x, y)];
                let (f2, _) = colours(c, &default_fg, &default_bg);
                if f2 != fg || c.modifier.contains(Modifier::BOLD) != bold || c.symbol().is_empty()
                {
                    break;
                }
                text.push_str(c.symbol());
                x += 1;
            }
            let trimmed = text.trim_end();
            if trimmed.is_empty() {
                continue;
            }
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{baseline:.1}" fill="{fg}"{}{} xml:space="preserve">"#,
                start as f64 * CELL_W,
                if bold { r#" font-weight="bold""# } else { "" },
                if underline {
                    r#" text-decoration="underline""#
                } else {
                    ""
                },
            );
            escape(trimmed, &mut s);
            s.push_str("</text>\n");
        }
    }
    s.push_str("</svg>\n");
    s
}

fn colours(cell: &ratatui::buffer::Cell, default_fg: &str, default_bg: &str) -> (String, String) {
    let fg = hex(cell.fg, default_fg);
    let bg = hex(cell.bg, default_bg);
    if cell.modifier.contains(Modifier::REVERSED) {
        (bg, fg)
    } else {
        (fg, bg)
    }
}

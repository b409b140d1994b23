//! Styled lines wrapped to a width, on top of the column measures in
//! [`crate::printable::fit`] (re-exported here, as every pane cuts text).

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::printable::fit::char_width;
pub use crate::printable::fit::{
    Shared, fit, fit_distinct, fit_middle, group, pad, shared_ends, width,
};

/// Word-wraps a styled line to `w` columns. Continuation lines are
/// indented like the first (up to half the width), so a wrapped value
/// stays under its label. Words longer than a line are cut where the line
/// ends.
pub fn wrap(line: &Line<'_>, w: usize) -> Vec<Line<'static>> {
    let lead = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars())
        .take_while(|c| *c == ' ')
        .count();
    wrap_hanging(line, w, lead)
}

/// Word-wraps a styled line to `w` columns, continuation lines indented by
/// `indent` (at most half the width): `label  value value` wraps under
/// the value.
pub fn wrap_hanging(line: &Line<'_>, w: usize, indent: usize) -> Vec<Line<'static>> {
    let w = w.max(1);
    let base = line.style;
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let total: usize = cells.iter().map(|(c, _)| char_width(*c)).sum();
    if total <= w {
        return vec![own(line)];
    }
    let indent = indent.min(w / 2);
    let mut out: Vec<Vec<(char, Style)>> = Vec::new();
    let mut cur: Vec<(char, Style)> = Vec::new();
    let mut cur_w = 0;
    // The position in `cur` just after its last space, where a break can go.
    let mut brk: Option<usize> = None;
    let start_len = |first: bool| if first { 0 } else { indent };
    for (c, st) in cells {
        let cw = char_width(c);
        if cur_w + cw > w {
            let first = out.is_empty();
            let floor = start_len(first);
            let rest: Vec<(char, Style)> = match brk {
                Some(b) if b > floor + 1 => cur.split_off(b),
                _ => Vec::new(),
            };
            // A space that ends a line is dropped; one after a carried
            // word still separates it from the next.
            let carried = !rest.is_empty();
            while cur.last().is_some_and(|(c, _)| *c == ' ') && cur.len() > floor {
                cur.pop();
            }
            out.push(std::mem::take(&mut cur));
            cur.extend(std::iter::repeat_n((' ', Style::default()), indent));
            cur.extend(rest);
            cur_w = cur.iter().map(|(c, _)| char_width(*c)).sum();
            brk = None;
            if c == ' ' && !carried {
                continue;
            }
        }
        cur.push((c, st));
        cur_w += cw;
        if c == ' ' {
            brk = Some(cur.len());
        }
    }
    if cur.len() > indent || out.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|cells| {
            let mut spans: Vec<Span<'static>> = Vec::new();
            let mut text = String::new();
            let mut style = None;
            for (c, st) in cells {
                if style.is_some_and(|s| s != st) {
                    spans.push(Span::styled(std::mem::take(&mut text), style.unwrap()));
                }
                style = Some(st);
                text.push(c);
            }
            if let Some(s) = style {
                spans.push(Span::styled(text, s));
            }
            Line::from(spans).style(base)
        })
        .collect()
}

/// Wraps every line.
pub fn wrap_all(lines: &[Line<'_>], w: usize) -> Vec<Line<'static>> {
    lines.iter().flat_map(|l| wrap(l, w)).collect()
}

fn own(line: &Line<'_>) -> Line<'static> {
    Line::from(
        line.spans
            .iter()
            .map(|s| Span::styled(s.content.to_string(), s.style))
            .collect::<Vec<_>>(),
    )
    .style(line.style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn wrapping_breaks_at_words_and_keeps_the_indent() {
        let l = Line::from("  the quick brown fox jumps over the lazy dog");
        let w: Vec<String> = wrap(&l, 16).iter().map(plain).collect();
        assert_eq!(
            w,
            [
                "  the quick",
                "  brown fox",
                "  jumps over",
                "  the lazy dog"
            ]
        );
        for line in &w {
            assert!(width(line) <= 16);
        }
        let long = Line::from("x".repeat(25));
        let w: Vec<String> = wrap(&long, 10).iter().map(plain).collect();
        assert_eq!(w, ["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
        let cjk = Line::from("部署生产环境部署生产环境");
        for l in wrap(&cjk, 7) {
            assert!(width(&plain(&l)) <= 7);
        }
        assert_eq!(wrap(&Line::from("fits"), 10).len(), 1);
        let hang = Line::from("initial  orchestrator, planner, researcher");
        let w: Vec<String> = wrap_hanging(&hang, 24, 9).iter().map(plain).collect();
        assert_eq!(
            w,
            [
                "initial  orchestrator,",
                "         planner,",
                "         researcher"
            ]
        );
    }
}

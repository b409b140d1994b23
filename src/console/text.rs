//! Text measured in terminal columns, not chars: CJK and most emoji take
//! two cells, combining marks none. ratatui measures with `unicode-width`
//! too, so what these functions cut fits the cells it is drawn in.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Columns `s` takes on a terminal.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

fn char_width(c: char) -> usize {
    UnicodeWidthChar::width(c).unwrap_or(0)
}

/// The longest prefix of `s` at most `w` columns wide.
fn take_cols(s: &str, w: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += char_width(c);
        if used > w {
            return &s[..i];
        }
    }
    s
}

/// The longest suffix of `s` at most `w` columns wide.
fn take_cols_end(s: &str, w: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices().rev() {
        used += char_width(c);
        if used > w {
            return &s[i + c.len_utf8()..];
        }
    }
    s
}

/// Cuts `s` to `w` columns, marking the cut with `…` at the end.
pub fn fit(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out = take_cols(s, w - 1).to_string();
    out.push('…');
    out
}

/// Cuts `s` to `w` columns in the middle, keeping its start and (a little
/// more of) its end: operation names tend to differ at the end
/// (`research-api`, `research-db`), so `res…-api` is told apart where
/// `researc…` is not.
pub fn fit_middle(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w < 5 {
        return fit(s, w);
    }
    let head = (w - 1) / 2;
    let tail = w - 1 - head;
    let end = take_cols_end(s, tail);
    // A wide char that did not fit leaves a column: give it to the head.
    let head = w - 1 - width(end);
    format!("{}…{end}", take_cols(s, head))
}

/// `s` padded with spaces to `w` columns (cut when longer).
pub fn pad(s: &str, w: usize) -> String {
    let s = fit(s, w);
    let n = w.saturating_sub(width(&s));
    format!("{s}{}", " ".repeat(n))
}

/// `4 944`, `100 000`: thousands apart, as the issue tracker writes them.
pub fn group(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

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
    fn fitting_counts_columns_not_chars() {
        assert_eq!(fit("deploy-prod", 20), "deploy-prod");
        assert_eq!(fit("deploy-prod", 7), "deploy…");
        // Each CJK char takes two columns: 5 columns hold two and the mark.
        assert_eq!(fit("部署生产环境", 5), "部署…");
        assert_eq!(width(&fit("部署生产环境", 5)), 5);
        // An emoji is two columns as well.
        assert_eq!(fit("🚀 ship it", 4), "🚀 …");
        assert_eq!(pad("部署", 6), "部署  ");
        assert_eq!(width(&pad("🚀🚀🚀", 5)), 5);
    }

    #[test]
    fn middle_cuts_keep_the_end() {
        assert_eq!(fit_middle("research-api", 8), "res…-api");
        assert_eq!(fit_middle("research-deps", 8), "res…deps");
        assert_eq!(fit_middle("short", 8), "short");
        let cjk = fit_middle("集成测试-支付-3", 9);
        assert!(cjk.ends_with("-3") && width(&cjk) <= 9, "{cjk}");
        assert_eq!(fit_middle("abcdef", 3), "ab…");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group(7), "7");
        assert_eq!(group(4944), "4 944");
        assert_eq!(group(100_000), "100 000");
        assert_eq!(group(1_234_567), "1 234 567");
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

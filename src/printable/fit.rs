//! Text measured in terminal columns, not chars: CJK and most emoji take
//! two cells, combining marks none. ratatui measures with `unicode-width`
//! too, so what these functions cut fits the cells it is drawn in. Here,
//! below every surface, so the console, the run list and the reports cut
//! text the same way.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Columns `s` takes on a terminal.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

pub fn char_width(c: char) -> usize {
    UnicodeWidthChar::width(c).unwrap_or(0)
}

/// The longest prefix of `s` at most `w` columns wide.
pub fn take_cols(s: &str, w: usize) -> &str {
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
pub fn take_cols_end(s: &str, w: usize) -> &str {
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

/// What the names of a lane's visible rows share at their start and end
/// (in bytes, the same in each name), snapped to a separator so a cut
/// does not fall inside a word: between them is what tells them apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shared {
    pub prefix: usize,
    pub suffix: usize,
}

fn separator(c: char) -> bool {
    matches!(c, '-' | '_' | '.' | '/' | ' ' | ':')
}

/// The start and end the `names` share; none for fewer than two.
pub fn shared_ends<'a>(names: impl IntoIterator<Item = &'a str>) -> Shared {
    let mut it = names.into_iter();
    let Some(first) = it.next() else {
        return Shared::default();
    };
    let (mut prefix, mut suffix, mut n) = (first, first, 1);
    for name in it {
        n += 1;
        let p = prefix
            .char_indices()
            .zip(name.chars())
            .find(|((_, a), b)| a != b)
            .map_or(prefix.len().min(name.len()), |((i, _), _)| i);
        prefix = &prefix[..p];
        let s = suffix
            .char_indices()
            .rev()
            .zip(name.chars().rev())
            .find(|((_, a), b)| a != b)
            .map_or(suffix.len().min(name.len()), |((i, c), _)| {
                suffix.len() - i - c.len_utf8()
            });
        suffix = &suffix[suffix.len() - s..];
    }
    if n < 2 {
        return Shared::default();
    }
    // Back to just after the last separator, forward to the first.
    let prefix = prefix
        .char_indices()
        .rev()
        .find(|(_, c)| separator(*c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let suffix = suffix
        .char_indices()
        .find(|(_, c)| separator(*c))
        .map_or(0, |(i, _)| suffix.len() - i);
    Shared { prefix, suffix }
}

/// Cuts `name` to `w` columns where it repeats what its lane's rows
/// share, so the part that differs stays: `ver…way-south-07` among
/// `verify-svc-api-gateway-north-07` and its kind. Without a shared part
/// (or with too little room) it is [`fit_middle`].
pub fn fit_distinct(name: &str, w: usize, shared: Shared) -> String {
    if width(name) <= w {
        return name.to_string();
    }
    let (p, s) = (shared.prefix, shared.suffix);
    let fits_in = |i: usize| i <= name.len() && name.is_char_boundary(i);
    // Both ends shared: cut both, keeping the middle that differs (the
    // same way for every row of the lane).
    if p > 0 && s > 0 && p + s < name.len() && fits_in(p) && fits_in(name.len() - s) {
        let core = &name[p..name.len() - s];
        if width(core) + 2 <= w {
            let left = w - 2 - width(core);
            let head = take_cols(&name[..p], left / 2);
            let tail = take_cols_end(&name[name.len() - s..], left - width(head));
            return format!("{head}…{core}…{tail}");
        }
    }
    if p > 0 && fits_in(p) && p < name.len() {
        let rest = &name[p..];
        if width(rest) < w {
            // The room left goes half to the name's start, half to what
            // comes just before the part that differs.
            let left = w - 1 - width(rest);
            let head = take_cols(&name[..p], left / 2);
            let before = take_cols_end(&name[..p], left - width(head));
            return format!("{head}…{before}{rest}");
        }
    }
    if s > 0 && s < name.len() && fits_in(name.len() - s) {
        let keep = &name[..name.len() - s];
        if width(keep) < w {
            let left = w - 1 - width(keep);
            let tail = take_cols_end(&name[name.len() - s..], left);
            return format!("{keep}…{tail}");
        }
    }
    fit_middle(name, w)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_lanes_shared_start_is_cut_before_what_differs() {
        let names = [
            "verify-svc-api-gateway-north-07",
            "verify-svc-api-gateway-south-07",
            "verify-svc-api-gateway-south-08",
        ];
        let shared = shared_ends(names);
        assert_eq!(&names[0][..shared.prefix], "verify-svc-api-gateway-");
        assert_eq!(shared.suffix, 0, "-07 and -08 differ");
        assert_eq!(fit_distinct(names[1], 16, shared), "ver…way-south-07");
        assert_eq!(fit_distinct(names[2], 16, shared), "ver…way-south-08");
        // What differs in the middle: both shared ends are cut, where
        // fit_middle alone cannot tell the rows apart.
        let mid = [
            "verify-svc-alpha-region-south-07",
            "verify-svc-beta-region-south-07",
        ];
        let shared_mid = shared_ends(mid);
        assert_eq!(fit_middle(mid[0], 16), fit_middle(mid[1], 16));
        assert_eq!(fit_distinct(mid[0], 16, shared_mid), "veri…alpha…th-07");
        assert_eq!(fit_distinct(mid[1], 16, shared_mid), "verif…beta…th-07");
        // A shared end: the start that differs stays, the end is cut.
        let tests = ["db-tests-integration-suite", "ui-tests-integration-suite"];
        let shared = shared_ends(tests);
        assert_eq!(shared.prefix, 0);
        assert_eq!(
            &tests[0][tests[0].len() - shared.suffix..],
            "-tests-integration-suite"
        );
        assert_eq!(fit_distinct(tests[0], 12, shared), "db…ion-suite");
        // One row alone shares nothing with anything: the middle cut.
        assert_eq!(shared_ends(["research-api"]), Shared::default());
        assert_eq!(
            fit_distinct("research-api", 8, Shared::default()),
            "res…-api"
        );
        // Wide chars are measured in columns, and a cut never splits one.
        let cjk = ["部署-生产-第一", "部署-生产-第二"];
        let r = fit_distinct(cjk[1], 9, shared_ends(cjk));
        assert!(r.ends_with("第二") && width(&r) <= 9, "{r}");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group(7), "7");
        assert_eq!(group(4944), "4 944");
        assert_eq!(group(100_000), "100 000");
        assert_eq!(group(1_234_567), "1 234 567");
    }
}

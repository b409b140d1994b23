//! Splits a play at its `[[operations]]` headers, so each operation is
//! parsed alone and dropped once read: the memory a play costs is the play
//! and what is read from it, not a spanned document of all of it (a DOM of
//! a 100 000-operation play is about 30 bytes per byte of text).
//!
//! Everything that is not an operation (`[play]`, `[palette]`, ...) is
//! parsed as one document in which the operations' bytes are blanked to
//! spaces, so its positions are those of the file. Each operation's text is
//! parsed on its own and its positions moved by where it starts, so every
//! diagnostic points where it did when the file was parsed whole.
//!
//! When the split is not certain (an `operations` key the header scan
//! cannot read plainly, an `operations` table or array outside
//! `[[operations]]` headers) or any part has a syntax error, the caller
//! parses the file whole, so what is reported never depends on the split.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};
use toml_parser::Source;
use toml_parser::lexer::TokenKind;

/// Where the operations are.
#[derive(Debug, PartialEq)]
pub struct Split {
    /// One range per `[[operations]]` table, with the sub-tables under it
    /// (`[operations.sim]`, `[[operations.sim.emits]]`), in file order.
    pub operations: Vec<Range<usize>>,
}

/// The plain text of a header key, or `None` for a quoted key with escapes
/// (the scan does not decode them; the caller parses the file whole).
fn key_text(kind: TokenKind, raw: &str) -> Option<&str> {
    match kind {
        TokenKind::Atom => Some(raw),
        TokenKind::BasicString if !raw.contains('\\') => raw.get(1..raw.len() - 1),
        TokenKind::LiteralString => raw.get(1..raw.len() - 1),
        _ => None,
    }
}

struct Header<'a> {
    start: usize,
    array: bool,
    first: Option<&'a str>,
    keys: usize,
}

/// Finds the `[[operations]]` tables. `None`: the split is not certain.
pub fn split(source: &str) -> Option<Split> {
    let src = Source::new(source);
    let mut tokens = src.lex().peekable();
    let mut line_start = true;
    // Brackets and braces open in a value (arrays, inline tables may span
    // lines): a `[` inside one never starts a header.
    let mut depth = 0usize;
    let mut headers: Vec<Header<'_>> = Vec::new();
    while let Some(tok) = tokens.next() {
        match tok.kind() {
            TokenKind::Eof => break,
            TokenKind::Whitespace | TokenKind::Comment => {}
            TokenKind::Newline => line_start |= depth == 0,
            TokenKind::LeftSquareBracket if line_start && depth == 0 => {
                let start = tok.span().start();
                let array = tokens
                    .next_if(|t| {
                        t.kind() == TokenKind::LeftSquareBracket && t.span().start() == start + 1
                    })
                    .is_some();
                let mut first = None;
                let mut keys = 0;
                let mut closed = false;
                for t in tokens.by_ref() {
                    match t.kind() {
                        TokenKind::Whitespace | TokenKind::Dot => {}
                        TokenKind::RightSquareBracket => {
                            closed = true;
                            break;
                        }
                        TokenKind::Atom | TokenKind::BasicString | TokenKind::LiteralString => {
                            let raw = &source[t.span().start()..t.span().end()];
                            let text = key_text(t.kind(), raw)?;
                            if keys == 0 {
                                first = Some(text);
                            }
                            keys += 1;
                        }
                        // A header that is not plain: let the parser say.
                        _ => return None,
                    }
                }
                if !closed {
                    return None;
                }
                headers.push(Header {
                    start,
                    array,
                    first,
                    keys,
                });
                line_start = false;
            }
            TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket => {
                depth += 1;
                line_start = false;
            }
            TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket => {
                depth = depth.saturating_sub(1);
                line_start = false;
            }
            _ => line_start = false,
        }
    }
    let mut operations: Vec<Range<usize>> = Vec::new();
    let mut open: Option<usize> = None;
    for h in &headers {
        let ours = h.first == Some("operations");
        if ours && h.array && h.keys == 1 {
            if let Some(s) = open.take() {
                operations.push(s..h.start);
            }
            open = Some(h.start);
        } else if ours && h.keys > 1 && open.is_some() {
            // A sub-table of the current operation.
        } else if ours {
            // `[operations]`, or a sub-table before any [[operations]]:
            // not the plain shape.
            return None;
        } else if let Some(s) = open.take() {
            operations.push(s..h.start);
        }
    }
    if let Some(s) = open {
        operations.push(s..source.len());
    }
    Some(Split { operations })
}

/// The rest of the play without the operations' bytes (the parts between
/// them joined), and where each part starts: `(in the joined text, in the
/// file)`. Parsed, then [`to_file_positions`]: a million operations'
/// bytes are not copied as spaces to read a few lines of settings.
pub fn rest_joined(source: &str, split: &Split) -> (String, Vec<(usize, usize)>) {
    let mut out = String::new();
    let mut parts = Vec::with_capacity(split.operations.len() + 1);
    let mut at = 0;
    for r in &split.operations {
        if r.start > at {
            parts.push((out.len(), at));
            out.push_str(&source[at..r.start]);
        }
        at = r.end;
    }
    parts.push((out.len(), at));
    out.push_str(&source[at..]);
    (out, parts)
}

/// Moves every position in `v` from the joined text of [`rest_joined`] to
/// the file's.
pub fn to_file_positions<'i>(
    v: Spanned<DeValue<'i>>,
    parts: &[(usize, usize)],
) -> Spanned<DeValue<'i>> {
    let at = |p: usize, end: bool| {
        // An end is the position after a byte: placed by that byte, so a
        // part's end stays in its part.
        let probe = if end && p > 0 { p - 1 } else { p };
        let i = parts
            .partition_point(|&(joined, _)| joined <= probe)
            .saturating_sub(1);
        parts
            .get(i)
            .map_or(p, |&(joined, file)| file + (p - joined))
    };
    remap(v, &|r: Range<usize>| {
        at(r.start, false)..at(r.end, true).max(at(r.start, false))
    })
}

/// Every position in `v` (keys' too) through `f`.
fn remap<'i, F: Fn(Range<usize>) -> Range<usize>>(
    v: Spanned<DeValue<'i>>,
    f: &F,
) -> Spanned<DeValue<'i>> {
    let span = f(v.span());
    let value = match v.into_inner() {
        DeValue::Array(mut items) => {
            for item in items.iter_mut() {
                let old = std::mem::replace(item, Spanned::new(0..0, DeValue::Boolean(false)));
                *item = remap(old, f);
            }
            DeValue::Array(items)
        }
        DeValue::Table(t) => {
            let mut out = DeTable::new();
            for (k, v) in t {
                let ks = f(k.span());
                out.insert(Spanned::new(ks, k.into_inner()), remap(v, f));
            }
            DeValue::Table(out)
        }
        other => other,
    };
    Spanned::new(span, value)
}

/// The play without its operations (the bytes between them kept), for a
/// reader of its other sections only: the whole source when it does not
/// split plainly.
pub fn without_operations(source: &str) -> std::borrow::Cow<'_, str> {
    let Some(split) = split(source).filter(|s| !s.operations.is_empty()) else {
        return source.into();
    };
    let mut out = String::new();
    let mut at = 0;
    for r in &split.operations {
        out.push_str(&source[at..r.start]);
        at = r.end;
    }
    out.push_str(&source[at..]);
    out.into()
}

/// Moves every position in `v` by `by` bytes.
pub fn shift<'i>(v: Spanned<DeValue<'i>>, by: usize) -> Spanned<DeValue<'i>> {
    remap(v, &|r: Range<usize>| r.start + by..r.end + by)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(source: &str) -> Option<Vec<&str>> {
        split(source).map(|s| s.operations.iter().map(|r| &source[r.clone()]).collect())
    }

    #[test]
    fn operations_and_their_sub_tables_are_cut_out() {
        let src = "[play]\nname = \"x\"\n[[operations]]\nid = \"a\"\n[operations.sim]\nduration_ms = 1\n[[operations.sim.emits]]\nat_ms = 0\n[[operations]]\nid = \"b\"\n[palette]\nroles = []\n";
        assert_eq!(
            ops(src).unwrap(),
            [
                "[[operations]]\nid = \"a\"\n[operations.sim]\nduration_ms = 1\n[[operations.sim.emits]]\nat_ms = 0\n",
                "[[operations]]\nid = \"b\"\n",
            ]
        );
        let (rest, parts) = rest_joined(src, &split(src).unwrap());
        assert_eq!(rest, "[play]\nname = \"x\"\n[palette]\nroles = []\n");
        // Read from the joined text, positions are the file's.
        let doc = DeTable::parse(&rest).unwrap();
        let span = doc.span();
        let doc = to_file_positions(Spanned::new(span, DeValue::Table(doc.into_inner())), &parts);
        let DeValue::Table(t) = doc.get_ref() else {
            panic!("a table")
        };
        let (key, palette) = t.get_key_value("palette").unwrap();
        assert_eq!(&src[key.span()], "palette");
        let DeValue::Table(p) = palette.get_ref() else {
            panic!("a table")
        };
        let (roles, _) = p.get_key_value("roles").unwrap();
        assert_eq!(&src[roles.span()], "roles");
        let (name, _) = t["play"]
            .get_ref()
            .as_table()
            .unwrap()
            .get_key_value("name")
            .unwrap();
        assert_eq!(&src[name.span()], "name");
    }

    #[test]
    fn brackets_in_strings_and_values_are_not_headers() {
        let src = "[[operations]]\nid = \"a\"\ninstruction = \"\"\"\n[[operations]]\n\"\"\"\ndepends_on = [\n[\"x\"],\n]\nctx = { a = [\n1] }\n[[operations]]\nid = \"b\"\n";
        let got = ops(src).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("instruction") && got[1].contains("\"b\""));
    }

    #[test]
    fn quoted_and_spaced_headers_are_read() {
        let src = "[ [\"operations\"] ]\nid = \"a\"\n[[ 'operations' ]]\nid = \"b\"\n";
        // `[ [` is not an array-table header: the split is not certain.
        assert_eq!(ops(src), None);
        let src = "[[\"operations\"]]\nid = \"a\"\n[[ 'operations' ]]\nid = \"b\"\n";
        assert_eq!(ops(src).unwrap().len(), 2);
        assert_eq!(ops("[[\"op\\u0065rations\"]]\nid = \"a\"\n"), None);
    }

    #[test]
    fn an_operations_table_outside_the_array_is_left_to_the_parser() {
        assert_eq!(ops("[operations]\nid = \"a\"\n"), None);
        assert_eq!(ops("[operations.sim]\nx = 1\n[[operations]]\n"), None);
        assert_eq!(ops("[[operations]]\nid = \"a\"\n[operations]\n"), None);
        assert_eq!(ops("[play]\nname = \"x\"\n").unwrap(), Vec::<&str>::new());
    }

    #[test]
    fn shifted_positions_are_those_of_the_file() {
        let src = "[play]\nname = \"x\"\n[[operations]]\nid = \"a\"\n";
        let s = split(src).unwrap();
        let r = s.operations[0].clone();
        let (doc, errors) = DeTable::parse_recoverable(&src[r.clone()]);
        assert!(errors.is_empty());
        let v = shift(
            Spanned::new(doc.span(), DeValue::Table(doc.into_inner())),
            r.start,
        );
        let DeValue::Table(t) = v.get_ref() else {
            panic!()
        };
        let DeValue::Array(a) = t.get("operations").unwrap().get_ref() else {
            panic!()
        };
        let DeValue::Table(op) = a[0].get_ref() else {
            panic!()
        };
        let id = op.get("id").unwrap();
        assert_eq!(&src[id.span()], "\"a\"");
    }
}

//! Diagnostics for input files: what is wrong, where (file:line:col with a
//! caret under the offending text) and what is allowed.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

pub type Span = Range<usize>;

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub span: Span,
    /// What is wrong, as a sentence.
    pub message: String,
    /// A short label printed under the caret.
    pub label: String,
    /// What is allowed, or how to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>, label: impl Into<String>) -> Self {
        Diagnostic {
            span,
            message: message.into(),
            label: label.into(),
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// All the problems found in one file, reported together.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostics {
    pub file: Arc<str>,
    pub source: Arc<str>,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(&self.source, offset)
    }

    /// `file:line:col` of each diagnostic, in order.
    pub fn positions(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|d| {
                let (l, c) = self.line_col(d.span.start);
                format!("{}:{l}:{c}", self.file)
            })
            .collect()
    }

    /// Renders every diagnostic, rustc style; `color` for terminals.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        let mut out = String::new();
        for d in &self.items {
            let span = clamp(&self.source, d.span.clone());
            let mut report = vec![
                Level::ERROR.primary_title(d.message.as_str()).element(
                    Snippet::source(&*self.source)
                        .path(&*self.file)
                        .annotation(AnnotationKind::Primary.span(span).label(d.label.as_str())),
                ),
            ];
            if let Some(help) = &d.help {
                report.push(Group::with_title(
                    Level::HELP.secondary_title(help.as_str()),
                ));
            }
            out.push_str(&renderer.render(&report));
            out.push_str("\n\n");
        }
        let n = self.items.len();
        out.push_str(&format!(
            "{}: {n} problem{} found; nothing was created\n",
            self.file,
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char(source, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Keeps a span inside the source and on character boundaries; an empty
/// span becomes one character wide so the caret has something to point at.
fn clamp(source: &str, span: Span) -> Span {
    let start = floor_char(source, span.start.min(source.len()));
    let mut end = floor_char(source, span.end.min(source.len())).max(start);
    if end == start && start < source.len() {
        end = start + source[start..].chars().next().map_or(0, char::len_utf8);
    }
    start..end
}

/// The closest of `candidates` to `word`, if it is close enough to be a
/// plausible typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (levenshtein(word, c), c))
        .filter(|(d, c)| *d <= (c.chars().count().max(3) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// "a, b, c" for help texts, cut after `max` items.
pub fn list(items: &[impl AsRef<str>], max: usize) -> String {
    let mut s = items
        .iter()
        .take(max)
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        s.push_str(&format!(", … ({} more)", items.len() - max));
    }
    s
}

/// A TOML file of the user's (a theme, the config) that could not be read
/// or is not the TOML it should be, named, with the line and column where the TOML
/// reader gives one.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{file}: {error}")]
    Read { file: String, error: std::io::Error },
    /// One line (the parser's own rendering quotes the source over
    /// several), so a list of errors stays one error a line.
    #[error("{}: {message}", located(.file, *.at))]
    Toml {
        file: String,
        /// Line and column, from 1.
        at: Option<(usize, usize)>,
        message: String,
    },
}

/// `file:line:column`, or `file` when there is no position.
pub fn located(file: &str, at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, col)) => format!("{file}:{line}:{col}"),
        None => file.to_string(),
    }
}

impl FileError {
    /// The text of the file at `path`.
    pub fn read(path: &std::path::Path) -> Result<String, FileError> {
        std::fs::read_to_string(path).map_err(|error| FileError::Read {
            file: path.display().to_string(),
            error,
        })
    }

    /// `text` as `T`; `file` names it.
    pub fn toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, FileError> {
        toml::from_str(text).map_err(|error| FileError::from_toml(file, text, &error))
    }

    /// A TOML error in `text` (the file `file`), placed.
    pub fn from_toml(file: &str, text: &str, error: &toml::de::Error) -> FileError {
        FileError::Toml {
            file: file.to_string(),
            at: error.span().map(|s| line_col(text, s.start)),
            message: error.message().trim_end().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let src = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        let x = src.find("\"x\"").unwrap();
        assert_eq!(line_col(src, x), (2, 6));
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        let ids = ["design", "deploy", "plan"];
        assert_eq!(did_you_mean("desgin", ids), Some("design"));
        assert_eq!(did_you_mean("zzzzzz", ids), None);
    }

    #[test]
    fn render_names_file_line_col_and_caret() {
        let d = Diagnostics {
            file: "p.toml".into(),
            source: "[play]\nname = 3\n".into(),
            items: vec![
                Diagnostic::new(14..15, "`name` must be a string", "found an integer")
                    .help("write name = \"...\""),
            ],
        };
        let out = d.render(false);
        assert!(out.contains("p.toml:2:8"), "{out}");
        assert!(out.contains("^ found an integer"), "{out}");
        assert!(out.contains("help: write name"), "{out}");
        assert!(out.contains("1 problem found"), "{out}");
    }
}

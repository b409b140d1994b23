//! The diff view (`D`): what an operation changed, read in the console —
//! by file and by hunk, coloured, with the operator's notes on lines. For
//! work waiting for review it is what would land; its notes go with a
//! send-back (`T`), each naming the file and line it is about.
//!
//! The text is git's unified diff (no colour asked: the view colours it),
//! with the `# …` lines the preparation adds; only the rows in the window
//! are drawn.

use std::collections::BTreeMap;

use super::scroll::{Motion, ScrollList};

/// What a line of the diff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffKind {
    /// A `# …` line of ours: what is shown, which command.
    Comment,
    /// `diff --git a/x b/x`: a file starts.
    File,
    /// `index …`, `--- a/x`, `+++ b/x`, `new file mode …`.
    Meta,
    /// `@@ -1,3 +1,4 @@`.
    Hunk,
    Added,
    Removed,
    Context,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffLine {
    pub kind: DiffKind,
    pub text: String,
    /// The file it is in and, for added and context lines, its line in the
    /// new version (removed lines: in the old one), for notes.
    pub at: Option<(usize, u32)>,
}

#[derive(Debug)]
pub struct DiffView {
    pub node: u32,
    pub op: String,
    /// What it shows, in a line: `what api would land on playdeck/r1`.
    pub title: String,
    pub lines: Vec<DiffLine>,
    /// Each file's path and the line its `diff --git` is on.
    pub files: Vec<(String, usize)>,
    /// The lines hunks start on.
    pub hunks: Vec<usize>,
    /// The operator's notes, by line.
    pub notes: BTreeMap<usize, String>,
    pub scroll: ScrollList,
    /// Work waiting for review: the question whose commits it shows. An
    /// approval from the view names it, so what lands is what was read.
    pub basis: Option<crate::kernel::Basis>,
}

/// Characters kept of a line: more never fits a terminal's width.
const LINE_MAX: usize = 1_000;

impl DiffView {
    pub fn new(node: u32, op: &str, title: String, text: &str) -> DiffView {
        let mut lines = Vec::new();
        let mut files: Vec<(String, usize)> = Vec::new();
        let mut hunks = Vec::new();
        // Line numbers in the old and the new version, inside a hunk.
        let (mut old, mut new) = (0u32, 0u32);
        let mut in_hunk = false;
        for raw in text.lines() {
            let clean = crate::printable::printable(raw);
            let text: String = clean.chars().take(LINE_MAX).collect();
            let file = files.len().checked_sub(1);
            let (kind, at) = if raw.starts_with("diff --git ") {
                in_hunk = false;
                let path = raw
                    .rsplit_once(" b/")
                    .map_or_else(|| raw[11..].to_string(), |(_, p)| p.to_string());
                files.push((path, lines.len()));
                (DiffKind::File, None)
            } else if raw.starts_with('#') && !in_hunk {
                (DiffKind::Comment, None)
            } else if let Some(h) = raw.strip_prefix("@@ ") {
                in_hunk = true;
                hunks.push(lines.len());
                (old, new) = hunk_starts(h);
                (DiffKind::Hunk, None)
            } else if in_hunk && raw.starts_with('+') {
                new += 1;
                (DiffKind::Added, file.map(|f| (f, new - 1)))
            } else if in_hunk && raw.starts_with('-') {
                old += 1;
                (DiffKind::Removed, file.map(|f| (f, old - 1)))
            } else if in_hunk && (raw.starts_with(' ') || raw.is_empty()) {
                old += 1;
                new += 1;
                (DiffKind::Context, file.map(|f| (f, new - 1)))
            } else {
                in_hunk = false;
                (DiffKind::Meta, None)
            };
            lines.push(DiffLine { kind, text, at });
        }
        let mut scroll = ScrollList::list();
        scroll.set_len(lines.len());
        DiffView {
            node,
            op: op.to_string(),
            title,
            lines,
            files,
            hunks,
            notes: BTreeMap::new(),
            scroll,
            basis: None,
        }
    }

    /// The line the cursor is on.
    pub fn cursor(&self) -> usize {
        self.scroll.selected().unwrap_or(0)
    }

    pub fn apply(&mut self, m: Motion) {
        self.scroll.apply(m);
    }

    /// To the next (`forward`) or previous start among `starts`.
    fn jump(&mut self, starts: &[usize], forward: bool) -> bool {
        let at = self.cursor();
        let to = if forward {
            starts.iter().find(|&&s| s > at)
        } else {
            starts.iter().rev().find(|&&s| s < at)
        };
        match to {
            Some(&s) => {
                self.scroll.select(s);
                true
            }
            None => false,
        }
    }

    /// The next or previous hunk; `false` at the last (first) one.
    pub fn hunk(&mut self, forward: bool) -> bool {
        let hunks = self.hunks.clone();
        self.jump(&hunks, forward)
    }

    /// The next or previous file.
    pub fn file(&mut self, forward: bool) -> bool {
        let starts: Vec<usize> = self.files.iter().map(|(_, at)| *at).collect();
        self.jump(&starts, forward)
    }

    /// Which file and hunk the cursor is in, counted from 1: `(file, of,
    /// hunk, of)`.
    pub fn position(&self) -> (usize, usize, usize, usize) {
        let at = self.cursor();
        let file = self.files.iter().filter(|(_, s)| *s <= at).count();
        let hunk = self.hunks.iter().filter(|&&s| s <= at).count();
        (file, self.files.len(), hunk, self.hunks.len())
    }

    /// Whether a note can go on the cursor's line (a line of a file).
    pub fn can_note(&self) -> bool {
        self.lines
            .get(self.cursor())
            .is_some_and(|l| l.at.is_some())
    }

    /// Sets (or with empty text, removes) the note on the cursor's line.
    pub fn note(&mut self, text: &str) {
        let at = self.cursor();
        let text = text.trim();
        if text.is_empty() {
            self.notes.remove(&at);
        } else {
            self.notes.insert(at, text.to_string());
        }
    }

    /// The notes as the agent is told them, one per line:
    /// `a.txt:3 (+the api): say why`.
    pub fn notes_said(&self) -> Vec<String> {
        self.notes
            .iter()
            .filter_map(|(&i, note)| {
                let l = self.lines.get(i)?;
                let (file, line) = l.at?;
                let path = &self.files.get(file)?.0;
                let quoted: String = l.text.chars().take(60).collect();
                Some(format!("{path}:{line} ({quoted}): {note}"))
            })
            .collect()
    }
}

/// Where a hunk starts in the old and new versions: `-12,3 +14,4 @@ …`.
fn hunk_starts(h: &str) -> (u32, u32) {
    let mut parts = h.split_whitespace();
    let start = |p: Option<&str>, sign: char| {
        p.and_then(|p| p.strip_prefix(sign))
            .and_then(|p| p.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(1)
    };
    let old = start(parts.next(), '-');
    let new = start(parts.next(), '+');
    (old, new)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &[&str] = &[
        "# api's worktree: what it would land on playdeck/r1",
        "diff --git a/a.txt b/a.txt",
        "index 1..2 100644",
        "--- a/a.txt",
        "+++ b/a.txt",
        "@@ -1,2 +1,3 @@",
        " one",
        "-two",
        "+deux",
        "+trois",
        "@@ -10 +11 @@ fn x",
        "-ten",
        "+dix",
        "diff --git a/b.txt b/b.txt",
        "new file mode 100644",
        "--- /dev/null",
        "+++ b/b.txt",
        "@@ -0,0 +1 @@",
        "+brand new",
    ];

    fn view() -> DiffView {
        DiffView::new(0, "api", "t".into(), &DIFF.join("\n"))
    }

    #[test]
    fn files_and_hunks_are_found_and_lines_know_where_they_are() {
        let mut v = view();
        assert_eq!(
            v.files,
            vec![("a.txt".to_string(), 1), ("b.txt".to_string(), 13)]
        );
        assert_eq!(v.hunks, vec![5, 10, 17]);
        assert_eq!(v.lines[0].kind, DiffKind::Comment);
        assert_eq!(v.lines[6].kind, DiffKind::Context);
        assert_eq!(
            v.lines[8],
            DiffLine {
                kind: DiffKind::Added,
                text: "+deux".into(),
                at: Some((0, 2)),
            }
        );
        assert_eq!(v.lines[7].at, Some((0, 2)), "removed: its old line");
        assert_eq!(v.lines[12].at, Some((0, 11)));
        assert_eq!(v.lines[18].at, Some((1, 1)));
        // By hunk, by file, and back; the ends say so.
        assert!(v.hunk(true));
        assert_eq!(v.cursor(), 5);
        assert!(v.hunk(true));
        assert_eq!(v.position(), (1, 2, 2, 3));
        assert!(v.file(true));
        assert_eq!(v.cursor(), 13);
        assert!(!v.file(true), "the last file");
        assert!(v.hunk(false));
        assert_eq!(v.cursor(), 10);
        assert!(v.file(false));
        assert_eq!(v.cursor(), 1);
        assert!(!v.file(false));
    }

    #[test]
    fn notes_name_the_file_and_line_they_are_on() {
        let mut v = view();
        v.scroll.select(0);
        assert!(!v.can_note(), "not on a line of a file");
        v.scroll.select(8);
        assert!(v.can_note());
        v.note("  why deux?  ");
        v.scroll.select(18);
        v.note("needs a test");
        assert_eq!(
            v.notes_said(),
            vec![
                "a.txt:2 (+deux): why deux?".to_string(),
                "b.txt:1 (+brand new): needs a test".to_string(),
            ]
        );
        v.note("");
        assert_eq!(v.notes.len(), 1, "an empty note removes it");
    }
}

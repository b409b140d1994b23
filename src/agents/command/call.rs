//! What a call an agent asks permission for would do, whole, for the
//! operator who decides it: a Bash command as it would run, a Write's
//! content (as a diff against the file it replaces), an Edit's diff. An
//! answer allows exactly this call: the question's basis is the digest of
//! its whole input.

use std::path::Path;

use serde_json::Value;

/// The most of a call shown where it is decided; past it the view says
/// `(cut)` and how much more there was. The digest still covers it all.
pub const DETAIL_MAX: usize = 64 * 1024;

/// The call `tool(input)` in lines an operator reads: what it would run or
/// write, whole up to [`DETAIL_MAX`], every line made printable. `cwd` is
/// where the agent works: a Write to a file that exists is shown as its
/// diff.
pub fn detail(tool: &str, input: &Value, cwd: Option<&Path>) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    let path = s("file_path")
        .or_else(|| s("filePath"))
        .or_else(|| s("path"));
    let text = match (tool, path) {
        ("Bash", _) if s("command").is_some() => {
            let mut t = format!("$ {}", s("command").unwrap_or_default());
            if let Some(d) = s("description") {
                t = format!("# {d}\n{t}");
            }
            t
        }
        ("Write", Some(p)) => {
            let new = s("content").unwrap_or_default();
            let old = cwd
                .map(|d| d.join(p))
                .and_then(|f| std::fs::read_to_string(f).ok());
            match old {
                Some(old) => format!(
                    "Write {p} (replaces the file; its diff):\n{}",
                    unified(&old, new, p)
                ),
                None => format!("Write {p} (a new file, whole):\n{new}"),
            }
        }
        ("Edit", Some(p)) => {
            let all = input.get("replace_all").and_then(Value::as_bool) == Some(true);
            format!(
                "Edit {p}{}:\n{}",
                if all { " (every occurrence)" } else { "" },
                unified(
                    s("old_string").unwrap_or_default(),
                    s("new_string").unwrap_or_default(),
                    p
                )
            )
        }
        ("MultiEdit", Some(p)) => {
            let edits = input.get("edits").and_then(Value::as_array);
            let mut t = format!("MultiEdit {p}:");
            for (i, e) in edits.into_iter().flatten().enumerate() {
                let g = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
                t.push_str(&format!(
                    "\nedit {}:\n{}",
                    i + 1,
                    unified(g("old_string"), g("new_string"), p)
                ));
            }
            t
        }
        _ => format!(
            "{tool} {}",
            serde_json::to_string_pretty(input).unwrap_or_default()
        ),
    };
    bounded(&printable_lines(&text))
}

/// The change from `old` to `new` as a unified diff of `path`.
fn unified(old: &str, new: &str, path: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Each line printable (an agent's escape sequences never reach a
/// terminal), the lines kept.
fn printable_lines(text: &str) -> String {
    text.split('\n')
        .map(|l| crate::printable::printable(&l.replace('\t', "    ")).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` up to [`DETAIL_MAX`] bytes, cut at a character and said so.
pub fn bounded(text: &str) -> String {
    if text.len() <= DETAIL_MAX {
        return text.to_string();
    }
    let mut end = DETAIL_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… (cut: {} more bytes of this call are not shown)",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bash_command_is_shown_whole_and_a_long_one_says_it_was_cut() {
        let long = format!("echo {} ; rm -rf /tmp/x", "a".repeat(400));
        let d = detail("Bash", &json!({"command": long}), None);
        assert!(d.ends_with("; rm -rf /tmp/x"), "{d}");
        let huge = "b".repeat(DETAIL_MAX + 10);
        let d = detail("Bash", &json!({"command": huge}), None);
        assert!(d.contains("(cut: 12 more bytes"), "{}", &d[d.len() - 80..]);
    }

    #[test]
    fn a_write_is_its_content_or_its_diff_against_the_file_and_an_edit_its_diff() {
        let dir = tempfile::tempdir().unwrap();
        let d = detail(
            "Write",
            &json!({"file_path": "a.txt", "content": "one\ntwo\n"}),
            Some(dir.path()),
        );
        assert!(
            d.starts_with("Write a.txt (a new file, whole):\none\ntwo"),
            "{d}"
        );
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        let d = detail(
            "Write",
            &json!({"file_path": "a.txt", "content": "one\ntwo\n"}),
            Some(dir.path()),
        );
        assert!(d.contains("+two") && d.contains("--- a/a.txt"), "{d}");
        let d = detail(
            "Edit",
            &json!({"file_path": "b.rs", "old_string": "x = 1", "new_string": "x = 2"}),
            None,
        );
        assert!(d.contains("-x = 1") && d.contains("+x = 2"), "{d}");
    }

    #[test]
    fn an_agents_escape_sequences_never_reach_the_view() {
        let d = detail(
            "Bash",
            &json!({"command": "echo \u{1b}]52;c;AAAA\u{7} hi"}),
            None,
        );
        assert!(!d.contains('\u{1b}'), "{d:?}");
        let d = detail("Other", &json!({"x": 1}), None);
        assert!(d.starts_with("Other {"), "{d}");
    }
}
